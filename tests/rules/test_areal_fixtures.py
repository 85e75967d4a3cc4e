"""Every real AReaL 1.0 config of ``tests/fixtures/areal`` (copied from AReaL's examples), plain and with ``areal_schema``
first, under AReaL 1.0's rules (``AREAL_CONF_AREAL_VERSION=1.0``, as a user of AReaL 1.0
sets it): the 2.0 configs are ``test_areal2_fixtures.py``'s.

For each file the expected verdict, the engines AReaL builds (GPUs each), the engines
that are not built, the GPU owner of each colocated engine and the GPUs used are
written down here, derived by hand from the rules (not read back from the code):

- an engine is a role section that is present, or any top-level section with a backend;
- ref is not built when ``actor.kl_ctl`` is set and <= 0;
- every engine is on its own GPUs unless its scheduling_strategy says colocation;
- ``cluster.n_gpus_per_node: 0`` is a CPU run: nothing to place, 0 GPUs used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from _helpers import FIXTURES, Train
from hydra import compose, initialize_config_dir

import areal_conf.hydra.structured  # noqa: F401  (registers areal_schema and the resolvers)
from areal_conf import AllocationError
from areal_conf.areal.roles import ROLE_NAMES
from areal_conf.config.nodes import is_absent, is_unset_section
from areal_conf.hydra.compat import VERSION_BASE
from areal_conf.hydra.explain import explain_config
from areal_conf.validation import validate

FIXTURES = FIXTURES / "areal"

pytestmark = pytest.mark.usefixtures("areal_1_0")


class Valid(NamedTuple):
    gpus: dict[str, int]  # built engines -> GPUs (world size), in plan order
    not_built: dict[str, str]  # engine -> a part of the reason
    owners: dict[str, str]  # colocated engine -> the engine that owns its GPUs
    used: int
    available: int


class Rejected(NamedTuple):
    key: str  # the config key the message starts with
    reason: str  # a part of the first line
    hint: str  # a part of the hint


KL = "actor.kl_ctl is 0.0"

EXPECTED: dict[str, Valid | Rejected] = {
    # GRPO: no critic section, kl_ctl 0.0 (no ref); sglang:d4 + fsdp:d4 on 8 GPUs.
    "gsm8k_grpo": Valid({"rollout": 4, "actor": 4}, {"ref": KL}, {}, 8, 8),
    # AReaL's CPU template: processes only.
    "gsm8k_grpo_cpu": Valid({"rollout": 1, "actor": 1}, {"ref": KL}, {}, 0, 0),
    # A teacher fsdp:d1p1t4 (4 GPUs) on its own GPUs, 2 of 8 idle.
    "gsm8k_grpo_distill": Valid({"rollout": 1, "actor": 1, "teacher": 4}, {"ref": KL}, {}, 6, 8),
    # actor.behave_imp_weight_cap: AReaL 1.0 (4aef98d8) refuses it before its merge,
    # naming rejection_sampling (areal/api/cli_args.py:2915-2947 there).
    "gsm8k_grpo_megatron_lora_moe": Rejected(
        "actor.behave_imp_weight_cap", "AReaL removed this key", "rejection_sampling"
    ),
    # PPO: the critic (= actor.backend) colocated with the actor, ref not built.
    "gsm8k_ppo": Valid(
        {"rollout": 4, "actor": 4, "critic": 4}, {"ref": KL}, {"critic": "actor"}, 8, 8
    ),
    # The deprecated allocation_mode, rejected with its translation.
    "gsm8k_rlvr_scaffolding": Rejected(
        "allocation_mode",
        "allocation_mode is deprecated",
        "++rollout.backend=sglang:d1 ++rollout.scheduling_strategy.type=separation "
        "++actor.backend=fsdp:d1 ++actor.scheduling_strategy.type=separation",
    ),
    # SFT: training only.
    "gsm8k_sft": Valid({"actor": 8}, {}, {}, 8, 8),
    # DPO: no kl_ctl, so the ref (= actor.backend) is built, on the actor's GPUs.
    "hhrlhf_dpo": Valid({"actor": 8, "ref": 8}, {}, {"ref": "actor"}, 8, 8),
    # Inference only.
    "tau2_rollout": Valid({"rollout": 2}, {}, {}, 2, 2),
    # judge_engine (sglang:d1) is a ninth GPU on an 8-GPU cluster.
    "tongyi_deepresearch": Rejected(
        "cluster",
        "the engines need 9 GPUs (rollout 4 + actor 4 + judge_engine 1) but the cluster has 8",
        "cluster.n_nodes=2",
    ),
}


def test_every_fixture_has_an_expectation() -> None:
    assert sorted(p.stem for p in FIXTURES.glob("*.yaml")) == sorted(EXPECTED)


def with_schema(name: str, tmp_path: Path) -> Path:
    """A copy of the fixture with ``defaults: [areal_schema, _self_]`` first."""
    text = (FIXTURES / f"{name}.yaml").read_text()
    (tmp_path / f"{name}.yaml").write_text("defaults:\n  - areal_schema\n  - _self_\n\n" + text)
    return tmp_path


def compose_fixture(config_dir: Path, name: str, overrides: list[str] | None = None) -> Any:
    with initialize_config_dir(config_dir=str(config_dir), **VERSION_BASE):
        return compose(config_name=name, overrides=overrides or [])


def check(plan_or_error: Any, expected: Valid | Rejected) -> None:
    if isinstance(expected, Rejected):
        assert isinstance(plan_or_error, AllocationError), plan_or_error
        assert plan_or_error.reason.startswith(f"{expected.key}: ") or (
            expected.key == "allocation_mode" and "allocation_mode" in plan_or_error.reason
        )
        assert expected.reason in plan_or_error.reason
        assert expected.hint in plan_or_error.hint
        return
    assert not isinstance(plan_or_error, Exception), plan_or_error
    plan = plan_or_error
    assert plan.gpus_by_engine() == expected.gpus
    assert list(plan.gpus_by_engine()) == list(expected.gpus)
    assert set(plan.not_built()) == set(expected.not_built)
    for name, part in expected.not_built.items():
        assert part in plan.not_built()[name]
    owners = {n: e.owner for n, e in plan.engines.items() if e.enabled and e.colocated_with}
    assert owners == expected.owners
    assert (plan.used_gpus, plan.available_gpus) == (expected.used, expected.available)
    for name in expected.owners:
        assert plan.engines[name].slots == plan.engines[expected.owners[name]].slots


def outcome(cfg: Any) -> Any:
    try:
        return validate(cfg)
    except AllocationError as err:
        return err


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_plain(name: str) -> None:
    check(outcome(compose_fixture(FIXTURES, name)), EXPECTED[name])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_with_schema_first(name: str, tmp_path: Path) -> None:
    cfg = compose_fixture(with_schema(name, tmp_path), name)
    # The schema adds its own keys and lets AReaL's pass through.
    assert cfg.experiment_name
    assert "cluster" in cfg and "fileroot" in cfg.cluster
    plain = compose_fixture(FIXTURES, name)
    assert given_roles(cfg) == given_roles(plain)
    expected = EXPECTED[name]
    if isinstance(expected, Rejected):
        # The schema holds every engine's backend and scheduling_strategy: a fix sets
        # them as they are, without Hydra's "++" (add or set).
        expected = expected._replace(hint=expected.hint.replace("++", ""))
    check(outcome(cfg), expected)


def given_roles(cfg: Any) -> list[str]:
    """The role sections a config gives (the schema holds every role's, unset)."""
    return [k for k in ROLE_NAMES if k in cfg and not is_absent(cfg._get_node(k))]


def test_schema_does_not_add_engines(tmp_path: Path) -> None:
    cfg = compose_fixture(with_schema("gsm8k_sft", tmp_path), "gsm8k_sft")
    assert given_roles(cfg) == ["actor"]
    # The others are the schema's, typed but unset: no engine.
    assert is_unset_section(cfg._get_node("critic")) and cfg.critic.backend is None
    assert list(validate(cfg).engines) == ["actor"]
    cfg = compose_fixture(with_schema("tau2_rollout", tmp_path), "tau2_rollout")
    assert given_roles(cfg) == ["rollout"]


def test_schema_keeps_its_own_types(tmp_path: Path) -> None:
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException):
        compose_fixture(with_schema("gsm8k_grpo", tmp_path), "gsm8k_grpo", ["cluster.n_nodes=two"])
    text = (FIXTURES / "gsm8k_grpo.yaml").read_text().replace("n_nodes: 1", "n_nodes: one")
    (tmp_path / "bad.yaml").write_text("defaults:\n  - areal_schema\n  - _self_\n" + text)
    with pytest.raises(ConfigCompositionException):
        compose_fixture(tmp_path, "bad")


