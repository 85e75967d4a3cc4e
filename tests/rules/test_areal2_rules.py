"""AReaL 2.0's rules, one table: every start-up error, misallocation and warning.

Each row starts from a valid config (an RL run, or the variant the rule needs), changes a
few keys, and states what ``validate`` says: the key the message starts with and words it
contains, or the words of the warning it adds. The rows were written from AReaL 2.0's
code (its trainers, controllers and schedulers), not read back from areal-conf's output.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from _helpers import FIXTURES, run_python

from areal_conf import AllocationError, validate
from areal_conf.areal.local_gpus import machine_gpus
from areal_conf.areal.versions import VERSION_ENV, choose_rules
from areal_conf.plan.report import plan_table
from areal_conf.settings import DEVICE_DIR_ENV, Settings

DROP = object()  # a change that removes the key


def change(cfg: dict[str, Any], key: str, value: Any) -> None:
    *parents, leaf = key.split(".")
    node = cfg
    for part in parents:
        node = node.setdefault(part, {})
    if value is DROP:
        node.pop(leaf, None)
    else:
        node[leaf] = value


ONE_GPU = [{"gpu": 1}]


def rl(base: str = "local", **changes: Any) -> dict[str, Any]:
    """A valid RL config, then ``changes`` (``actor__offload=True`` sets actor.offload).

    ``local``: rollout sglang:d4 and actor fsdp:d4 on one 8-GPU machine; ``slurm``/``ray``:
    rollout sglang:d8 and actor fsdp:d8 on 2 × 8; ``dte``: controller v2 with delta weight
    updates (megatron actor, sglang rollout, awex); ``awex``: v1 AWEX, megatron:d8 actor
    and sglang:d1t8 rollout, both separated, on one machine.
    """
    cfg: dict[str, Any] = {
        "scheduler": {"type": "local"},
        "cluster": {"n_nodes": 1, "n_gpus_per_node": 8},
        "rollout": {"backend": "sglang:d4", "scheduling_spec": copy.deepcopy(ONE_GPU)},
        "actor": {"backend": "fsdp:d4", "scheduling_spec": copy.deepcopy(ONE_GPU)},
    }
    if base in ("slurm", "ray"):
        cfg["scheduler"]["type"] = base
        cfg["cluster"]["n_nodes"] = 2
        cfg["rollout"]["backend"] = "sglang:d8"
        cfg["actor"]["backend"] = "fsdp:d8"
    elif base == "dte":
        cfg["actor"].update(
            backend="megatron:d4",
            _version="v2",
            weight_update_mode="awex",
            enable_delta_weight_update=True,
            ppo_n_minibatches=1,
        )
        cfg["rollout"].update(_version="v2")
    elif base == "awex":
        cfg["actor"].update(backend="megatron:d8", weight_update_mode="awex")
        cfg["rollout"].update(backend="sglang:d1t8")
    for key, value in changes.items():
        change(cfg, key.replace("__", "."), value)
    return cfg


COLOCATE = {"type": "colocation", "target": "actor"}


class Rejected(NamedTuple):
    id: str  # the rule (SPEC-areal2's id)
    cfg: dict[str, Any]
    key: str  # the message starts with "<key>:"
    words: tuple[str, ...] = ()  # in the message (reason or hint)


class Warned(NamedTuple):
    id: str
    cfg: dict[str, Any]
    words: tuple[str, ...]  # one warning has them all


REJECTED: list[Rejected] = [
    # -- the scheduler and AReaL's loader
    Rejected("E6", rl(scheduler__type="kubernetes"), "scheduler.type", ("local", "slurm", "ray")),
    Rejected("E6 not a section", rl(scheduler="slurm"), "scheduler", ("scheduler.type=local",)),
    Rejected(
        "E1",
        rl(teacher={"backend": "fsdp:d1t4", "mb_spec": {"max_tokens_per_mb": 1024}}),
        "teacher.backend",
        ("teacher.train", "engine_type: train", "mb_spec", "teacher.rollout.backend"),
    ),
    Rejected("E2", rl(teacher={"engine_type": "student"}), "teacher.engine_type", ("train",)),
    Rejected("E3 rollout", rl(teacher={"path": "Qwen/x"}), "teacher.rollout", ("engine_type",)),
    Rejected(
        "E3 train",
        rl(teacher={"engine_type": "train", "rollout": {"backend": "sglang:d1"}}),
        "teacher.train",
        ("teacher.engine_type=rollout",),
    ),
    Rejected("E4", rl(actor___version="v3"), "actor._version", ("v1", "v2")),
    Rejected(
        "E4 ref not built",
        rl(actor__kl_ctl=0.0, ref={"backend": "", "_version": "v0"}),
        "ref._version",
    ),
    Rejected("E5 none", rl(actor__scheduling_spec=[]), "actor.scheduling_spec", ("0 entries",)),
    Rejected(
        "E5 three",
        rl(rollout__scheduling_spec=[{"gpu": 1}] * 3),
        "rollout.scheduling_spec",
        ("3 entries",),
    ),
    Rejected(
        "E5 two on v2",
        rl("dte", actor__scheduling_spec=[{"gpu": 1}, {"gpu": 1}]),
        "actor.scheduling_spec",
        ("controller v2 takes exactly one",),
    ),
    Rejected(
        "E5 two on world size 4",
        rl(actor__scheduling_spec=[{"gpu": 1}, {"gpu": 1}]),
        "actor.scheduling_spec",
        ("2 entries", "4 ranks"),
    ),
    Rejected(
        "E5 not a list",
        rl(actor__scheduling_spec={"gpu": 1}),
        "actor.scheduling_spec",
        ("must be a list",),
    ),
    Rejected(
        "E16 optimizer_dtype",
        rl(actor__optimizer_dtype="float16"),
        "actor.optimizer_dtype",
        ("float32", "bfloat16"),
    ),
    Rejected("E16 dtype", rl(critic={"backend": "", "dtype": "int8"}), "critic.dtype"),
    Rejected(
        "E7 minibatches",
        rl("dte", actor__ppo_n_minibatches=4),
        "actor.ppo_n_minibatches",
        ("ppo_n_minibatches=1",),
    ),
    # -- PPOTrainer's checks, in its order
    Rejected(
        "E7 rollout separated",
        rl("dte", rollout__scheduling_strategy=COLOCATE, enable_offload=True),
        "rollout.scheduling_strategy.type",
        ("separated rollout",),
    ),
    Rejected(
        "E7 method",
        rl("dte", actor__weight_update_delta_method="xor"),
        "actor.weight_update_delta_method",
        ("adamw",),
    ),
    Rejected(
        "E7 anchor",
        rl("dte", actor__weight_update_anchor_interval=-1),
        "actor.weight_update_anchor_interval",
    ),
    Rejected("E7 megatron", rl("dte", actor__backend="fsdp:d4"), "actor.backend", ("megatron",)),
    Rejected("E7 sglang", rl("dte", rollout__backend="vllm:d4"), "rollout.backend", ("sglang",)),
    Rejected("E7 actor v2", rl("dte", actor___version="v1"), "actor._version", ("v2",)),
    Rejected("E7 rollout v2", rl("dte", rollout___version="v1"), "rollout._version", ("v2",)),
    Rejected("E7 awex", rl("dte", actor__weight_update_mode="xccl"), "actor.weight_update_mode"),
    Rejected("E7 lora", rl("dte", actor__use_lora=True), "actor.use_lora"),
    Rejected("E15 rollout", rl(rollout__backend="fsdp:d4"), "rollout.backend", ("inference",)),
    Rejected("E15 actor", rl(actor__backend="vllm:d4"), "actor.backend", ("training",)),
    Rejected(
        "E15 teacher.rollout",
        rl(teacher={"rollout": {"backend": "fsdp:d2", "scheduling_spec": ONE_GPU}}),
        "teacher.rollout.backend",
        ("inference",),
    ),
    Rejected(
        "E15 teacher.train",
        rl(teacher={"engine_type": "train", "train": {"backend": "vllm:d2"}}),
        "teacher.train.backend",
        ("training",),
    ),
    Rejected(
        "E8 colocation",
        rl(rollout__scheduling_strategy=COLOCATE, actor__weight_update_mode="disk"),
        "enable_offload",
        ("share GPUs", "enable_offload=true"),
    ),
    Rejected("E8 actor.offload", rl(actor__offload=True), "enable_offload", ("actor.offload",)),
    Rejected(
        "E8 ref.offload of a ref not built",
        rl(actor__kl_ctl=0.0, ref={"backend": "", "offload": True}),
        "enable_offload",
        ("ref.offload",),
    ),
    Rejected(
        "E8 teacher.offload",
        rl(teacher={"offload": True, "rollout": {"backend": "sglang:d1"}}),
        "enable_offload",
        ("teacher.offload",),
    ),
    Rejected(
        "E9",
        rl(rollout__scheduling_strategy=COLOCATE, enable_offload=True),
        "actor.weight_update_mode",
        ("disk", "awex"),
    ),
    Rejected("E10 actor", rl("awex", actor__backend="fsdp:d8"), "actor.backend", ("megatron",)),
    Rejected(
        "E10 rollout", rl("awex", rollout__backend="vllm:d1t8"), "rollout.backend", ("sglang",)
    ),
    Rejected(
        "E11",
        rl(rollout__backend="vllm:d4", rollout__return_routed_experts=True),
        "rollout.return_routed_experts",
        ("vllm",),
    ),
    Rejected(
        "E12",
        rl(actor__backend="megatron:d4", actor__use_lora=True),
        "actor.use_lora",
        ("vllm",),
    ),
    Rejected("E13", rl(rollout___version="v2"), "rollout._version", ("actor._version", "v1", "v2")),
    # engine/megatron_engine.py:540-545, 1707-1727: FP8 training needs FP8 weights
    Rejected(
        "fp8-weights bf16 release",
        rl(
            actor__backend="megatron:d4",
            actor__path="Qwen/Qwen3-1.7B",
            actor__megatron={"fp8_config": {"recipe": "blockwise"}},
        ),
        "actor.megatron.fp8_config",
        ("no quantization_config", "actor.path=Qwen/Qwen3-1.7B-FP8", "fp8_config=null"),
    ),
    Rejected(
        "fp8-weights no FP8 release known",
        rl(
            actor__backend="megatron:d4",
            actor__path="Qwen/Qwen3-8B",
            actor__megatron={"fp8_config": {}},
        ),
        "actor.megatron.fp8_config",
        ("actor.megatron.fp8_config=null", "a model released in FP8"),
    ),
    Rejected("E14", rl(actor__weight_update_mode="nccl"), "actor.weight_update_mode", ("xccl",)),
    # -- each engine's workers and GPUs
    Rejected(
        "G1 gpu 0",
        rl(actor__scheduling_spec=[{"gpu": 0}]),
        "actor.scheduling_spec",
        ("no GPU", "actor.scheduling_spec.0.gpu=1"),
    ),
    Rejected(
        "G1 gpu 2",
        rl(actor__scheduling_spec=[{"gpu": 2}]),
        "actor.scheduling_spec",
        ("2 GPUs and uses one",),
    ),
    Rejected(
        "G2",
        rl(rollout__scheduling_spec=[{"gpu": 0}]),
        "rollout.scheduling_spec",
        ("without a GPU", "rollout.scheduling_spec.0.gpu=1"),
    ),
    Rejected(
        "G3",
        rl(cluster__n_gpus_per_node=0),
        "actor.scheduling_spec",  # created first
        ("CPU run", "real GPUs", "actor.scheduling_spec.0.gpu=0"),
    ),
    # the local scheduler's n_gpus_per_node is the machine's, never 0 (local.py:184-201),
    # so only Slurm's and Ray's v2 servers meet controller v2's refusal of 0
    # (areal/v2/inference_service/controller/controller.py:113-115)
    Rejected(
        "G3 local v2 servers",
        rl("dte", cluster__n_gpus_per_node=0, actor__scheduling_spec=[{"gpu": 0}]),
        "rollout.scheduling_spec",
        ("CPU run", "local scheduler", "real GPUs"),
    ),
    Rejected(
        "G3 slurm v2 servers",
        rl(
            "dte",
            scheduler__type="slurm",
            cluster__n_gpus_per_node=0,
            actor__scheduling_spec=[{"gpu": 0}],
        ),
        "rollout.scheduling_spec",
        ("CPU run", "controller v2 refuses n_gpus_per_node = 0"),
    ),
    # -- colocation
    Rejected(
        "C1 later target",
        rl(
            actor__scheduling_strategy={"type": "colocation", "target": "rollout"},
            enable_offload=True,
            actor__weight_update_mode="disk",
        ),
        "actor.scheduling_strategy.target",
        ("created after",),
    ),
    Rejected(
        "C3",
        rl(
            rollout__backend="sglang:d4",
            rollout__scheduling_strategy={**COLOCATE, "fork": False},
            enable_offload=True,
            actor__weight_update_mode="disk",
        ),
        "rollout.scheduling_strategy",
        ("eval-rollout", "fork=true"),
    ),
    Rejected(
        "C4",
        rl(
            "dte",
            ref={"backend": "", "scheduling_strategy": COLOCATE, "scheduling_spec": ONE_GPU},
        ),
        "ref.scheduling_strategy",
        ("controller v2", "actor-guard", "separation"),
    ),
    # -- §5, per scheduler
    Rejected(
        "local capacity",
        rl(actor__backend="fsdp:d8"),
        "cluster.n_gpus_per_node",
        ("12 GPUs", "round robin"),
    ),
    Rejected(
        "local worker larger than the machine",
        rl(rollout__backend="sglang:t16", cluster__n_gpus_per_node=16, actor__backend="fsdp:d1"),
        "cluster.n_gpus_per_node",
    ),
    Rejected(
        "local instance larger than the machine",
        rl(rollout__backend="sglang:t16", actor__backend="fsdp:d1"),
        "rollout.backend",
        ("local scheduler",),
    ),
    Rejected(
        "local different replicas",
        rl(
            rollout__backend="sglang:d2t2",
            rollout__scheduling_strategy=COLOCATE,
            enable_offload=True,
            actor__weight_update_mode="disk",
        ),
        "rollout.backend",
        ("Replica count mismatch",),
    ),
    Rejected(
        "equal replicas, other GPUs per worker",
        rl(
            "slurm",
            rollout__backend="sglang:d8t2",
            rollout__scheduling_strategy=COLOCATE,
            actor__backend="fsdp:d8",
            enable_offload=True,
            actor__weight_update_mode="disk",
        ),
        "rollout.backend",
        ("2 GPUs", "forked onto one actor worker's 1"),
    ),
    Rejected(
        "slurm entire nodes",
        rl("slurm", actor__backend="fsdp:d4"),
        "actor.backend",
        ("entire nodes", "multiple of 8"),
    ),
    Rejected(
        "slurm worker divides a node",
        rl("slurm", rollout__backend="sglang:d8t3", cluster__n_nodes=4),
        "rollout.backend",
        ("does not divide",),
    ),
    Rejected(
        "slurm v1 instance larger than a node",
        rl("slurm", rollout__backend="sglang:t16", cluster__n_nodes=3),
        "rollout.backend",
        ("ntasks-per-node", "_version=v2"),
    ),
    Rejected(
        "slurm grouped colocation of a training engine",
        rl("slurm", critic={"backend": "fsdp:d4", "scheduling_strategy": COLOCATE}),
        "critic.backend",
        ("only for an inference engine",),
    ),
    Rejected(
        "slurm grouped colocation on other GPUs",
        rl(
            "slurm",
            rollout__backend="sglang:d1t4",
            rollout__scheduling_strategy=COLOCATE,
            enable_offload=True,
            actor__weight_update_mode="disk",
        ),
        "rollout.backend",
        ("exactly actor's 8",),
    ),
    Rejected(
        "ray bash commands",
        rl("ray", actor__scheduling_spec=[{"gpu": 1, "additional_bash_cmds": ["pip list"]}]),
        "actor.scheduling_spec",
        ("additional_bash_cmds",),
    ),
    Rejected(
        "ray worker over a node",
        rl("ray", rollout__backend="sglang:t12", cluster__n_nodes=3),
        "rollout.backend",
        ("whole number of nodes",),
    ),
    Rejected(
        "ray grouped colocation divides a node",
        rl(
            "ray",
            rollout__backend="sglang:d1t8",
            rollout__scheduling_strategy=COLOCATE,
            actor__backend="fsdp:d8",
            enable_offload=True,
            actor__weight_update_mode="disk",
            cluster__n_gpus_per_node=6,
            cluster__n_nodes=3,
        ),
        "rollout.backend",
        ("divide a node's 6",),
    ),
    Rejected(
        "null capacity",
        rl(scheduler__type=None, actor__backend="fsdp:d8"),
        "cluster",
        ("12 GPUs", "cluster.n_nodes=2"),
    ),
    Rejected(
        "null different replicas",
        rl(
            scheduler__type=None,
            rollout__backend="sglang:d2t2",
            rollout__scheduling_strategy=COLOCATE,
            enable_offload=True,
            actor__weight_update_mode="disk",
        ),
        "rollout.backend",
        ("set scheduler.type",),
    ),
    Rejected(
        "v2 instance not whole nodes",
        rl("dte", rollout__backend="sglang:t12", scheduler__type="slurm", cluster__n_nodes=4),
        "rollout.backend",
        ("controller v2",),
    ),
    # -- the model rules, each engine against the model it runs
    Rejected(
        "teacher's own model",  # Qwen2.5-14B: 40 heads, 8 KV heads (the actor's is unknown)
        rl(
            teacher={
                "path": "Qwen/Qwen2.5-14B-Instruct",
                "rollout": {"backend": "vllm:t3", "scheduling_spec": ONE_GPU},
            },
            actor__backend="fsdp:d1",
        ),
        "teacher",
        ("of its model Qwen/Qwen2.5-14B-Instruct", "num_attention_heads=40", "t2, t4 or t8"),
    ),
    # -- what the first training step meets: the rollout's queue and staleness cap
    Rejected(
        "queue of the defaults",  # 16 × consumer_batch_size 1 (workflow_executor.py:705-708)
        rl(train_dataset={"batch_size": 64}),
        "rollout.queue_size",
        ("queue size is too small: 16 < batch size 64", "++rollout.consumer_batch_size=64"),
    ),
    Rejected(
        "queue set",
        rl(
            train_dataset={"batch_size": 64},
            rollout__consumer_batch_size=64,
            rollout__queue_size=32,
        ),
        "rollout.queue_size",
        ("32 < batch size 64", "hint: rollout.queue_size=64"),
    ),
    Rejected(
        "queue per rank",  # launched by AReaL's launcher: each of the actor's 4 ranks asks for 32
        rl(scheduler__type=None, train_dataset={"batch_size": 128}),
        "rollout.queue_size",
        ("16 < batch size 32", "on each of the actor's 4 data-parallel ranks"),
    ),
    Rejected(
        "consumer batch, first step",  # cap (0 + 0 + 1) × 1 < 8
        rl(train_dataset={"batch_size": 8}),
        "rollout.consumer_batch_size",
        ("1 (the default)", "at the first step", "++rollout.consumer_batch_size=8"),
    ),
    Rejected(
        "consumer batch, later",  # steps k with (k + 1) × 8 <= (2 + k + 1) × 4: k = 0, 1
        rl(
            train_dataset={"batch_size": 8},
            rollout__consumer_batch_size=4,
            rollout__max_head_offpolicyness=2,
        ),
        "rollout.consumer_batch_size",
        ("after 2 steps", "rollout.consumer_batch_size=8"),
    ),
    Rejected(
        "consumer batch per rank",  # 6 // 4 = 1 a rank against 32 // 4 = 8
        rl(scheduler__type=None, train_dataset={"batch_size": 32}, rollout__consumer_batch_size=6),
        "rollout.consumer_batch_size",
        (
            "6, so 1 on each of the actor's 4 data-parallel ranks",
            "their share of a step's batch, 8",
        ),
    ),
    # -- AWEX
    Rejected(
        "A5 colocated with another engine's GPUs",  # the ref's, on GPUs of its own
        rl(
            "awex",
            scheduler__type="slurm",
            cluster__n_nodes=2,
            actor__kl_ctl=0.1,
            ref={"backend": "megatron:d8", "scheduling_spec": ONE_GPU},
            rollout__scheduling_strategy={"type": "colocation", "target": "ref"},
        ),
        "rollout.scheduling_strategy.target",
        ("colocated with ref", "rollout.scheduling_strategy.target=actor"),
    ),
    Rejected("A2", rl("awex", rollout__backend="sglang:d1t4"), "rollout.backend", ("CUDA IPC",)),
    Rejected(
        "A3 local colocated with multi-GPU servers",
        rl("awex", rollout__scheduling_strategy=COLOCATE),
        "rollout.backend",
        ("Replica count mismatch",),
    ),
    Rejected(
        "A4 actor short of the machine",
        rl("awex", actor__backend="megatron:d4", rollout__backend="sglang:d1t4"),
        "rollout.scheduling_strategy",
        ("all 8 GPUs", "actor.backend=megatron:d8"),
    ),
    Rejected(
        "A4 an engine in between",
        rl(
            "awex",
            cluster__n_gpus_per_node=8,
            critic={"backend": "megatron:d1", "scheduling_spec": ONE_GPU},
            actor__backend="megatron:d8",
        ),
        "rollout.scheduling_strategy",
        ("critic takes GPUs of their own in between",),
    ),
    Rejected(
        "A4 slurm separated",
        rl("awex", scheduler__type="slurm"),
        "rollout.scheduling_strategy",
        ("rollout.scheduling_strategy.type=colocation",),
    ),
]

WARNED: list[Warned] = [
    Warned("W1", rl(scheduler__type=None), ("scheduler.type", "null")),
    Warned("W2 slurm", rl("slurm", cluster__n_nodes=1), ("cluster.n_nodes", "16 GPUs")),
    Warned("W2 ray", rl("ray", cluster__n_nodes=1), ("cluster.n_nodes", "Ray")),
    Warned(
        "W3",
        rl(cluster__n_nodes=2),
        ("cluster.n_nodes", "local", "one node of 8"),
    ),
    Warned(
        "W4",
        rl(actor___version="v2", rollout___version="v2", actor__weight_update_mode="xccl"),
        ("weight_update_mode", "v2", "awex"),
    ),
    Warned(
        "W5",
        rl(
            teacher={"engine_type": "train", "train": {"backend": "fsdp:d2"}},
            actor__backend="fsdp:d2",
        ),
        ("deprecated",),
    ),
    Warned(
        "W7",
        rl(
            actor___version="v2",
            rollout___version="v2",
            rollout__scheduling_strategy=COLOCATE,
            enable_offload=True,
            actor__weight_update_mode="awex",
            actor__backend="megatron:d4",
        ),
        ("rollout.scheduling_strategy", "v2", "ignored"),
    ),
    Warned("W8", rl("ray", actor__backend="fsdp:d12", cluster__n_nodes=3), ("partial",)),
    Warned(
        "W9",
        rl(
            teacher={
                "rollout": {"backend": "sglang:d1", "scheduling_spec": ONE_GPU},
                "train": {"backend": "fsdp:d1"},
            },
            actor__backend="fsdp:d2",
        ),
        ("engine_type", "teacher.rollout", "teacher.train"),
    ),
    Warned(
        "W10",
        rl(
            actor__kl_ctl=0.1,
            ref={"backend": "", "_version": "v2", "scheduling_strategy": COLOCATE},
        ),
        ("v2", "v1", "ref"),
    ),
    Warned(
        "W11",
        rl(actor__scheduling_spec=DROP),
        ("actor.scheduling_spec", "gpu 0", "+actor.scheduling_spec=[{gpu:1}]"),
    ),
]


@pytest.mark.parametrize("row", REJECTED, ids=[row.id for row in REJECTED])
def test_rejected(row: Rejected) -> None:
    with pytest.raises(AllocationError) as info:
        validate(row.cfg, areal_version="2.0")
    err = info.value
    assert err.reason.startswith(f"{row.key}: "), err.reason
    assert err.hint, err
    for word in row.words:
        assert word in str(err), (word, str(err))


def test_every_rejected_row_is_valid_without_its_changes() -> None:
    for base in ("local", "slurm", "ray", "dte", "awex"):
        plan = validate(rl(base), areal_version="2.0")
        assert plan.warnings == (), (base, plan.warnings)


@pytest.mark.parametrize("row", WARNED, ids=[row.id for row in WARNED])
def test_warned(row: Warned) -> None:
    plan = validate(row.cfg, areal_version="2.0")
    matching = [w for w in plan.warnings if all(word in w for word in row.words)]
    assert len(matching) == 1, plan.warnings
    assert f"warning: {matching[0]}" in plan_table(plan)
    assert matching[0] in plan.to_dict()["warnings"]


# ----------------------------------------------------------- what the plan shows


def test_teacher_layouts_are_planned_where_areal_2_creates_them() -> None:
    rollout_teacher = rl(
        cluster__n_gpus_per_node=8,
        teacher={"rollout": {"backend": "vllm:t2", "scheduling_spec": ONE_GPU}},
        actor__backend="fsdp:d2",
    )
    plan = validate(rollout_teacher, areal_version="2.0")
    assert list(plan.engines) == ["actor", "rollout", "teacher"]  # T1: after the rollout
    teacher = plan.to_dict()["engines"]["teacher"]
    assert (teacher["kind"], teacher["section"], teacher["gpus"]) == (
        "inference",
        "teacher.rollout",
        2,
    )
    assert plan.engines["teacher"].slots == ((0, 6), (0, 7))  # the local counter: last
    train_teacher = rl(
        teacher={
            "engine_type": "train",
            "train": {"backend": "fsdp:d2", "scheduling_spec": ONE_GPU},
        },
        actor__backend="fsdp:d2",
    )
    plan = validate(train_teacher, areal_version="2.0")
    assert list(plan.engines) == ["actor", "teacher", "rollout"]  # T2: before the rollout
    assert plan.to_dict()["engines"]["teacher"]["section"] == "teacher.train"


def test_an_empty_teacher_backend_disables_the_teacher() -> None:
    plan = validate(rl(teacher={"rollout": {"backend": ""}}), areal_version="2.0")
    assert plan.not_built() == {"teacher": "disabled: teacher.rollout.backend is empty"}


def test_v1_awex_shares_the_actors_gpus() -> None:
    plan = validate(rl("awex"), areal_version="2.0")
    rollout = plan.engines["rollout"]
    assert rollout.awex_shared and rollout.owner == "actor"
    assert rollout.slots == plan.engines["actor"].slots
    assert plan.used_gpus == 8
    assert "shares actor's GPUs (AWEX)" in plan_table(plan)
    entry = plan.to_dict()["engines"]["rollout"]
    assert (entry["colocated_with"], entry["gpu_owner"], entry["awex_shared"]) == (
        "actor",
        "actor",
        True,
    )


def test_slurm_colocates_servers_in_groups_over_the_actor() -> None:
    cfg = rl(
        "slurm",
        rollout__backend="sglang:d1t8",
        rollout__scheduling_strategy=COLOCATE,
        enable_offload=True,
        actor__weight_update_mode="disk",
    )
    plan = validate(cfg, areal_version="2.0")
    assert plan.engines["rollout"].owner == "actor" and plan.used_gpus == 8


def test_v2_servers_larger_than_a_node_are_workers_per_node() -> None:
    cfg = rl("dte", rollout__backend="sglang:d2t16", scheduler__type="slurm", cluster__n_nodes=5)
    cfg["actor"]["backend"] = "megatron:d8"
    engine = validate(cfg, areal_version="2.0").to_dict()["engines"]["rollout"]
    assert (engine["replicas"], engine["gpus_per_worker"], engine["gpus"]) == (4, 8, 32)


def test_a_colocated_engine_does_not_read_its_own_gpu() -> None:
    cfg = rl(
        critic={"backend": "", "scheduling_strategy": COLOCATE, "scheduling_spec": [{"gpu": 0}]}
    )
    assert validate(cfg, areal_version="2.0").engines["critic"].owner == "actor"  # G4


def test_an_online_rollout_may_reuse_the_actors_processes() -> None:
    cfg = rl(
        rollout__scheduling_strategy={**COLOCATE, "fork": False},
        rollout__agent={"mode": "online"},
        enable_offload=True,
        actor__weight_update_mode="disk",
    )
    validate(cfg, areal_version="2.0")  # C3 does not apply: no eval-rollout in online mode


def test_the_plan_says_which_rules_and_scheduler() -> None:
    plan = validate(rl("slurm"), areal_version="2.0")
    data = plan.to_dict()
    assert data["areal_rules"] == {"version": "2.0", "source": "--areal-version", "installed": None}
    assert data["scheduler"] == {"type": "slurm", "rules": "slurm"}
    assert "rules: AReaL 2.0 (--areal-version 2.0); scheduler.type slurm" in plan_table(plan)
    engine = data["engines"]["actor"]
    assert (engine["controller"], engine["replicas"], engine["gpus_per_worker"]) == ("v1", 8, 1)


def test_a_cpu_run_takes_no_gpus() -> None:
    cfg = rl(cluster__n_gpus_per_node=0, rollout__scheduling_spec=[{"gpu": 0}])
    cfg["actor"]["scheduling_spec"] = [{"gpu": 0}]
    data = validate(cfg, areal_version="2.0").to_dict()
    assert all(e["gpus"] == 0 for e in data["engines"].values())


# ------------------------------------------------------- the local scheduler's GPUs
# AReaL 2.0 (cbff54d64), areal/infra/scheduler/local.py: LocalScheduler.gpu_devices is
# _detect_gpus() (line 116): CUDA_VISIBLE_DEVICES when set and not empty, its entries
# read by int(), else [0] (lines 188-197); else _get_device_count_safely(), the /dev
# entries nvidiaN, else davinciN (lines 73-90, 198-201). Its n_gpus_per_node is
# len(gpu_devices) (lines 184-186); cluster.n_gpus_per_node is never read.

NVIDIA_DEV = ["nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl", "nvidia-uvm", "nvidia-caps"]


class Counted(NamedTuple):
    id: str
    visible: str | None  # CUDA_VISIBLE_DEVICES (None: not set)
    devices: tuple[str, ...]  # the entries of the device directory
    count: int | None  # None: no GPU visible
    key: str = ""
    source: str = ""  # {dev}: the device directory


COUNTED = [
    Counted("nothing visible", None, (), None),
    Counted("no GPU device", None, ("null", "tty0", "nvidiactl"), None),
    Counted("nvidiaN", None, tuple(NVIDIA_DEV), 4, "scheduler.type", "{dev}/nvidia* devices"),
    Counted(
        "davinciN",
        None,
        ("davinci0", "davinci1", "davinci_manager"),
        2,
        "scheduler.type",
        "{dev}/davinci* devices",
    ),
    Counted(
        "nvidia before davinci", None, ("nvidia0", "davinci0", "davinci1"), 1, "scheduler.type"
    ),
    Counted(
        "indices", "0,1", tuple(NVIDIA_DEV), 2, "CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES=0,1"
    ),
    Counted("blanks, as int() reads them", " 2, 3,5", (), 3, "CUDA_VISIBLE_DEVICES"),
    Counted("empty: the devices", "", tuple(NVIDIA_DEV), 4, "scheduler.type"),
    Counted(
        "a trailing comma: GPU 0 alone",
        "0,1,",
        tuple(NVIDIA_DEV),
        1,
        "CUDA_VISIBLE_DEVICES",
        "CUDA_VISIBLE_DEVICES='0,1,', which AReaL does not read as GPU indices: it takes GPU 0",
    ),
    Counted("a UUID: GPU 0 alone", "GPU-8f6d2c1e", (), 1, "CUDA_VISIBLE_DEVICES"),
]


@pytest.mark.parametrize("row", COUNTED, ids=[row.id for row in COUNTED])
def test_the_machines_gpus_are_counted_as_areal_counts_them(row: Counted, tmp_path: Path) -> None:
    for name in row.devices:
        (tmp_path / name).touch()
    env = {} if row.visible is None else {"CUDA_VISIBLE_DEVICES": row.visible}
    found = machine_gpus(env, tmp_path)
    if row.count is None:
        assert found is None
        return
    assert found is not None
    assert (found.count, found.key) == (row.count, row.key)
    if row.source:
        assert found.source == row.source.format(dev=tmp_path)


def test_a_device_directory_that_cannot_be_read_shows_no_gpu(tmp_path: Path) -> None:
    assert machine_gpus({}, tmp_path / "absent") is None


def _machine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, visible: str = "", devices: int = 0
) -> None:
    """This machine, as areal-conf sees it: CUDA_VISIBLE_DEVICES and nvidia devices."""
    if visible:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    dev = tmp_path / "dev"
    dev.mkdir()
    for i in range(devices):
        (dev / f"nvidia{i}").touch()
    monkeypatch.setenv(DEVICE_DIR_ENV, str(dev))


class OnMachine(NamedTuple):
    id: str
    cfg: dict[str, Any]
    visible: str  # CUDA_VISIBLE_DEVICES ("": not set)
    devices: int  # /dev/nvidiaN entries
    key: str  # the message starts with "<key>:"
    words: tuple[str, ...] = ()


ON_MACHINE = [
    OnMachine(
        "more than CUDA_VISIBLE_DEVICES",
        rl(),
        "0,1,2,3",
        8,
        "CUDA_VISIBLE_DEVICES",
        (
            "need 8 GPUs",
            "has 4 GPUs (CUDA_VISIBLE_DEVICES=0,1,2,3)",
            "actor.backend=fsdp:d2 rollout.backend=sglang:d2 (fewer data-parallel copies)",
            "list 8 GPUs in CUDA_VISIBLE_DEVICES (indices, e.g. 0,1,2,3,4,5,6,7)",
        ),
    ),
    OnMachine(
        "a larger cluster.n_gpus_per_node does not silence it",
        rl(actor__backend="fsdp:d8", cluster__n_gpus_per_node=16),
        "0,1,2,3,4,5,6,7",
        8,
        "CUDA_VISIBLE_DEVICES",
        ("need 12 GPUs", "has 8 GPUs"),
    ),
    OnMachine(
        "more than the machine's devices",
        rl(cluster__n_gpus_per_node=16),
        "",
        4,
        "scheduler.type",
        ("need 8 GPUs", "has 4 GPUs", "/nvidia* devices"),
    ),
    OnMachine(
        "a trailing comma leaves GPU 0 alone",
        rl(),
        "0,1,2,3,4,5,6,7,",
        8,
        "CUDA_VISIBLE_DEVICES",
        ("has 1 GPU", "does not read as GPU indices"),
    ),
    OnMachine(
        "an instance larger than the visible GPUs",
        rl(rollout__backend="sglang:t4", actor__backend="fsdp:d1"),
        "0,1",
        8,
        "rollout.backend",
        ("needs 4 GPUs", "one machine of 2 (CUDA_VISIBLE_DEVICES=0,1)"),
    ),
]


@pytest.mark.parametrize("row", ON_MACHINE, ids=[row.id for row in ON_MACHINE])
def test_the_local_scheduler_has_the_machines_gpus(
    row: OnMachine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _machine(monkeypatch, tmp_path, row.visible, row.devices)
    with pytest.raises(AllocationError) as info:
        validate(row.cfg, areal_version="2.0")
    err = info.value
    assert err.reason.startswith(f"{row.key}: "), err.reason
    for word in row.words:
        assert word in str(err), (word, str(err))


def test_the_plan_says_where_the_machines_gpus_were_counted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _machine(monkeypatch, tmp_path, "0,1,2,3", 8)
    plan = validate(rl(actor__backend="fsdp:d2", rollout__backend="sglang:d2"), areal_version="2.0")
    assert plan.to_dict()["cluster"] == {
        "n_nodes": 1,
        "n_gpus_per_node": 4,
        "gpus_per_node_from": "CUDA_VISIBLE_DEVICES=0,1,2,3",
    }
    table = plan_table(plan)
    assert "GPUs: 4 used of 4 (one machine × 4, local scheduler), 0 idle" in table
    assert "machine: 4 GPUs from CUDA_VISIBLE_DEVICES=0,1,2,3" in table.splitlines()
    (warning,) = plan.warnings
    assert warning.startswith("cluster.n_gpus_per_node is 8, but AReaL's local scheduler")
    assert "cluster.n_gpus_per_node=4 says so" in warning


def test_with_no_gpu_visible_the_local_scheduler_plans_with_the_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _machine(monkeypatch, tmp_path)  # as on CI, or a laptop that is not the target machine
    plan = validate(rl(), areal_version="2.0")
    assert plan.n_gpus_per_node == 8 and plan.warnings == ()
    source = "cluster.n_gpus_per_node, no GPU visible here"
    assert plan.to_dict()["cluster"]["gpus_per_node_from"] == source
    assert f"machine: 8 GPUs from {source} (AReaL's local scheduler counts" in plan_table(plan)


@pytest.mark.parametrize("scheduler", ["slurm", "ray"])
def test_slurm_and_ray_read_the_config_whatever_the_machine(
    scheduler: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _machine(
        monkeypatch, tmp_path, "0,1", 2
    )  # areal/infra/scheduler/slurm.py:93-95, ray.py:605-607
    plan = validate(rl(scheduler), areal_version="2.0")
    assert plan.n_gpus_per_node == 8
    assert plan.to_dict()["cluster"]["gpus_per_node_from"] == "cluster.n_gpus_per_node"
    assert "machine:" not in plan_table(plan)


def test_a_cpu_run_on_the_local_scheduler_has_no_gpus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _machine(monkeypatch, tmp_path, "0,1,2,3", 4)
    cfg = rl(cluster__n_gpus_per_node=0, rollout__scheduling_spec=[{"gpu": 0}])
    cfg["actor"]["scheduling_spec"] = [{"gpu": 0}]
    plan = validate(cfg, areal_version="2.0")
    assert plan.cpu_run and plan.used_gpus == 0


GSM8K_MEGATRON = FIXTURES / "areal2/examples/math/gsm8k_grpo_megatron.yaml"


def test_check_counts_the_gpus_of_the_environment_the_command_runs_with(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cli: Any
) -> None:
    """``check`` runs where ``run`` starts the AReaL command, with its environment."""
    _machine(monkeypatch, tmp_path, "0,1,2,3", 8)
    argv = ["python", "driver.py", "--config", str(GSM8K_MEGATRON), "scheduler.type=local"]
    status, _, err = cli("check", *argv)  # actor megatron:d4 + rollout sglang:d4
    assert status == 2
    assert err.startswith("error: CUDA_VISIBLE_DEVICES: the engines need 8 GPUs"), err
    status, out, _ = cli("check", *argv, "actor.backend=megatron:d2", "rollout.backend=sglang:d2")
    assert status == 0 and "machine: 4 GPUs from CUDA_VISIBLE_DEVICES=0,1,2,3" in out


@pytest.mark.e2e
def test_train_counts_the_gpus_of_its_environment(
    train: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _machine(monkeypatch, tmp_path, "0,1,2,3,4,5,6,7", 8)
    result = train("scheduler.type=local", "cluster.n_nodes=1", "cluster.n_gpus_per_node=16")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "CUDA_VISIBLE_DEVICES: the engines need 16 GPUs" in result.stderr


# ------------------------------------------------------------------ allocation_mode


def test_allocation_mode_that_says_what_the_engines_say() -> None:
    cfg = rl(allocation_mode="sglang:d4+fsdp:d4")
    with pytest.raises(AllocationError) as info:
        validate(cfg, areal_version="2.0")
    assert "removing allocation_mode is the whole fix" in info.value.hint  # W6
    cfg["actor"]["backend"] = "fsdp:d2"
    with pytest.raises(AllocationError) as info:
        validate(cfg, areal_version="2.0")
    assert "actor.backend is fsdp:d2, but allocation_mode says fsdp:d4" in info.value.hint


# ------------------------------------------------------------ the rules of 1.0 (T4)


def test_a_2_0_teacher_under_1_0_rules() -> None:
    cfg = rl(teacher={"rollout": {"backend": "vllm:d1t2"}})
    with pytest.raises(AllocationError) as info:
        validate(cfg, areal_version="1.0")
    assert info.value.reason.startswith("teacher.rollout: AReaL 1.0 has no teacher.engine_type")
    assert "teacher.backend=fsdp:d1t2" in info.value.hint


def test_1_0_rules_keep_the_flat_teacher() -> None:
    plan = validate(
        rl(teacher={"backend": "fsdp:d2"}, actor__backend="fsdp:d2"), areal_version="1.0"
    )
    assert plan.engines["teacher"].gpus == 2 and plan.warnings == ()


# -------------------------------------------------------------- choosing the rules


class Chosen(NamedTuple):
    requested: str | None
    env: str | None
    installed: str | None
    version: str
    text: str
    warned: bool = False


CHOSEN = [
    Chosen(None, None, None, "2.0", "AReaL 2.0 (no areal installed: newest supported)"),
    Chosen(None, None, "1.0.4", "1.0", "AReaL 1.0 (areal 1.0.4 installed)"),
    Chosen(None, None, "2.0.0", "2.0", "AReaL 2.0 (areal 2.0.0 installed)"),
    Chosen(None, None, "0.5.3", "1.0", "AReaL 1.0 (areal 0.5.3 installed)", warned=True),
    Chosen(None, None, "3.1.0", "2.0", "AReaL 2.0 (areal 3.1.0 installed)", warned=True),
    Chosen(None, "1.0", "2.0.0", "1.0", f"AReaL 1.0 ({VERSION_ENV}=1.0)"),
    Chosen("2.0", "1.0", "1.0.4", "2.0", "AReaL 2.0 (--areal-version 2.0)"),
]


@pytest.mark.parametrize("row", CHOSEN, ids=[str(row[:3]) for row in CHOSEN])
def test_which_rules(row: Chosen) -> None:
    env = {VERSION_ENV: row.env} if row.env else {}
    choice = choose_rules(row.requested, environ=env, installed=lambda: row.installed)
    assert choice.version == row.version
    assert choice.describe() == row.text
    assert (choice.warning is not None) == row.warned


@pytest.mark.parametrize("value", ["3", "v3", "2.1", "latest", " "])
def test_a_version_that_is_not_supported_is_one_error(value: str) -> None:
    with pytest.raises(AllocationError) as info:
        choose_rules(environ={VERSION_ENV: value}, installed=lambda: None)
    assert info.value.reason.startswith(f"{VERSION_ENV}: ")
    assert "1.0 or 2.0" in info.value.reason


def test_validate_takes_the_version_once() -> None:
    """``areal_version`` and ``settings.areal_version`` name the version: either one alone
    decides, the same one twice is fine, two different ones are an error (neither wins)."""
    cfg = rl()
    for given, in_settings in (("1.0", None), (None, "1.0"), ("1.0", "1.0")):
        plan = validate(cfg, areal_version=given, settings=Settings(areal_version=in_settings))
        assert plan.to_dict()["areal_rules"]["version"] == "1.0"
    with pytest.raises(AllocationError) as info:
        validate(cfg, areal_version="1.0", settings=Settings(areal_version="2.0"))
    assert info.value.reason == (
        "areal_version='1.0' and settings.areal_version='2.0' name different AReaL versions"
    )


def test_the_installed_areal_decides(tmp_path: Path) -> None:
    """An ``areal`` distribution on the path chooses its rules, in a fresh interpreter."""
    dist = tmp_path / "areal-1.0.4.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: areal\nVersion: 1.0.4\n")
    code = (
        "import sys, json; sys.path.insert(0, sys.argv[1]);"
        "from areal_conf import validate;"
        "print(json.dumps(validate({'actor': {'backend': 'fsdp:d8'}}).to_dict()['areal_rules']))"
    )
    result = run_python("-c", code, str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "version": "1.0",
        "source": "installed areal 1.0.4",
        "installed": "1.0.4",
    }


# ------------------------------------------------------------------------ memory


QWEN_7B = {
    "num_layers": 28,
    "hidden_size": 3584,
    "num_attention_heads": 28,
    "num_kv_heads": 4,
    "ffn_hidden_size": 18944,
    "vocab_size": 152064,
}


@pytest.mark.parametrize(
    ("version", "changes", "bytes_per_param"),
    [
        ("2.0", {}, 16),  # optimizer_dtype float32: weights, grads, two moments
        ("2.0", {"actor__optimizer_dtype": "bfloat16"}, 8),
        ("1.0", {}, 8),  # AReaL 1.0 stored FSDP weights in dtype (bfloat16)
    ],
)
def test_fsdp_memory_follows_the_storage_dtype(
    version: str, changes: dict[str, Any], bytes_per_param: int
) -> None:
    from areal_conf.model.shape import model_shape
    from areal_conf.perf.parameters import parameter_count

    cfg = rl(**changes)
    settings = Settings(areal_version=version, model=QWEN_7B, model_from="test")
    est = validate(cfg, settings=settings).engines["actor"].memory
    assert est is not None
    shape = model_shape(QWEN_7B)
    assert not isinstance(shape, str)
    expected = parameter_count(shape) * bytes_per_param / 4  # fsdp:d4
    assert est.weights + est.grads + est.optimizer == pytest.approx(expected, rel=0.01)


# ------------------------------------------------- bad input, as a user meets it


HERMES = FIXTURES / "areal2" / "examples" / "hermes"


class BadInput(NamedTuple):
    name: str
    args: tuple[str, ...]  # train.py's command line after --config-dir/--config-name
    env: dict[str, str]
    key: str  # the message's first line starts with it


BAD_INPUT = [
    BadInput("scheduler type", ("scheduler.type=kubernetes",), {}, "scheduler.type"),
    BadInput("controller version", ("actor._version=v3",), {}, "actor._version"),
    BadInput("no scheduling spec", ("rollout.scheduling_spec=[]",), {}, "rollout.scheduling_spec"),
    BadInput(
        "teacher engine type",
        ("+teacher.engine_type=student", "+teacher.rollout.backend=sglang:d1"),
        {},
        "teacher.engine_type",
    ),
    BadInput("rules version", (), {VERSION_ENV: "3.0"}, VERSION_ENV),
    BadInput("GPU memory", (), {"AREAL_CONF_GPU_MEMORY_GB": "lots"}, "AREAL_CONF_GPU_MEMORY_GB"),
]


@pytest.mark.e2e
@pytest.mark.parametrize("row", BAD_INPUT, ids=[row.name for row in BAD_INPUT])
def test_bad_input_is_one_message_and_exit_2(
    row: BadInput, train: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in row.env.items():
        monkeypatch.setenv(name, value)
    result = train("--config-dir", str(HERMES), "--config-name", "config", *row.args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    # a bad environment variable is a setting, not the config's allocation
    heading = "error: invalid setting\n" if row.env else "error: invalid allocation\n"
    message = result.stderr.split(heading, 1)[1]
    assert message.startswith(f"{row.key}: "), message
    assert message.count("\nhint: ") == 1, message


@pytest.mark.e2e
def test_a_bad_version_stops_a_sweep_and_the_command_line(
    train: Any, sweep_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VERSION_ENV, "nope")
    result = train("-m", "actor.backend=fsdp:d8,fsdp:d4t2", "hydra.launcher.dry_run=true")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{VERSION_ENV}: 'nope' is not an AReaL version" in result.stderr
    cli = run_python("-m", "areal_conf", "explain", "--config", str(HERMES / "config.yaml"))
    assert cli.returncode == 2 and "Traceback" not in cli.stderr
    assert f"{VERSION_ENV}: 'nope'" in cli.stderr


def test_a_consumer_batch_of_the_step_s_batch_passes() -> None:
    """As AReaL's examples set it: ``consumer_batch_size: ${train_dataset.batch_size}``."""
    for base, batch in (("local", 64), ("slurm", 512)):
        cfg = rl(base, train_dataset={"batch_size": batch}, rollout__consumer_batch_size=batch)
        assert validate(cfg, areal_version="2.0").warnings == ()


