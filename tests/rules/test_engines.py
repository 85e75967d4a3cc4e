"""The engine model: discovery, the role table, scheduling chains, replicas, CPU runs.

These are AReaL 1.0's rules (``AREAL_CONF_AREAL_VERSION=1.0``); the error table runs under
2.0's rules too where 2.0 says the same (2.0's own rules are in ``test_areal2_rules.py``)."""

from __future__ import annotations

import copy
import re
from typing import Any, NamedTuple

import pytest
from _helpers import Train
from omegaconf import OmegaConf

from areal_conf import AllocationError
from areal_conf.areal.roles import ROLE, ROLE_NAMES, display_order
from areal_conf.areal.versions import VERSIONS
from areal_conf.config.reading import engine_names
from areal_conf.plan.report import plan_table
from areal_conf.validation import validate

pytestmark = pytest.mark.usefixtures("areal_1_0")


def colo(target: str, fork: bool = True) -> dict[str, Any]:
    return {"type": "colocation", "target": target, "fork": fork}


def base(**changes: Any) -> dict[str, Any]:
    """rollout sglang:d8 and actor fsdp:d8 on 2 × 8 GPUs, plus ``changes`` (None drops)."""
    cfg: dict[str, Any] = {
        "rollout": {"backend": "sglang:d8"},
        "actor": {"backend": "fsdp:d8"},
        "cluster": {"n_nodes": 2, "n_gpus_per_node": 8},
    }
    for key, value in changes.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    return cfg


# ------------------------------------------------------------------- the role table


def test_creation_order_and_display_order() -> None:
    assert ROLE_NAMES == ("actor", "critic", "ref", "teacher", "rollout")
    assert display_order(["judge", *ROLE_NAMES]) == [
        "rollout",
        "actor",
        "critic",
        "ref",
        "teacher",
        "judge",
    ]
    assert {r.name: r.kind for r in ROLE.values()}["rollout"] == "inference"


def test_discovery_reads_sections_with_a_backend_only() -> None:
    cfg = base(
        judge_engine={"backend": "sglang:d1"},
        sglang={"model_path": "x", "attention_backend": "fa3"},  # no `backend` key
        tokenizer_path="${actor.path}",  # never read
        critic=None,
    )
    cfg["critic"] = None  # null: no engine
    assert engine_names(cfg, VERSIONS["1.0"]) == ["rollout", "actor", "judge_engine"]


@pytest.mark.parametrize(
    ("cfg", "gpus", "not_built"),
    [
        # training only and inference only are valid
        (base(rollout=None), {"actor": 8}, {}),
        (base(actor=None), {"rollout": 8}, {}),
        # critic/ref with an empty backend use the actor's
        (
            base(critic={"backend": ""}, cluster={"n_nodes": 3}),
            {"rollout": 8, "actor": 8, "critic": 8},
            {},
        ),
        # kl_ctl <= 0: no ref; kl_ctl > 0 or absent: a ref
        (
            base(actor={"backend": "fsdp:d8", "kl_ctl": 0}, ref={"backend": ""}),
            {"rollout": 8, "actor": 8},
            {"ref": "actor.kl_ctl is 0"},
        ),
        (
            base(actor={"backend": "fsdp:d4", "kl_ctl": 0.1}, ref={"backend": ""}),
            {"rollout": 8, "actor": 4, "ref": 4},
            {},
        ),
        # an empty teacher backend: disabled
        (base(teacher={"backend": ""}), {"rollout": 8, "actor": 8}, {"teacher": "disabled"}),
        # an extra engine's kind follows from its backend
        (
            base(rollout=None, reward_model={"backend": "fsdp:d8"}),
            {"actor": 8, "reward_model": 8},
            {},
        ),
    ],
)
def test_engines_built(
    cfg: dict[str, Any], gpus: dict[str, int], not_built: dict[str, str]
) -> None:
    plan = validate(cfg)
    assert plan.gpus_by_engine() == gpus
    assert set(plan.not_built()) == set(not_built)
    for name, part in not_built.items():
        assert part in plan.not_built()[name]


def test_a_not_built_ref_is_not_parsed() -> None:
    cfg = base(actor={"backend": "fsdp:d8", "kl_ctl": -1.0}, ref={"backend": "fsdp:d0"})
    assert validate(cfg).not_built() == {
        "ref": "actor.kl_ctl is -1.0: AReaL builds the ref model only when actor.kl_ctl > 0"
    }


