"""The model section rules of SPEC §7: one table row per rule, dense and MoE."""

from __future__ import annotations

from typing import Any

import pytest

from areal_conf.all_layouts import layouts
from areal_conf.errors import AllocationError
from areal_conf.model_checks import (
    MODEL_KEYS,
    MODEL_RULES,
    check_model,
    cp_fits,
    ep_fits,
    model_violations,
    pp_fits,
    tp_fits,
    validate_model,
)
from areal_conf.model_shape import check_shape_values
from areal_conf.parser import parse_backend

DENSE: dict[str, int | None] = {
    "num_layers": 30,
    "num_attention_heads": 12,
    "num_kv_heads": 4,
    "num_experts": None,
    "max_seq_len": 96,
}
MOE: dict[str, int | None] = {
    "num_layers": 48,
    "num_attention_heads": 48,
    "num_kv_heads": 8,
    "num_experts": 6,
    "max_seq_len": 4096,
}

# (model, backend spec, the one expected violation); each rule fails once per model.
VIOLATIONS = [
    pytest.param(
        DENSE,
        "megatron:d2t8",
        "num_attention_heads=12 is not divisible by tp=8; use t1, t2, t3, t4, t6 or t12",
        id="dense-heads",
    ),
    pytest.param(
        DENSE,
        "megatron:d2t6",
        "num_kv_heads=4 is neither a multiple nor a divisor of tp=6; "
        "use a divisor of 4 (t1, t2 or t4) or a multiple of 4 (t8, t12, ...)",
        id="dense-kv-heads",
    ),
    pytest.param(
        DENSE,
        "archon:d2p4",
        "num_layers=30 is not divisible by pp=4; use p1, p2, p3, p5, p6, p10, p15 or p30",
        id="dense-layers",
    ),
    # AReaL's Megatron engine splits layers into stages of unequal length
    pytest.param(DENSE, "megatron:d2p4", None, id="dense-megatron-uneven-stages"),
    pytest.param(
        DENSE,
        "megatron:p32",
        "num_layers=30 is fewer than pp=32: every pipeline stage needs a layer; use at most p30",
        id="dense-megatron-more-stages-than-layers",
    ),
    pytest.param(
        DENSE,
        "megatron:d2c5",
        "max_seq_len=96 is not divisible by 2×cp=10; "
        "use c1, c2, c3, c4, c6, c8, c12, c16, c24 or c48, or pad max_seq_len to 100",
        id="dense-seq-len",
    ),
    pytest.param(
        DENSE,
        "sglang:d2t8",
        "num_attention_heads=12 is not divisible by tp=8; use t1, t2, t3, t4, t6 or t12",
        id="dense-inference-heads",
    ),
    pytest.param(
        DENSE,
        "vllm:p4",
        "num_layers=30 is not divisible by pp=4; use p1, p2, p3, p5, p6, p10, p15 or p30",
        id="dense-inference-layers",
    ),
    pytest.param(
        MOE,
        "megatron:d2t32",
        "num_attention_heads=48 is not divisible by tp=32; "
        "use t1, t2, t3, t4, t6, t8, t12, t16, t24 or t48",
        id="moe-heads",
    ),
    pytest.param(
        MOE,
        "megatron:(attn:d2t6|ffn:t2e2)",
        "num_kv_heads=8 is neither a multiple nor a divisor of tp=6; "
        "use a divisor of 8 (t1, t2, t4 or t8) or a multiple of 8 (t16, t24, ...)",
        id="moe-kv-heads",
    ),
    pytest.param(
        MOE,
        "archon:d4p32",
        "num_layers=48 is not divisible by pp=32; use p1, p2, p3, p4, p6, p8, p12, p16, p24 or p48",
        id="moe-layers",
    ),
    pytest.param(
        MOE,
        "megatron:d4e4",
        "num_experts=6 is not divisible by ep=4; use e1, e2, e3 or e6",
        id="moe-experts",
    ),
    pytest.param(
        MOE,
        "archon:(attn:d3t2|ffn:t2e3)",
        None,
        id="moe-archon-fine",
    ),
    pytest.param(
        MOE,
        "megatron:(attn:d2c3|ffn:t2e3)",
        "max_seq_len=4096 is not divisible by 2×cp=6; use c1, c2, c4, c8, c16, c32, "
        "c64, c128, c256, c512 or another divisor of 2048, or pad max_seq_len to 4098",
        id="moe-seq-len",
    ),
    pytest.param(DENSE, "megatron:d2p2t4c2", None, id="dense-fine"),
    pytest.param(MOE, "megatron:d2p2t4e2", None, id="moe-fine"),
]