def test_extra_engine_is_planned_by_name() -> None:
    cfg = compose_fixture(FIXTURES, "tongyi_deepresearch", ["cluster.n_nodes=2"])
    plan = validate(cfg)
    assert plan.gpus_by_engine() == {"rollout": 4, "actor": 4, "judge_engine": 1}
    assert plan.engines["judge_engine"].kind == "inference"
    assert plan.used_gpus == 9
    text = explain_config(FIXTURES / "tongyi_deepresearch.yaml", ["cluster.n_nodes=2"])
    assert "judge_engine" in text and "ref: not built (actor.kl_ctl is 0.0" in text


@pytest.mark.e2e
@pytest.mark.parametrize("schema", [False, True], ids=["plain", "schema"])
@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTED.items() if isinstance(e, Rejected)))
def test_train_rejects_with_the_key_and_no_traceback(
    name: str, schema: bool, train: Train, tmp_path: Path
) -> None:
    expected = EXPECTED[name]
    assert isinstance(expected, Rejected)
    config_dir = with_schema(name, tmp_path) if schema else FIXTURES
    result = train("--config-dir", str(config_dir), "--config-name", name)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    assert expected.reason in result.stderr
    assert f"\n{expected.key}" in result.stderr or f"{expected.key}:" in result.stderr
    assert not (tmp_path / "run" / "allocation_plan.json").exists()


