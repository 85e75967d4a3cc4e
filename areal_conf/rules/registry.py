"""Every rule areal-conf checks, in one table: :data:`RULES`.

Each rule is one :class:`Rule`: a unique id (which an error it raises carries as
``AllocationError.rule``), the topic it belongs to, what it checks, the AReaL versions and
schedulers it applies to, whether only an RL config (an actor and a rollout, run by
AReaL's trainer) meets it,
the code of AReaL (or of the engine) that makes it, and the function that checks it.
The table is in the order AReaL meets the rules, so a version's checks are the rules
that apply to it, in table order (:func:`rules_for`): the first that fails is the
message. A new rule is a new row here; a new AReaL version is a new value in the
``versions`` of the rows that hold for it, not a branch in a check.

docs/rules.md is this table as the user reads it (:func:`rules_table`), and a test holds
the two equal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from areal_conf.rules.awex import check_awex_sharing
from areal_conf.rules.backends import check_backends, check_backends_and_kinds, check_kinds
from areal_conf.rules.capacity import capacity_everywhere, place_engines
from areal_conf.rules.colocation import colocate, colocate_2_0, ignore_v2_rollout_colocation
from areal_conf.rules.context import Context
from areal_conf.rules.fp8 import check_fp8_gpu, check_fp8_weights
from areal_conf.rules.loading import check_delta_minibatches, check_load_keys
from areal_conf.rules.memory import check_engine_memory
from areal_conf.rules.model import read_model
from areal_conf.rules.scheduling import check_ray_specs, check_scheduler, check_scheduler_gpus
from areal_conf.rules.speed import predict_step_times
from areal_conf.rules.staleness import check_consumer_batch, check_rollout_queue
from areal_conf.rules.teacher import check_teacher, check_teacher_layout_1_0
from areal_conf.rules.weights import (
    check_awex_backends,
    check_colocated_weight_update,
    check_controller_versions,
    check_delta_weight_update,
    check_megatron_lora,
    check_offload,
    check_routed_experts,
    check_v1_weight_update,
)
from areal_conf.rules.workers import count_workers

#: The topics rules belong to: each is the module of :mod:`areal_conf.rules` that holds
#: its rules (``teacher``: :mod:`areal_conf.rules.teacher`).
TOPICS: Final = (
    "teacher",
    "loading",
    "backends",
    "weights",
    "awex",
    "workers",
    "colocation",
    "scheduling",
    "capacity",
    "model",
    "fp8",
    "memory",
    "staleness",
    "speed",
)


@dataclass(frozen=True)
class Rule:
    """One rule: see the module docstring. ``schedulers`` holds the values of
    ``scheduler.type`` it applies under (``null`` for none given; ``any`` for a version
    whose rules do not depend on the scheduler); empty: all of them."""

    id: str
    topic: str
    checks: str
    versions: tuple[str, ...]
    run: Callable[[Context], None]
    source: str
    schedulers: tuple[str, ...] = ()
    rl_only: bool = False

    def applies(self, ctx: Context) -> bool:
        """Whether the rule holds for the config of ``ctx`` (its version is checked by
        :func:`rules_for`)."""
        if self.schedulers and ctx.column not in self.schedulers:
            return False
        return ctx.run.rl or not self.rl_only


#: Every rule, in the order AReaL meets them.
RULES: Final[tuple[Rule, ...]] = (
    Rule(
        "teacher-1.0-layout",
        "teacher",
        "the teacher is an engine section of its own (teacher.backend), as AReaL 1.0 reads it",
        ("1.0",),
        check_teacher_layout_1_0,
        "AReaL 1.0.4: api/cli_args.py:2822 (TeacherConfig is a PPOActorConfig: no "
        "engine_type, rollout or train)",
    ),
    Rule(
        "scheduler-type",
        "scheduling",
        "scheduler.type is local, slurm, ray or null",
        ("2.0",),
        check_scheduler,
        "trainer/rl_trainer.py:1051-1059 (every trainer's _init_scheduler)",
    ),
    Rule(
        "teacher-layout",
        "teacher",
        "the teacher is teacher.rollout or teacher.train, as engine_type says",
        ("2.0",),
        check_teacher,
        "api/cli_args.py:3343-3393 (TeacherConfig)",
    ),
    Rule(
        "loader-values",
        "loading",
        "each engine's _version, its scheduling_spec entries, its dtypes",
        ("2.0",),
        check_load_keys,
        "api/cli_args.py:1464-1501, 2668-2676",
    ),
    Rule(
        "delta-minibatches",
        "loading",
        "delta weight updates need one PPO minibatch",
        ("2.0",),
        check_delta_minibatches,
        "api/cli_args.py:1909-1930",
    ),
    Rule(
        "backend-and-kind",
        "backends",
        "each engine's backend string, and that its kind (inference or training) is its role's",
        ("1.0",),
        check_backends_and_kinds,
        "AReaL 1.0.4: api/alloc_mode.py:286 (ModelAllocation.from_str), "
        "trainer/rl_trainer.py:132-185, 919, 946, 1013",
    ),
    Rule(
        "backend",
        "backends",
        "each engine's backend string",
        ("2.0",),
        check_backends,
        "api/alloc_mode.py:286 (ModelAllocation.from_str), trainer/rl_trainer.py:124-224",
    ),
    Rule(
        "delta-weight-update",
        "weights",
        "what delta weight transfer requires, in AReaL's order",
        ("2.0",),
        check_delta_weight_update,
        "utils/dte.py:20-71",
        rl_only=True,
    ),
    Rule(
        "backend-kind",
        "backends",
        "each role's backend kind (inference or training)",
        ("2.0",),
        check_kinds,
        "trainer/rl_trainer.py:1139-1142, 1166-1169, 1237-1240, 1267-1309",
    ),
    Rule(
        "enable-offload",
        "weights",
        "enable_offload when an engine offloads or the actor and rollout share GPUs",
        ("2.0",),
        check_offload,
        "trainer/rl_trainer.py:1469-1483",
        rl_only=True,
    ),
    Rule(
        "colocated-weight-update",
        "weights",
        "a rollout on the actor's GPUs gets its weights by disk or awex",
        ("2.0",),
        check_colocated_weight_update,
        "trainer/rl_trainer.py:1485-1492",
        rl_only=True,
    ),
    Rule(
        "awex-backends",
        "weights",
        "v1 AWEX needs a megatron actor and an sglang rollout",
        ("2.0",),
        check_awex_backends,
        "trainer/rl_trainer.py:509-526",
        rl_only=True,
    ),
    Rule(
        "routed-experts",
        "weights",
        "routed experts need an sglang rollout",
        ("2.0",),
        check_routed_experts,
        "trainer/rl_trainer.py:1506-1510",
        rl_only=True,
    ),
    Rule(
        "megatron-lora",
        "weights",
        "a megatron actor with LoRA needs a vllm rollout",
        ("2.0",),
        check_megatron_lora,
        "trainer/rl_trainer.py:1511-1520",
        rl_only=True,
    ),
    Rule(
        "controller-versions",
        "weights",
        "the actor and the rollout run the same controller version",
        ("2.0",),
        check_controller_versions,
        "trainer/rl_trainer.py:1522-1529",
        rl_only=True,
    ),
    Rule(
        "weight-update-mode",
        "weights",
        "the weight update mode (v1: disk, xccl or awex; v2 does not read it)",
        ("2.0",),
        check_v1_weight_update,
        "trainer/rl_trainer.py:376-450",
        rl_only=True,
    ),
    Rule(
        "v2-rollout-colocation",
        "colocation",
        "controller v2 starts its rollout on GPUs of its own, whatever its strategy says",
        ("2.0",),
        ignore_v2_rollout_colocation,
        "v2/inference_service/controller/controller.py:104-125, 345-370",
    ),
    Rule(
        "workers",
        "workers",
        "each engine's workers and the GPUs its scheduling_spec gives each",
        ("2.0",),
        count_workers,
        "infra/controller/train_controller.py:254-323, "
        "infra/controller/rollout_controller.py:162-197, "
        "v2/training_service/controller/controller.py:165-199",
    ),
    Rule(
        "colocation-1.0",
        "colocation",
        "targets created earlier, chains that fork, equal replicas",
        ("1.0",),
        colocate,
        "AReaL 1.0.4: infra/scheduler/local.py:220-229, 568-625 (a colocated role reuses "
        "its target's workers)",
    ),
    Rule(
        "colocation",
        "colocation",
        "targets created earlier and built, chains, replicas as the scheduler in use needs",
        ("2.0",),
        colocate_2_0,
        "infra/scheduler/local.py:679-714, slurm.py:1013-1094, ray.py:1517-1562",
    ),
    Rule(
        "awex-sharing",
        "awex",
        "v1 AWEX's rollout runs on the actor's GPUs",
        ("2.0",),
        check_awex_sharing,
        "engine/awex/colocate_writer.py:1-20, trainer/rl_trainer.py:337-355",
        rl_only=True,
    ),
    Rule(
        "ray-specs",
        "scheduling",
        "Ray's scheduling_spec (no additional_bash_cmds, whole nodes)",
        ("2.0",),
        check_ray_specs,
        "infra/scheduler/ray.py:942-975, 1389-1471",
    ),
    Rule(
        "scheduler-gpus",
        "scheduling",
        "each engine on the GPUs the scheduler in use gives it",
        ("2.0",),
        check_scheduler_gpus,
        "infra/scheduler/local.py:203-218, slurm.py:1066-1081, ray.py:1389-1471",
    ),
    Rule(
        "capacity",
        "capacity",
        "the engines on GPUs of their own fit cluster.n_nodes × n_gpus_per_node",
        ("1.0", "2.0"),
        capacity_everywhere,
        "infra/utils/launcher.py:228-277 (the launchers' assert)",
        schedulers=("any", "null"),
    ),
    Rule(
        "placement",
        "capacity",
        "concrete GPUs on nodes for every engine, as the scheduler hands them out",
        ("1.0", "2.0"),
        place_engines,
        "infra/scheduler/local.py:716-747, slurm.py:838-920, ray.py:1331-1471",
    ),
    Rule(
        "model",
        "model",
        "the model's shape and the layout rules it implies (heads, layers, experts)",
        ("1.0", "2.0"),
        read_model,
        "Megatron-Core, SGLang and vLLM: each rule of areal_conf.spec.model_checks with its code",
    ),
    Rule(
        "fp8-weights",
        "fp8",
        "a Megatron engine that trains in FP8 loads weights stored in FP8",
        ("1.0", "2.0"),
        check_fp8_weights,
        "engine/megatron_engine.py:540-545, 1707-1727 (AReaL 1.0.4: 368-369, 1188-1208)",
    ),
    Rule(
        "memory",
        "memory",
        "each engine's memory per GPU, engines sharing GPUs together",
        ("1.0", "2.0"),
        check_engine_memory,
        "areal_conf.perf.memory (an estimate: AReaL fails with CUDA out of memory)",
    ),
    Rule(
        "fp8-gpu",
        "fp8",
        "the GPU named (--gpu) runs the Megatron engine's FP8 recipe",
        ("1.0", "2.0"),
        check_fp8_gpu,
        "Transformer Engine: transformer_engine/pytorch/quantization.py:146-238 "
        "(check_recipe_support, at d0067d0)",
    ),
    Rule(
        "rollout-queue",
        "staleness",
        "the rollout's queue holds a step's batch",
        ("1.0", "2.0"),
        check_rollout_queue,
        "infra/workflow_executor.py:705-708, infra/controller/rollout_controller.py:217",
        rl_only=True,
    ),
    Rule(
        "consumer-batch",
        "staleness",
        "rollout.consumer_batch_size is at least a step's batch (else the trainer waits "
        "without end)",
        ("1.0", "2.0"),
        check_consumer_batch,
        "infra/staleness_manager.py:102-112, infra/workflow_executor.py:460-471, 700-755",
        rl_only=True,
    ),
    Rule(
        "speed",
        "speed",
        "each training engine's predicted step time (never refuses a config)",
        ("1.0", "2.0"),
        predict_step_times,
        "areal_conf.perf.step_time (a prediction)",
    ),
)


#: The last rule that can refuse a config: the check of a fix stops there (the rules after
#: it only predict).
LAST_REFUSING: Final = "consumer-batch"


def rules_for(version: str) -> tuple[Rule, ...]:
    """The rules of AReaL ``version``, in the order AReaL meets them."""
    return tuple(rule for rule in RULES if version in rule.versions)


def rules_table() -> str:
    """:data:`RULES` as docs/rules.md shows them: one Markdown table, in order."""
    lines = [
        "| Id | Topic | AReaL | Applies to | What it checks | Where AReaL (or the engine) "
        "decides |",
        "|---|---|---|---|---|---|",
    ]
    for rule in RULES:
        applies = []
        if rule.rl_only:
            applies.append("RL configs run by AReaL's trainer (an actor and a rollout)")
        if rule.schedulers:
            given = [s for s in rule.schedulers if s not in ("any", "null")]
            shown = [*given, *(["no scheduler.type"] if "null" in rule.schedulers else [])]
            one_column = " (AReaL 1.0: every config)" if "any" in rule.schedulers else ""
            applies.append("scheduler: " + ", ".join(shown) + one_column)
        lines.append(
            f"| `{rule.id}` | {rule.topic} | {', '.join(rule.versions)} | "
            f"{'; '.join(applies) or 'every config'} | {rule.checks} | {rule.source} |"
        )
    return "\n".join(lines) + "\n"