@pytest.mark.parametrize(
    "path, backend, fp8_config, refused",
    [
        ("Qwen/Qwen3-1.7B-FP8", "megatron:d4", {"recipe": "blockwise"}, False),  # FP8 weights
        ("deepseek-ai/DeepSeek-V3", "megatron:d4", {}, False),  # released in FP8 only
        ("Qwen/Qwen3-1.7B", "megatron:d4", None, False),  # bf16 training
        ("Qwen/Qwen3-1.7B", "fsdp:d4", {}, False),  # FSDP does not read megatron.*
        ("an/unknown-model", "megatron:d4", {}, False),  # its config.json is not at hand
        ("Qwen/Qwen3-1.7B", "megatron:d4", {}, True),
    ],
)
def test_fp8_training_needs_fp8_weights_where_the_weights_are_known(
    path: str, backend: str, fp8_config: dict[str, Any] | None, refused: bool
) -> None:
    """AReaL's Megatron engine stops at start-up when it trains in FP8
    (``megatron.fp8_config`` set) from a model whose ``config.json`` has no
    ``quantization_config`` with ``quant_method: fp8``
    (``areal/engine/megatron_engine.py:540-545, 1707-1727``); both versions."""
    cfg = rl(actor__backend=backend, actor__path=path, actor__megatron={"fp8_config": fp8_config})
    for version in ("1.0", "2.0"):
        try:
            validate(cfg, areal_version=version)
        except AllocationError as err:  # DeepSeek-V3 does not fit 8 GPUs
            assert (err.rule == "fp8-weights") is refused, err
            assert not refused or "trains in FP8 only" in err.reason
        else:
            assert not refused