def test_cpu_run_places_nothing() -> None:
    plan = validate(base(cluster={"n_nodes": 1, "n_gpus_per_node": 0}))
    assert plan.cpu_run and plan.used_gpus == 0 and plan.available_gpus == 0
    assert all(e.slots == () for e in plan.engines.values())
    assert plan.to_dict()["cpu_run"] is True
    assert "CPU run (cluster.n_gpus_per_node: 0): 16 engine processes" in plan_table(plan)


def test_chain_resolves_to_the_gpu_owner() -> None:
    cfg = base(critic={"backend": "", "scheduling_strategy": colo("actor")})
    cfg["ref"] = {"backend": "", "scheduling_strategy": colo("critic")}
    cfg["judge"] = {"backend": "vllm:d8", "scheduling_strategy": colo("rollout", fork=False)}
    plan = validate(cfg)
    assert plan.engines["ref"].owner == "actor"
    assert plan.engines["ref"].slots == plan.engines["actor"].slots
    assert plan.engines["judge"].slots == plan.engines["rollout"].slots
    assert plan.used_gpus == 16
    assert "colocated with critic (GPUs of actor)" in plan_table(plan)
    assert "colocated with rollout, no fork" in plan_table(plan)
    assert plan.to_dict()["engines"]["ref"]["gpu_owner"] == "actor"
    assert plan.to_dict()["engines"]["judge"]["fork"] is False


# ------------------------------------------------------------------------- errors

OVERRIDE = re.compile(r"([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+)=([^\s,()]+)")


def apply_hint(cfg: dict[str, Any], hint: str) -> dict[str, Any]:
    """The config with the first alternative of the hint (its key=value items) applied."""
    fixed = copy.deepcopy(cfg)
    first = hint.split(" or ")[0]
    found = OVERRIDE.findall(first)
    assert found, hint
    for key, value in found:
        *parents, leaf = key.split(".")
        node = fixed
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return fixed


class BadConfig(NamedTuple):
    """A config that validate rejects, and what the error says."""

    name: str  # the test id
    cfg: dict[str, Any]
    reason: str  # the key and the start of the reason
    hint: str  # a part of the hint
    hint_validates: bool  # applying the hint's overrides gives a valid config
    # AReaL 2.0's rules give the same message (False where one of its own rules comes
    # first: its PPOTrainer checks, its teacher layout)
    same_in_2_0: bool = True