@pytest.mark.e2e
@pytest.mark.parametrize("schema", [False, True], ids=["plain", "schema"])
def test_train_writes_not_built_entries(schema: bool, train: Train, tmp_path: Path) -> None:
    config_dir = with_schema("gsm8k_grpo", tmp_path) if schema else FIXTURES
    result = train("--config-dir", str(config_dir), "--config-name", "gsm8k_grpo")
    assert result.returncode == 0, result.stderr
    assert "ref: not built (actor.kl_ctl is 0.0" in result.stdout
    plan = json.loads((tmp_path / "run" / "allocation_plan.json").read_text())
    assert list(plan["engines"]) == ["rollout", "actor", "ref"]
    assert plan["engines"]["ref"]["built"] is False
    assert "kl_ctl" in plan["engines"]["ref"]["reason"]
    assert plan["gpus"] == {"available": 8, "used": 8, "idle": 0}


@pytest.mark.e2e
def test_train_cpu_run(train: Train, tmp_path: Path) -> None:
    result = train("--config-dir", str(FIXTURES), "--config-name", "gsm8k_grpo_cpu")
    assert result.returncode == 0, result.stderr
    assert "CPU run (cluster.n_gpus_per_node: 0)" in result.stdout
    plan = json.loads((tmp_path / "run" / "allocation_plan.json").read_text())
    assert plan["cpu_run"] is True
    assert plan["engines"]["actor"]["slots"] == []
    # as the table shows ("-"): no engine of a CPU run takes a GPU
    assert {name: e["gpus"] for name, e in plan["engines"].items()} == {
        "actor": 0,
        "ref": 0,
        "rollout": 0,
    }
