"""The launcher's shortcut for value-only sweep jobs gives what Hydra's full compose gives.

A job whose overrides only set, add or delete values is composed from one composition of
the sweep's base config (``_compose.ValueOverrides``); every other job, and every job the
shortcut cannot apply, is composed by Hydra. Each row of the tables composes the same job
both ways, against the same master config (``train.py``'s own ``conf/``, with its
structured schema, its ``experiment`` group and ``hydra/launcher=areal``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _helpers import CONF
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from areal_conf.hydra.compat import VERSION_BASE
from hydra_plugins.areal_conf_plugin._compose import SweepLoader, ValueOverrides


@pytest.fixture(scope="module")
def hydra_loader() -> Iterator[Any]:
    with initialize_config_dir(config_dir=str(CONF), **VERSION_BASE):
        yield GlobalHydra.instance().config_loader()


@pytest.fixture(scope="module")
def master(hydra_loader: Any, tmp_path_factory: pytest.TempPathFactory) -> DictConfig:
    """The multirun's master config, as Hydra composes it before the sweep."""
    sweep_dir = tmp_path_factory.mktemp("sweep")
    cfg: DictConfig = hydra_loader.load_configuration(
        config_name="config",
        overrides=[
            f"hydra.sweep.dir={sweep_dir}",
            "hydra.launcher.dry_run=true",
            "hydra.job.config.override_dirname.exclude_keys=[seed]",
            "actor.backend=fsdp:d8,fsdp:d4t2",
        ],
        run_mode=RunMode.MULTIRUN,
    )
    # Every job's config copies the master's resolver cache, so a ${now:...} resolved in
    # the master has one value in all of them (Hydra's launchers resolve the sweep
    # directory first). The comparisons below resolve every key, hydra.run.dir's
    # timestamp (to the microsecond) included: resolve it in the master once, or each
    # config would read the clock itself.
    str(cfg.hydra.run.dir)
    return cfg


def full_compose(loader: Any, master: DictConfig, overrides: list[str]) -> DictConfig:
    cfg: DictConfig = loader.load_sweep_config(master, overrides)
    return cfg


def as_launched(cfg: DictConfig) -> DictConfig:
    """A copy with what a launcher sets before it runs a job (Hydra's own sweep
    directory interpolations read them)."""
    launched = cfg.copy()
    with open_dict(launched):
        launched.hydra.job.num = 0
        launched.hydra.job.id = "0"
        launched.hydra.runtime.output_dir = "/jobs/0"
    return launched


def assert_same_config(shortcut: DictConfig, full: DictConfig) -> None:
    """Equal as OmegaConf sees it, resolved and not, with the same flags and node types."""
    assert OmegaConf.to_container(as_launched(shortcut), resolve=True) == OmegaConf.to_container(
        as_launched(full), resolve=True
    )
    assert OmegaConf.to_container(shortcut) == OmegaConf.to_container(full)
    assert shortcut == full
    for node in (None, "hydra", "actor", "cluster"):
        a = shortcut if node is None else shortcut[node]
        b = full if node is None else full[node]
        assert OmegaConf.is_struct(a) == OmegaConf.is_struct(b)
        assert OmegaConf.is_readonly(a) == OmegaConf.is_readonly(b)
        assert OmegaConf.get_type(a) == OmegaConf.get_type(b)


#: Jobs that only set, add or delete values: composed from the base config.
VALUE_JOBS = {
    "set a string": ["actor.backend=fsdp:d8"],
    "an escaped colon, as the basic sweeper writes it": ["actor.backend=fsdp\\:d2t4"],
    "a quoted string": ["actor.backend='megatron:(attn:d4p2|ffn:d2p2e2)'"],
    "an int of the schema": ["cluster.n_nodes=4"],
    # keys AReaL's classes have: a job's allocation node reads the config, keys first
    "a float": ["+actor.kl_ctl=1.5e-6"],
    "a bool": ["+actor.offload=true"],
    "null": ["+actor.path=null"],
    "a list": ["actor.scheduling_spec=[{gpu: 2}]"],
    "a new dict": ["+extra={a: 1, b: [2, 3]}"],
    "an interpolation": ["+actor.trial_name=${cluster.n_nodes}-nodes"],
    "a resolver": ["actor.allocation=${areal.allocation:}"],
    "force-add an existing key": ["++cluster.n_gpus_per_node=4"],
    "force-add a new key": ["++seed=7"],
    "delete a key": ["~ref.allocation"],
    "delete a section": ["~critic"],
    "null a section": ["critic=null"],
    "set a section the schema holds unset": ["teacher.rollout.backend=sglang:d1"],
    "add to a section the schema holds unset": ["+teacher.rollout.backend=sglang:d1"],
    "delete a key by value": ["~cluster.n_nodes=2"],
    "several at once": ["actor.backend=fsdp:d2t4", "cluster.n_nodes=3", "+seed=1"],
    "no overrides": [],
}