ERRORS: list[BadConfig] = [
    BadConfig(
        name="no engine",
        cfg={"cluster": {"n_nodes": 1}, "sglang": {"model_path": "x"}},
        reason="the config has no engine",
        hint="+actor.backend=fsdp:d8",
        hint_validates=False,
    ),
    BadConfig(
        name="role before rollout",
        cfg=base(actor={"backend": "fsdp:d8", "scheduling_strategy": colo("rollout")}),
        reason="actor.scheduling_strategy.target: actor -> rollout: rollout is created after actor",
        hint="colocate rollout with actor instead",
        hint_validates=True,
        same_in_2_0=False,
    ),
    BadConfig(
        name="role onto an extra",
        cfg=base(
            judge={"backend": "fsdp:d8"},
            critic={"backend": "", "scheduling_strategy": colo("judge")},
            cluster={"n_nodes": 3},
        ),
        reason="critic.scheduling_strategy.target: critic -> judge: a role cannot be colocated with "
        "the extra engine judge",
        hint="judge.scheduling_strategy.target=critic",
        hint_validates=True,
    ),
    BadConfig(
        name="absent",
        cfg=base(critic={"backend": "", "scheduling_strategy": colo("ref")}),
        reason="critic.scheduling_strategy.target: critic -> ref: the config has no ref section",
        hint="critic.scheduling_strategy.target=actor",
        hint_validates=True,
    ),
    BadConfig(
        name="not built",
        cfg=base(
            actor={"backend": "fsdp:d8", "kl_ctl": 0.0},
            ref={"backend": ""},
            critic={"backend": "", "scheduling_strategy": colo("ref")},
        ),
        reason="critic.scheduling_strategy.target: critic -> ref: ref is not built (actor.kl_ctl is 0.0",
        hint="critic.scheduling_strategy.target=actor",
        hint_validates=True,
    ),
    BadConfig(
        name="absent, only a matching target is suggested",
        cfg=base(
            actor={"backend": "fsdp:d4"},
            critic={"backend": "fsdp:d8"},
            ref={"backend": "fsdp:d8", "scheduling_strategy": colo("teacher")},
            cluster={"n_nodes": 3},
        ),
        reason="ref.scheduling_strategy.target: ref -> teacher: the config has no teacher section",
        hint="ref.scheduling_strategy.target=critic",
        hint_validates=True,
    ),
    BadConfig(
        name="disabled",
        cfg=base(
            teacher={"backend": ""},
            rollout={"backend": "sglang:d8", "scheduling_strategy": colo("teacher")},
        ),
        reason="rollout.scheduling_strategy.target: rollout -> teacher: teacher is not built "
        "(disabled: teacher.backend is empty)",
        hint="rollout.scheduling_strategy.target=actor",
        hint_validates=True,
        same_in_2_0=False,
    ),
    BadConfig(
        name="self",
        cfg=base(critic={"backend": "", "scheduling_strategy": colo("critic")}),
        reason="critic.scheduling_strategy.target: critic -> critic: critic cannot be colocated with "
        "itself",
        hint="critic.scheduling_strategy.target=actor",
        hint_validates=True,
    ),
    BadConfig(
        name="no target",
        cfg=base(critic={"backend": "", "scheduling_strategy": {"type": "colocation"}}),
        reason="critic.scheduling_strategy.target: critic: critic is colocated but names no target",
        hint="critic.scheduling_strategy.target=actor",
        hint_validates=True,
    ),
    BadConfig(
        name="cycle",
        cfg=base(
            actor={"backend": "fsdp:d8", "scheduling_strategy": colo("critic")},
            critic={"backend": "", "scheduling_strategy": colo("actor")},
        ),
        reason="actor.scheduling_strategy.target: actor -> critic -> actor: the colocation targets "
        "form a cycle",
        hint="actor.scheduling_strategy.type=separation",
        hint_validates=True,
    ),
    BadConfig(
        name="cycle on a full cluster",
        cfg=base(
            critic={"backend": "", "scheduling_strategy": colo("ref")},
            ref={"backend": "", "scheduling_strategy": colo("critic")},
        ),
        reason="critic.scheduling_strategy.target: critic -> ref -> critic: the colocation targets "
        "form a cycle",
        hint="critic.scheduling_strategy.target=actor",
        hint_validates=True,
    ),
    BadConfig(
        name="chain through an engine that does not fork",
        cfg=base(
            critic={"backend": "", "scheduling_strategy": colo("actor", fork=False)},
            ref={"backend": "", "scheduling_strategy": colo("critic")},
        ),
        reason="ref.scheduling_strategy.target: ref -> critic: the chain passes through critic, which "
        "does not fork",
        hint="ref.scheduling_strategy.target=actor",
        hint_validates=True,
    ),
    BadConfig(
        name="replicas: inference onto training",
        cfg=base(rollout={"backend": "sglang:d4t2", "scheduling_strategy": colo("actor")}),
        reason="rollout.backend: rollout -> actor: rollout runs 4 server instances (sglang:d4t2) and "
        "actor 8 ranks (fsdp:d8)",
        hint="rollout.backend=sglang:d8",
        hint_validates=True,
        same_in_2_0=False,
    ),
    BadConfig(
        name="replicas: training onto inference with multi-GPU instances",
        cfg=base(
            rollout={"backend": "sglang:d2t4"},
            judge={"backend": "fsdp:d8", "scheduling_strategy": colo("rollout")},
        ),
        reason="judge.backend: judge -> rollout: judge runs 8 ranks (fsdp:d8) and rollout 2 server "
        "instances",
        hint="rollout.backend=sglang:d8 judge.backend=fsdp:d8",
        hint_validates=True,
    ),
    BadConfig(
        name="GPU count with equal replicas",
        cfg=base(rollout={"backend": "sglang:d8t2", "scheduling_strategy": colo("actor")}),
        reason="rollout.backend: rollout -> actor: rollout needs 16 GPUs (sglang:d8t2) and actor has 8",
        hint="rollout.backend=sglang:d8",
        hint_validates=True,
        same_in_2_0=False,
    ),
    BadConfig(
        name="replicas: training onto training",
        cfg=base(critic={"backend": "fsdp:d4", "scheduling_strategy": colo("actor")}),
        reason="critic.backend: critic -> actor: critic runs 4 ranks (fsdp:d4) and actor 8 ranks",
        hint="critic.backend=fsdp:d8",
        hint_validates=True,
    ),
    BadConfig(
        name="empty inherit without actor",
        cfg=base(actor=None, critic={"backend": ""}),
        reason="critic.backend: an empty critic backend means actor.backend, and there is no actor",
        hint="critic.backend=fsdp:d8",
        hint_validates=True,
    ),
    BadConfig(
        name="nothing built",
        cfg={"teacher": {"backend": ""}, "cluster": {"n_nodes": 1}},
        reason="teacher: the config builds no engine (teacher: disabled: teacher.backend is empty)",
        hint="teacher.backend=fsdp:d8",
        hint_validates=True,
        same_in_2_0=False,
    ),
    BadConfig(  # the example takes the GPUs the rollout leaves: 3 × 8 - 8
        name="actor without backend",
        cfg=base(actor={"backend": ""}, cluster={"n_nodes": 3, "n_gpus_per_node": 8}),
        reason="actor.backend: actor needs a backend and none is set",
        hint="e.g. actor.backend=fsdp:d16 (set one)",
        hint_validates=True,
    ),
    BadConfig(
        name="extra engine without backend",
        cfg=base(judge={"backend": ""}),
        reason="judge.backend: judge needs a backend and none is set",
        hint="remove the judge section",
        hint_validates=False,
    ),
    BadConfig(
        name="fork not a bool",
        cfg=base(critic={"backend": "", "scheduling_strategy": {"fork": "maybe"}}),
        reason="critic.scheduling_strategy.fork: must be true or false",
        hint="fork=true",
        hint_validates=False,
    ),
    BadConfig(
        name="kl_ctl not a number",
        cfg=base(actor={"backend": "fsdp:d8", "kl_ctl": "zero"}, ref={"backend": ""}),
        reason="actor.kl_ctl: must be a number",
        hint="actor.kl_ctl=0.0",
        hint_validates=False,
    ),
    BadConfig(
        name="negative GPUs per node",
        cfg=base(cluster={"n_nodes": 1, "n_gpus_per_node": -1}),
        reason="cluster.n_gpus_per_node: must be a whole number, 0 for a CPU run",
        hint="cluster.n_gpus_per_node=8",
        hint_validates=False,
    ),
    BadConfig(
        name="role section not a section",
        cfg=base(critic="fsdp:d8"),
        reason="critic: the critic engine must be a section",
        hint="critic.backend=fsdp:d8",
        hint_validates=False,
    ),
]