def test_a_local_model_s_quantization_is_read_from_its_config_json(tmp_path: Path) -> None:
    """A local model directory: its ``config.json``'s ``quantization_config`` decides."""
    config = json.loads((FIXTURES / "hf" / "qwen2_5_7b" / "config.json").read_text())
    config["num_hidden_layers"] = 2  # small enough to fit
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config))
    cfg = rl(
        actor__backend="megatron:d4",
        actor__path=str(model),
        actor__megatron={"fp8_config": {"recipe": "tensorwise"}},
    )
    with pytest.raises(AllocationError, match="has no quantization_config"):
        validate(cfg, areal_version="2.0")
    config["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    (model / "config.json").write_text(json.dumps(config))
    validate(cfg, areal_version="2.0")
    config["quantization_config"] = {"quant_method": "awq"}
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(AllocationError, match="has quant_method 'awq'"):
        validate(cfg, areal_version="2.0")


@pytest.mark.parametrize(
    "gpu, recipe, refused",
    [
        ("h100", "blockwise", ""),
        ("h100", "tensorwise", ""),
        ("b200", "mxfp8", ""),
        (None, "mxfp8", ""),  # no GPU named: not checked
        ("a100", "delayed", "no FP8 tensor cores"),
        ("h100", "mxfp8", "needs compute capability 10.0 to below 12.0"),
        ("h20", "mxfp8", "the H20 has 9.0"),
    ],
)
def test_the_gpu_named_runs_the_fp8_recipe(gpu: str | None, recipe: str, refused: str) -> None:
    """Transformer Engine's ``check_recipe_support`` (``transformer_engine/pytorch/
    quantization.py`` L146-238) stops an FP8 step on a GPU whose compute capability the
    recipe does not run on; areal-conf checks it when the GPU is named."""
    cfg = rl(
        actor__backend="megatron:d4",
        actor__path="Qwen/Qwen3-1.7B-FP8",
        actor__megatron={"fp8_config": {"recipe": recipe}},
    )
    settings = Settings(areal_version="2.0", gpu=gpu)
    if not refused:
        validate(cfg, settings=settings)
        return
    with pytest.raises(AllocationError, match=refused) as info:
        validate(cfg, settings=settings)
    assert info.value.rule == "fp8-gpu"
    assert "actor.megatron.fp8_config=null" in str(info.value.hint)
