"""Model shape from hf_config, the memory check in validate, plan output, train.py, CLI."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from _helpers import CONF, ROOT, Train, fixes_in, with_overrides

from areal_conf import AllocationError, check_command
from areal_conf.cli import main
from areal_conf.model.shape import ModelShape, merge_model, model_shape, read_hf_config
from areal_conf.perf.parameters import parameter_count
from areal_conf.plan.report import memory_breakdown, plan_table
from areal_conf.settings import Settings
from areal_conf.validation import validate

HF = ROOT / "tests" / "fixtures" / "hf"

# -- model shape -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, billions, experts",
    [
        ("llama3_70b", 70.55, None),
        ("qwen2_5_7b", 7.62, None),
        ("qwen3_30b_a3b", 30.5, 128),
        ("mixtral_8x7b", 46.7, 8),
    ],
)
def test_hf_configs_give_the_published_parameter_counts(
    name: str, billions: float, experts: int | None
) -> None:
    shape = model_shape(read_hf_config(str(HF / name)))
    assert isinstance(shape, ModelShape)
    assert shape.num_experts == experts
    assert parameter_count(shape) / 1e9 == pytest.approx(billions, rel=0.01)


def test_hf_config_keys_of_each_family() -> None:
    qwen3 = read_hf_config(str(HF / "qwen3_30b_a3b" / "config.json"))
    assert qwen3["head_dim"] == 128 and qwen3["moe_ffn_hidden_size"] == 768
    assert qwen3["moe_router_topk"] == 8 and qwen3["max_seq_len"] == 40960
    mixtral = read_hf_config(str(HF / "mixtral_8x7b"))
    assert mixtral["num_experts"] == 8 and mixtral["moe_router_topk"] == 2
    assert "moe_ffn_hidden_size" not in mixtral  # Mixtral's experts use intermediate_size
    shape = model_shape(mixtral)
    assert isinstance(shape, ModelShape) and shape.moe_ffn_hidden_size == 14336


def test_deepseek_and_qwen_moe_keys(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "hidden_size": 7168,
                "n_routed_experts": 256,
                "n_shared_experts": 1,
                "num_experts_per_tok": 8,
                "moe_intermediate_size": 2048,
                "shared_expert_intermediate_size": 2048,
                "num_hidden_layers": 61,
            }
        )
    )
    found = read_hf_config(str(tmp_path))
    assert found["num_experts"] == 256
    assert found["moe_router_topk"] == 8
    assert found["moe_shared_expert_ffn_hidden_size"] == 2048


def test_explicit_model_keys_win_over_the_file_and_actor_path_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    merged = merge_model({"hf_config": str(HF / "llama3_70b"), "num_layers": 40})
    assert merged["num_layers"] == 40 and merged["hidden_size"] == 8192
    assert "hf_config" not in merged
    local = tmp_path / "Llama-3-70B"
    local.mkdir()
    shutil.copy(HF / "llama3_70b" / "config.json", local / "config.json")
    assert merge_model({}, str(local))["vocab_size"] == 128256
    # a hub id: a model areal-conf knows gives its shape, another none (nothing is
    # downloaded)
    assert merge_model({}, "meta-llama/Meta-Llama-3-70B")["num_layers"] == 80
    assert merge_model({}, "someone/unreleased-model-7B") == {}
    # hf_config wins over actor.path
    assert merge_model({"hf_config": str(HF / "qwen2_5_7b")}, str(local))["hidden_size"] == 3584


def test_unknown_shape_says_what_is_missing() -> None:
    text = model_shape({"num_layers": 32, "num_attention_heads": 32})
    assert isinstance(text, str)
    assert "hidden_size" in text and "AREAL_CONF_MODEL" in text


# -- validate: errors as a table -------------------------------------------------------

LLAMA70B = {
    "num_layers": 80,
    "hidden_size": 8192,
    "ffn_hidden_size": 28672,
    "num_attention_heads": 64,
    "num_kv_heads": 8,
    "vocab_size": 128256,
    "max_seq_len": 8192,
}


def config(**parts: Any) -> dict[str, Any]:
    """The actor on its own GPUs; a critic that does not train (``optimizer: null``) and
    the ref share 8 other GPUs; the rollout 8 more."""
    cfg: dict[str, Any] = {
        "rollout": {"backend": "sglang:d1t8"},
        "actor": {"backend": "fsdp:d8", "mb_spec": {"max_tokens_per_mb": 8192}},
        "critic": {
            "backend": "fsdp:d8",
            "optimizer": None,
            "scheduling_strategy": {"type": "separation"},
        },
        "ref": {
            "backend": "fsdp:d8",
            "scheduling_strategy": {"type": "colocation", "target": "critic"},
        },
        "cluster": {"n_nodes": 3, "n_gpus_per_node": 8, "gpu_memory_gb": 80},
        "model": dict(LLAMA70B),
    }
    for key, value in parts.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg


#: An actor that fits 80 GB (70B on 32 GPUs with recomputation), beside the engine a
#: test is about.
TRAINS_ON_32 = {"backend": "fsdp:d32", "gradient_checkpointing": True}


class TooBig(NamedTuple):
    """A config whose engines do not fit in GPU memory, and what the error says."""

    cfg: dict[str, Any]
    message: str  # a part of the reason
    also: str  # a part of the reason or of the hint
    hint: str  # a part of the hint


ERRORS: list[TooBig] = [
    TooBig(
        cfg=config(),
        message="actor: fsdp:d8 needs",
        also="the biggest term is",
        hint="actor.backend=fsdp:",
    ),
    TooBig(
        cfg=config(  # the actor fits: only the rollout does not
            rollout={"backend": "sglang:d8"},
            actor={"backend": "fsdp:d32", "gradient_checkpointing": True},
            cluster={"n_nodes": 6},
        ),
        message="rollout: sglang:d8 needs 141.1 GB of weights per GPU but reserves 71.5 GB",
        also="sglang.mem_fraction_static 0.9",
        hint="rollout.backend=sglang:",
    ),
    TooBig(
        cfg=config(
            actor={"backend": "fsdp:d32"},
            ref={"backend": "", "scheduling_strategy": {"type": "colocation", "target": "actor"}},
            critic={
                "backend": "",
                "scheduling_strategy": {"type": "colocation", "target": "actor"},
            },
            cluster={"n_nodes": 5},  # the critic does not train (optimizer: null)
        ),
        message="actor, critic, ref share actor's GPUs (fsdp:d32) and together need",
        also="the biggest term is actor's",
        # recomputation alone leaves 80.3 GB: three processes' CUDA contexts and NCCL
        # buffers tip it over
        hint="this would fit: actor.backend=fsdp:d16c2 ++actor.gradient_checkpointing=true "
        "(GB per GPU: actor ",
    ),
    TooBig(  # Archon's default checkpointing is op-level: it keeps every second matmul's
        # output, and its fix is whole layers (archon.ac_mode), not gradient_checkpointing
        cfg=config(
            actor={"backend": "archon:d32", "gradient_checkpointing": True}, cluster={"n_nodes": 6}
        ),
        message="actor: archon:d32 needs 138.0 GB per GPU",
        also="the biggest term is activations (97.6 GB)",
        hint="this would fit: ++actor.archon.ac_mode=full (GB per GPU: actor 57.4)",
    ),
    TooBig(  # the KV cache of an instance holds less than one request's context
        cfg=config(rollout={"backend": "sglang:d1t2"}, actor=TRAINS_ON_32, cluster={"n_nodes": 6}),
        message="rollout: sglang:t2 has no room for one request's KV cache: it holds 5,226 "
        "tokens per instance, one request needs 16,384 (gconfig.max_new_tokens 16,384)",
        also="(sglang.mem_fraction_static 0.9; a GPU has 80 GB (cluster.gpu_memory_gb))",
        hint="this would fit: ++sglang.mem_fraction_static=0.93 (GB per GPU: rollout 74.4)",
    ),
    TooBig(  # the same under vLLM, which takes its fraction of the whole GPU
        cfg=config(rollout={"backend": "vllm:d1t2"}, actor=TRAINS_ON_32, cluster={"n_nodes": 6}),
        message="rollout: vllm:t2 has no room for one request's KV cache: it holds 8,819 tokens",
        also="vllm.gpu_memory_utilization 0.9",
        hint="this would fit: ++vllm.gpu_memory_utilization=0.92 (GB per GPU: rollout 74.3)",
    ),
    TooBig(  # at the highest fraction a fix proposes: more tp on the same GPUs
        cfg=config(
            rollout={"backend": "sglang:d2t2"},
            sglang={"mem_fraction_static": 0.95},
            gconfig={"max_new_tokens": 65536},
            actor=TRAINS_ON_32,
            cluster={"n_nodes": 6},
        ),
        message="rollout: sglang:d2t2 has no room for one request's KV cache: it holds 29,440 "
        "tokens per instance, one request needs 65,536",
        also="sglang.mem_fraction_static 0.95",
        hint="this would fit: rollout.backend=sglang:t4 (GB per GPU: rollout 76.0)",
    ),
    TooBig(  # no other layout on its 2 GPUs has more room: shorter responses
        cfg=config(
            rollout={"backend": "sglang:d1t2"},
            sglang={"mem_fraction_static": 0.95},
            gconfig={"max_new_tokens": 65536},
            actor=TRAINS_ON_32,
            cluster={"n_nodes": 6},
        ),
        message="rollout: sglang:t2 has no room for one request's KV cache",
        also="one request needs 65,536",
        hint="this would fit: gconfig.max_new_tokens=16384 (GB per GPU: rollout 76.0)",
    ),
    TooBig(  # vLLM asks for its fraction of the whole GPU free beside the CUDA context
        cfg=config(
            rollout={"backend": "vllm:d1t8"},
            vllm={"gpu_memory_utilization": 0.995},
            actor=TRAINS_ON_32,
            cluster={"n_nodes": 6},
        ),
        message="rollout: vllm:t8 takes 80.3 GB per GPU (vllm.gpu_memory_utilization of the "
        "GPU, 79.6 GB, beside its CUDA context and NCCL buffers) but a GPU has 80 GB",
        also="vLLM refuses to start when that fraction of the GPU is not free",
        hint="this would fit: vllm.gpu_memory_utilization=0.95 (GB per GPU: rollout 76.7)",
    ),
    TooBig(  # no GPU memory given, and more than any GPU areal-conf knows has
        cfg=config(cluster={"gpu_memory_gb": None}),
        message="actor: fsdp:d8 needs 317.8 GB per GPU but the largest GPU areal-conf knows "
        "(B200) has 180 GB",
        also="CUDA context 0.5 + NCCL buffers 0.2 = 317.8 GB",
        hint="this would fit: actor.backend=fsdp:d8c2 ++actor.gradient_checkpointing=true "
        "cluster.n_nodes=4 (GB per GPU: actor 79.9); it takes 16 GPUs instead of 8; a GPU's "
        "memory is not given: the fix is for 80 GB",
    ),
    TooBig(
        cfg=config(cluster={"gpu_memory_gb": float("nan")}),
        message="cluster.gpu_memory_gb: must be a positive number",
        also="",
        hint="cluster.gpu_memory_gb=80",
    ),
    TooBig(
        cfg=config(cluster={"gpu_memory_gb": 0}),
        message="cluster.gpu_memory_gb: must be a positive number",
        also="",
        hint="cluster.gpu_memory_gb=80",
    ),
    TooBig(
        cfg=config(model={"hf_config": "/nonexistent/config.json"}),
        message="model.hf_config: '/nonexistent/config.json' is not a local file or directory",
        also="",
        hint="config.json",
    ),
    TooBig(
        cfg=config(model={"hidden_size": -1}),
        message="model.hidden_size must be a positive integer or null",
        also="",
        hint="model.hidden_size=4096",
    ),
    TooBig(
        cfg=config(model={"hidden_sise": 8192}),
        message="model.hidden_sise: no such key in areal-conf's model section",
        also="",
        hint="did you mean model.hidden_size?",
    ),
]


@pytest.mark.parametrize(TooBig._fields, ERRORS)
def test_memory_errors(cfg: dict[str, Any], message: str, also: str, hint: str) -> None:
    with pytest.raises(AllocationError) as info:
        validate(cfg)
    err = info.value
    assert message in err.reason
    assert also in err.reason or also in err.hint
    assert hint in err.hint


def test_an_assumed_gpu_memory_warns_instead() -> None:
    """Without the GPUs' memory (no cluster.gpu_memory_gb, no AREAL_CONF_GPU_MEMORY_GB)
    80 GB is assumed, and what would not fit but fits a GPU areal-conf knows (158.8 GB:
    an H200's 141 GB is too little, a B200's 180 GB enough) is a warning."""
    cfg = config(actor={"gradient_checkpointing": True})
    del cfg["cluster"]["gpu_memory_gb"]
    plan = validate(cfg)
    (warning,) = [w for w in plan.warnings if "actor: fsdp:d8 needs" in w]
    assert "actor: fsdp:d8 needs 158.8 GB per GPU but a GPU has 80 GB (assumed)" in warning
    assert "if your GPUs have more memory, give it (AREAL_CONF_GPU_MEMORY_GB=<GB>)" in warning
    assert "otherwise this would fit: actor.backend=fsdp:" in warning
    assert plan.engines["actor"].memory is not None


def test_a_lora_engine_trains_only_its_adapters() -> None:
    """With use_lora only the adapters have gradients and Adam state (AReaL's LoRA,
    rank ``lora_rank``, 32 by default: cli_args.py:1380): 70B on fsdp:d8 does not fit
    trained whole and does with LoRA. An adapter of a k×n weight is rank×(k+n): on every
    linear layer of the 70B model (qkv, output projection, gate and up, down), over 80
    layers, sharded over 8 ranks in fp32 (FSDP's storage)."""
    whole = {"gradient_checkpointing": True}
    with pytest.raises(AllocationError):
        validate(config(actor=whole))
    h, q, kv, f = 8192, 8192, 1024, 28672
    per_layer = (h + q + 2 * kv) + (q + h) + (h + 2 * f) + (f + h)
    adapters = 32 * per_layer * 80
    plan = validate(config(actor={**whole, "use_lora": True}))
    memory = plan.engines["actor"].memory
    assert memory is not None and memory.fits
    assert memory.grads == pytest.approx(adapters * 4 / 8)
    assert memory.optimizer == pytest.approx(adapters * 8 / 8)
    assert not [w for w in plan.warnings if "use_lora" in w]
    twice = config(actor={**whole, "use_lora": True, "lora_rank": 64})
    ranked = validate(twice).engines["actor"].memory
    assert ranked is not None and ranked.grads == pytest.approx(2 * memory.grads)


WITH_FIXES = [row for row in ERRORS if "this would fit: " in row.hint]


@pytest.mark.parametrize(TooBig._fields, WITH_FIXES)
def test_every_fix_of_a_memory_error_passes_the_check(
    cfg: dict[str, Any], message: str, also: str, hint: str
) -> None:
    """Each fix the hint gives, applied to the config as Hydra applies a command line's
    overrides, gives a config that the whole check accepts: every engine fits."""
    with pytest.raises(AllocationError) as info:
        validate(cfg)
    fixes = fixes_in(info.value.hint)
    assert fixes, info.value.hint
    for overrides in fixes:
        plan = validate(with_overrides(cfg, overrides))
        for e in plan.engines.values():
            assert e.memory is None or e.memory.fits, (overrides, e.name)
        assert not [w for w in plan.warnings if "GB per GPU" in w]


def test_a_fix_of_two_engines_sets_each_key_once() -> None:
    """Neither engine fits: the rollout's fix needs 4 nodes, and the actor's, found on the
    config with the rollout's applied, 29 for both; the fix says 29 once, not 4 then 29."""
    cfg = {
        "cluster": {"n_nodes": 1, "n_gpus_per_node": 8},
        "rollout": {"backend": "sglang:d4"},
        "actor": {"backend": "megatron:d4", "path": "deepseek-ai/DeepSeek-V3"},
    }
    with pytest.raises(AllocationError, match="no room for the KV cache") as info:
        validate(cfg, settings=Settings(areal_version="1.0"))
    (fix,) = info.value.fixes
    keys = [override.partition("=")[0].lstrip("+") for override in fix]
    assert len(keys) == len(set(keys)) and "cluster.n_nodes" in keys, fix
    assert fix[-1] == "cluster.n_nodes=29"


def test_the_hint_fits() -> None:
    """Applying the overrides of the hint gives a config that validates."""
    with pytest.raises(AllocationError) as info:
        validate(config())
    cfg = config()
    for item in shlex.split(info.value.hint.split(": ", 1)[1].split(" (", 1)[0]):
        key, value = item.lstrip("+").split("=", 1)
        section, _, field = key.partition(".")
        cfg.setdefault(section, {})[field] = int(value) if value.isdigit() else value
    plan = validate(cfg)
    actor = plan.engines["actor"].memory
    assert actor is not None and actor.fits and actor.total <= 80e9


def test_offload_lets_colocated_engines_share() -> None:
    """The fix offloads the fewest engines, largest first, by their own flags
    (``areal/trainer/rl_trainer.py:155-171``): ``enable_offload`` alone moves nothing."""
    shared = {"backend": "", "scheduling_strategy": {"type": "colocation", "target": "actor"}}
    cfg = config(
        model={"hf_config": str(HF / "qwen2_5_7b"), **dict.fromkeys(LLAMA70B)},
        rollout={"backend": "sglang:d2t4"},
        critic=dict(shared, optimizer={"type": "adam"}, mb_spec={"max_tokens_per_mb": 8192}),
        ref=dict(shared),
    )
    with pytest.raises(AllocationError) as info:
        validate(cfg)
    offload = "++actor.offload=true ++critic.offload=true ++ref.offload=true ++enable_offload=true"
    assert f"or {offload}: training engines leave the GPUs" in info.value.hint
    with pytest.raises(AllocationError, match=r"together need 129\.0 GB per GPU"):
        validate({**cfg, "enable_offload": True})
    plan = validate(with_overrides(cfg, offload.split()))
    assert {n for n, e in plan.engines.items() if e.offloaded} == {"actor", "critic", "ref"}
    assert (
        "actor + critic + ref: 54.4 GB at the most at once (actor, critic and ref take turns"
        in memory_breakdown(plan)
    )


def test_an_actor_and_a_rollout_on_the_same_gpus_take_turns() -> None:
    """AReaL offloads a rollout that shares the actor's GPUs, and the actor, between
    phases (``rl_trainer.py:155-157``, ``:709-710``, ``:782-783``): the GPUs hold the
    larger of the two at once, not their sum."""
    cfg = config(
        model={"hf_config": str(HF / "qwen2_5_7b"), **dict.fromkeys(LLAMA70B)},
        rollout={
            "backend": "sglang:d2t4",
            "scheduling_strategy": {"type": "colocation", "target": "actor"},
        },
        actor={"backend": "fsdp:d8", "weight_update_mode": "disk"},
        critic=None,
        ref=None,
        enable_offload=True,
        scheduler={"type": "slurm"},
        cluster={"n_nodes": 1, "n_gpus_per_node": 8, "gpu_memory_gb": 80},
    )
    plan = validate(cfg)
    assert plan.engines["actor"].offloaded and plan.engines["rollout"].offloaded
    assert "actor + rollout: 72.7 GB at the most at once (actor and rollout take turns; " in (
        memory_breakdown(plan)
    )
    # Separated, the rollout keeps its own GPUs: nothing offloads it.
    alone = {
        **cfg,
        "rollout": {"backend": "sglang:d2t4"},
        "cluster": {**cfg["cluster"], "n_nodes": 2},
    }
    assert not validate(alone).engines["rollout"].offloaded


def test_recompute_and_smaller_micro_batches_are_read_from_areal_keys() -> None:
    base = config(actor={"backend": "fsdp:d8"}, rollout={"backend": "sglang:d2t4"})
    base["model"] = {"hf_config": str(HF / "qwen2_5_7b")}
    plain = validate(base).engines["actor"].memory
    recompute = (
        validate({**base, "actor": {**base["actor"], "gradient_checkpointing": True}})
        .engines["actor"]
        .memory
    )
    smaller = (
        validate({**base, "actor": {**base["actor"], "mb_spec": {"max_tokens_per_mb": 4096}}})
        .engines["actor"]
        .memory
    )
    assert plain is not None and recompute is not None and smaller is not None
    assert recompute.activations < plain.activations
    assert smaller.activations < plain.activations
    assert recompute.weights == plain.weights == smaller.weights


def test_kv_cache_against_the_rollouts_asked_for() -> None:
    cfg = config(actor={"backend": "fsdp:d8"}, rollout={"backend": "sglang:d1t4"})
    cfg["model"] = {"hf_config": str(HF / "qwen2_5_7b")}
    cfg["rollout"]["max_concurrent_rollouts"] = 4096
    cfg["gconfig"] = {"max_new_tokens": 16384}
    cfg["train_dataset"] = {"max_length": 1024}
    plan = validate(cfg)
    rollout = plan.engines["rollout"].memory
    assert rollout is not None
    assert rollout.kv_cache_tokens_needed == 4096 * (1024 + 16384)
    assert any("rollout: the KV cache of an instance holds" in w for w in plan.warnings)


# -- the plan and its JSON ----------------------------------------------------------------


def test_plan_shows_gb_per_gpu() -> None:
    cfg = config(actor={"backend": "fsdp:d8"}, rollout={"backend": "sglang:d2t4"})
    cfg["model"] = {"hf_config": str(HF / "qwen2_5_7b")}
    plan = validate(cfg)
    data = plan.to_dict()
    memory = data["engines"]["actor"]["memory"]
    terms = ("weights", "grads", "optimizer", "activations", "cuda_context", "comm_buffers")
    assert set(memory) == {*terms, "kv_cache", "total"}
    assert memory["total"] == pytest.approx(sum(memory[k] for k in terms), abs=0.05)
    assert data["engines"]["rollout"]["memory"]["kv_cache"] > 0
    assert data["memory_note"] is None
    table = plan_table(plan)
    assert "GB/GPU" in table.splitlines()[0]
    assert f"{plan.engines['actor'].memory.total / 1e9:.1f}" in table  # type: ignore[union-attr]


def test_plan_says_when_memory_is_not_checked() -> None:
    plan = validate(
        {
            "rollout": {"backend": "sglang:d2t4"},
            "actor": {"backend": "fsdp:d8"},
            "cluster": {"n_nodes": 2, "n_gpus_per_node": 8},
        }
    )
    assert plan.engines["actor"].memory is None
    assert plan.to_dict()["engines"]["actor"]["memory"] is None
    assert plan.memory_note.startswith("memory not checked: model shape unknown")
    assert plan.memory_note in plan_table(plan)


# -- train.py and the CLI, as a user runs them ---------------------------------------------


@pytest.mark.e2e
def test_train_rejects_70b_on_8_gpus_and_the_hinted_layout_passes(
    train: Train, tmp_path: Path
) -> None:
    rejected = train("+experiment=llama70b_fsdp")
    assert rejected.returncode == 2
    assert "Traceback" not in rejected.stderr
    assert "together need" in rejected.stderr and "GB per GPU" in rejected.stderr
    assert "the biggest term is" in rejected.stderr
    hint = next(line for line in rejected.stderr.splitlines() if line.startswith("hint: "))
    overrides = shlex.split(hint.split("this would fit: ", 1)[1].split(" (", 1)[0])
    assert any(o.startswith("actor.backend=fsdp:") for o in overrides)
    accepted = train("+experiment=llama70b_fsdp", *overrides)
    assert accepted.returncode == 0, accepted.stderr
    plan = json.loads((tmp_path / "run" / "allocation_plan.json").read_text())
    assert plan["engines"]["actor"]["memory"]["total"] <= 80


@pytest.mark.e2e
def test_train_default_config_passes_and_says_memory_was_not_checked(train: Train) -> None:
    done = train()
    assert done.returncode == 0, done.stderr
    assert "memory not checked" in done.stdout


def test_layouts_fits_prints_gb_and_sorts(capsys: pytest.CaptureFixture[str]) -> None:
    fixture = str(HF / "qwen3_30b_a3b")
    argv = ["layouts", "megatron", "--gpus", "64", "--model", f"hf_config={fixture}"]
    assert main([*argv, "--max-tokens-per-mb", "16384"]) == 0
    every = capsys.readouterr().out.split()
    assert main([*argv, "--max-tokens-per-mb", "16384", "--fits"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert 0 < len(lines) < len(every)
    sizes = [float(line.split()[1]) for line in lines]
    assert all(line.split()[2] == "GB/GPU" for line in lines)
    assert sizes == sorted(sizes) and sizes[-1] <= 80
    assert {line.split()[0] for line in lines} <= set(every)


def test_layouts_fits_needs_a_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["layouts", "fsdp", "--gpus", "8", "--fits"]) == 2
    assert "model shape unknown" in capsys.readouterr().err


# -- the layouts sweeper's fits -----------------------------------------------------------


def test_engine_layouts_fits_keeps_what_validate_accepts_smallest_first() -> None:
    from areal_conf.advise.sweeps import engine_layouts

    cfg = config(rollout={"backend": "sglang:d2t4"})
    cfg["model"] = {"hf_config": str(HF / "qwen2_5_7b")}
    cfg["actor"]["mb_spec"] = {"max_tokens_per_mb": 32768}
    every = engine_layouts(cfg, "actor").layouts
    kept = engine_layouts(cfg, "actor", fits=True).layouts
    assert 0 < len(kept) < len(every)
    totals = []
    for spec in every:
        try:
            plan = validate({**cfg, "actor": {**cfg["actor"], "backend": spec}})
        except AllocationError:
            assert spec not in kept
            continue
        assert spec in kept
        memory = plan.engines["actor"].memory
        assert memory is not None
        totals.append((memory.total, spec))
    assert [spec for _, spec in sorted(totals)] == list(kept)


def test_explain_shows_the_breakdown() -> None:
    from areal_conf.hydra.explain import explain_config

    text = explain_config(
        CONF / "config.yaml",
        [
            f"model.hf_config={HF / 'qwen2_5_7b'}",
            "++actor.gradient_checkpointing=true",
            "++critic.gradient_checkpointing=true",
        ],
    )
    assert "memory per GPU (GB = 10^9 bytes; a GPU has 80 GB)" in text
    assert "actor (fsdp:d4t2, training): weights" in text
    assert "ref (fsdp:d4t2, forward only): weights" in text
    assert "actor (fsdp:d4t2, training): weights 3.8 + grads 3.8 + optimizer 7.6 + " in text
    assert "+ CUDA context 0.5 + NCCL buffers 0.5 = 31.7 GB" in text  # tp, dp, the world
    assert "rollout (sglang:d2t4, inference): reserves 71.4 GB: weights 3.8 + KV cache " in text
    assert "beside CUDA context 0.5 + NCCL buffers 0.2: 72.1 GB" in text
    assert "on actor's GPUs: actor + critic + ref = " in text


def test_layouts_fits_hydra_override_lists_fitting_layouts_smallest_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "layouts",
        "fsdp",
        "--gpus",
        "32",
        "--model",
        f"hf_config={HF / 'llama3_70b'}",
        "--max-tokens-per-mb",
        "8192",
        "--gradient-checkpointing",
        "--fits",
    ]
    assert main(argv) == 0
    ranked = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert main([*argv, "--hydra"]) == 0
    override = capsys.readouterr().out.strip()
    assert override == "actor.backend=" + ",".join(ranked)


# -- a fix on AReaL's own command passes the check, scheduler rules included ---------------

COMMANDS = ROOT / "tests" / "fixtures" / "commands"  # the error catalogue's AReaL YAML
GSM8K = ["python", "examples/math/gsm8k_rl.py", "--config", "examples/math/gsm8k_grpo.yaml"]


class OnCommand(NamedTuple):
    """Overrides of the catalogue's small GRPO YAML (fsdp:d4 and sglang:d4 on one machine
    of 8 GPUs) whose engines do not fit 80 GB, and what the hint says."""

    overrides: list[str]
    hint: str  # a part of the hint


ON_COMMANDS: list[OnCommand] = [
    OnCommand(  # a fix on the GPUs the local scheduler has
        ["scheduler.type=local", "actor.path=Qwen/Qwen2.5-14B-Instruct", "actor.backend=fsdp:d2"],
        "this would fit: actor.backend=fsdp:d4 ++actor.gradient_checkpointing=true",
    ),
    OnCommand(  # 72B: no actor layout on this machine's 8 GPUs (the bug: fsdp:d4c4 on 3 nodes)
        ["scheduler.type=local", "actor.path=Qwen/Qwen2.5-72B-Instruct"],
        "no change areal-conf tries passes the whole check: the first that fits memory, on 16 "
        "GPUs, is refused (cluster.n_gpus_per_node: the engines need 20 GPUs (actor 16 + "
        "rollout 4) but AReaL's local scheduler has 8 GPUs (cluster.n_gpus_per_node, no GPU visible here)",
    ),
    OnCommand(  # on Slurm the actor takes 2 nodes, and the rollout's own fix comes with it
        [
            "scheduler.type=slurm",
            "actor.path=Qwen/Qwen2.5-72B-Instruct",
            "actor.backend=fsdp:d8",
            "rollout.backend=sglang:d8",
        ],
        "this would fit: actor.backend=fsdp:d4c4 ++actor.gradient_checkpointing=true "
        "cluster.n_nodes=3 rollout.backend=sglang:d2t4 (GB per GPU: actor 79.1); it takes 16 "
        "GPUs instead of 8",
    ),
]


@pytest.mark.parametrize(OnCommand._fields, ON_COMMANDS)
def test_a_memory_fix_on_an_areal_command_respects_the_scheduler(
    overrides: list[str], hint: str
) -> None:
    settings = Settings(gpu_memory_gb=80, gpu_memory_from="--gpu-memory-gb")
    with pytest.raises(AllocationError) as info:
        check_command([*GSM8K, *overrides], cwd=COMMANDS, settings=settings)
    assert hint in info.value.hint
    for fix in fixes_in(info.value.hint):
        plan = check_command([*GSM8K, *overrides, *fix], cwd=COMMANDS, settings=settings)
        assert all(e.memory is None or e.memory.fits for e in plan.engines.values())


def test_the_check_command_prints_no_fix_the_local_scheduler_refuses(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report: ``python -m areal_conf check --gpu-memory-gb 80 -- <the command>
    actor.path=Qwen/Qwen2.5-72B-Instruct scheduler.type=local`` hinted at 16 GPUs and 3
    nodes, which the local scheduler (one machine of 8) refuses."""
    monkeypatch.chdir(COMMANDS)
    argv = ["check", "--gpu-memory-gb", "80", "--", *GSM8K]
    assert main([*argv, "actor.path=Qwen/Qwen2.5-72B-Instruct", "scheduler.type=local"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: actor: fsdp:d4 needs 515.4 GB per GPU but a GPU has 80 GB")
    assert "this would fit" not in err and "cluster.n_nodes" not in err
    assert "AReaL's local scheduler has 8 GPUs" in err


# -- the config a fix is rechecked on --------------------------------------------------------


def test_with_overrides_sets_and_adds_keys_on_a_copy() -> None:
    """The recheck applies a fix's overrides as Hydra's ``++`` does (set, or add where
    absent), values read as Hydra reads plain ones, on a copy: interpolations of a changed
    key follow it, in a section of a larger config too."""
    from omegaconf import OmegaConf

    from areal_conf.config.edits import with_overrides

    plain = {"actor": {"backend": "fsdp:d8"}, "cluster": {"n_nodes": 1}}
    changed = with_overrides(
        plain,
        [
            "actor.backend=fsdp:d4c4",
            "++actor.gradient_checkpointing=true",
            "++actor.mb_spec.max_tokens_per_mb=4096",
            "cluster.n_nodes=3",
            "++sglang.mem_fraction_static=0.93",
        ],
    )
    assert changed == {
        "actor": {
            "backend": "fsdp:d4c4",
            "gradient_checkpointing": True,
            "mb_spec": {"max_tokens_per_mb": 4096},
        },
        "cluster": {"n_nodes": 3},
        "sglang": {"mem_fraction_static": 0.93},
    }
    assert plain == {"actor": {"backend": "fsdp:d8"}, "cluster": {"n_nodes": 1}}
    top = OmegaConf.create(
        {"areal": {"actor": {"backend": "fsdp:d8"}, "ref": {"backend": "${areal.actor.backend}"}}}
    )
    OmegaConf.set_struct(top, True)
    for cfg, section in ((top, "areal."), (top.areal, "")):
        copy = with_overrides(cfg, [f"{section}actor.backend=fsdp:d4", f"++{section}x.y=null"])
        node = copy.areal if section else copy
        assert node.ref.backend == "fsdp:d4" and node.x.y is None
    assert top.areal.ref.backend == "fsdp:d8" and "x" not in top.areal


def test_a_fix_is_rechecked_on_an_edited_config_without_resolving_what_is_not_read() -> None:
    """The layouts sweeper validates the config as read with one backend replaced; the
    recheck of a fix applies the same edit to a copy of the config, so an interpolation
    only the application resolves (an unset environment variable in a key areal-conf
    does not read) is left alone there too, and the fix comes out checked."""
    from omegaconf import OmegaConf

    from areal_conf.validation import read_run, validate_run

    cfg = config()
    cfg["actor"]["experiment_name"] = "${oc.env:AREAL_CONF_TEST_NEVER_SET}"
    reading = read_run(OmegaConf.create(cfg))
    with pytest.raises(AllocationError) as info:
        validate_run(reading, ["actor.backend=fsdp:d8"])
    (fix,) = fixes_in(info.value.hint)
    assert fix[0].startswith("actor.backend=fsdp:")
    plan = validate(with_overrides(cfg, fix))
    assert plan.engines["actor"].memory is not None and plan.engines["actor"].memory.fits


def test_weights_that_leave_no_kv_cache_say_the_server_would_not_start() -> None:
    """On an assumed GPU's memory a server whose weights fill its fraction is a warning
    (the GPU may be larger); with no room for a KV cache SGLang and vLLM stop at
    start-up (see perf/memory.py), so the warning says that, not that requests wait."""
    cfg = config(rollout={"backend": "sglang:d8"})
    cfg["cluster"] = {"n_nodes": 3, "n_gpus_per_node": 8}  # no GPU memory given
    cfg["actor"] = {**cfg["actor"], "use_lora": True, "gradient_checkpointing": True}
    plan = validate(cfg)
    (warning,) = [w for w in plan.warnings if w.startswith("rollout: on a GPU of 80 GB")]
    assert "the weights leave no room for the KV cache: the server would stop" in warning
    assert "requests will wait" not in warning