@pytest.mark.parametrize(
    ("row", "version"),
    [
        pytest.param(row, version, id=f"{row.name}-{version}")
        for row in ERRORS
        for version in ("1.0", "2.0")
        if version == "1.0" or row.same_in_2_0
    ],
)
def test_errors(row: BadConfig, version: str) -> None:
    with pytest.raises(AllocationError) as info:
        validate(row.cfg, areal_version=version)
    assert info.value.reason.startswith(row.reason), info.value.reason
    assert row.hint in info.value.hint, info.value.hint
    if row.hint_validates:
        validate(apply_hint(row.cfg, info.value.hint), areal_version=version)


# ---------------------------------------------------------- the issue's commands


COLOCATE_ROLLOUT = (
    "actor.backend=fsdp:d8",
    "rollout.scheduling_strategy.type=colocation",
    "rollout.scheduling_strategy.target=actor",
    "cluster.n_nodes=1",
)


@pytest.mark.e2e
def test_rollout_colocated_with_the_actor_plans_8_gpus(train: Train) -> None:
    result = train("rollout.backend=sglang:d8", *COLOCATE_ROLLOUT)
    assert result.returncode == 0, result.stderr
    assert "GPUs: 8 used of 8" in result.stdout
    assert "A = actor  fsdp:d8  8 GPUs on node 0, shared with rollout, critic, ref" in (
        result.stdout
    )