@pytest.mark.parametrize("overrides", VALUE_JOBS.values(), ids=VALUE_JOBS.keys())
def test_value_jobs_take_the_shortcut_and_compose_as_hydra_does(
    hydra_loader: Any, master: DictConfig, overrides: list[str]
) -> None:
    composer = ValueOverrides(hydra_loader, master)
    shortcut = composer.compose(overrides)
    assert composer.shortcuts == 1, "composed by Hydra, not by the shortcut"
    assert_same_config(shortcut, full_compose(hydra_loader, master, overrides))
    assert OmegaConf.to_container(shortcut.hydra.overrides.task) == overrides
    # the job's own output directory name, as Hydra's job runtime gives it
    assert (
        shortcut.hydra.job.override_dirname
        == full_compose(hydra_loader, master, overrides).hydra.job.override_dirname
    )


def test_the_base_is_not_changed_by_a_job(hydra_loader: Any, master: DictConfig) -> None:
    composer = ValueOverrides(hydra_loader, master)
    first = composer.compose(["~critic", "cluster.n_nodes=9"])
    second = composer.compose([])
    assert "critic" not in first and "critic" in second
    assert second.cluster.n_nodes == 2
    assert_same_config(second, full_compose(hydra_loader, master, []))


#: Jobs the shortcut must leave to Hydra: a config group choice, an ``hydra.*`` value, a
#: package, anything Hydra rejects.
FULL_COMPOSE_JOBS = {
    "add a config group (+experiment=...)": ["+experiment=distillation"],
    "a Hydra config group": ["hydra/job_logging=disabled"],
    "a Hydra value": ["hydra.job.name=other"],
    "a Hydra value among app values": ["actor.backend=fsdp:d8", "hydra.verbose=true"],
    "a group with a package": ["+experiment@foo=distillation"],
}


@pytest.mark.parametrize("overrides", FULL_COMPOSE_JOBS.values(), ids=FULL_COMPOSE_JOBS.keys())
def test_other_jobs_are_composed_by_hydra(
    hydra_loader: Any, master: DictConfig, overrides: list[str]
) -> None:
    composer = ValueOverrides(hydra_loader, master)
    assert composer.value_only(overrides) is None
    cfg = composer.compose(overrides)
    assert composer.shortcuts == 0
    assert_same_config(cfg, full_compose(hydra_loader, master, overrides))


#: Jobs Hydra cannot compose: the error is Hydra's own, word for word.
BAD_JOBS = {
    "a key not in the config": ["model.nope=1"],
    "a key not in a closed section": ["actor.scheduling_strategy.nope=1"],
    "a value of the wrong type": ["cluster.n_nodes=many"],
    "deleting a key that is not there": ["~nothing"],
    "adding a key that is there": ["+cluster.n_nodes=3"],
}


@pytest.mark.parametrize("overrides", BAD_JOBS.values(), ids=BAD_JOBS.keys())
def test_jobs_hydra_rejects_get_hydras_error(
    hydra_loader: Any, master: DictConfig, overrides: list[str]
) -> None:
    with pytest.raises(Exception) as hydra_error:
        full_compose(hydra_loader, master, overrides)
    composer = ValueOverrides(hydra_loader, master)
    with pytest.raises(type(hydra_error.value)) as ours:
        composer.compose(overrides)
    assert str(ours.value) == str(hydra_error.value)
    assert composer.shortcuts == 0


def test_a_kept_config_is_handed_out_once_and_copied(hydra_loader: Any, master: DictConfig) -> None:
    loader = SweepLoader(hydra_loader, master)
    job = ["cluster.n_nodes=5"]
    cfg = loader.load_sweep_config(master, job)  # the sweeper's check of the batch
    cfg.cluster.n_nodes = 99  # what the caller does to it is not kept
    assert loader.kept_jobs == 1
    taken = loader.take(job)
    assert taken is not None and taken.cluster.n_nodes == 5
    assert_same_config(taken, full_compose(hydra_loader, master, job))
    assert loader.take(job) is None and loader.kept_jobs == 0


def test_other_masters_are_composed_by_hydra(hydra_loader: Any, master: DictConfig) -> None:
    loader = SweepLoader(hydra_loader, master)
    other = master.copy()
    cfg = loader.load_sweep_config(other, ["cluster.n_nodes=5"])
    assert cfg.cluster.n_nodes == 5 and loader.kept_jobs == 0
