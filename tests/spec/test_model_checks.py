"""The model-shape rules of each backend: one table row per rule, and AReaL's verdict.

Each rule of ``MODEL_RULES`` cites the start-up code of AReaL's engine (AReaL cbff54d64)
or of the Megatron-Core, SGLang or vLLM release AReaL pins; ``RULE_ROWS`` breaks each
rule once (and passes the layouts AReaL takes that areal-conf once refused), with the
model of AReaL's own examples where one shows the rule. The models come from
areal-conf's table of known models, whose entries copy the models' ``config.json``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from areal_conf.errors import AllocationError
from areal_conf.model.known_models import known_model
from areal_conf.model.shape import check_shape_values
from areal_conf.spec.backends import BACKENDS
from areal_conf.spec.layouts import layouts
from areal_conf.spec.model_checks import (
    MODEL_KEYS,
    MODEL_RULES,
    NO_EXPERTS,
    RULE_KEYS,
    SIZE_PREFIX,
    SIZES,
    Sizes,
    check_model,
    cp_fits,
    ep_fits,
    etp_fits,
    model_violations,
    pp_fits,
    tp_fits,
    validate_model,
    violations,
)
from areal_conf.spec.parser import parse_backend


def _known(model_id: str) -> dict[str, Any]:
    found = known_model(model_id)
    assert found is not None, model_id
    return found


# Qwen2.5-1.5B-Instruct (AReaL's examples/math/gsm8k_grpo*.yaml): 28 layers, 12 heads,
# 2 key-value heads, ffn 8960, dense.
Q15 = _known("Qwen/Qwen2.5-1.5B-Instruct")
# Qwen2.5-7B-Instruct: 28 layers, 28 heads, 4 key-value heads, dense.
Q7 = _known("Qwen/Qwen2.5-7B-Instruct")
# Qwen3-30B-A3B: 48 layers, 32 heads, 4 key-value heads, 128 experts of ffn 768.
Q30 = _known("Qwen/Qwen3-30B-A3B")
# A partial shape (areal-conf's own model section): whether it has experts is unknown.
PARTIAL: dict[str, Any] = {"num_layers": 30, "num_attention_heads": 12, "num_kv_heads": 4}


def row(rule: str | None, model: dict[str, Any], spec: str, *expected: str, id: str) -> Any:
    """A row of RULE_ROWS: ``spec`` on ``model`` breaks ``rule`` (None: no rule), each
    message of ``expected`` in order."""
    return pytest.param(rule, model, spec, list(expected), id=id)


RULE_ROWS = [
    # heads-tp: every backend
    row(
        "heads-tp",
        {"num_attention_heads": 12},
        "fsdp:d1t8",
        "num_attention_heads=12 is not divisible by tp=8; use t1, t2, t3, t4, t6 or t12",
        id="heads-tp-fsdp",
    ),
    row(
        "heads-tp",
        {"num_attention_heads": 12, "num_kv_heads": 4},
        "sglang:d2t8",
        # t3 and t6 are no fix: 4 key-value heads neither divide them nor are a multiple
        "num_attention_heads=12 is not divisible by tp=8; use t1, t2, t4 or t12",
        id="heads-tp-sglang-fix-keeps-kv-rule",
    ),
    # kv-heads-tp: FSDP, Archon and AReaL's Megatron engine give each rank whole kv heads
    row(
        "kv-heads-tp",
        Q15,
        "fsdp:d1t4",
        "num_kv_heads=2 is not divisible by tp=4; use t1 or t2",
        id="kv-heads-tp-fsdp-qwen2.5-1.5b",
    ),
    row(
        "kv-heads-tp",
        Q15,
        "archon:d2t4",
        "num_kv_heads=2 is not divisible by tp=4; use t1 or t2",
        id="kv-heads-tp-archon",
    ),
    row(
        "kv-heads-tp",
        Q15,
        "megatron:t3",
        # the fix names no size AReaL refuses (12 heads alone would allow t4 and t6)
        "num_kv_heads=2 is not divisible by tp=3; use t1 or t2",
        "ffn_hidden_size=8960 is not divisible by tp=3; use t1 or t2",
        id="kv-heads-tp-megatron-t3",
    ),
    # kv-heads-tp-replicated: SGLang and vLLM replicate kv heads over a larger tp
    row(
        "kv-heads-tp-replicated",
        PARTIAL,
        "vllm:d2t6",
        "num_kv_heads=4 is neither a multiple nor a divisor of tp=6; use t1, t2, t4 or t12",
        id="kv-heads-tp-replicated-vllm",
    ),
    row(
        "kv-heads-tp-replicated",
        {"num_kv_heads": 4},
        "sglang:t6",
        "num_kv_heads=4 is neither a multiple nor a divisor of tp=6; "
        "use t1, t2, t4, t8, t12, t16, ...",
        id="kv-heads-tp-replicated-no-heads",
    ),
    row(None, Q15, "sglang:t4", id="kv-heads-replicated-sglang-qwen2.5-1.5b"),
    # ffn-tp: Megatron, SGLang and vLLM split the MLP evenly
    row(
        "ffn-tp",
        Q15,
        "sglang:t6",
        "ffn_hidden_size=8960 is not divisible by tp=6; use t1, t2 or t4",
        id="ffn-tp-sglang",
    ),
    row(
        None,
        {"num_attention_heads": 12, "ffn_hidden_size": 8960},
        "fsdp:t12",
        id="ffn-tp-not-fsdp",
    ),
    row(
        None,
        {"num_attention_heads": 32, "num_kv_heads": 4, "ffn_hidden_size": 6000, "num_experts": 8},
        "vllm:t8",
        id="ffn-tp-not-with-experts",
    ),
    # moe-ffn-etp: Megatron's grouped experts split their MLP over etp
    row(
        "moe-ffn-etp",
        Q30,
        "megatron:(attn:d5t2|ffn:t5e2)",
        "moe_ffn_hidden_size=768 is not divisible by the expert tensor parallel size 5; "
        "use ffn t1, t2, t3, t4, t6, t8, t12, t16, t24, t32 or another of the 18 sizes "
        "that fit",
        id="moe-ffn-etp",
    ),
    # layers-pp-*: every engine splits the layers into stages of unequal length
    row(
        "layers-pp-megatron",
        Q15,
        "megatron:p31",
        "num_layers=28 is fewer than pp-2=29: AReaL's Megatron engine balances the stages, "
        "and every stage but the first and the last needs a layer; use at most p30",
        id="layers-pp-megatron",
    ),
    row(None, Q15, "megatron:p30", id="layers-pp-megatron-first-last-stage-empty"),
    row(None, PARTIAL, "megatron:d2p4", id="layers-pp-megatron-uneven"),
    row(
        "layers-pp-archon",
        Q15,
        "archon:p16",
        "num_layers=28 is fewer than 2×pp-2=30: Archon's default schedule "
        "(Interleaved1F1B) runs 2 stages per pipeline rank, each with a layer (the first "
        "and the last count the embedding and the output as one); use at most p15",
        id="layers-pp-archon",
    ),
    row(None, PARTIAL, "archon:d2p4", id="layers-pp-archon-uneven"),
    row(
        "layers-pp-inference",
        PARTIAL,
        "sglang:p32",
        "num_layers=30 is fewer than pp=32: every pipeline stage needs a layer; use at most p30",
        id="layers-pp-inference",
    ),
    row(None, PARTIAL, "vllm:p4", id="layers-pp-inference-uneven"),
    # heads-cp-ulysses: FSDP's and Archon's context parallelism splits heads
    row(
        "heads-cp-ulysses",
        {"num_attention_heads": 12},
        "fsdp:c8",
        "num_attention_heads=12 is not divisible by tp×cp=8: context parallelism "
        "(Ulysses) splits each tensor-parallel rank's heads over cp; "
        "use c1, c2, c3, c4, c6 or c12",
        id="heads-cp-ulysses-fsdp",
    ),
    row(
        "heads-cp-ulysses",
        Q15,
        "archon:d2t2c4",
        "num_attention_heads=12 is not divisible by tp×cp=8: context parallelism "
        "(Ulysses) splits each tensor-parallel rank's heads over cp; use c1, c2, c3 or c6",
        id="heads-cp-ulysses-archon-after-tp",
    ),
    row(None, {"num_attention_heads": 12}, "megatron:c8", id="heads-cp-not-megatron"),
    # kv-heads-cp-ulysses: each rank's kv heads repeated up to cp, or split by it
    row(
        "kv-heads-cp-ulysses",
        {"num_attention_heads": 24, "num_kv_heads": 8},
        "fsdp:t2c3",
        "num_kv_heads=8 over tp=2 gives 4 per rank, neither a multiple nor a divisor of "
        "cp=3; use c1, c2, c4 or c12",
        id="kv-heads-cp-ulysses",
    ),
    row(None, Q15, "fsdp:c4", id="kv-heads-cp-ulysses-repeated"),
    # experts-ep-dense: a model whose shape is known and names no experts
    row(
        "experts-ep-dense",
        Q7,
        "megatron:d8e2",
        "ep=2 shards experts, and the model has none (its shape names no num_experts); use e1",
        id="experts-ep-dense-qwen2.5-7b",
    ),
    row(None, PARTIAL, "megatron:d4e4", id="experts-ep-unknown-is-unchecked"),
    row(None, Q7, "megatron:(attn:d4t2|ffn:d2t4)", id="expert-tensor-size-on-dense"),
    # experts-ep
    row(
        "experts-ep",
        {"num_experts": 6},
        "megatron:d4e4",
        "num_experts=6 is not divisible by ep=4; use e1, e2, e3 or e6",
        id="experts-ep",
    ),
    row(None, Q30, "archon:(attn:d4t2|ffn:t2e4)", id="experts-ep-archon"),
    # no sequence-length rule: AReaL pads every sequence for context parallelism
    row(None, {"max_seq_len": 96}, "megatron:d2c5", id="no-seq-len-rule"),
]


@pytest.mark.parametrize(("rule", "model", "spec", "expected"), RULE_ROWS)
def test_rule_row(rule: str | None, model: dict[str, Any], spec: str, expected: list[str]) -> None:
    allocation = parse_backend(spec)
    assert model_violations(allocation, model) == expected
    found = violations(allocation.parallel, validate_model(model), allocation.backend)
    assert [v.rule.name for v in found][:1] == ([rule] if rule else [])


def test_every_rule_has_a_row_and_a_source_per_backend() -> None:
    broken = {param.values[0] for param in RULE_ROWS}
    assert broken - {None} == {rule.name for rule in MODEL_RULES}
    assert len({rule.name for rule in MODEL_RULES}) == len(MODEL_RULES)
    for rule in MODEL_RULES:
        assert rule.backends <= set(BACKENDS), rule.name
        cited = {line.split(":", 1)[0] for line in rule.source}
        assert cited == set(rule.backends), rule.name
        assert set(rule.keys) <= set(RULE_KEYS), rule.name


def test_a_rule_reads_only_sizes_a_sweep_chose_before_its_own() -> None:
    # layouts() filters each size as it chooses it, in the order of SIZES.
    for rule in MODEL_RULES:
        assert all(SIZES.index(r) < SIZES.index(rule.size) for r in rule.reads), rule.name


def test_null_sizes_skip_their_rules() -> None:
    for model in (PARTIAL, Q15, Q30):
        assert model_violations(parse_backend("megatron:d2p7t5c3"), dict.fromkeys(model)) == []
    assert model_violations(parse_backend("megatron:d2p7t5c3"), {}) == []


def test_a_full_shape_without_experts_is_dense() -> None:
    assert validate_model(Q7)["num_experts"] == NO_EXPERTS
    assert validate_model(Q30)["num_experts"] == 128
    assert validate_model(PARTIAL)["num_experts"] is None
    assert validate_model(None)["num_experts"] is None


def test_several_rules_in_order() -> None:
    found = model_violations(parse_backend("megatron:p4t8e4"), Q30 | {"num_layers": 1})
    assert [v.split(";", 1)[0] for v in found] == [
        "num_kv_heads=4 is not divisible by tp=8",
        "num_layers=1 is fewer than pp-2=2: AReaL's Megatron engine balances the stages, "
        "and every stage but the first and the last needs a layer",
    ]


def test_check_model_names_engine_spec_and_every_rule() -> None:
    allocation = parse_backend("sglang:d1 p32 t8")
    with pytest.raises(AllocationError) as info:
        check_model("rollout", allocation, PARTIAL)
    err = info.value
    assert err.spec == "sglang:p32t8"
    assert err.position is None
    assert err.reason == (
        "rollout: sglang:p32t8 breaks 2 model rules: "
        "num_attention_heads=12 is not divisible by tp=8; "
        "num_layers=30 is fewer than pp=32: every pipeline stage needs a layer"
    )
    assert err.hint == "tp: use t1, t2, t4 or t12; pp: use at most p30"
    assert "hint: " in str(err)


def test_check_model_one_fix_per_size() -> None:
    # megatron:t3 breaks two rules on tp: one fix, the sizes both rules take.
    with pytest.raises(AllocationError) as info:
        check_model("actor", parse_backend("megatron:t3"), Q15)
    assert info.value.reason == (
        "actor: megatron:t3 breaks 2 model rules: num_kv_heads=2 is not divisible by tp=3; "
        "ffn_hidden_size=8960 is not divisible by tp=3"
    )
    assert info.value.hint == "use t1 or t2"


def test_check_model_passes() -> None:
    check_model("critic", parse_backend("megatron:d2p2t4e2"), Q30)


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
        ({"max_seq_len": 4096.0}, "got 4096.0", "null to take it from model.hf_config"),
        ({"ffn_hidden_size": 0}, "model.ffn_hidden_size must be a positive", ""),
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


def test_many_sizes_are_thinned_to_the_nearest() -> None:
    # 720720 has 240 divisors; the fix shows the ten nearest tp=17.
    found = model_violations(parse_backend("megatron:t17"), {"num_attention_heads": 720720})
    assert found == [
        (
            "num_attention_heads=720720 is not divisible by tp=17; use t11, t12, t13, t14, "
            "t15, t16, t18, t20, t21, t22 or another of the 240 sizes that fit"
        )
    ]


def test_huge_values_stay_bounded() -> None:
    # Suggestions stop at 2**20 (no size can be larger): a huge prime costs 2**20 steps.
    found = model_violations(parse_backend("megatron:t2"), {"num_attention_heads": 2**61 - 1})
    assert found == [f"num_attention_heads={2**61 - 1} is not divisible by tp=2; use t1"]


def test_keys() -> None:
    assert MODEL_KEYS == ("num_layers", "num_attention_heads", "num_kv_heads", "num_experts")


def test_every_layout_key_has_a_rule() -> None:
    assert {key for rule in MODEL_RULES for key in rule.keys} == set(RULE_KEYS)


VALUES = (1, 2, 3, 4, 5, 6, 8, 12, 16, 48)
FILTERS = {"tp": tp_fits, "pp": pp_fits, "cp": cp_fits, "ep": ep_fits, "etp": etp_fits}


@pytest.mark.parametrize(
    "model",
    [PARTIAL, PARTIAL | {"num_experts": 10}, Q15, Q30],
    ids=["partial", "partial-10-experts", "qwen2.5-1.5b", "qwen3-30b-a3b"],
)
def test_filters_and_messages_agree(model: dict[str, Any]) -> None:
    # A size passes its filter exactly when no message names a rule on that size.
    spec = validate_model(model)
    for backend in BACKENDS:
        for size, letter in SIZE_PREFIX.items():
            for n in VALUES:
                if size == "etp":
                    text = f"{backend}:(attn:d{n}t{n}|ffn:t{n})"
                else:
                    text = f"{backend}:d{n}{letter}{n}"
                try:
                    allocation = parse_backend(text)
                except AllocationError:
                    continue  # a size the backend does not have
                broken = {
                    v.rule.name
                    for v in violations(allocation.parallel, spec, backend)
                    if v.rule.size == size
                }
                fits = FILTERS[size](spec, n, backend)
                assert fits == (not broken), (backend, size, n, broken)


def test_a_sweep_offers_no_expert_layout_without_experts() -> None:
    def experts(spec: str) -> bool:
        return "e" in spec.split(":", 1)[1]

    for model in (PARTIAL, Q7):
        assert not [s for s in layouts("megatron", 8, model=model) if experts(s)]
    assert any(experts(s) for s in layouts("megatron", 8, model=PARTIAL | {"num_experts": 8}))


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


# -- property: the sweep and the check agree on the models of AReaL's examples ---------

# The models AReaL's example YAMLs (tests/fixtures/areal2/examples) train whose shape
# areal-conf's table of known models holds.
EXAMPLE_MODELS = {
    name: _known(name)
    for name in (
        "Qwen/Qwen2.5-1.5B-Instruct",
        "Qwen/Qwen2.5-7B",
        "Qwen/Qwen2.5-14B-Instruct",
        "Qwen/Qwen3-0.6B",
        "Qwen/Qwen3-1.7B",
        "Qwen/Qwen3-30B-A3B",
        "Qwen/Qwen3-235B-A22B",
    )
}
GPU_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def accepted(backend: str, gpus: int, model: dict[str, Any]) -> set[str]:
    """Every spelling of every layout on ``gpus`` GPUs that the parser takes for
    ``backend`` and the check passes, written canonically."""
    has_experts = bool(model.get("num_experts"))
    found: set[str] = set()
    for pp in _divisors(gpus):
        stage = gpus // pp
        for tp in _divisors(stage):
            for cp in _divisors(stage // tp):
                dp = stage // (tp * cp)
                for ep in _divisors(stage):
                    for etp in _divisors(stage // ep):
                        if etp == 1:
                            text = f"{backend}:d{dp}p{pp}t{tp}c{cp}e{ep}"
                        elif not has_experts:
                            # the ffn section's t shards nothing without experts: the
                            # same layout as etp 1, which a sweep lists once
                            continue
                        else:
                            text = f"{backend}:(attn:d{dp}p{pp}t{tp}c{cp}|ffn:t{etp}e{ep}p{pp})"
                        try:
                            allocation = parse_backend(text)
                            check_model("actor", allocation, model)
                        except AllocationError:
                            continue
                        found.add(str(allocation))
    return found


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    model=st.sampled_from(sorted(EXAMPLE_MODELS)),
    backend=st.sampled_from(sorted(BACKENDS)),
    gpus=st.sampled_from(GPU_COUNTS),
)
def test_the_sweep_lists_exactly_what_the_check_accepts(
    model: str, backend: str, gpus: int
) -> None:
    shape = EXAMPLE_MODELS[model]
    listed = layouts(backend, gpus, model=shape)
    for spec in listed:
        check_model("actor", parse_backend(spec), shape)
    assert set(listed) == accepted(backend, gpus, shape)


_FIX = re.compile(r"use (?:ffn )?(?:at most )?(.*)")


def _sizes_in(fix: str, prefix: str) -> list[int]:
    """The sizes a fix names (``use at most p30``: 1 to 30)."""
    match = _FIX.fullmatch(fix.split(" or another of", 1)[0].removesuffix(", ..."))
    assert match is not None, fix
    sizes = [int(n) for n in re.findall(rf"\b{prefix}(\d+)", match.group(1))]
    return list(range(1, sizes[0] + 1)) if "at most" in fix else sizes


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    model=st.sampled_from([*sorted(EXAMPLE_MODELS), "partial"]),
    backend=st.sampled_from(sorted(BACKENDS)),
    tp=st.sampled_from((1, 2, 3, 4, 5, 6, 8, 12, 16)),
    pp=st.sampled_from((1, 2, 4, 8, 16, 32, 64)),
    cp=st.sampled_from((1, 2, 3, 4, 8)),
    ep=st.sampled_from((1, 2, 3, 4, 8)),
)
def test_a_fix_names_only_sizes_that_break_no_rule(
    model: str, backend: str, tp: int, pp: int, cp: int, ep: int
) -> None:
    shape = PARTIAL if model == "partial" else EXAMPLE_MODELS[model]
    spec = validate_model(shape)
    try:
        allocation = parse_backend(f"{backend}:d{ep}t{tp}p{pp}c{cp}e{ep}")
    except AllocationError:
        return  # sizes the backend does not have
    p = Sizes.of(allocation.parallel)
    for v in violations(p, spec, backend):
        sizes = _sizes_in(v.fix, SIZE_PREFIX[v.rule.size])
        assert sizes, v.fix
        for n in sizes:
            changed = p._replace(**{v.rule.size: n})
            still = [
                w.text for w in violations(changed, spec, backend) if w.rule.size == v.rule.size
            ]
            assert not still, (v.text, v.fix, n, still)
