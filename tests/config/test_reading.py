"""Reading a config once: ``read_value`` gives what OmegaConf's own ``get`` gives, and
every key is one AReaL's config classes have.

``read_value`` follows ``${a.b}`` interpolations itself (OmegaConf parses each with its
grammar, most of a read's cost) and leaves every other kind to OmegaConf; either way the
value must be OmegaConf's, and an unresolvable one an AllocationError naming the key.
"""

from __future__ import annotations

from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from areal_conf import AllocationError, validate
from areal_conf.areal.versions import VERSIONS
from areal_conf.config.known_keys import UnknownKey
from areal_conf.config.nodes import read_value
from areal_conf.config.reading import read_config

CONFIG: dict[str, Any] = {
    "actor": {
        "backend": "fsdp:d8",
        "path": "Qwen/Qwen3-8B",
        "dtype": "bfloat16",
        "offload": False,
        "kl_ctl": 0.0,
        "optimizer": None,  # a key AReaL has (read_config refuses any other)
        "scheduling_spec": [{"gpu": 1, "cmd": "x"}],
    },
    "base": {"path": "${actor.path}"},
    "cases": {
        "plain": "${actor.backend}",
        "chained": "${base.path}",
        "a bool": "${actor.offload}",
        "a float": "${actor.kl_ctl}",
        "null": "${actor.optimizer}",
        "a section": "${actor}",
        "a list": "${actor.scheduling_spec}",
        "into a list": "${actor.scheduling_spec.0.gpu}",
        "in a string": "x-${actor.dtype}",
        "a resolver": "${oc.env:AREAL_CONF_TEST_READING,fallback}",
        "relative": "${..actor.dtype}",
        "not interpolated": 42,
    },
}


def config() -> DictConfig:
    cfg = OmegaConf.create(CONFIG)
    assert isinstance(cfg, DictConfig)
    return cfg


@pytest.mark.parametrize("key", list(CONFIG["cases"]))
def test_read_value_is_omegaconfs_get(key: str) -> None:
    cfg = config()
    cases = cfg.cases
    theirs: Any = cases.get(key)
    ours = read_value(cases, key, f"cases.{key}")
    if isinstance(theirs, DictConfig | type(OmegaConf.create([]))):
        assert OmegaConf.to_container(ours, resolve=True) == OmegaConf.to_container(
            theirs, resolve=True
        )
    else:
        assert ours == theirs and type(ours) is type(theirs)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("${actor.nowhere}", "Interpolation key 'actor.nowhere' not found"),
        (
            "${oc.env:AREAL_CONF_TEST_UNSET}",
            "Environment variable 'AREAL_CONF_TEST_UNSET' not found",
        ),
    ],
)
def test_a_value_that_does_not_resolve_names_its_key(value: str, reason: str) -> None:
    cfg = config()
    cfg.cases.bad = value
    with pytest.raises(AllocationError) as info:
        read_value(cfg.cases, "bad", "cases.bad")
    assert info.value.reason == f"cases.bad: {reason}"


def test_a_missing_value_reads_as_none_as_omegaconfs_get() -> None:
    cfg = config()
    cfg.cases.bad = "???"
    assert cfg.cases.get("bad") is None
    assert read_value(cfg.cases, "bad", "cases.bad") is None


def test_an_absent_key_is_the_default() -> None:
    assert read_value(config().actor, "nope", "actor.nope", "dflt") == "dflt"
    assert read_value({"a": 1}, "a", "a") == 1  # a plain mapping too


