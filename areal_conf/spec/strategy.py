"""The size arithmetic of a parallel layout, stated once, and the type that holds it.

A layout uses ``world = dp·tp·pp·cp`` GPUs (at most 2**20). Its expert layers reuse those
GPUs: ``edp·pp·etp·ep = world``, so the expert data-parallel size ``edp`` is derived
when not given. Archon adds rules of its own. The scanner, the fast path of the parser,
``layouts`` and ``mesh`` all read these functions, and :class:`ParallelStrategy` can only
be built from sizes that pass them.

Problems come back as :class:`SizeProblem` values (reason, hint and which part of the
text to point at) rather than exceptions, so that the parser's fast path can fall back
to the scanner cheaply and the scanner can point at the offending characters.
"""

from __future__ import annotations

from collections.abc import Iterable
from math import isqrt
from typing import Any, NamedTuple, Self, TypeVar

from areal_conf.errors import AllocationError
from areal_conf.spec.backends import MAX_SIZE


class SizeProblem(NamedTuple):
    """A size rule that a layout breaks.

    ``where`` names the part of a backend string to point at: the expert size ``"e"`` (of
    the ffn section in the hybrid form), a size of the ffn section (``"ffn.d"``,
    ``"ffn.p"``, ``"ffn.t"``), the whole ffn section (``"ffn"``), or ``""`` for the
    whole string.
    """

    reason: str
    hint: str
    where: str


class _Sizes(NamedTuple):
    dp_size: int = 1
    tp_size: int = 1
    pp_size: int = 1
    cp_size: int = 1
    ep_size: int = 1
    etp_size: int = 1
    edp_size: int = 1


class ParallelStrategy(_Sizes):
    """Sizes of one engine's parallel dimensions; ``world_size = dp × tp × pp × cp``.

    ``edp_size`` defaults to what the others leave, ``world / (pp × etp × ep)``. Building
    one with sizes that break a rule (a size below 1, more than 2**20 GPUs, expert sizes
    that do not add up to the world size) raises AllocationError.
    """

    __slots__ = ()

    def __new__(
        cls,
        dp_size: int = 1,
        tp_size: int = 1,
        pp_size: int = 1,
        cp_size: int = 1,
        ep_size: int = 1,
        etp_size: int = 1,
        edp_size: int | None = None,
    ) -> Self:
        sizes = (dp_size, tp_size, pp_size, cp_size, ep_size, etp_size, edp_size)
        return _checked(cls, sizes)

    @classmethod
    def _make(cls, iterable: Iterable[Any]) -> Self:  # type: ignore[override]
        # namedtuple's _make (and _replace, which calls it) would skip the checks.
        return _checked(cls, tuple(iterable))

    @property
    def world_size(self) -> int:
        return self.dp_size * self.tp_size * self.pp_size * self.cp_size

    # AReaL's long names.
    @property
    def data_parallel_size(self) -> int:
        return self.dp_size

    @property
    def tensor_parallel_size(self) -> int:
        return self.tp_size

    @property
    def pipeline_parallel_size(self) -> int:
        return self.pp_size

    @property
    def context_parallel_size(self) -> int:
        return self.cp_size

    @property
    def expert_parallel_size(self) -> int:
        return self.ep_size

    @property
    def expert_tensor_parallel_size(self) -> int:
        return self.etp_size

    @property
    def expert_data_parallel_size(self) -> int:
        return self.edp_size

    @property
    def is_hybrid(self) -> bool:
        """True when only the hybrid (attn|ffn) form can express this layout."""
        return self.etp_size > 1

    def body(self) -> str:
        """The canonical text after ``backend:``."""
        attn = attn_text(self.dp_size, self.pp_size, self.tp_size, self.cp_size)
        if self.etp_size > 1:
            ffn = ffn_text(self.edp_size, self.pp_size, self.etp_size, self.ep_size)
            return hybrid_body(attn, ffn)
        return flat_body(attn, expert_text(self.ep_size))

    def __eq__(self, other: object) -> bool:
        return type(other) is ParallelStrategy and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return tuple.__hash__(self)


_new_strategy = tuple.__new__
_Strategy = TypeVar("_Strategy", bound=ParallelStrategy)