@pytest.mark.e2e
def test_rollout_with_fewer_instances_than_actor_ranks_is_rejected(train: Train) -> None:
    result = train("rollout.backend=sglang:d4t2", *COLOCATE_ROLLOUT)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "rollout runs 4 server instances (sglang:d4t2) and actor 8 ranks" in result.stderr
    hint = result.stderr.split("hint: ", 1)[1]
    assert hint.startswith("rollout.backend=sglang:d8 ")
    # the hint validates
    fixed = train("rollout.backend=sglang:d8", *COLOCATE_ROLLOUT)
    assert fixed.returncode == 0, fixed.stderr


@pytest.mark.e2e
def test_actor_colocated_with_rollout_is_rejected_with_the_swap(train: Train) -> None:
    result = train(
        "rollout.backend=sglang:d8",
        "actor.backend=fsdp:d8",
        "actor.scheduling_strategy.type=colocation",
        "actor.scheduling_strategy.target=rollout",
        "cluster.n_nodes=1",
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "actor -> rollout: rollout is created after actor" in result.stderr
    swap = (
        "rollout.scheduling_strategy.type=colocation rollout.scheduling_strategy.target=actor "
        "actor.scheduling_strategy.type=separation"
    )
    assert f"hint: colocate rollout with actor instead: {swap}" in result.stderr
    fixed = train(
        "rollout.backend=sglang:d8",
        "actor.backend=fsdp:d8",
        *swap.split(),
        "cluster.n_nodes=1",
    )
    assert fixed.returncode == 0, fixed.stderr


# ------------------------------------------------------- one model for every reader


def test_sweeps_know_extra_engines_of_the_config() -> None:
    from areal_conf.advise.sweeps import check_engine, engine_layouts

    cfg = base(judge_engine={"backend": "sglang:d4"})
    sweep = engine_layouts(cfg, "judge_engine")
    assert (sweep.backend, sweep.gpus, sweep.key) == ("sglang", 4, "judge_engine.backend")
    assert "sglang:d2t2" in sweep.layouts
    with pytest.raises(AllocationError) as info:
        check_engine("judge_engin", cfg)
    assert "did you mean judge_engine?" in info.value.hint


def test_launcher_recognises_configs_by_their_engines() -> None:
    from hydra_plugins.areal_conf_plugin._core import is_areal_config

    assert is_areal_config({"judge_engine": {"backend": "sglang:d1"}})
    assert is_areal_config({"allocation_mode": "sglang:d1+d1"})
    assert is_areal_config({"critic": None})
    assert not is_areal_config({"db": {"driver": "mysql"}, "sglang": {"model_path": "x"}})


@pytest.mark.parametrize(
    ("cfg", "reason"),
    [
        (None, "the config must be a mapping of sections, got NoneType"),
        ([{"actor": {"backend": "fsdp:d8"}}], "the config must be a mapping of sections, got list"),
        (
            {"actor": {"backend": "fsdp:d8"}, "cluster": [2, 8]},
            "cluster: must be a section, got list",
        ),
        (
            base(
                critic={
                    "backend": "",
                    "scheduling_strategy": {"type": "colocation", "target": ["actor"]},
                }
            ),
            "critic.scheduling_strategy.target: must be an engine name",
        ),
    ],
    ids=["none", "list", "cluster list", "target list"],
)
def test_a_config_of_the_wrong_shape_is_one_allocation_error(cfg: Any, reason: str) -> None:
    with pytest.raises(AllocationError) as info:
        validate(cfg)
    assert info.value.reason.startswith(reason), info.value.reason
    assert info.value.hint


@pytest.mark.parametrize("value", ["${areal.alloc:fsdp:d2}", "foo"])
def test_an_allocation_node_that_disagrees_with_its_backend_is_rejected(value: str) -> None:
    # `allocation` is a key of areal-conf's own configs (areal_schema), AReaL has none
    from areal_conf.hydra.structured import schema_node

    def own(actor: dict[str, Any]) -> Any:
        return OmegaConf.merge(schema_node(), OmegaConf.create(base(actor=actor)))

    with pytest.raises(AllocationError) as info:
        validate(own({"backend": "fsdp:d8", "allocation": value}))
    assert info.value.reason == "actor.allocation: is derived from actor.backend and cannot be set"
    assert "set actor.backend instead" in info.value.hint
    ok = own({"backend": "fsdp:d8", "allocation": "${areal.allocation:}"})
    assert validate(ok).engines["actor"].gpus == 8
