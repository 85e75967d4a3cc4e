"""Layout sweeps (SPEC §8) against an independent brute force over all size tuples."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from areal_conf.errors import AllocationError
from areal_conf.spec.layouts import layouts
from areal_conf.spec.model_checks import model_violations
from areal_conf.spec.parser import parse_backend

DENSE: dict[str, int | None] = {
    "num_layers": 24,
    "num_attention_heads": 16,
    "num_kv_heads": 4,
    "max_seq_len": 4096,
}
MOE: dict[str, int | None] = {
    "num_layers": 24,
    "num_attention_heads": 32,
    "num_kv_heads": 8,
    "num_experts": 12,
    "max_seq_len": 4100,  # no rule reads it: AReaL pads every sequence for cp
}
MOE_16: dict[str, int | None] = dict(MOE, num_experts=16, max_seq_len=4096)


def brute_force(
    backend: str,
    gpus: int,
    model: dict[str, int | None] | None = None,
    max_tp: int | None = None,
) -> set[str]:
    """Every size tuple, written as a spec; keep what the parser and the rules accept."""
    model = model or {}
    sizes = [d for d in range(1, gpus + 1) if gpus % d == 0]
    found: set[str] = set()
    for dp, tp, pp, cp, ep, etp in itertools.product(sizes, repeat=6):
        if etp == 1:
            spec = f"{backend}:d{dp}t{tp}p{pp}c{cp}e{ep}"
        else:
            spec = f"{backend}:(attn:d{dp}t{tp}p{pp}c{cp}|ffn:t{etp}e{ep}p{pp})"
        try:
            allocation = parse_backend(spec)
        except AllocationError:
            continue
        if allocation.world_size != gpus:
            continue
        if (ep > 1 or etp > 1) and model.get("num_experts") is None:
            continue
        if max_tp is not None and (tp > max_tp or etp > max_tp):
            continue
        if model_violations(allocation, model):
            continue
        found.add(str(allocation))
    return found


def case(
    *,
    backend: str,
    gpus: int,
    model: dict[str, int | None] | None = None,
    max_tp: int | None = None,
    count: int | None = None,
    id: str,
) -> Any:
    """A row of CASES: ``layouts(backend, gpus, model=..., max_tp=...)``, and how many
    layouts it lists when ``count`` is given."""
    return pytest.param(backend, gpus, model, max_tp, count, id=id)


CASES = [
    case(backend="fsdp", gpus=8, count=10, id="fsdp-8"),
    case(backend="megatron", gpus=16, id="megatron-16-no-model"),
    case(backend="megatron", gpus=16, model=DENSE, id="megatron-16-dense"),
    case(backend="megatron", gpus=16, model=MOE, id="megatron-16-moe"),
    case(backend="megatron", gpus=16, model=MOE, max_tp=2, id="megatron-16-moe-max-tp-2"),
    case(backend="archon", gpus=16, model=MOE_16, id="archon-16-moe"),
    case(backend="archon", gpus=12, model=MOE, id="archon-12-moe"),
    case(backend="sglang", gpus=8, max_tp=4, count=9, id="sglang-8-max-tp-4"),
    case(backend="vllm", gpus=12, model=DENSE, id="vllm-12-dense"),
    case(backend="fsdp", gpus=16, model=MOE, id="fsdp-16-moe-has-no-experts"),
]


@pytest.mark.parametrize(("backend", "gpus", "model", "max_tp", "count"), CASES)
def test_matches_brute_force(
    backend: str,
    gpus: int,
    model: dict[str, int | None] | None,
    max_tp: int | None,
    count: int | None,
) -> None:
    listed = layouts(backend, gpus, model=model, max_tp=max_tp)
    expected = brute_force(backend, gpus, model, max_tp)
    assert len(listed) == len(set(listed)), "duplicates"
    assert set(listed) == expected
    assert len(listed) == len(expected)
    if count is not None:
        assert len(listed) == count


@pytest.mark.parametrize(("backend", "gpus", "model", "max_tp", "count"), CASES)
def test_every_layout_round_trips_in_order(
    backend: str,
    gpus: int,
    model: dict[str, int | None] | None,
    max_tp: int | None,
    count: int | None,
) -> None:
    listed = layouts(backend, gpus, model=model, max_tp=max_tp)
    keys = []
    for spec in listed:
        allocation = parse_backend(spec)
        assert str(allocation) == spec
        assert allocation.backend == backend
        assert allocation.world_size == gpus
        p = allocation.parallel
        keys.append((p.pp_size, p.tp_size, p.cp_size, p.ep_size, p.etp_size, p.dp_size))
    assert keys == sorted(keys)


def test_the_brute_force_is_not_vacuous() -> None:
    moe = layouts("megatron", 16, model=MOE)
    assert "megatron:d2p2t4e4" in moe  # flat expert layout, ep 4 | 12
    assert "megatron:(attn:d4t2c2|ffn:d2t2e4)" in moe  # hybrid, etp 2
    assert not any("e8" in s or "e16" in s for s in moe)  # 8, 16 do not divide 12
    assert "megatron:d2t2c4e4" in moe  # Megatron's cp splits sequences, not heads
    fsdp = layouts("fsdp", 16, model=DENSE | {"num_attention_heads": 12})
    assert "fsdp:d4c4" in fsdp and "fsdp:d4t2c2" in fsdp  # 12 heads over t×c = 4
    assert "fsdp:d2c8" not in fsdp  # 12 heads, not divisible by c8 (Ulysses)
    assert not any("t8" in s or "t16" in s for s in fsdp)  # 4 kv heads, each rank whole
    dense = layouts("megatron", 16, model=DENSE)
    assert not any("e" in s.split(":", 1)[1] or "ffn" in s for s in dense)
    archon = layouts("archon", 16, model=MOE_16)
    assert "archon:(attn:d2t2|ffn:d2t2)" not in archon  # world 4, not 16
    assert all(
        parse_backend(s).parallel.etp_size in (1, parse_backend(s).parallel.tp_size) for s in archon
    )


def test_small_examples() -> None:
    assert layouts("fsdp", 1) == ["fsdp:d1"]
    assert layouts("fsdp", 4) == [
        "fsdp:d4",
        "fsdp:d2c2",
        "fsdp:c4",
        "fsdp:d2t2",
        "fsdp:t2c2",
        "fsdp:t4",
    ]
    assert layouts("sglang", 4, max_tp=1) == ["sglang:d4", "sglang:d2p2", "sglang:p4"]
    assert layouts("megatron", 2, model={"num_experts": 2}) == [
        "megatron:d2",
        "megatron:(attn:d2|ffn:t2)",
        "megatron:d2e2",
        "megatron:c2",
        "megatron:(attn:c2|ffn:t2)",
        "megatron:c2e2",
        "megatron:t2",
        "megatron:(attn:t2|ffn:t2)",
        "megatron:t2e2",
        "megatron:p2",
    ]


def test_max_tp_caps_expert_tp_too() -> None:
    listed = layouts("megatron", 16, model=MOE_16, max_tp=2)
    assert all(
        parse_backend(s).parallel.tp_size <= 2 and parse_backend(s).parallel.etp_size <= 2
        for s in listed
    )
    assert "megatron:(attn:d8t2|ffn:d4t2e2)" in listed


def test_largest_world_is_quick_and_valid() -> None:
    listed = layouts("fsdp", 2**20)
    assert len(listed) == 21 * 22 // 2  # t, c powers of two with t·c ≤ 2**20
    assert listed[0] == "fsdp:d1048576" and listed[-1] == "fsdp:t1048576"


@pytest.mark.parametrize(
    ("kwargs", "message", "hint"),
    [
        (
            {"backend": "fdsp", "gpus": 8},
            "unknown backend 'fdsp'",
            "did you mean fsdp?",
        ),
        ({"backend": "FSDP", "gpus": 8}, "unknown backend 'FSDP'", "lower case: fsdp"),
        (
            {"backend": "fsdp:d8", "gpus": 8},
            "unknown backend",
            "backend name only, e.g. fsdp",
        ),
        ({"backend": "torch", "gpus": 8}, "unknown backend 'torch'", "known backends"),
        ({"backend": 8, "gpus": 8}, "backend must be a string, got int", "fsdp"),
        (
            {"backend": "fsdp", "gpus": 0},
            "gpus must be a positive integer",
            "e.g. 8",
        ),
        ({"backend": "fsdp", "gpus": -4}, "got -4", "e.g. 8"),
        ({"backend": "fsdp", "gpus": 2**20 + 1}, "got 1048577", "e.g. 8"),
        ({"backend": "fsdp", "gpus": True}, "got True", "e.g. 8"),
        ({"backend": "fsdp", "gpus": 8.0}, "got 8.0", "e.g. 8"),
        ({"backend": "fsdp", "gpus": "8"}, "got '8'", "e.g. 8"),
        (
            {"backend": "fsdp", "gpus": 8, "max_tp": 0},
            "max_tp must be a positive",
            "None",
        ),
        ({"backend": "fsdp", "gpus": 8, "max_tp": -1}, "got -1", "GPUs per node"),
        ({"backend": "fsdp", "gpus": 8, "max_tp": True}, "got True", "None"),
        ({"backend": "fsdp", "gpus": 8, "max_tp": "4"}, "got '4'", "None"),
        (
            {"backend": "fsdp", "gpus": 8, "model": {"layers": 4}},
            "unknown key layers in the model section",
            "num_layers",
        ),
        (
            {"backend": "fsdp", "gpus": 8, "model": {"num_layers": 0}},
            "model.num_layers must be a positive integer or null",
            "null",
        ),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], message: str, hint: str) -> None:
    with pytest.raises(AllocationError) as info:
        layouts(**kwargs)
    assert message in info.value.reason
    assert hint in info.value.hint
