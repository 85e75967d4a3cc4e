"""The Hydra layer: schema, resolvers, validate(cfg) through compose, and train.py end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _helpers import Train, compose_config
from omegaconf import OmegaConf

from areal_conf import AllocationError
from areal_conf.hydra.structured import EngineConfig, TeacherLayouts
from areal_conf.validation import validate


def test_default_config_plan() -> None:
    plan = validate(compose_config())
    assert (plan.used_gpus, plan.available_gpus, plan.idle_gpus) == (16, 16, 0)
    assert plan.gpus_by_engine() == {"rollout": 8, "actor": 8, "critic": 8, "ref": 8}
    assert plan.engines["critic"].inherited_from == "actor"
    assert plan.engines["critic"].colocated_with == "actor"
    assert "teacher" not in plan.engines  # absent unless the config gives it
    assert plan.engines["critic"].slots == plan.engines["actor"].slots


def test_allocation_nodes_resolve() -> None:
    cfg = compose_config("actor.backend=megatron:d2p2t4e4", "cluster.n_nodes=4")
    OmegaConf.resolve(cfg)
    assert cfg.actor.allocation == {
        "spec": "megatron:d2p2t4e4",
        "backend": "megatron",
        "dp": 2,
        "tp": 4,
        "pp": 2,
        "cp": 1,
        "ep": 4,
        "etp": 1,
        "edp": 2,
        "world_size": 16,
    }
    assert cfg.critic.allocation.spec == "megatron:d2p2t4e4"  # inherited from actor
    assert cfg.ref.allocation.world_size == 16
    assert cfg.rollout.allocation.dp == 2


def test_allocation_node_is_null_for_engines_not_built() -> None:
    cfg = compose_config(
        "+teacher.backend=", "+teacher.allocation=${areal.allocation:}", "+actor.kl_ctl=0.0"
    )
    OmegaConf.resolve(cfg)
    assert cfg.teacher.allocation is None  # an empty teacher backend: disabled
    assert cfg.ref.allocation is None  # actor.kl_ctl <= 0: no ref model


SECTIONS_CONFIG = """\
defaults:
  - areal_schema
  - areal_engine@judge
  - _self_