def _checked(cls: type[_Strategy], sizes: tuple[object, ...]) -> _Strategy:
    names = _Sizes._fields
    if len(sizes) != len(names):
        raise TypeError(f"ParallelStrategy takes {len(names)} sizes, got {len(sizes)}")
    given_edp = sizes[-1]
    checked: list[int] = []
    for name, size in zip(names, sizes, strict=True):
        if size is None and name == "edp_size":
            continue
        if type(size) is not int or size < 1:
            raise AllocationError(
                f"{name} must be a positive integer, got {size!r}",
                hint="build layouts with parse_backend / ModelAllocation.from_str",
            )
        checked.append(size)
    dp, tp, pp, cp, ep, etp = checked[:6]
    edp = checked[6] if given_edp is not None else None
    world = dp * tp * pp * cp
    if world > MAX_SIZE:
        raise AllocationError(
            f"world size {world} (dp×tp×pp×cp) is larger than the limit {MAX_SIZE} (2**20)",
            hint="use smaller sizes",
        )
    derived = expert_data_parallel(world, pp, etp, ep, edp)
    if derived is None:
        per_replica = pp * etp * ep
        found = (
            f"pp×etp×ep = {per_replica} does not divide"
            if edp is None
            else f"edp×pp×etp×ep = {edp * per_replica} differs from"
        )
        raise AllocationError(
            f"{found} the world size dp×tp×pp×cp = {world}",
            hint=f"set edp = world / (pp×etp×ep); parse_backend derives it "
            f"(here world={world}, pp×etp×ep={per_replica})",
        )
    return _new_strategy(cls, (dp, tp, pp, cp, ep, etp, derived))


def expert_data_parallel(
    world: int, pp: int, etp: int, ep: int, edp: int | None = None
) -> int | None:
    """The expert data-parallel size: ``edp`` with ``edp·pp·etp·ep = world``.

    None when ``pp·etp·ep`` does not divide ``world`` or a given ``edp`` is not that size.
    """
    per_replica = pp * etp * ep
    if world % per_replica:
        return None
    derived = world // per_replica
    return derived if edp is None or edp == derived else None


def flat(dp: int, tp: int, pp: int, cp: int, ep: int) -> ParallelStrategy | SizeProblem:
    """The layout of a flat string such as ``megatron:d4p2e2`` (expert tensor size 1)."""
    world = dp * tp * pp * cp
    if world > MAX_SIZE:
        return _too_big(world, f"d×t×p×c = {dp}×{tp}×{pp}×{cp}")
    edp = expert_data_parallel(world, pp, 1, ep)
    if edp is None:
        shards = world // pp
        return SizeProblem(
            f"expert parallel size {ep} does not divide the {shards} GPUs of a "
            f"pipeline stage (d×t×c = {dp}×{tp}×{cp})",
            f"choose e from {_divisors_text(shards)}",
            "e",
        )
    return _new_strategy(ParallelStrategy, (dp, tp, pp, cp, ep, 1, edp))


def hybrid(
    dp: int,
    tp: int,
    pp: int,
    cp: int,
    *,
    ffn_dp: int | None,
    ffn_pp: int | None,
    etp: int,
    ep: int,
) -> ParallelStrategy | SizeProblem:
    """The layout of the hybrid form: attn sizes, and the ffn section's sizes as written
    (``ffn_dp``/``ffn_pp`` None when left out, which derives them)."""
    world = dp * tp * pp * cp
    if world > MAX_SIZE:
        return _too_big(world, f"attn d×t×p×c = {dp}×{tp}×{pp}×{cp}")
    if ffn_pp is not None and ffn_pp != pp:
        return SizeProblem(
            f"ffn pipeline size {ffn_pp} differs from attn pipeline size {pp}",
            f"pipeline stages are shared: write p{pp} in ffn or leave p out there",
            "ffn.p",
        )
    per_replica = pp * etp * ep
    edp = expert_data_parallel(world, pp, etp, ep, ffn_dp)
    if edp is None and ffn_dp is not None:
        return SizeProblem(
            f"world sizes differ: attn uses {world} GPUs (d×t×p×c), ffn uses "
            f"{ffn_dp * per_replica} (d×p×t×e = {ffn_dp}×{pp}×{etp}×{ep})",
            f"write d{world // per_replica} in ffn or leave d out there"
            if world % per_replica == 0
            else f"make ffn d×p×t×e equal {world}",
            "ffn.d",
        )
    if edp is None:
        return SizeProblem(
            f"ffn p×t×e = {pp}×{etp}×{ep} = {per_replica} does not divide the "
            f"{world} GPUs of the attn section, so ffn d cannot be derived",
            f"choose ffn t×e dividing {world // pp}",
            "ffn",
        )
    return _new_strategy(ParallelStrategy, (dp, tp, pp, cp, ep, etp, edp))


