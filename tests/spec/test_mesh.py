"""Rank groups (SPEC §7) against references built independently from Megatron's layout.

The references never call ``areal_conf.spec.mesh``: they enumerate every coordinate of the
mesh, compute the rank with Megatron-Core's documented formula for the order (first
listed dimension fastest), and group ranks that agree on every coordinate outside the
group kind.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from areal_conf.errors import AllocationError
from areal_conf.plan.report import format_rank_groups
from areal_conf.spec.allocation import ModelAllocation, ParallelStrategy
from areal_conf.spec.mesh import rank_groups

ATTN_KEYS = ["tp", "cp", "dp", "pp", "dp-cp", "tp-pp", "tp-cp", "tp-dp", "tp-dp-cp"]
EXPERT_KEYS = ["ep", "etp", "edp", "etp-ep", "etp-ep-pp"]

Coords = dict[str, int]


def megatron(
    dp: int = 1,
    tp: int = 1,
    pp: int = 1,
    cp: int = 1,
    ep: int = 1,
    etp: int = 1,
    edp: int | None = None,
) -> ModelAllocation:
    world = dp * tp * pp * cp
    if edp is None:
        edp = world // (pp * etp * ep)
    return ModelAllocation("megatron", ParallelStrategy(dp, tp, pp, cp, ep, etp, edp))


# Megatron's layout, written out per order (r = coordinates, s = sizes).
def attn_rank_default(r: Coords, s: Coords) -> int:  # tp-cp-ep-dp-pp, ep = 1
    return r["tp"] + s["tp"] * (r["cp"] + s["cp"] * (r["dp"] + s["dp"] * r["pp"]))


def expert_rank_default(r: Coords, s: Coords) -> int:  # tp=etp, cp=1, dp=edp
    return r["etp"] + s["etp"] * (r["ep"] + s["ep"] * (r["edp"] + s["edp"] * r["pp"]))


def attn_rank_pp_dp(r: Coords, s: Coords) -> int:  # tp-cp-ep-pp-dp
    return r["tp"] + s["tp"] * (r["cp"] + s["cp"] * (r["pp"] + s["pp"] * r["dp"]))


def expert_rank_pp_dp(r: Coords, s: Coords) -> int:
    return r["etp"] + s["etp"] * (r["ep"] + s["ep"] * (r["pp"] + s["pp"] * r["edp"]))


FORMULAS = {
    "tp-cp-ep-dp-pp": (attn_rank_default, expert_rank_default),
    "tp-cp-ep-pp-dp": (attn_rank_pp_dp, expert_rank_pp_dp),
}


def reference_groups(
    sizes: Coords, rank_of: Callable[[Coords, Coords], int], members: list[str]
) -> list[list[int]]:
    by_outside: dict[tuple[int, ...], list[int]] = {}
    names = list(sizes)
    for values in itertools.product(*(range(sizes[n]) for n in names)):
        coords = dict(zip(names, values, strict=True))
        outside = tuple(coords[n] for n in names if n not in members)
        by_outside.setdefault(outside, []).append(rank_of(coords, sizes))
    return sorted(sorted(g) for g in by_outside.values())


def reference(allocation: ModelAllocation, order: str) -> dict[str, list[list[int]]]:
    p = allocation.parallel
    attn_rank, expert_rank = FORMULAS[order]
    attn = {"tp": p.tp_size, "cp": p.cp_size, "dp": p.dp_size, "pp": p.pp_size}
    expert = {"etp": p.etp_size, "ep": p.ep_size, "edp": p.edp_size, "pp": p.pp_size}
    out = {k: reference_groups(attn, attn_rank, k.split("-")) for k in ATTN_KEYS}
    out.update({k: reference_groups(expert, expert_rank, k.split("-")) for k in EXPERT_KEYS})
    return out


CASES = [
    # megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)
    (megatron(dp=4, pp=2, tp=2, cp=2, ep=2, etp=4), "tp-cp-ep-dp-pp", 32),
    # megatron:d2p2t2 (flat: etp 1, edp = 8 / 2)
    (megatron(dp=2, pp=2, tp=2), "tp-cp-ep-dp-pp", 8),
    # megatron:d2p2t4e2
    (megatron(dp=2, pp=2, tp=4, ep=2), "tp-cp-ep-dp-pp", 16),
    # megatron:d2p2t4e4 (the lead's example: edp 2)
    (megatron(dp=2, pp=2, tp=4, ep=4), "tp-cp-ep-dp-pp", 16),
    # megatron:d2p4c2t2 dense with cp
    (megatron(dp=2, pp=4, tp=2, cp=2), "tp-cp-ep-dp-pp", 32),
    # tp-cp-ep-pp-dp with pp > 1 needs edp == dp: megatron:(attn:d2p2t2c2|ffn:d2p2t2e2)
    (megatron(dp=2, pp=2, tp=2, cp=2, ep=2, etp=2), "tp-cp-ep-pp-dp", 16),
    # megatron:(attn:d3p2t4|ffn:d3p2t2e2), odd dp
    (megatron(dp=3, pp=2, tp=4, ep=2, etp=2), "tp-cp-ep-pp-dp", 24),
    # tp-cp-ep-pp-dp with pp = 1: edp (4) may differ from dp (2): megatron:d2t2e2
    (megatron(dp=2, tp=2, ep=2), "tp-cp-ep-pp-dp", 4),
    # everything 1
    (megatron(), "tp-cp-ep-dp-pp", 1),
    (megatron(), "tp-cp-ep-pp-dp", 1),
]


@pytest.mark.parametrize(("allocation", "order", "world"), CASES)
def test_matches_megatron_layout(allocation: ModelAllocation, order: str, world: int) -> None:
    assert allocation.world_size == world
    got = rank_groups(allocation, order)
    assert list(got) == ATTN_KEYS + EXPERT_KEYS
    assert got == reference(allocation, order)


@pytest.mark.parametrize(("allocation", "order", "world"), CASES)
def test_each_kind_partitions_the_world(
    allocation: ModelAllocation, order: str, world: int
) -> None:
    p = allocation.parallel
    size = {
        "tp": p.tp_size,
        "cp": p.cp_size,
        "dp": p.dp_size,
        "pp": p.pp_size,
        "ep": p.ep_size,
        "etp": p.etp_size,
        "edp": p.edp_size,
    }
    for key, groups in rank_groups(allocation, order).items():
        flat = [r for g in groups for r in g]
        assert sorted(flat) == list(range(world)), key
        expected = math.prod(size[n] for n in key.split("-"))
        assert all(len(g) == expected for g in groups), key
        assert all(g == sorted(g) for g in groups), key
        assert [g[0] for g in groups] == sorted(g[0] for g in groups), key


def test_megatron_docstring_example() -> None:
    # initialize_model_parallel's docstring: 16 GPUs, tp 2, pp 4.
    groups = rank_groups(megatron(dp=2, tp=2, pp=4))
    assert groups["dp"] == [
        [0, 2],
        [1, 3],
        [4, 6],
        [5, 7],
        [8, 10],
        [9, 11],
        [12, 14],
        [13, 15],
    ]
    assert groups["tp"] == [
        [0, 1],
        [2, 3],
        [4, 5],
        [6, 7],
        [8, 9],
        [10, 11],
        [12, 13],
        [14, 15],
    ]
    assert groups["pp"] == [
        [0, 4, 8, 12],
        [1, 5, 9, 13],
        [2, 6, 10, 14],
        [3, 7, 11, 15],
    ]


def test_context_parallel_docstring_example() -> None:
    # context_parallel_size's docstring: 8 GPUs, tp 4, cp 2.
    groups = rank_groups(megatron(tp=4, cp=2))
    assert groups["cp"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert groups["tp-cp"] == [list(range(8))]


def test_hybrid_example_by_hand() -> None:
    # megatron:(attn:d4p2t2c2|ffn:d2p2t4e2), default order: pp is the slowest dimension.
    groups = rank_groups(megatron(dp=4, pp=2, tp=2, cp=2, ep=2, etp=4))
    assert groups["pp"][:2] == [[0, 16], [1, 17]]
    assert groups["etp"][:2] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert groups["ep"][:2] == [[0, 4], [1, 5]]
    assert groups["edp"][:2] == [[0, 8], [1, 9]]
    assert groups["etp-ep-pp"] == [
        list(range(8)) + list(range(16, 24)),
        list(range(8, 16)) + list(range(24, 32)),
    ]
    assert groups["dp-cp"][0] == [0, 2, 4, 6, 8, 10, 12, 14]


def test_partial_order_as_megatron() -> None:
    # RankGenerator appends names of size 1 that the order leaves out.
    allocation = megatron(dp=2, tp=2, pp=2, etp=2)  # edp = 2 == dp, cp = ep = 1
    assert rank_groups(allocation, "tp-dp-pp") == rank_groups(allocation)
    assert rank_groups(allocation, "tp-pp-dp") == rank_groups(allocation, "tp-cp-ep-pp-dp")


def test_other_permutation_is_generic() -> None:
    # pp first: both generators put pp at stride 1 (edp 2 == dp 2, as the pp rule needs).
    allocation = megatron(dp=2, pp=2, tp=2, ep=2)
    assert allocation.parallel.edp_size == 2
    groups = rank_groups(allocation, "pp-tp-cp-ep-dp")
    assert groups["pp"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert groups["tp"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert groups["dp"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert groups["ep"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert groups["edp"] == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_accepts_spec_string() -> None:
    pytest.importorskip("areal_conf.spec.parser")
    spec = "megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)"
    assert rank_groups(spec) == reference(
        megatron(dp=4, pp=2, tp=2, cp=2, ep=2, etp=4), "tp-cp-ep-dp-pp"
    )
    assert rank_groups("megatron:d2p2t4e4") == reference(
        megatron(dp=2, pp=2, tp=4, ep=4), "tp-cp-ep-dp-pp"
    )


def test_bad_spec_string_is_allocation_error() -> None:
    pytest.importorskip("areal_conf.spec.parser")
    with pytest.raises(AllocationError):
        rank_groups("megatron:d0")
    with pytest.raises(AllocationError):
        rank_groups(8)  # type: ignore[arg-type]


def test_returns_fresh_lists() -> None:
    allocation = megatron(dp=2, tp=2)
    first = rank_groups(allocation)
    first["tp"][0].append(99)
    assert rank_groups(allocation)["tp"][0] == [0, 1]


# --- errors ---------------------------------------------------------------------------

DEFAULT = megatron(dp=2, pp=2, tp=2)


class BadOrder(NamedTuple):
    """A rank order that rank_groups rejects for DEFAULT, and what the error says."""

    order: str
    position: int | None  # where the caret points (None: no caret line)
    message: str  # a part of the reason
    hint: str  # a part of the hint


BAD_ORDERS: list[BadOrder] = [
    BadOrder(
        order="tp-cp-ep-dp-xx",
        position=12,
        message="unknown parallelism 'xx'",
        hint="joined by '-'",
    ),
    BadOrder(order="tp-cp-ep-dp-pp-", position=15, message="empty token", hint="joined by '-'"),
    BadOrder(order="tp--cp-ep-dp-pp", position=3, message="empty token", hint="joined by '-'"),
    BadOrder(order="", position=None, message="empty rank order", hint="tp-cp-ep-dp-pp"),
    BadOrder(
        order="tp-cp-cp-dp-pp", position=6, message="cp appears twice", hint="each at most once"
    ),
    BadOrder(
        order="TP-CP-EP-DP-PP",
        position=0,
        message="unknown parallelism 'TP'",
        hint="lower case: tp",
    ),
    BadOrder(
        order="tp-cp-ep-dp- pp",
        position=12,
        message="unknown parallelism ' pp'",
        hint="joined by '-'",
    ),
    BadOrder(
        order="tp,cp,ep,dp,pp", position=0, message="unknown parallelism", hint="joined by '-'"
    ),
    BadOrder(order="tp-cp-ep-dp", position=None, message="leaves out pp, but pp=2", hint="add pp"),
    BadOrder(order="cp-ep-dp-pp", position=None, message="leaves out tp, but tp=2", hint="add tp"),
]


@pytest.mark.parametrize(BadOrder._fields, BAD_ORDERS)
def test_bad_order(order: str, position: int | None, message: str, hint: str) -> None:
    with pytest.raises(AllocationError) as info:
        rank_groups(DEFAULT, order)
    err = info.value
    assert err.position == position
    assert err.spec == order
    assert message in err.reason
    assert hint in err.hint


def test_missing_order_token_checks_expert_sizes_too() -> None:
    with pytest.raises(AllocationError, match="leaves out dp, but edp=2"):
        rank_groups(megatron(tp=2), "tp-cp-ep-pp")  # dp 1, edp 2
    with pytest.raises(AllocationError, match="leaves out ep, but ep=2"):
        rank_groups(megatron(dp=2, ep=2), "tp-cp-dp-pp")


def test_non_string_order() -> None:
    with pytest.raises(AllocationError, match="must be a string"):
        rank_groups(DEFAULT, 5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "allocation",
    [
        megatron(dp=2, pp=2, tp=2),  # flat: edp = 4 != dp = 2
        megatron(dp=4, pp=2, tp=2, cp=2, ep=2, etp=4),  # edp 2 != dp 4
        megatron(dp=2, pp=2, tp=4, ep=2),  # edp 4 != dp 2
    ],
)
def test_order_not_ending_in_pp_needs_edp_equal_dp(allocation: ModelAllocation) -> None:
    with pytest.raises(AllocationError) as info:
        rank_groups(allocation, "tp-cp-ep-pp-dp")
    err = info.value
    assert "does not end in pp" in err.reason
    assert err.position == 9 and err.length == 2
    assert "tp-cp-ep-dp-pp" in err.hint and "etp×ep" in err.hint


def test_pipeline_groups_must_agree() -> None:
    # edp == dp, but pp's stride is tp (2) for attention and etp (1) for experts.
    allocation = megatron(dp=2, pp=2, tp=2, ep=2)
    assert allocation.parallel.edp_size == 2
    with pytest.raises(AllocationError) as info:
        rank_groups(allocation, "tp-pp-cp-ep-dp")
    assert "pipeline groups" in info.value.reason
    assert "pp last" in info.value.hint


@pytest.mark.parametrize("backend", ["sglang", "vllm"])
def test_inference_backend_has_no_groups(backend: str) -> None:
    allocation = ModelAllocation(backend, ParallelStrategy(dp_size=2, tp_size=4))
    with pytest.raises(AllocationError) as info:
        rank_groups(allocation)
    assert "inference backend" in info.value.reason
    assert "2 independent server instance(s) of 4 GPU(s)" in info.value.hint


def test_inconsistent_expert_sizes_cannot_be_built() -> None:
    with pytest.raises(AllocationError, match="edp×pp×etp×ep = 3 differs from the world size"):
        megatron(dp=2, tp=2, edp=3)
    with pytest.raises(AllocationError, match="pp×etp×ep = 3 does not divide the world size"):
        ParallelStrategy(dp_size=2, ep_size=3)
    with pytest.raises(AllocationError, match="edp×pp×etp×ep = 3 differs"):
        ParallelStrategy(dp_size=2)._replace(edp_size=3)


def test_non_positive_size_cannot_be_built() -> None:
    with pytest.raises(AllocationError, match="dp_size must be a positive integer"):
        ParallelStrategy(dp_size=0)
    with pytest.raises(AllocationError, match="tp_size must be a positive integer"):
        ParallelStrategy._make([1, 2.0, 1, 1, 1, 1, 1])


def test_default_edp_is_what_the_other_sizes_leave() -> None:
    assert ParallelStrategy(dp_size=4, pp_size=2, ep_size=2).edp_size == 2
    assert ParallelStrategy(dp_size=4, tp_size=2, etp_size=2, ep_size=4).edp_size == 1


def test_unknown_backend() -> None:
    with pytest.raises(AllocationError, match="unknown backend"):
        rank_groups(ModelAllocation("deepspeed", ParallelStrategy()))


def test_other_training_backends() -> None:
    fsdp = ModelAllocation("fsdp", ParallelStrategy(dp_size=4, tp_size=2, edp_size=8))
    assert rank_groups(fsdp) == reference(fsdp, "tp-cp-ep-dp-pp")


# --- property: random valid layouts --------------------------------------------------


@st.composite
def layouts(draw: st.DrawFn) -> tuple[ModelAllocation, str]:
    dp, tp, pp, cp = (draw(st.integers(1, 4)) for _ in range(4))
    world = dp * tp * pp * cp
    order = draw(st.sampled_from(sorted(FORMULAS)))
    if order == "tp-cp-ep-pp-dp" and pp > 1:
        # edp must equal dp, so etp × ep = tp × cp.
        inner = tp * cp
        etp = draw(st.sampled_from([d for d in range(1, inner + 1) if inner % d == 0]))
        ep = inner // etp
    else:
        rest = world // pp
        etp = draw(st.sampled_from([d for d in range(1, rest + 1) if rest % d == 0]))
        ep = draw(st.sampled_from([d for d in range(1, rest // etp + 1) if rest // etp % d == 0]))
    return megatron(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp), order


@settings(max_examples=150, deadline=None)
@given(layouts())
def test_random_layouts_match_reference(case: tuple[ModelAllocation, str]) -> None:
    allocation, order = case
    assert rank_groups(allocation, order) == reference(allocation, order)


# --- text rendering ------------------------------------------------------------------


def test_format_small() -> None:
    text = format_rank_groups(rank_groups(megatron(dp=2, tp=2)))
    lines = text.splitlines()
    assert len(lines) == len(ATTN_KEYS) + len(EXPERT_KEYS)
    assert lines[0].split() == [
        "tp",
        "2",
        "groups",
        "of",
        "2:",
        "[0,",
        "1]",
        "[2,",
        "3]",
    ]
    assert any(
        line.startswith("tp-dp-cp") and "1 group of 4: [0, 1, 2, 3]" in line for line in lines
    )


def test_format_big_world_is_concise() -> None:
    groups = rank_groups(megatron(dp=64, pp=4, tp=8, cp=2))
    text = format_rank_groups(groups, max_groups=2, max_ranks=4)
    assert len(text) < 2000
    dp_line = next(line for line in text.splitlines() if line.startswith("dp "))
    assert "64 groups of 64" in dp_line
    assert "[0, 16, 32, ..., 1008]" in dp_line
    assert "(62 more)" in dp_line
