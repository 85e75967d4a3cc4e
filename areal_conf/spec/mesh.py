"""Megatron-Core rank groups of one training engine.

``rank_groups`` reproduces what ``megatron/core/parallel_state.py`` builds in
``initialize_model_parallel``: two ``RankGenerator`` objects over the same order string,

- the decoder (attention) generator ``tp=tp, cp=cp, ep=1, dp=dp, pp=pp``, and
- the expert generator ``tp=etp, cp=1, ep=ep, dp=edp, pp=pp``,

whose ``get_ranks(token)`` is ``generate_masked_orthogonal_rank_groups``: with the order's
sizes ``s0, s1, …`` (first = fastest varying), a rank is ``Σ idx_k · s0·…·s(k-1)``; a group
fixes the coordinates outside the token and runs over those inside it.

Groups are listed exactly as Megatron generates them. That order is already "each group
sorted, groups sorted by first rank": inside a group (and across group bases) the first
listed dimension varies fastest and every stride exceeds the largest sum of the smaller
ones, so both sequences increase. Pure Python, no torch or numpy.

Order strings follow ``RankGenerator``: ``-``-separated tokens from ``tp cp ep dp pp``,
each at most once; a token may be left out only when its size is 1 in both generators
(Megatron then appends it, which changes no rank). Upper case and blanks are rejected
(Megatron lower-cases for the generator but checks ``order.endswith("pp")`` on the raw
text, so ``TP-…-PP`` would behave differently in its two checks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, TypeVar, overload

from areal_conf.errors import AllocationError
from areal_conf.spec.allocation import ModelAllocation
from areal_conf.spec.backends import BACKENDS, TRAINING_BACKENDS, join_or

DEFAULT_ORDER: Final = "tp-cp-ep-dp-pp"
ORDER_TOKENS: Final = ("tp", "cp", "ep", "dp", "pp")

# Result key → Megatron token of the decoder generator.
ATTENTION_GROUPS: Final = (
    "tp",
    "cp",
    "dp",
    "pp",
    "dp-cp",
    "tp-pp",
    "tp-cp",
    "tp-dp",
    "tp-dp-cp",
)
# Result key → Megatron token of the expert generator (its tp is etp, its dp is edp).
EXPERT_GROUPS: Final = {
    "ep": "ep",
    "etp": "tp",
    "edp": "dp",
    "etp-ep": "tp-ep",
    "etp-ep-pp": "tp-ep-pp",
}
GROUP_KINDS: Final = ATTENTION_GROUPS + tuple(EXPERT_GROUPS)

_ORDER_HINT: Final = (
    "an order is tp, cp, ep, dp, pp joined by '-', each at most once, "
    "e.g. tp-cp-ep-dp-pp (the default) or tp-cp-ep-pp-dp"
)


def rank_groups(
    allocation_or_spec: ModelAllocation | str, order: str = DEFAULT_ORDER
) -> dict[str, list[list[int]]]:
    """Every Megatron-Core process group of one training engine, by kind.

    Keys: attention groups ``tp cp dp pp dp-cp tp-pp tp-cp tp-dp tp-dp-cp`` and expert
    groups ``ep etp edp etp-ep etp-ep-pp``. Ranks are engine-local (``0 … world-1``).
    Each value lists the groups of that kind; together they partition the ranks.

    Raises ``AllocationError`` for an invalid spec or order, an inference backend, or a
    layout/order pair that Megatron-Core's ``initialize_model_parallel`` rejects.
    Every rank is listed once per kind (14 million numbers for 2**20 GPUs, seconds);
    :func:`group_kinds` gives the same groups computed on demand.
    """
    return {key: kind.lists() for key, kind in group_kinds(allocation_or_spec, order).items()}


def group_kinds(
    allocation_or_spec: ModelAllocation | str, order: str = DEFAULT_ORDER
) -> dict[str, GroupKind]:
    """:func:`rank_groups` without listing them: each kind's groups as a
    :class:`GroupKind`, a sequence whose groups and ranks are computed when read, so a
    report of the first groups of a huge layout costs what it shows."""
    allocation = _as_training_allocation(allocation_or_spec)
    p = allocation.parallel
    tokens = _parse_order(order, allocation)

    decoder = {
        "tp": p.tp_size,
        "cp": p.cp_size,
        "ep": 1,
        "dp": p.dp_size,
        "pp": p.pp_size,
    }
    expert = {
        "tp": p.etp_size,
        "cp": 1,
        "ep": p.ep_size,
        "dp": p.edp_size,
        "pp": p.pp_size,
    }
    decoder_sizes = [decoder[t] for t in tokens]
    expert_sizes = [expert[t] for t in tokens]

    # initialize_model_parallel:
    #   assert order.endswith("pp") or pipeline_model_parallel_size == 1
    #          or expert_data_parallel_size == data_parallel_size
    if not order.endswith("pp") and p.pp_size != 1 and p.edp_size != p.dp_size:
        pos = order.find("pp")
        raise AllocationError(
            f"order {order} does not end in pp, so with pp={p.pp_size} Megatron-Core needs "
            f"the expert data-parallel size to equal the data-parallel size "
            f"(edp={p.edp_size}, dp={p.dp_size})",
            order,
            pos if pos >= 0 else None,
            length=2,
            hint=f"use an order ending in pp such as {DEFAULT_ORDER}, or choose ffn sizes "
            f"with etp×ep = tp×cp = {p.tp_size * p.cp_size} so that edp = dp "
            f"(layout {allocation})",
        )

    groups: dict[str, GroupKind] = {}
    for key in ATTENTION_GROUPS:
        groups[key] = GroupKind(decoder_sizes, _mask(tokens, key))
    # initialize_model_parallel:
    #   assert decoder_rank_generator.get_ranks("pp")
    #          == expert_decoder_rank_generator.get_ranks("pp")
    if p.pp_size != 1 and groups["pp"] != GroupKind(expert_sizes, _mask(tokens, "pp")):
        raise AllocationError(
            f"with order {order} the pipeline groups of the attention layers and of the "
            f"expert layers differ (layout {allocation})",
            order,
            order.find("pp"),
            length=2,
            hint=f"Megatron-Core needs the same pipeline groups for both; put pp last, as in "
            f"{DEFAULT_ORDER}",
        )
    for key, token in EXPERT_GROUPS.items():
        groups[key] = GroupKind(expert_sizes, _mask(tokens, token))
    return groups


#: A dimension of a rank index: its size and its stride (the rank distance between
#: neighbours along it).
_Dim = tuple[int, int]


def _merged(dims: list[_Dim]) -> tuple[_Dim, ...]:
    """``dims`` with neighbours that run on as one dimension merged (size ``a`` at stride
    ``s`` followed by stride ``a·s``): the same ranks in the same order, one way to
    write them, so two kinds are equal exactly when their merged dimensions are."""
    out: list[_Dim] = []
    for size, stride in dims:
        if out and stride == out[-1][0] * out[-1][1]:
            out[-1] = (out[-1][0] * size, out[-1][1])
        else:
            out.append((size, stride))
    return tuple(out)


def _at(dims: tuple[_Dim, ...], index: int) -> int:
    """The rank offset of the ``index``-th point of ``dims`` (the first fastest)."""
    offset = 0
    for size, stride in dims:
        index, digit = divmod(index, size)
        offset += digit * stride
    return offset


def _count(dims: tuple[_Dim, ...]) -> int:
    n = 1
    for size, _ in dims:
        n *= size
    return n


_T = TypeVar("_T")


def _indexed(index: int | slice, length: int, item: Callable[[int], _T]) -> _T | list[_T]:
    """``item(index)`` as a sequence of ``length`` items indexes (negative from the end,
    IndexError outside), or the list of a slice's items."""
    if isinstance(index, slice):
        return [item(i) for i in range(*index.indices(length))]
    if index < 0:
        index += length
    if not 0 <= index < length:
        raise IndexError(index)
    return item(index)