def _too_big(world: int, product: str) -> SizeProblem:
    return SizeProblem(
        f"world size {world} ({product}) is larger than the limit {MAX_SIZE} (2**20)",
        "use smaller sizes",
        "",
    )


# -- Archon ---------------------------------------------------------------------------


def archon_allows(dp: int, tp: int, cp: int, ep: int, etp: int) -> bool:
    """Archon's start-up rules: etp is 1 or tp, and experts shard evenly over its ranks."""
    if etp != 1 and etp != tp:
        return False
    if ep == 1:
        return True
    step, shards = _archon_expert_ranks(dp, tp, cp, etp)
    return ep % step == 0 and shards % ep == 0


def _archon_expert_ranks(dp: int, tp: int, cp: int, etp: int) -> tuple[int, int]:
    """(the multiple ep must be, the ranks ep must divide) for Archon's expert sharding."""
    if etp == tp:
        return cp, dp * cp
    return cp * tp, dp * cp * tp


def archon_problem(p: ParallelStrategy) -> SizeProblem | None:
    """The first Archon rule ``p`` breaks, pointing at ffn t (etp) or e, or None."""
    dp, tp, cp, ep, etp = p.dp_size, p.tp_size, p.cp_size, p.ep_size, p.etp_size
    if archon_allows(dp, tp, cp, ep, etp):
        return None
    if etp != 1 and etp != tp:
        return SizeProblem(
            f"archon: expert tensor parallel size must be 1 or tp ({tp}), got {etp}",
            f"write ffn t1 or t{tp}",
            "ffn.t",
        )
    step, shards = _archon_expert_ranks(dp, tp, cp, etp)
    ranks, multiple = ("dp×cp", "cp") if etp == tp else ("dp×cp×tp", "cp×tp")
    fits = [e for e in range(step, shards + 1, step) if shards % e == 0][:8]
    return SizeProblem(
        f"archon: with etp = {etp}, ep ({ep}) must be a multiple of "
        f"{multiple} ({step}) and divide {ranks} ({shards})",
        f"archon shards experts over its {ranks} ranks: use e from "
        f"{', '.join(map(str, fits)) or '(none: change d, c or t)'}, or use megatron",
        "e",
    )


# -- canonical text ---------------------------------------------------------------------
# Sizes of 1 are left out; dimensions print in the order d p t c e. Layouts builds its
# strings from these pieces too, computing each piece once per loop level.


def attn_text(dp: int, pp: int, tp: int, cp: int) -> str:
    """The attention (or flat) dimensions, '' when all are 1."""
    return (
        (f"d{dp}" if dp != 1 else "")
        + (f"p{pp}" if pp != 1 else "")
        + (f"t{tp}" if tp != 1 else "")
        + (f"c{cp}" if cp != 1 else "")
    )


def expert_text(ep: int) -> str:
    """The e of a flat string, '' for 1."""
    return f"e{ep}" if ep != 1 else ""


def ffn_text(edp: int, pp: int, etp: int, ep: int) -> str:
    """The ffn section's dimensions (d is edp, t is etp), '' when all are 1."""
    return attn_text(edp, pp, etp, 1) + expert_text(ep)


def flat_body(attn: str, expert: str) -> str:
    return (attn + expert) or "d1"


def hybrid_body(attn: str, ffn: str) -> str:
    return f"(attn:{attn or 'd1'}|ffn:{ffn or 'd1'})"


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` that can be a size (at most 2**20), ascending."""
    low: list[int] = []
    high: list[int] = []
    for i in range(1, min(isqrt(n), MAX_SIZE) + 1):
        if n % i == 0:
            low.append(i)
            j = n // i
            if j != i and j <= MAX_SIZE:
                high.append(j)
    return low + high[::-1]


def _divisors_text(n: int) -> str:
    small = [d for d in range(1, min(n, 64) + 1) if n % d == 0]
    return ", ".join(str(d) for d in small[:8])
