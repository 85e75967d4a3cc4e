"""An AReaL config mounted under a key (``- areal_schema@areal``): the ``allocation``
resolvers read the engine's own section, and the launcher validates the section that
``hydra.launcher.config_root`` names, or says once that it validated nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _helpers import compose_config, run_python

MOUNTED_CONFIG = """\
defaults:
  - areal_schema@areal
  - _self_
areal:
  cluster: {n_nodes: 1, n_gpus_per_node: 8}
  rollout: {backend: "sglang:d2", allocation: "${areal.allocation:}"}
  actor: {backend: "fsdp:d2", kl_ctl: 0.0, allocation: "${areal.allocation:}"}
  critic: {backend: "", allocation: "${areal.allocation:}"}
  ref: {backend: "", allocation: "${areal.allocation:}"}
trainer_seed: 1
"""

APP = """\
import hydra
from hydra.core.hydra_config import HydraConfig

from areal_conf import run_validated
from areal_conf.hydra.compat import VERSION_BASE


@hydra.main(config_path="conf", config_name="config", **VERSION_BASE)
def main(cfg):
    print(f"TASK RAN {HydraConfig.get().job.num} {cfg.areal.actor.backend}", flush=True)


if __name__ == "__main__":
    run_validated(main)
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "config.yaml").write_text(MOUNTED_CONFIG)
    (tmp_path / "app.py").write_text(APP)
    return tmp_path


def test_resolvers_read_the_engines_own_section(app: Path) -> None:
    cfg = compose_config(config_dir=app / "conf")
    assert cfg.areal.actor.allocation.world_size == 2
    # an empty critic backend is the actor's, read beside the critic, not at the top
    assert cfg.areal.critic.allocation.spec == "fsdp:d2"
    # kl_ctl 0.0 under areal.actor: AReaL builds no ref
    assert cfg.areal.ref.allocation is None


def test_mounted_sections_are_typed_with_their_allocation(tmp_path: Path) -> None:
    # The same config with no allocation nodes written: the schema gives each section one.
    text = MOUNTED_CONFIG.replace(', allocation: "${areal.allocation:}"', "")
    assert "allocation" not in text
    (tmp_path / "config.yaml").write_text(text)
    cfg = compose_config("areal.teacher.rollout.backend=sglang:d1", config_dir=tmp_path)
    assert cfg.areal.actor.allocation.world_size == 2
    assert cfg.areal.critic.allocation.spec == "fsdp:d2"
    assert cfg.areal.ref.allocation is None
    assert cfg.areal.teacher.rollout.allocation.spec == "sglang:d1"


def sweep(app: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_python("app.py", "-m", "hydra/launcher=areal", *args, cwd=app)


@pytest.mark.e2e
def test_config_root_validates_the_mounted_section(app: Path) -> None:
    out = sweep(app, "hydra.launcher.config_root=areal", "areal.actor.backend=fsdp:d2,fsdp:d16")
    assert out.returncode == 2, out.stderr
    assert "areal launcher: 1 of 2 jobs failed validation; no job was launched." in out.stderr
    assert "#1 areal.actor.backend=fsdp:d16" in out.stderr
    assert "TASK RAN" not in out.stdout


@pytest.mark.e2e
def test_config_root_runs_a_valid_sweep(app: Path) -> None:
    out = sweep(app, "hydra.launcher.config_root=areal", "areal.actor.backend=fsdp:d2,fsdp:d1")
    assert out.returncode == 0, out.stderr
    assert "areal launcher: 2 jobs valid, launching with BasicLauncher" in out.stdout + out.stderr
    assert out.stdout.count("TASK RAN") == 2


@pytest.mark.e2e
def test_jobs_with_no_engines_are_named_once(app: Path) -> None:
    out = sweep(app, "areal.actor.backend=fsdp:d2,fsdp:d1")
    logs = out.stdout + out.stderr
    assert out.returncode == 0, out.stderr
    assert logs.count("engine sections (rollout, actor, ...) at the top level") == 1
    assert "set hydra.launcher.config_root to that key" in logs
    assert "0 jobs valid, 2 not validated" in logs


@pytest.mark.e2e
def test_a_config_root_that_is_not_there_is_one_message(app: Path) -> None:
    out = sweep(app, "hydra.launcher.config_root=nope", "trainer_seed=1,2")
    assert out.returncode == 2
    assert "hydra.launcher.config_root: 'nope' is not in the job's config" in out.stderr
    assert "Traceback" not in out.stderr
    assert "TASK RAN" not in out.stdout