class Group(Sequence[int]):
    """One process group's ranks, computed when read (:class:`GroupKind`)."""

    def __init__(self, base: int, inner: tuple[_Dim, ...]) -> None:
        self._base, self._inner, self._len = base, inner, _count(inner)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        return _indexed(index, self._len, lambda i: self._base + _at(self._inner, i))


class GroupKind(Sequence[Group]):
    """The groups of one kind, in Megatron's order, computed when read.

    ``generate_masked_orthogonal_rank_groups(world, sizes, mask)``: the dimensions of
    ``sizes`` (first fastest) that ``mask`` marks run inside a group, the others from
    group to group. :meth:`lists` lists them all.
    """

    def __init__(self, sizes: list[int], mask: list[bool]) -> None:
        self._sizes, self._mask = list(sizes), list(mask)
        inner: list[_Dim] = []
        outer: list[_Dim] = []
        stride = 1
        for size, member in zip(sizes, mask, strict=True):
            if size != 1:
                (inner if member else outer).append((size, stride))
                stride *= size
        self._inner, self._outer = _merged(inner), _merged(outer)
        self._len = _count(self._outer)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> Group: ...
    @overload
    def __getitem__(self, index: slice) -> list[Group]: ...
    def __getitem__(self, index: int | slice) -> Group | list[Group]:
        return _indexed(index, self._len, lambda i: Group(_at(self._outer, i), self._inner))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GroupKind):
            return NotImplemented
        return (self._inner, self._outer) == (other._inner, other._outer)

    def __hash__(self) -> int:
        return hash((self._inner, self._outer))

    def lists(self) -> list[list[int]]:
        """Every group as a list of ranks (what :func:`rank_groups` returns)."""
        return _orthogonal_groups(self._sizes, self._mask)