@pytest.mark.parametrize(("model", "spec", "expected"), VIOLATIONS)
def test_one_rule_each(model: dict[str, int | None], spec: str, expected: str | None) -> None:
    allocation = parse_backend(spec)
    assert model_violations(allocation, model) == ([] if expected is None else [expected])


@pytest.mark.parametrize("model", [DENSE, MOE], ids=["dense", "moe"])
def test_null_fields_skip_their_checks(model: dict[str, int | None]) -> None:
    unchecked = dict.fromkeys(model)
    assert model_violations(parse_backend("megatron:d2p7t5c3"), unchecked) == []
    assert model_violations(parse_backend("megatron:d2p7t5c3"), {}) == []


def test_several_rules_in_order() -> None:
    found = model_violations(parse_backend("megatron:p4t8c5e4"), MOE | {"num_layers": 2})
    assert [v.split("=", 1)[0] for v in found] == [
        "num_layers",
        "num_experts",
        "max_seq_len",
    ]


def test_check_model_names_engine_spec_and_every_rule() -> None:
    allocation = parse_backend("sglang:d1 p4 t8")
    with pytest.raises(AllocationError) as info:
        check_model("rollout", allocation, DENSE)
    err = info.value
    assert err.spec == "sglang:p4t8"
    assert err.position is None
    assert err.reason.startswith("rollout: sglang:p4t8 breaks 2 model rules: ")
    for rule in (
        "num_attention_heads=12 is not divisible by tp=8",
        "num_layers=30 is not divisible by pp=4",
    ):
        assert rule in err.reason
    assert "num_attention_heads: use t1, t2, t3, t4, t6 or t12" in err.hint
    assert "num_layers: use p1, p2, p3, p5, p6, p10, p15 or p30" in err.hint
    assert "hint: " in str(err)


def test_check_model_single_rule_hint_is_the_fix() -> None:
    with pytest.raises(AllocationError) as info:
        check_model("rollout", parse_backend("sglang:d2t8"), DENSE)
    assert info.value.reason == (
        "rollout: sglang:d2t8 breaks a model rule: num_attention_heads=12 is not divisible by tp=8"
    )
    assert info.value.hint == "use t1, t2, t3, t4, t6 or t12"


def test_check_model_passes() -> None:
    check_model("critic", parse_backend("megatron:d2p2t4e2"), MOE)


@pytest.mark.parametrize(
    ("model", "message", "hint"),
    [
        ({"num_head": 8}, "unknown key num_head in the model section", "num_layers"),
        ({"num_layer": 8}, "unknown key num_layer", "did you mean num_layers?"),
        ({3: 8}, "unknown key 3 in the model section", "max_seq_len"),
        (
            {"num_layers": 0},
            "model.num_layers must be a positive integer or null, got 0",
            "",
        ),
        ({"num_layers": -2}, "got -2", "null to skip"),
        ({"num_experts": True}, "got True", "model.num_experts=64"),
        ({"max_seq_len": 4096.0}, "got 4096.0", ""),
        ({"num_kv_heads": "8"}, "got '8'", ""),
        ([("num_layers", 8)], "the model section must be a mapping, got list", "keys"),
    ],
)
@pytest.mark.parametrize("call", ["violations", "check"])
def test_bad_model_section(model: Any, message: str, hint: str, call: str) -> None:
    allocation = parse_backend("fsdp:d8")
    with pytest.raises(AllocationError) as info:
        if call == "violations":
            model_violations(allocation, model)
        else:
            check_model("actor", allocation, model)
    assert message in info.value.reason
    assert hint in info.value.hint
    assert info.value.position is None


