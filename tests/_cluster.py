"""What the cluster tests (``tests/hydra/test_cluster_*.py``) share.

They run sweeps through real schedulers: a one-node Slurm (``scripts/slurm-test-cluster
up``) and Ray.  Without them the tests skip with a reason that says how to get them;
with ``AREAL_CONF_REQUIRE_CLUSTER=1`` (``.ci/run`` sets it) they fail instead, so a run
cannot pass by skipping them.

``task`` is the job of the small test application: it is importable by name (this
directory is on ``PYTHONPATH`` for the jobs), so submitit and Ray pickle it by reference
and the job processes import it from here.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

import pytest
from _helpers import SUBPROCESS_TIMEOUT, user_env
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

REQUIRE_ENV = "AREAL_CONF_REQUIRE_CLUSTER"
TESTS = Path(__file__).resolve().parent


def unavailable(what: str, problem: str, how: str) -> NoReturn:
    """Skip (or fail, under ``AREAL_CONF_REQUIRE_CLUSTER=1``) a test that needs ``what``."""
    message = f"{what} is not available here ({problem}); {how}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} [{REQUIRE_ENV}=1: these tests must run]", pytrace=False)
    pytest.skip(message)


def job_env() -> dict[str, str]:
    """The environment for applications and jobs: this checkout and this directory first
    on ``PYTHONPATH`` (Slurm and Ray jobs inherit it from the submitting process)."""
    env = user_env()
    root, *rest = env["PYTHONPATH"].split(os.pathsep)
    env["PYTHONPATH"] = os.pathsep.join([root, str(TESTS), *rest])
    return env


def run(
    args: list[str], *, timeout: float = SUBPROCESS_TIMEOUT, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)


# ------------------------------------------------------------------ the test application

APP_CONFIG = """\
defaults:
  - override hydra/launcher: areal
  - _self_
rollout:
  backend: "sglang:d2t4"
  scheduling_strategy: {type: separation, target: null}
actor:
  backend: "fsdp:d8"
  scheduling_strategy: {type: separation, target: null}
cluster:
  n_nodes: 2
  n_gpus_per_node: 8
allocation_mode: ""
# the job raises when actor.backend equals this value
fail_on: null
"""

APP_SOURCE = """\
from pathlib import Path

import hydra

from _cluster import task
from areal_conf.hydra.compat import VERSION_BASE

# absolute: a relative config_path would be read from _cluster.py's directory
CONF = str(Path(__file__).resolve().parent / "conf")
main = hydra.main(config_path=CONF, config_name="config", **VERSION_BASE)(task)

if __name__ == "__main__":
    main()
"""


def write_app(where: Path) -> Path:
    """A two-engine AReaL app whose job is ``task``; returns its directory."""
    app = where / "app"
    (app / "conf").mkdir(parents=True)
    (app / "conf" / "config.yaml").write_text(APP_CONFIG)
    (app / "app.py").write_text(APP_SOURCE)
    return app


def run_app(
    app: Path, args: list[str], timeout: float = SUBPROCESS_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    return run(
        [sys.executable, str(app / "app.py"), *args], cwd=app, env=job_env(), timeout=timeout
    )


def task(cfg: DictConfig) -> dict[str, Any]:
    """One job: say where it ran (process, host, Slurm job, Ray task), leave a file in the
    job's directory, return the same facts; raise when ``fail_on`` names this backend."""
    hc = HydraConfig.get()
    backend = str(cfg.actor.backend)
    print(f"TASK RAN {hc.job.num} {backend}", flush=True)
    if cfg.get("fail_on") == backend:
        raise RuntimeError(f"task failed on purpose on {backend}")
    facts = {
        "num": int(hc.job.num),
        "backend": backend,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "ray_task_id": _ray_task_id(),
    }
    Path(hc.runtime.output_dir, "task.json").write_text(json.dumps(facts))
    return facts


def _ray_task_id() -> str | None:
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    task_id = ray.get_runtime_context().get_task_id()
    return str(task_id) if task_id else None
