"""The contract of the Python API: any argument gives a sane result or an AllocationError.

Every public function (``areal_conf.__all__`` and the documented functions of its
modules, :data:`EXTRA`) is called with arguments drawn from hostile strategies: any type,
None, bools, NaN, infinities, negatives, zero, numbers far beyond any real input, random
text, mixed with valid arguments. The call either returns a result that passes the
function's sanity check (finite, non-negative times and bytes, ...) or raises
:class:`AllocationError`; never another exception. Hypothesis runs derandomized with a
bounded number of examples. A table test holds the failures issue 32 reported, and a
test fails when a public name has no strategy here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import areal_conf
from areal_conf import (
    HARDWARE,
    AllocationError,
    Calibration,
    Hardware,
    ModelAllocation,
    ParallelStrategy,
    Plan,
    Reading,
    RLStep,
    Settings,
    StepTime,
    check_command,
    decode_throughput,
    layouts,
    migrate_allocation_mode,
    parse_backend,
    rank_groups,
    rank_layouts,
    read_run,
    rl_split,
    rl_throughput,
    run_validated,
    step_time,
    validate,
    validate_run,
)
from areal_conf.arguments import MAX_TOKENS
from areal_conf.model.shape import ModelShape, model_shape
from areal_conf.perf.decode import DecodeThroughput, RequestLengths
from areal_conf.perf.memory import MemoryEstimate, estimate
from areal_conf.perf.ranking import MAX_SPLIT_GPUS, Critic, RankedLayout, RLSplit
from areal_conf.spec.backends import MAX_SIZE
from areal_conf.spec.mesh import GroupKind, group_kinds

#: Qwen2.5-7B's sizes (its config.json, tests/fixtures/hf/qwen2_5_7b).
MODEL: dict[str, Any] = {
    "num_layers": 28,
    "hidden_size": 3584,
    "num_attention_heads": 28,
    "num_kv_heads": 4,
    "ffn_hidden_size": 18944,
    "vocab_size": 152064,
}

# -- hostile values -----------------------------------------------------------------------

#: Values no argument of areal-conf takes as they are, or takes only at an edge.
EDGES: tuple[object, ...] = (
    None,
    True,
    False,
    0,
    -1,
    1,
    2,
    8,
    -(2**63),
    2**20 + 1,
    2**40 + 1,
    2**64,
    10**18,
    0.0,
    -0.0,
    0.5,
    1.5,
    8.0,
    math.nan,
    math.inf,
    -math.inf,
    1e308,
    "",
    " ",
    "x",
    "8",
    "nan",
    "fsdp",
    "sglang:d1",
    "h100",
    b"fsdp:d8",
    [],
    [1],
    ["fsdp:d8"],
    (),
    {},
    {"hidden_size": 0},
    object(),
    ModelAllocation("nope", None),  # type: ignore[arg-type]
    ModelAllocation("fsdp", 8),  # type: ignore[arg-type]
)

HOSTILE: st.SearchStrategy[object] = st.one_of(
    st.sampled_from(EDGES),
    st.integers(min_value=-10, max_value=64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.integers(-2, 9), max_size=3),
    st.dictionaries(st.sampled_from(list(MODEL)), st.sampled_from(EDGES), max_size=3),
)


def hostile_kwargs(valid: Mapping[str, object]) -> st.SearchStrategy[dict[str, object]]:
    """``valid`` with some arguments (at least one) replaced by hostile values."""
    names = sorted(valid)
    return st.sets(st.sampled_from(names), min_size=1).flatmap(
        lambda bad: st.fixed_dictionaries(
            {n: (HOSTILE if n in bad else st.just(valid[n])) for n in names}
        )
    )


# -- sanity of results -------------------------------------------------------------------


def finite_non_negative(*values: object) -> None:
    for value in values:
        assert isinstance(value, int | float) and not isinstance(value, bool), value
        assert math.isfinite(value) and value >= 0, value


def sane_memory(est: MemoryEstimate) -> None:
    finite_non_negative(
        est.weights,
        est.grads,
        est.optimizer,
        est.activations,
        est.kv_cache,
        est.cuda_context,
        est.comm_buffers,
        est.total,
        est.capacity,
    )


def sane_step(st_: StepTime) -> None:
    finite_non_negative(*(getattr(st_, f.name) for f in dataclasses.fields(st_)))
    assert st_.total > 0


def sane_decode(d: DecodeThroughput) -> None:
    finite_non_negative(d.tokens_per_s, d.per_instance, d.batch, d.step_s, d.kv_capacity_tokens)
    assert d.tokens_per_s > 0


def sane_ranked(ranked: list[RankedLayout]) -> None:
    for r in ranked:
        sane_step(r.step)
        sane_memory(r.memory)
        finite_non_negative(r.seconds)


def sane_split(split: RLSplit) -> None:
    for o in split.options:
        finite_non_negative(o.generate_s, o.train_s, o.step_s, o.critic_s)
        assert o.rollout_gpus > 0 and o.actor_gpus > 0
    assert split.best in split.options


def sane_groups(groups: dict[str, list[list[int]]]) -> None:
    for kind in groups.values():
        ranks = sorted(r for g in kind for r in g)
        assert ranks == list(range(len(ranks)))


def sane_shape(shape: ModelShape | str) -> None:
    if isinstance(shape, ModelShape):
        finite_non_negative(shape.num_layers, shape.hidden_size, shape.head_dim)
        assert shape.hidden_size > 0 and shape.head_dim > 0
    else:
        assert "model shape unknown" in shape


def sane_strings(values: list[str]) -> None:
    assert all(isinstance(v, str) for v in values)


def anything(_: object) -> None:
    """A result whose only contract is that it came back (the call's own checks ran)."""


# -- the public functions and how to call them --------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    """A public function, valid arguments for it (keyword names, ``positional`` given
    by position), and the sanity check of its result."""

    call: Callable[..., Any]
    valid: Mapping[str, object]
    sane: Callable[[Any], None]
    positional: tuple[str, ...] = ()

    def __call__(self, kwargs: Mapping[str, object]) -> Any:
        args = [kwargs[n] for n in self.positional]
        rest = {k: v for k, v in kwargs.items() if k not in self.positional}
        return self.call(*args, **rest)


def _hardware_lookup(name: object) -> Hardware:
    return HARDWARE[name]  # type: ignore[index]


#: A valid config: an RL run on one node of 8 GPUs.
CONFIG: dict[str, Any] = {
    "rollout": {"backend": "sglang:d4"},
    "actor": {"backend": "fsdp:d4"},
    "cluster": {"n_nodes": 1, "n_gpus_per_node": 8},
}


def _reading() -> Reading:
    return read_run(CONFIG, areal_version="2.0")


def _validate_with_settings(**fields: Any) -> Plan:
    return validate(CONFIG, areal_version="2.0", settings=Settings(**fields))


#: An RL config whose step can be predicted: CONFIG with a batch.
RL_CONFIG: dict[str, Any] = {
    **CONFIG,
    "rollout": {"backend": "sglang:d4", "consumer_batch_size": 16},
    "train_dataset": {"batch_size": 16, "max_length": 512},
    "gconfig": {"n_samples": 4, "max_new_tokens": 1024},
}


def _rl_throughput(**fields: Any) -> RLStep:
    calibration = fields.pop("calibration")
    return rl_throughput(
        RL_CONFIG, areal_version="2.0", settings=Settings(**fields), calibration=calibration
    )


def sane_rl_step(step: RLStep) -> None:
    finite_non_negative(step.step_seconds)
    assert step.step_seconds > 0 and step.tokens_per_s > 0
    for seconds in step.phases.values():
        finite_non_negative(seconds)


def sane_plan(plan: Plan) -> None:
    assert plan.used_gpus <= plan.node_count * plan.n_gpus_per_node
    for engine in plan.engines.values():
        if engine.memory is not None:
            sane_memory(engine.memory)
        if engine.step_seconds is not None:
            finite_non_negative(engine.step_seconds)


def _run_validated(main: object) -> object:
    return run_validated(main)  # type: ignore[arg-type]


CASES: dict[str, Case] = {
    "estimate": Case(
        estimate,
        {
            "allocation_or_spec": "fsdp:d8",
            "model": MODEL,
            "trainable": True,
            "is_critic": False,
            "tokens_per_microbatch": 16384,
            "recompute": "full",
            "sequence_parallel": None,
            "flash_attention": True,
            "distributed_optimizer": True,
            "zero_stage": None,
            "dtype": "bfloat16",
            "mem_fraction": None,
            "gpu_memory_gb": 80.0,
            "max_concurrent_rollouts": None,
            "prompt_len": 1024,
            "max_new_tokens": 8192,
            "own_process": True,
        },
        sane_memory,
        ("allocation_or_spec", "model"),
    ),
    "estimate(inference)": Case(
        estimate,
        {
            "allocation_or_spec": "sglang:d2t4",
            "model": MODEL,
            "mem_fraction": 0.8,
            "gpu_memory_gb": 80,
            "max_concurrent_rollouts": 256,
            "prompt_len": 1024,
            "max_new_tokens": 8192,
        },
        sane_memory,
        ("allocation_or_spec", "model"),
    ),
    "model_shape": Case(model_shape, {"model": MODEL}, sane_shape, ("model",)),
    "model_shape(sizes)": Case(lambda **sizes: model_shape(sizes), MODEL, sane_shape),
    "step_time": Case(
        step_time,
        {
            "allocation_or_spec": "megatron:d2p2t2",
            "model": MODEL,
            "gpu": "h100",
            "n_gpus_per_node": 8,
            "tokens_per_step": 1 << 20,
            "tokens_per_microbatch": 16384,
            "recompute": "selective",
            "seq_len": None,
            "sequence_parallel": None,
            "virtual_stages": 1,
            "overlap_grad_reduce": True,
            "grad_reduce_dtype": "float32",
            "zero3": "fsdp",
            "forward_only": False,
            "fp8": "delayed",
            "fp8_param_gather": True,
        },
        sane_step,
        ("allocation_or_spec", "model"),
    ),
    "decode_throughput": Case(
        decode_throughput,
        {
            "spec": "sglang:d2t4",
            "model": MODEL,
            "gpu": "h200",
            "concurrent": 256,
            "context_tokens": 4096,
            "n_gpus_per_node": 8,
            "mem_fraction": None,
            "requests": RequestLengths(1024, 2048),
        },
        sane_decode,
        ("spec", "model"),
    ),
    "RequestLengths": Case(RequestLengths, {"prompt": 1024, "response": 2048}, anything),
    "rank_layouts": Case(
        rank_layouts,
        {
            "backend": "fsdp",
            "gpus": 16,
            "model": MODEL,
            "gpu": "h100",
            "tokens_per_step": 1 << 20,
            "tokens_per_microbatch": 16384,
            "n_gpus_per_node": 8,
            "recompute": "none",
            "max_tp": None,
            "gpu_memory_gb": None,
            "fits_only": False,
            "top": 5,
        },
        sane_ranked,
        ("backend", "gpus", "model"),
    ),
    "rl_split": Case(
        rl_split,
        {
            "model": MODEL,
            "gpu": "h100",
            "total_gpus": 16,
            "batch_size": 64,
            "n_samples": 4,
            "max_new_tokens": 1024,
            "prompt_tokens": 1024,
            "mean_response_tokens": None,
            "n_gpus_per_node": 8,
            "rollout_backend": "sglang",
            "actor_backend": "fsdp",
            "tokens_per_microbatch": None,
            "recompute": "none",
            "ppo_n_minibatches": 1,
            "asynchronous": True,
            "max_concurrent_rollouts": None,
            "critic": None,
        },
        sane_split,
        ("model",),
    ),
    "rl_split(critic)": Case(
        lambda **fields: rl_split(
            MODEL,
            gpu="h100",
            total_gpus=16,
            batch_size=64,
            n_samples=4,
            max_new_tokens=1024,
            prompt_tokens=1024,
            critic=Critic(**fields),
        ),
        {
            "backend": "fsdp",
            "ppo_n_minibatches": 4,
            "tokens_per_microbatch": None,
            "recompute": "none",
            "layout": None,
        },
        sane_split,
    ),
    "layouts": Case(
        layouts,
        {"backend": "megatron", "gpus": 16, "model": MODEL, "max_tp": 8},
        sane_strings,
        ("backend", "gpus"),
    ),
    "rank_groups": Case(
        rank_groups,
        {"allocation_or_spec": "megatron:d2p2t2", "order": "tp-cp-ep-dp-pp"},
        sane_groups,
        ("allocation_or_spec", "order"),
    ),
    "group_kinds": Case(
        group_kinds,
        {"allocation_or_spec": "megatron:d2p2t2e2", "order": "tp-cp-ep-dp-pp"},
        lambda kinds: sane_groups({k: [list(g) for g in v] for k, v in kinds.items()}),
        ("allocation_or_spec", "order"),
    ),
    "parse_backend": Case(
        parse_backend,
        {"spec": "megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)", "teacher_layout": None},
        lambda a: sane_strings([str(a)]),
        ("spec",),
    ),
    "ModelAllocation.from_str": Case(
        ModelAllocation.from_str, {"spec": "fsdp:d4t2"}, anything, ("spec",)
    ),
    "ParallelStrategy": Case(
        ParallelStrategy,
        {"dp_size": 2, "tp_size": 2, "pp_size": 1, "cp_size": 1, "ep_size": 1, "etp_size": 1},
        anything,
    ),
    "migrate_allocation_mode": Case(
        migrate_allocation_mode,
        {"legacy": "sglang:d4t2+fsdp:d8", "teacher_layout": "nested"},
        sane_strings,
        ("legacy",),
    ),
    "check_command": Case(
        check_command,
        {"argv": ["python", "no_such_driver.py", "--config", "no_such.yaml"], "cwd": None},
        anything,
        ("argv",),
    ),
    "validate": Case(
        validate, {"cfg": None, "areal_version": None, "settings": None}, anything, ("cfg",)
    ),
    "read_run": Case(
        read_run, {"cfg": CONFIG, "areal_version": None, "settings": None}, anything, ("cfg",)
    ),
    "validate_run": Case(
        validate_run,
        {"reading": _reading(), "edits": ["actor.backend=fsdp:d2t2"], "check_fixes": True},
        sane_plan,
        ("reading", "edits"),
    ),
    "Settings": Case(
        _validate_with_settings,
        {
            "areal_version": None,
            "gpu": "h100",
            "gpu_memory_gb": 80.0,
            "model": MODEL,
            "mean_response_tokens": 1024,
        },
        sane_plan,
    ),
    "rl_throughput": Case(
        _rl_throughput,
        {
            "gpu": "h100",
            "model": MODEL,
            "mean_response_tokens": 512,
            "calibration": Calibration(generate=1.5, other_seconds=0.5),
        },
        sane_rl_step,
    ),
    "Calibration": Case(
        Calibration,
        {
            "generate": 1.2,
            "train": 0.9,
            "update_weights": 20.0,
            "transfer": 1.0,
            "other_seconds": 0.3,
        },
        anything,
    ),
    "run_validated": Case(_run_validated, {"main": lambda: 5}, anything, ("main",)),
    "HARDWARE": Case(_hardware_lookup, {"name": "h100"}, anything, ("name",)),
    "Hardware": Case(
        Hardware,
        {
            "name": "H100 SXM5",
            "peak_tflops": 989.0,
            "hbm_gb": 80.0,
            "hbm_tb_per_s": 3.35,
            "intra_node_gb_per_s": 450.0,
            "inter_node_gb_per_s": 50.0,
            "sm_count": 132,
            "gemm_efficiency": 0.75,
            "fp8_peak_tflops": 1979.0,
            "compute_capability": 9.0,
        },
        anything,
    ),
}

#: Public names besides ``areal_conf.__all__`` that the README and docs call.
EXTRA = {
    "estimate",
    "model_shape",
    "group_kinds",
    "ModelAllocation.from_str",
}

#: Public names that take no arguments to check, and why.
NO_ARGUMENTS = {
    "AllocationError": "the exception itself: its fields are what the raiser says",
    "StepTime": "a result record step_time builds; it computes nothing",
    "ModelAllocation": "a record (a NamedTuple, built by the parser); the functions that "
    "take one check it (the EDGES hold broken ones)",
    "BackendSyntaxError": "an AllocationError the parser raises; its fields are the raiser's",
    "ConfigError": "an AllocationError about a config as a whole; its fields are the raiser's",
    "Plan": "a result record validate builds",
    "EnginePlan": "a result record validate builds",
    "Validation": "a result record validate builds",
    "Reading": "a record read_run builds; validate_run checks it",
    "MemoryEstimate": "a result record estimate builds",
    "DecodeThroughput": "a result record decode_throughput builds",
    "RankedLayout": "a result record rank_layouts builds",
    "RLSplit": "a result record rl_split builds",
    "RLStep": "a result record rl_throughput builds",
}


def case_names() -> Iterator[str]:
    yield from sorted(CASES)


def test_every_public_name_has_a_strategy() -> None:
    covered = {name.split("(")[0] for name in CASES}
    public = set(areal_conf.__all__) | EXTRA
    assert public - covered - set(NO_ARGUMENTS) == set()
    assert covered - public == set()


@pytest.mark.parametrize("name", list(case_names()))
def test_valid_arguments_give_a_sane_result(name: str) -> None:
    case = CASES[name]
    if name in ("check_command", "validate"):
        with pytest.raises(AllocationError):  # no such driver; no config
            case(case.valid)
        return
    case.sane(case(case.valid))


@pytest.mark.parametrize("name", list(case_names()))
def test_hostile_arguments_give_a_sane_result_or_an_allocation_error(name: str) -> None:
    case = CASES[name]

    @settings(
        derandomize=True,
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(hostile_kwargs(case.valid))
    def check(kwargs: dict[str, object]) -> None:
        try:
            result = case(kwargs)
        except AllocationError as err:
            assert str(err).strip(), "an AllocationError says what is wrong"
            return
        case.sane(result)

    check()


# -- the failures issue 32 reported -----------------------------------------------------

NAN, INF = math.nan, math.inf
HUGE_SPLIT = {
    "gpu": "h100",
    "total_gpus": 2**64,
    "batch_size": 64,
    "n_samples": 4,
    "max_new_tokens": 1024,
    "prompt_tokens": 10**18,
}
SPLIT = {
    "gpu": "h100",
    "total_gpus": 16,
    "batch_size": 64,
    "n_samples": 4,
    "max_new_tokens": 1024,
    "prompt_tokens": 1024,
}

ISSUE_32: list[tuple[str, Callable[[], object], str, str]] = [
    # (what, call, the message names, the hint says)
    ("model_shape NaN", lambda: model_shape({**MODEL, "hidden_size": NAN}), "hidden_size", "e.g."),
    ("model_shape inf", lambda: model_shape({**MODEL, "num_layers": INF}), "num_layers", "e.g."),
    ("model_shape list", lambda: model_shape({**MODEL, "vocab_size": [1]}), "vocab_size", "e.g."),
    (
        "model_shape huge",
        lambda: model_shape({**MODEL, "hidden_size": 2**64}),
        "at most 1,099,511,627,776 (2**40)",
        "at most",
    ),
    ("estimate model 5", lambda: estimate("sglang:d1", 5), "model must be a mapping", "dict"),
    (
        "estimate gpu_memory_gb None",
        lambda: estimate("fsdp:d8", MODEL, gpu_memory_gb=None),
        "gpu_memory_gb must be a finite number above 0, got None",
        "e.g. 80",
    ),
    (
        "estimate tokens 'x'",
        lambda: estimate("fsdp:d8", MODEL, tokens_per_microbatch="x"),
        "tokens_per_microbatch must be a positive integer, got 'x'",
        "e.g. 16384",
    ),
    (
        "estimate hidden 0",
        lambda: estimate("fsdp:d8", {**MODEL, "hidden_size": 0}),
        "model.hidden_size must be a positive integer or null, got 0",
        "model.hidden_size=4096",
    ),
    (
        "estimate hidden below heads",
        lambda: estimate("fsdp:d8", {**MODEL, "hidden_size": 7}),
        "smaller than model.num_attention_heads",
        "head_dim",
    ),
    (
        "estimate negative micro-batch",
        lambda: estimate("fsdp:d8", MODEL, tokens_per_microbatch=-4096),
        "tokens_per_microbatch must be a positive integer, got -4096",
        "above 0",
    ),
    (
        "decode_throughput mem_fraction []",
        lambda: decode_throughput(
            "sglang:d1", MODEL, gpu="h100", concurrent=8, context_tokens=128, mem_fraction=[]
        ),
        "mem_fraction must be a number above 0 and at most 1, got []",
        "mem_fraction_static",
    ),
    ("check_command None", lambda: check_command(None), "argv must be a list of strings", "shlex"),
    (
        "check_command str",
        lambda: check_command("python x.py"),
        "argv must be a list of strings",
        "shlex",
    ),
    (
        "rl_split prompt None",
        lambda: rl_split(MODEL, **{**SPLIT, "prompt_tokens": None}),
        "prompt_tokens must be an integer of at least 0, got None",
        "e.g. 1024",
    ),
    (
        "rl_split prompt str",
        lambda: rl_split(MODEL, **{**SPLIT, "prompt_tokens": "x"}),
        "prompt_tokens must be an integer of at least 0",
        "e.g. 1024",
    ),
    (
        "rl_split prompt inf",
        lambda: rl_split(MODEL, **{**SPLIT, "prompt_tokens": INF}),
        "prompt_tokens must be an integer of at least 0, got inf",
        "e.g. 1024",
    ),
    (
        "rl_split prompt NaN",
        lambda: rl_split(MODEL, **{**SPLIT, "prompt_tokens": NAN}),
        "prompt_tokens must be an integer of at least 0, got nan",
        "e.g. 1024",
    ),
    (
        "rl_split prompt negative",
        lambda: rl_split(MODEL, **{**SPLIT, "prompt_tokens": -5000}),
        "prompt_tokens must be an integer of at least 0, got -5000",
        "e.g. 1024",
    ),
    (
        "rl_split batch NaN",
        lambda: rl_split(MODEL, **{**SPLIT, "batch_size": NAN}),
        "batch_size must be a positive integer, got nan",
        "train_dataset.batch_size",
    ),
    (
        "rl_split 2**64 GPUs",
        lambda: rl_split(MODEL, **HUGE_SPLIT),
        f"total_gpus must be at most {MAX_SPLIT_GPUS:,}",
        "at most 16,384",
    ),
    (
        "rl_split tokens 10**18",
        lambda: rl_split(MODEL, **{**SPLIT, "prompt_tokens": 10**18}),
        "prompt_tokens must be at most 1,099,511,627,776 (2**40)",
        "e.g. 1024",
    ),
    (
        "rank_layouts unknown knob",
        lambda: rank_layouts(
            "fsdp",
            8,
            MODEL,
            gpu="h100",
            tokens_per_step=1 << 20,
            tokens_per_microbatch=16384,
            nope=1,
        ),
        "a knob of rank_layouts must be one of",
        "step_time's",
    ),
    (
        "HARDWARE['x']",
        lambda: HARDWARE["x"],
        "'x' is not a GPU areal-conf knows (it knows a100, h100",
        "one of those names",
    ),
    (
        "HARDWARE[[1]]",
        lambda: HARDWARE[[1]],  # type: ignore[index]
        "[1] is not a GPU areal-conf knows",
        "one of those names",
    ),
    (
        "Hardware NaN",
        lambda: dataclasses.replace(HARDWARE["h100"], hbm_tb_per_s=NAN),
        "Hardware.hbm_tb_per_s must be a finite number above 0, got nan",
        "e.g. 3.35",
    ),
    (
        "Hardware efficiency 2",
        lambda: dataclasses.replace(HARDWARE["h100"], gemm_efficiency=2.0),
        "Hardware.gemm_efficiency must be at most 1",
        "e.g. 0.75",
    ),
    (
        "broken ModelAllocation",
        lambda: estimate(ModelAllocation("nope", None), MODEL),  # type: ignore[arg-type]
        "unknown backend 'nope' in ModelAllocation",
        "from_str",
    ),
    (
        "teacher_layout",
        lambda: migrate_allocation_mode("fsdp:d8", teacher_layout="deep"),
        "teacher_layout must be one of 'flat', 'nested', got 'deep'",
        "AReaL 2.0",
    ),
    (
        "run_validated not callable",
        lambda: run_validated(5),  # type: ignore[arg-type]
        "run_validated takes the app's main function, got int",
        "run_validated(main)",
    ),
    (
        "validate settings",
        lambda: validate({}, settings={"gpu_memory_gb": 80}),  # type: ignore[arg-type]
        "settings must be a Settings or None, got dict",
        "Settings(",
    ),
    (
        "validate settings.mean_response_tokens",  # was a TypeError deep in the step time
        lambda: validate({}, settings=Settings(mean_response_tokens="x")),  # type: ignore[arg-type]
        "settings.mean_response_tokens must be a positive integer, got 'x'",
        "Settings(mean_response_tokens=2048)",
    ),
    (
        "check_command settings.mean_response_tokens",
        lambda: check_command(["python", "d.py"], settings=Settings(mean_response_tokens=-3)),
        "settings.mean_response_tokens must be a positive integer, got -3",
        "Settings(mean_response_tokens=2048)",
    ),
    (
        "layouts max_tp huge",
        lambda: layouts("fsdp", 8, max_tp=2**64),
        f"max_tp must be at most {MAX_SIZE:,} (2**20)",
        "None for no cap",
    ),
]


@pytest.mark.parametrize(
    "call, message, hint", [row[1:] for row in ISSUE_32], ids=[row[0] for row in ISSUE_32]
)
def test_issue_32_failures_are_allocation_errors(
    call: Callable[[], object], message: str, hint: str
) -> None:
    with pytest.raises(AllocationError) as caught:
        call()
    text = str(caught.value)
    assert message in text
    assert "hint: " in text and hint in text.split("hint: ", 1)[1]


def test_hardware_lookup_errors_stay_key_errors() -> None:
    """Code that catches a dict's KeyError keeps working; ``get`` and ``in`` are a dict's."""
    with pytest.raises(KeyError):
        HARDWARE["x"]
    assert HARDWARE.get("x") is None and "x" not in HARDWARE
    assert HARDWARE["h100"].hbm_gb == 80.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tokens_per_microbatch": 1},
        {"tokens_per_microbatch": MAX_TOKENS},
        {"prompt_len": 0, "max_new_tokens": 0},
        {"zero_stage": 0},
        {"zero_stage": 3},
        {"mem_fraction": 1},
        {"gpu_memory_gb": 1e-3},
    ],
)
def test_edges_of_the_ranges_are_accepted(kwargs: dict[str, object]) -> None:
    sane_memory(estimate("fsdp:d8", MODEL, **kwargs))


def test_the_readme_rl_split_is_accepted() -> None:
    split = rl_split(
        MODEL,
        gpu="h100",
        total_gpus=64,
        batch_size=256,
        n_samples=8,
        max_new_tokens=8192,
        prompt_tokens=1024,
        mean_response_tokens=3000,
    )
    sane_split(split)


# -- rank groups computed when read -------------------------------------------------------

SMALL_LAYOUTS = [
    "megatron:d2p2t2",
    "megatron:d4t2c2",
    "megatron:d2p2t2e2",
    "megatron:(attn:d2p2t2c2|ffn:p2t4e2)",
    "megatron:(attn:d4p2t2|ffn:p2t2e4)",
    "archon:d2p2t2e2",
    "fsdp:d4t2",
]
ORDERS = ["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "pp-tp-cp-ep-dp", "dp-tp-cp-ep-pp"]


@pytest.mark.parametrize("spec", SMALL_LAYOUTS)
@pytest.mark.parametrize("order", ORDERS)
def test_group_kinds_read_as_rank_groups_lists(spec: str, order: str) -> None:
    try:
        listed = rank_groups(spec, order)
    except AllocationError:
        with pytest.raises(AllocationError):
            group_kinds(spec, order)
        return
    kinds = group_kinds(spec, order)
    assert list(kinds) == list(listed)
    for key, kind in kinds.items():
        assert [list(g) for g in kind] == listed[key]
        assert [list(g) for g in kind[-2:]] == listed[key][-2:]
        assert [g[-1] for g in kind] == [g[-1] for g in listed[key]]


@settings(derandomize=True, max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from([1, 2, 3, 4]), min_size=5, max_size=5),
    st.lists(st.booleans(), min_size=5, max_size=5),
    st.lists(st.sampled_from([1, 2, 3, 4]), min_size=5, max_size=5),
    st.lists(st.booleans(), min_size=5, max_size=5),
)
def test_group_kinds_are_equal_exactly_when_their_lists_are(
    sizes_a: list[int], mask_a: list[bool], sizes_b: list[int], mask_b: list[bool]
) -> None:
    a, b = GroupKind(sizes_a, mask_a), GroupKind(sizes_b, mask_b)
    assert (a == b) == (a.lists() == b.lists())
    assert a.lists() == [list(g) for g in a]


def test_a_huge_layout_lists_its_first_groups_without_listing_all() -> None:
    kinds = group_kinds("megatron:d1024t1024")
    assert len(kinds["cp"]) == 2**20
    assert list(kinds["tp"][1])[:3] == [1024, 1025, 1026]
    assert kinds["dp"][1][-1] == 2**20 - 1023
    assert len(kinds["tp-dp"][0]) == 2**20