def test_many_divisors_are_thinned_to_the_nearest() -> None:
    # 720720 has 240 divisors; the fix shows the ten nearest tp=17.
    found = model_violations(parse_backend("megatron:t17"), {"num_attention_heads": 720720})
    assert found == [
        (
            "num_attention_heads=720720 is not divisible by tp=17; use t11, t12, t13, t14, "
            "t15, t16, t18, t20, t21, t22 or another divisor of 720720"
        )
    ]


def test_huge_values_stay_bounded() -> None:
    # Suggestions stop at 2**20 (no size can be larger): a huge prime costs 2**20 steps.
    found = model_violations(parse_backend("megatron:t2"), {"num_attention_heads": 2**61 - 1})
    assert found == [f"num_attention_heads={2**61 - 1} is not divisible by tp=2; use t1"]


def test_keys() -> None:
    assert MODEL_KEYS == (
        "num_layers",
        "num_attention_heads",
        "num_kv_heads",
        "num_experts",
        "max_seq_len",
    )


SIZES = (1, 2, 3, 4, 5, 6, 8, 12, 16, 48)


@pytest.mark.parametrize(
    "model", [DENSE, DENSE | {"num_experts": 10}, MOE], ids=["dense", "dense-10-experts", "moe"]
)
def test_filters_and_messages_agree(model: dict[str, int | None]) -> None:
    # A size passes its filter exactly when no message names a rule on that size.
    spec = validate_model(model)
    filters = {"tp": tp_fits, "pp": pp_fits, "cp": cp_fits, "ep": ep_fits}
    rules_on = {size: {r.key for r in MODEL_RULES if r.size == size} for size in filters}
    for backend in ("megatron", "archon"):
        for size, fits in filters.items():
            for n in SIZES:
                # dN beside the size, so that ep = N divides the GPUs of a stage (and
                # Archon's expert rules hold).
                allocation = parse_backend(f"{backend}:d{n}{size[0]}{n}")
                named = {v.split("=", 1)[0] for v in model_violations(allocation, model)}
                assert fits(spec, n, backend) == (not named & rules_on[size]), (size, n, named)


def test_every_model_key_has_a_rule() -> None:
    assert {rule.key for rule in MODEL_RULES} == set(MODEL_KEYS)


def test_a_sweep_offers_no_expert_layout_without_num_experts() -> None:
    # The rule skips a null num_experts; the enumeration itself leaves expert layouts out.
    assert model_violations(parse_backend("megatron:d4e4"), DENSE) == []

    def experts(spec: str) -> bool:
        return "e" in spec.split(":", 1)[1]

    assert not [s for s in layouts("megatron", 8, model=DENSE) if experts(s)]
    assert any(experts(s) for s in layouts("megatron", 8, model=DENSE | {"num_experts": 8}))


@pytest.mark.parametrize("value", [0, -3, True, 2.0, "8"])
def test_layout_and_shape_keys_reject_the_same_values(value: object) -> None:
    # One positive-integer check behind both; only the hint's example and null differ.
    with pytest.raises(AllocationError) as layout_key:
        validate_model({"num_layers": value})
    with pytest.raises(AllocationError) as shape_key:
        check_shape_values({"hidden_size": value})
    assert (
        layout_key.value.reason
        == f"model.num_layers must be a positive integer or null, got {value!r}"
    )
    assert (
        shape_key.value.reason
        == f"model.hidden_size must be a positive integer or null, got {value!r}"
    )
    assert layout_key.value.hint == "write e.g. model.num_layers=32, or null to skip its check"
    assert shape_key.value.hint == (
        "write e.g. model.hidden_size=4096, or null to take it from model.hf_config"
    )


def test_layout_and_shape_keys_accept_one_and_null() -> None:
    assert validate_model({"num_layers": 1, "num_experts": None})["num_layers"] == 1
    check_shape_values({"hidden_size": 1, "vocab_size": None})