def test_text_of_a_whole_number_reads_as_the_number_as_areals_loader_converts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An int field written as text (``${oc.env:N}``, a quoted number) is that number in
    AReaL's merge (OmegaConf converts it for the dataclass's int field)."""
    monkeypatch.setenv("AREAL_CONF_TEST_GPUS", "4")
    cfg = OmegaConf.create(
        {
            "cluster": {"n_nodes": "2", "n_gpus_per_node": "${oc.env:AREAL_CONF_TEST_GPUS}"},
            "actor": {"backend": "fsdp:d4", "scheduling_spec": [{"gpu": "1"}]},
            "rollout": {"backend": "sglang:d4"},
        }
    )
    run = read_config(cfg, VERSIONS["2.0"])
    assert (run.cluster.n_nodes, run.cluster.n_gpus_per_node) == (2, 4)
    specs = run.engines["actor"].specs
    assert specs is not None and specs[0].gpu == 1


def test_read_config_reads_interpolated_engine_keys() -> None:
    cfg = config()
    cfg.ref = {"backend": "${actor.backend}", "scheduling_spec": "${actor.scheduling_spec}"}
    run = read_config(cfg, VERSIONS["2.0"])
    assert run.engines["ref"].backend == "fsdp:d8"
    assert run.engines["ref"].specs is not None and run.engines["ref"].specs[0].gpu == 1


# ------------------------------------------------------------ keys AReaL does not have
# AReaL's loader merges a config into its dataclasses strictly (areal/api/cli_args.py:3540
# at cbff54d6): a key no dataclass at its place has stops the run. read_config checks the
# keys first, against the table of those dataclasses (areal_conf/data/areal_keys_*.json).

AREAL_YAML: dict[str, Any] = {  # an AReaL YAML's shape: no model section, no areal_schema
    "experiment_name": "x",
    "max_turns": 3,  # a driver's own top-level key (AgentConfig's): not checked
    "econfig": {"anything": 1},  # a driver's own section: not checked
    "cluster": {"n_nodes": 1, "n_gpus_per_node": 8, "name_resolve": {"type": "nfs"}},
    "scheduler": {"type": "local", "reward_functioncall_config": {"any": {"key": 1}}},
    "rollout": {
        "backend": "sglang:d4",
        "agent": {"mode": "inline"},
        "scheduling_spec": [{"gpu": 1}],
    },
    "actor": {
        "backend": "fsdp:d4",
        "mb_spec": {"max_tokens_per_mb": 8192},
        "optimizer": {"lr": 1.0e-6},
        "scheduling_spec": [{"gpu": 1, "env_vars": {"ANY_NAME": "1"}}],
        "beta": 0.1,  # DPOEngineConfig's: valid where any experiment config has it
    },
    "ref": {"backend": "${actor.backend}"},
    "critic": None,
    "gconfig": {"n_samples": 4},
    "eval_gconfig": "${gconfig}",  # an interpolated section: its target is checked
    "sglang": {"mem_fraction_static": 0.8},
    "judge": {"backend": "sglang:d1", "max_concurrent_rollouts": 8},  # an extra engine
}


def areal_yaml(**changes: Any) -> DictConfig:
    """AREAL_YAML with ``changes`` (dotted keys) set."""
    cfg = OmegaConf.create(AREAL_YAML)
    for key, value in changes.items():
        OmegaConf.update(cfg, key.replace("__", "."), value, force_add=True)
    assert isinstance(cfg, DictConfig)
    return cfg


def test_an_areal_yaml_with_areal_keys_only_is_read() -> None:
    run = read_config(areal_yaml(), VERSIONS["2.0"])
    assert list(run.engines) == ["rollout", "actor", "ref", "judge"]


@pytest.mark.parametrize(
    ("changes", "reason", "hint"),
    [
        (  # the reported case: a misspelt backend, which ref.backend interpolates
            {"actor__bakend": "fsdp:d4"},
            "actor.bakend: no such key in AReaL's PPOActorConfig or DPOEngineConfig; "
            "AReaL's loader refuses the config",
            "did you mean actor.backend? rename it: ~actor.bakend actor.backend=fsdp:d4 (on the "
            "command line, else the same rename in the YAML)",
        ),
        (  # the reported case: SGLang's memory fraction, misspelt (AReaL has it)
            {"sglang__mem_fraction_statc": 0.5},
            "sglang.mem_fraction_statc: no such key in AReaL's SGLangConfig",
            "did you mean sglang.mem_fraction_static? rename it: ~sglang.mem_fraction_statc "
            "sglang.mem_fraction_static=0.5",
        ),
        (  # the right key is absent: ++ adds it
            {"vllm__gpu_memory_utilisation": 0.5},
            "vllm.gpu_memory_utilisation: no such key in AReaL's vLLMConfig",
            "rename it: ~vllm.gpu_memory_utilisation ++vllm.gpu_memory_utilization=0.5 (",
        ),
        (
            {"cluster__n_node": 3},
            "cluster.n_node: no such key in AReaL's ClusterSpecConfig",
            "~cluster.n_node cluster.n_nodes=3",
        ),
        (
            {"scheduler__typ": "slurm"},
            "scheduler.typ: no such key in AReaL's SchedulerConfig",
            "~scheduler.typ scheduler.type=slurm",
        ),
        (  # a misspelt section: its values move under the right one
            {"actor__mb_sepc": {"max_tokens_per_mb": 4096}},
            "actor.mb_sepc: no such key in AReaL's PPOActorConfig or DPOEngineConfig",
            "did you mean actor.mb_spec? rename it: ~actor.mb_sepc "
            "++actor.mb_spec.max_tokens_per_mb=4096 (",
        ),
        (  # a key of a subsection, one level up
            {"actor__lr": 1.0e-5},
            "actor.lr: no such key",
            "did you mean actor.optimizer.lr? rename it: ~actor.lr actor.optimizer.lr=1e-05 (",
        ),
        (  # ... which the config lacks: ++
            {"actor__weight_decay": 0.1},
            "actor.weight_decay: no such key",
            "~actor.weight_decay ++actor.optimizer.weight_decay=0.1",
        ),
        (  # subsections are checked: inside a list, the fix is the rename alone
            {"actor__scheduling_spec": [{"gpus": 1}]},
            "actor.scheduling_spec.0.gpus: no such key in AReaL's SchedulingSpec",
            "did you mean actor.scheduling_spec.0.gpu? rename it where it is written (the YAML, "
            "else the override that sets actor.scheduling_spec.0.gpus)",
        ),
        (
            {"rollout__agent__mod": "online"},
            "rollout.agent.mod: no such key in AReaL's AgentConfig",
            "did you mean rollout.agent.mode?",
        ),
        (
            {"gconfig__n_sample": 8},
            "gconfig.n_sample: no such key in AReaL's GenerationHyperparameters",
            "~gconfig.n_sample gconfig.n_samples=8",
        ),
        (  # an extra engine takes the keys of AReaL's engine classes
            {"judge__max_concurent_rollouts": 4},
            "judge.max_concurent_rollouts: no such key in AReaL's",
            "did you mean judge.max_concurrent_rollouts?",
        ),
        (
            {"teacher": {"rollout": {"backend": "sglang:d1", "bakend": "sglang:d1"}}},
            "teacher.rollout.bakend: no such key in AReaL's InferenceEngineConfig",
            "did you mean teacher.rollout.backend?",
        ),
        (  # no key is close: remove it
            {"actor__colour": "red"},
            "actor.colour: no such key in AReaL's PPOActorConfig or DPOEngineConfig",
            "remove it: ~actor.colour, or write a key AReaL's PPOActorConfig or DPOEngineConfig "
            "has",
        ),
        (  # ... in a small section, its keys are listed
            {"scheduler__colour": "red"},
            "scheduler.colour: no such key in AReaL's SchedulerConfig",
            "or write one of its keys: type, endpoint, deploy_mode, functioncall_service_domain, "
            "reward_functioncall_config, reward_model_path, reward_model_service_url",
        ),
        (  # areal-conf's own keys are for areal-conf's own configs
            {"cluster__gpu_memory_gb": 80},
            "cluster.gpu_memory_gb: no such key in AReaL's ClusterSpecConfig; AReaL's loader "
            "refuses the config (it is a key of areal-conf's own configs)",
            "remove it: ~cluster.gpu_memory_gb (AREAL_CONF_GPU_MEMORY_GB=80 gives areal-conf a "
            "GPU's memory instead",
        ),
        (
            {"actor__allocation": "fsdp:d4"},
            "actor.allocation: no such key in AReaL's PPOActorConfig or DPOEngineConfig",
            "areal-conf derives an engine's allocation from its backend",
        ),
        (  # keys AReaL refuses with a message of its own (cli_args.py:3499-3531)
            {"actor__behave_imp_weight_cap": 5.0},
            "actor.behave_imp_weight_cap: AReaL removed this key; AReaL's loader refuses the "
            "config",
            "remove it: ~actor.behave_imp_weight_cap (AReaL says: Config keys "
            "'behave_imp_weight_cap' and 'behave_imp_weight_mode' have been removed. Use "
            "'rejection_sampling' sub-config instead. Migration mapping: "
            "behave_imp_weight_mode='disabled' -> rejection_sampling: null / ",
        ),
        (
            {"model": {"num_layer": 32}},
            "model.num_layer: no such key in areal-conf's model section",
            "did you mean model.num_layers? rename it: ~model.num_layer ++model.num_layers=32 (",
        ),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else None,
)
def test_a_key_areal_does_not_have_is_one_error(
    changes: dict[str, Any], reason: str, hint: str
) -> None:
    with pytest.raises(UnknownKey) as info:
        read_config(areal_yaml(**changes), VERSIONS["2.0"])
    assert info.value.reason.startswith(reason), info.value.reason
    assert hint in info.value.hint, info.value.hint
    assert info.value.key == reason.split(":")[0]


@pytest.mark.parametrize(
    "changes",
    [
        {"model": {"num_layers": 32}, "cluster__gpu_memory_gb": 80},  # areal-conf's own config
        {"model": {}, "actor__allocation": "${areal.allocation:}"},
        {"actor__gae_lambda_kwargs": {"anything": 1}},  # a dict field takes any key
        {"valid_dataset": {"path": "x", "type": "rl", "dataset_kwargs": {"any": 1}}},
    ],
)
def test_keys_areal_or_areal_conf_accepts_are_read(changes: dict[str, Any]) -> None:
    from areal_conf.config.known_keys import check_keys

    wrong_value, _ = check_keys(areal_yaml(**changes), "2.0")
    assert wrong_value is None


def test_the_key_is_reported_before_what_it_breaks() -> None:
    """The reported case: actor.bakend leaves ref.backend's ${actor.backend} unresolvable,
    and cluster.n_nodes: 0 would be the next error; the misspelt key is the message."""
    cfg = areal_yaml(actor__bakend="fsdp:d4", cluster__n_nodes=0)
    del cfg.actor["backend"]
    with pytest.raises(AllocationError) as info:
        validate(cfg)
    assert info.value.reason.startswith("actor.bakend: no such key")
    assert "++actor.backend=fsdp:d4" in info.value.hint  # the config lacks actor.backend


@pytest.mark.parametrize(
    ("version", "changes", "reason"),
    [
        # the other version's teacher layout is the teacher rules' to translate
        ("2.0", {"teacher": {"backend": "fsdp:d1", "path": "x"}}, "teacher.backend: AReaL 2.0"),
        ("1.0", {"teacher": {"engine_type": "rollout"}}, "teacher.engine_type: AReaL 1.0 has"),
        # a key AReaL 2.0 added is no key of AReaL 1.0 (4aef98d8)
        ("1.0", {"actor__optimizer_dtype": "float32"}, "actor.optimizer_dtype: no such key"),
    ],
)
def test_each_version_has_its_own_keys(version: str, changes: dict[str, Any], reason: str) -> None:
    with pytest.raises(AllocationError) as info:
        validate(areal_yaml(**changes), areal_version=version)
    assert info.value.reason.startswith(reason), info.value.reason


# -- what AReaL offloads between the phases of a step ------------------------------------

_SHARED = {"type": "colocation", "target": "actor"}

OFFLOADS = [
    # (the config's keys, AReaL's reasons and the engines each offloads, who leaves)
    ({}, (), set()),
    ({"enable_offload": True}, (), set()),  # it lets the flags work; alone it moves nothing
    (
        {"rollout": {"scheduling_strategy": _SHARED}},
        (("colocation", ("rollout", "actor")),),
        {"actor", "rollout"},
    ),
    (
        {"actor": {"scheduling_strategy": {"type": "colocation", "target": "rollout"}}},
        (("colocation", ("rollout", "actor")),),
        {"actor", "rollout"},
    ),
    (
        {"actor": {"offload": True}, "critic": {"offload": True}, "ref": {"offload": True}},
        (("actor.offload", ("actor",)), ("critic.offload", ("critic",)), ("ref.offload", ("ref",))),
        {"actor", "critic", "ref"},
    ),
    ({"teacher": {"offload": True}}, (("teacher.offload", ("teacher",)),), {"teacher"}),
    # v1 AWEX clears the actor's and the rollout's flags and switches them by hand.
    (
        {"actor": {"offload": True, "weight_update_mode": "awex", "_version": "v1"}},
        (),
        {"actor", "rollout"},
    ),
]


@pytest.mark.parametrize(("keys", "flags", "leave"), OFFLOADS)
def test_offload_flags_are_ppo_trainers(
    keys: dict[str, Any], flags: tuple[tuple[str, tuple[str, ...]], ...], leave: set[str]
) -> None:
    """``_should_offload_*`` as ``areal/trainer/rl_trainer.py:155-171`` sets them."""
    cfg: dict[str, Any] = {
        "actor": {"backend": "fsdp:d8"},
        "rollout": {"backend": "sglang:d8"},
        "critic": {"backend": "fsdp:d8"},
        "ref": {"backend": "fsdp:d8"},
        "teacher": {"engine_type": "rollout", "rollout": {"backend": "sglang:d8"}},
    }
    for key, value in keys.items():
        cfg[key] = {**cfg[key], **value} if isinstance(value, dict) else value
    run = read_config(OmegaConf.create(cfg), VERSIONS["2.0"])
    assert run.offload_flags() == flags
    assert {n for n in ("actor", "rollout", "critic", "ref", "teacher") if run.leaves_gpus(n)} == (
        leave
    )