def _orthogonal_groups(sizes: list[int], mask: list[bool]) -> list[list[int]]:
    """``generate_masked_orthogonal_rank_groups(world, sizes, mask)``, built directly.

    Megatron decomposes each group index over the unmasked sizes and each in-group index
    over the masked sizes (first size fastest) and adds the inner products with the
    global strides. Expanding those sums one dimension at a time gives the same lists in
    the same order without the per-rank decomposition.
    """
    offsets = [0]  # in-group offsets, in Megatron's rank_in_group order
    bases = [0]  # group bases, in Megatron's group_index order
    stride = 1
    for size, member in zip(sizes, mask, strict=True):
        if size != 1:
            steps = range(0, size * stride, stride)
            if member:
                offsets = [o + s for s in steps for o in offsets]
            else:
                bases = [b + s for s in steps for b in bases]
            stride *= size
    n = len(offsets)
    if offsets[-1] == n - 1:  # contiguous groups
        return [list(range(b, b + n)) for b in bases]
    return [[b + o for o in offsets] for b in bases]


def _mask(tokens: list[str], token: str) -> list[bool]:
    wanted = token.split("-")
    return [t in wanted for t in tokens]


def _parse_order(order: object, allocation: ModelAllocation) -> list[str]:
    """The order's tokens, completed as ``RankGenerator.__init__`` completes them."""
    if order == DEFAULT_ORDER:
        return list(ORDER_TOKENS)
    if not isinstance(order, str):
        raise AllocationError(
            f"the rank order must be a string, not {type(order).__name__}",
            order,
            hint=_ORDER_HINT,
        )
    if not order:
        raise AllocationError("empty rank order", order, hint=_ORDER_HINT)
    tokens: list[str] = []
    pos = 0
    for token in order.split("-"):
        if token not in ORDER_TOKENS:
            if not token:
                reason = "empty token in rank order"
            else:
                reason = f"unknown parallelism {token!r} in rank order"
            lower = token.strip().lower()
            hint = (
                f"write it in lower case: {lower}"
                if lower in ORDER_TOKENS and token.strip() == token
                else _ORDER_HINT
            )
            raise AllocationError(reason, order, pos, length=len(token), hint=hint)
        if token in tokens:
            raise AllocationError(
                f"{token} appears twice in rank order",
                order,
                pos,
                length=len(token),
                hint=_ORDER_HINT,
            )
        tokens.append(token)
        pos += len(token) + 1

    p = allocation.parallel
    # RankGenerator.__init__: a name missing from the order is an error when its size is
    # not 1, else it is appended. The decoder and expert generators share the order.
    sizes = {
        "tp": (("tp", p.tp_size), ("etp", p.etp_size)),
        "cp": (("cp", p.cp_size),),
        "ep": (("ep", p.ep_size),),
        "dp": (("dp", p.dp_size), ("edp", p.edp_size)),
        "pp": (("pp", p.pp_size),),
    }
    for name in ORDER_TOKENS:
        if name in tokens:
            continue
        big = [f"{label}={size}" for label, size in sizes[name] if size != 1]
        if big:
            raise AllocationError(
                f"rank order leaves out {name}, but {' and '.join(big)}",
                order,
                hint=f"add {name} to the order, e.g. {DEFAULT_ORDER}",
            )
        tokens.append(name)
    return tokens


def _as_training_allocation(allocation_or_spec: object) -> ModelAllocation:
    from areal_conf.spec.parser import as_allocation

    allocation = as_allocation(allocation_or_spec)

    rule = BACKENDS.get(allocation.backend)
    if rule is None:
        raise AllocationError(
            f"unknown backend {allocation.backend!r}",
            allocation.backend,
            hint=f"rank groups exist for {join_or(list(TRAINING_BACKENDS))}",
        )
    if rule.kind == "inference":
        raise AllocationError(
            f"{allocation.backend} is an inference backend and has no Megatron rank groups",
            str(allocation),
            hint=f"{allocation} is {allocation.num_instances} independent server "
            f"instance(s) of {allocation.instance_size} GPU(s) each (tp×pp); rank groups "
            f"describe training engines ({join_or(list(TRAINING_BACKENDS))})",
        )
    # The sizes add up: a ParallelStrategy cannot be built otherwise.
    return allocation