rollout: {backend: "sglang:d2"}
actor: {backend: "fsdp:d2", optimizer: {lr: 1.0e-5}}
judge: {backend: "sglang:d1", max_concurrent_rollouts: 8}
cluster: {n_nodes: 1, n_gpus_per_node: 8}
scheduler: {type: local}
"""


@pytest.mark.parametrize(
    ("overrides", "section", "world_size"),
    [
        ([], "rollout", 2),  # from the YAML, which writes no allocation node
        ([], "actor", 2),
        ([], "judge", 1),  # another engine, typed by areal_engine in the defaults list
        (["critic.backend=fsdp:d2"], "critic", 2),  # from an override
        (["+critic.backend=fsdp:d2"], "critic", 2),  # "+" on an unset section works too
        (["ref.backend="], "ref", 2),  # an empty ref backend is the actor's
        (["teacher.rollout.backend=sglang:d1t2"], "teacher.rollout", 2),  # AReaL 2.0's teacher
        (["teacher.engine_type=train", "teacher.train.backend=fsdp:d2"], "teacher.train", 2),
    ],
)
def test_every_engine_section_is_typed_with_its_allocation(
    tmp_path: Path, overrides: list[str], section: str, world_size: int
) -> None:
    (tmp_path / "config.yaml").write_text(SECTIONS_CONFIG)
    cfg = compose_config(*overrides, config_dir=tmp_path)
    node = OmegaConf.select(cfg, section)
    assert OmegaConf.get_type(node) is EngineConfig
    assert node.scheduling_strategy.type == "separation"
    assert node.allocation.world_size == world_size
    assert section.split(".")[0] in validate(cfg).engines


def test_unset_sections_are_typed_and_no_engine(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(SECTIONS_CONFIG)
    cfg = compose_config(config_dir=tmp_path)
    assert OmegaConf.get_type(cfg.critic) is EngineConfig and cfg.critic.backend is None
    assert cfg.critic.allocation is None and cfg.teacher.rollout.allocation is None
    assert sorted(validate(cfg).engines) == ["actor", "judge", "rollout"]
    # AReaL's own keys pass through the typed sections
    assert cfg.actor.optimizer.lr == 1.0e-5 and cfg.judge.max_concurrent_rollouts == 8


def test_the_teacher_section_follows_the_areal_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.yaml").write_text(SECTIONS_CONFIG)
    monkeypatch.setenv("AREAL_CONF_AREAL_VERSION", "1.0")
    cfg = compose_config("teacher.backend=fsdp:d4", config_dir=tmp_path)
    assert OmegaConf.get_type(cfg.teacher) is EngineConfig  # AReaL 1.0: one flat section
    assert cfg.teacher.allocation.world_size == 4
    monkeypatch.setenv("AREAL_CONF_AREAL_VERSION", "2.0")
    cfg = compose_config("teacher.rollout.backend=sglang:d1", config_dir=tmp_path)
    assert OmegaConf.get_type(cfg.teacher) is TeacherLayouts


def test_world_size_resolver_in_any_value() -> None:
    cfg = OmegaConf.create(
        {
            "a": "${areal.world_size:fsdp:d4t2}",
            "b": "${areal.world_size:'megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)'}",
            "c": "${areal.alloc:sglang:d2t4}",
        }
    )
    assert (cfg.a, cfg.b, cfg.c.world_size) == (8, 32, 8)


def test_resolvers_register_idempotently_and_silently() -> None:
    import importlib
    import warnings

    import hydra_plugins.areal_conf_plugin.areal_configs as plugin

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plugin.register_resolvers()
        plugin.register_resolvers()
        importlib.reload(plugin)  # as Hydra 1.3's plugin scan re-executes it
    assert OmegaConf.create({"x": "${areal.world_size:fsdp:d8}"}).x == 8


@pytest.mark.parametrize(
    ("overrides", "message", "hint"),
    [
        (["actor.backend=d4t2"], "actor.backend: no backend prefix", "fsdp:d4t2"),
        (  # engine sections take AReaL's keys, so Hydra adds a misspelt one
            ["actor.bakend=fsdp:d8"],
            "actor.bakend: no such key in AReaL's PPOActorConfig or DPOEngineConfig",
            "did you mean actor.backend? rename it: ~actor.bakend actor.backend=fsdp:d8 (on "
            "the command line, else the same rename in the YAML)",
        ),
        (
            ["+teacher.engine_tpye=train"],
            "teacher.engine_tpye: no such key in AReaL's TeacherConfig",
            "did you mean teacher.engine_type? rename it: ~teacher.engine_tpye "
            "teacher.engine_type=train",
        ),
        (  # the cluster takes AReaL's keys too (and areal-conf's gpu_memory_gb)
            ["cluster.n_node=3"],
            "cluster.n_node: no such key in AReaL's ClusterSpecConfig",
            "did you mean cluster.n_nodes?",
        ),
        (
            ["allocation_mode=sglang:d4t2+fsdp:d8"],
            "allocation_mode is deprecated",
            "rollout.backend=sglang:d4t2 rollout.scheduling_strategy.type=separation actor.backend=fsdp:d8 actor.scheduling_strategy.type=separation",
        ),
        (
            ["critic.backend=fsdp:d4"],
            "critic.backend: critic -> actor: critic runs 4 ranks (fsdp:d4) and actor 8 ranks",
            "critic.backend=fsdp:d8",
        ),
        (  # the rules every scheduler shares (Slurm, the config's, only warns)
            ["rollout.backend=sglang:d4t4", "scheduler.type=null"],
            "need 24 GPUs (actor 8 + rollout 16) but the cluster has 16",
            "cluster.n_nodes=3",
        ),
        (
            ["actor.backend=fsdp:d4"],
            "actor.backend: AReaL's Slurm scheduler allocates only entire nodes: fsdp:d4 takes 4 "
            "GPUs but a node has 8",
            "a multiple of 8 GPUs",
        ),
        (
            ["rollout.backend=fsdp:d8"],
            "rollout.backend: rollout needs an inference backend",
            "sglang:d8",
        ),
        (["actor.backend=vllm:d8"], "actor needs a training backend", "fsdp:d8"),
        (["rollout.backend="], "rollout.backend: rollout needs a backend", "sglang:d2t4"),
        (
            ["actor.backend=", "critic.backend=fsdp:d8"],
            "actor.backend: actor needs a backend",
            "fsdp:d8",
        ),
        (
            ["actor.backend=fsdp:d4p2"],
            "actor.backend: fsdp does not support pipeline",
            "megatron:d4p2",
        ),
        (
            ["ref.scheduling_strategy.target=teacher", "+teacher.rollout.backend="],
            "ref -> teacher: teacher is not built (disabled: teacher.rollout.backend is empty)",
            "ref.scheduling_strategy.target=actor",
        ),
        (
            ["+teacher.backend=fsdp:d8"],
            "teacher.backend: AReaL 2.0 has no flat teacher",
            'teacher.train.backend: "fsdp:d8"',
        ),
        (
            ["ref.scheduling_strategy.target=teacher"],
            "ref -> teacher: the config has no teacher section",
            "ref.scheduling_strategy.target=actor",
        ),
        (
            ["ref.scheduling_strategy.target=actr"],
            "ref -> actr: 'actr' is not an engine of this config",
            "ref.scheduling_strategy.target=actor (did you mean actor?)",
        ),
        (
            ["ref.scheduling_strategy.target=ref"],
            "ref -> ref: ref cannot be colocated with itself",
            "ref.scheduling_strategy.type=separation",
        ),
        (["ref.scheduling_strategy.type=shared"], "unknown scheduling type 'shared'", "colocation"),
        (["cluster.n_nodes=0"], "cluster.n_nodes: must be a positive whole number", "n_nodes=1"),
        (
            ["model.num_attention_heads=6"],
            "rollout: sglang:d2t4 breaks a model rule",
            "t1, t2, t3 or t6",
        ),
        (
            ["actor.backend=megatron:d8e4", "model.num_experts=6"],
            "actor: megatron:d8e4 breaks a model rule: num_experts=6 is not divisible by ep=4",
            "e1, e2",
        ),
        (
            ["rollout.backend=sglang:d2t6", "actor.backend=fsdp:t4", "scheduler.type=null"],
            "rollout: sglang:d2t6 does not fit on 2 × 8 GPUs: 2 server instances of 6 GPUs, "
            "each within one node; one node holds 1 (6 of its 8 GPUs) after actor took theirs",
            "n_nodes=3",
        ),
    ],
)
def test_validation_errors(overrides: list[str], message: str, hint: str) -> None:
    with pytest.raises(AllocationError) as info:
        validate(compose_config(*overrides))
    assert message in info.value.reason
    assert hint in info.value.hint


@pytest.mark.parametrize("experiment", ["moe_megatron", "ppo_separate_critic", "distillation"])
def test_experiments_validate(experiment: str) -> None:
    plan = validate(compose_config(f"+experiment={experiment}"))
    assert plan.used_gpus <= plan.available_gpus


def test_moe_experiment_uses_the_hybrid_form() -> None:
    plan = validate(compose_config("+experiment=moe_megatron"))
    actor = plan.engines["actor"].allocation
    assert actor is not None and str(actor) == "megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)"
    assert actor.world_size == 32


def test_validate_accepts_plain_mappings() -> None:
    plan = validate(
        {
            "rollout": {"backend": "sglang:d2t4"},
            "actor": {"backend": "fsdp:d8"},
            "critic": {"backend": ""},
            "cluster": {"n_nodes": 3, "n_gpus_per_node": 8},
        }
    )
    # Every engine is on its own GPUs unless told otherwise, as in AReaL; no ref section,
    # no ref.
    assert plan.used_gpus == 24
    assert plan.engines["critic"].colocated_with is None
    assert list(plan.engines) == ["actor", "critic", "rollout"]  # AReaL's creation order


# -- train.py as a user runs it ---------------------------------------------------------


@pytest.mark.e2e
def test_train_default_prints_and_writes_plan(train: Train, tmp_path: Path) -> None:
    result = train()
    assert result.returncode == 0, result.stderr
    assert "GPUs: 16 used of 16" in result.stdout
    # the per-node GPU map follows the plan table
    assert "node 0  A A A A A A A A\nnode 1  R R R R R R R R" in result.stdout
    assert result.stdout.index("GPUs: 16 used") < result.stdout.index("node 0  A")
    plan = json.loads((tmp_path / "run" / "allocation_plan.json").read_text())
    assert plan["gpus"] == {"available": 16, "used": 16, "idle": 0}
    assert plan["engines"]["rollout"]["gpus"] == 8 and plan["engines"]["actor"]["gpus"] == 8


@pytest.mark.e2e
def test_train_overrides(train: Train) -> None:
    result = train("rollout.backend=sglang:d4t2", "cluster.n_nodes=3")
    assert result.returncode == 0, result.stderr
    assert "GPUs: 16 used of 24" in result.stdout


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("actor.backend=d4t2", "no backend prefix"),
        (
            "allocation_mode=sglang:d4t2+fsdp:d8",
            "rollout.backend=sglang:d4t2 rollout.scheduling_strategy.type=separation actor.backend=fsdp:d8 actor.scheduling_strategy.type=separation",
        ),
        ("critic.backend=fsdp:d4", "critic runs 4 ranks (fsdp:d4) and actor 8 ranks"),
        ("actor.backend=fsdp:d4", "Slurm scheduler allocates only entire nodes"),
    ],
)
def test_train_rejects_without_traceback(
    train: Train, tmp_path: Path, override: str, expected: str
) -> None:
    result = train(override)
    assert result.returncode != 0
    assert expected in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "run" / "allocation_plan.json").exists()


@pytest.mark.e2e
def test_train_hybrid_override_quoted(train: Train) -> None:
    result = train(
        "actor.backend='megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)'",
        "rollout.backend=sglang:d4t8",
        "cluster.n_nodes=8",
    )
    assert result.returncode == 0, result.stderr
    assert "megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)" in result.stdout


@pytest.mark.e2e
def test_train_cfg_job_resolve_shows_allocations(train: Train) -> None:
    result = train("--cfg", "job", "--resolve")
    assert result.returncode == 0, result.stderr
    shown = OmegaConf.create(result.stdout)
    for engine in ("rollout", "actor", "critic", "ref"):
        assert shown[engine]["allocation"]["world_size"] == 8
    # The schema's teacher section, which the config does not set: no engine to expand.
    assert shown.teacher.rollout.allocation is None and shown.teacher.train.allocation is None


@pytest.mark.e2e
def test_train_multirun_runs_two_jobs(train: Train, sweep_dir: Path) -> None:
    result = train("-m", "actor.backend=fsdp:d8,fsdp:d4t2")
    assert result.returncode == 0, result.stderr
    plans = sorted(sweep_dir.glob("*/allocation_plan.json"))
    assert len(plans) == 2
    backends = {json.loads(p.read_text())["engines"]["actor"]["spec"] for p in plans}
    assert backends == {"fsdp:d8", "fsdp:d4t2"}


@pytest.mark.e2e
def test_train_multirun_bad_job_no_traceback(train: Train) -> None:
    result = train("-m", "actor.backend=d4t2", "hydra/launcher=basic")
    assert result.returncode != 0
    assert "no backend prefix" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
