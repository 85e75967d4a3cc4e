"""Sweeps through ``hydra/launcher=areal`` + hydra-ray-launcher's ``ray`` launcher.

Two ways Ray is met in practice, both real:

* a local Ray started by the launcher itself (``+hydra.launcher.launcher.ray.init.num_cpus=2``);
* a running Ray cluster the sweep connects to (``hydra.launcher.launcher.ray.init.address``),
  started here with ``ray start --head``.  Its state API (tasks, driver jobs) is what says
  whether a sweep started anything: an invalid sweep must leave it unchanged.

Needs ``pip install -e '.[launchers]'``; without Ray these tests skip, or fail under
``AREAL_CONF_REQUIRE_CLUSTER=1`` (as in ``.ci/run``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _cluster import job_env, run, task, unavailable, write_app
from _helpers import ROOT, job_dirs
from hydra.test_utils.test_utils import TSweepRunner

# One group: with -n, they run one after another in one worker (one Slurm, one Ray).
pytestmark = [pytest.mark.cluster, pytest.mark.e2e, pytest.mark.xdist_group("cluster")]

RAY = "hydra/launcher@hydra.launcher.launcher=ray"


@pytest.fixture(scope="module")
def ray_installed() -> None:
    # not imported here: Ray reads its authentication settings once, at first use, and
    # the tests set them first
    for module in ("ray", "hydra_plugins.hydra_ray_launcher"):
        if importlib.util.find_spec(module) is None:
            unavailable(
                "Ray",
                f"{module} is not installed",
                "install the launchers extra: pip install -e '.[launchers]'",
            )


@pytest.fixture(scope="module")
def ray_dir(ray_installed: None) -> Iterator[Path]:
    """A short private directory: Ray's session sockets must fit in 107 characters, and
    the token file here makes Ray leave ~/.ray alone."""
    with tempfile.TemporaryDirectory(prefix="areal-ray-") as name:
        path = Path(name)
        (path / "token").write_text(secrets.token_hex(32))
        yield path


def ray_env(ray_dir: Path) -> dict[str, str]:
    env = job_env()
    env.update(
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN_PATH=str(ray_dir / "token"),
        RAY_USAGE_STATS_ENABLED="0",
    )
    return env


def sessions(temp_dir: Path) -> list[str]:
    """Ray's session directories: one per Ray instance started with this temp dir."""
    return sorted(p.name for p in temp_dir.glob("session_*") if not p.is_symlink())


# ------------------------------------------------------------------ local Ray from the launcher


def test_valid_sweep_runs_on_local_ray_workers(ray_dir: Path, tmp_path: Path) -> None:
    app = write_app(tmp_path)
    temp_dir = ray_dir / "local-ok"
    sweep_dir = tmp_path / "sweep"
    out = run(
        [
            sys.executable,
            str(app / "app.py"),
            "-m",
            "actor.backend=fsdp:d8,fsdp:d4t2,fsdp:d2t4",
            RAY,
            "+hydra.launcher.launcher.ray.init.num_cpus=2",
            f"+hydra.launcher.launcher.ray.init._temp_dir={temp_dir}",
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=app,
        env=ray_env(ray_dir),
    )
    assert out.returncode == 0, out.stderr
    assert "areal launcher: 3 jobs valid, launching with RayLauncher" in out.stdout
    assert len(sessions(temp_dir)) == 1  # the launcher started one Ray
    facts = [json.loads((sweep_dir / str(n) / "task.json").read_text()) for n in range(3)]
    assert [f["backend"] for f in facts] == ["fsdp:d8", "fsdp:d4t2", "fsdp:d2t4"]
    # each job ran as a Ray task in a worker process
    assert all(f["ray_task_id"] for f in facts)
    assert len({f["ray_task_id"] for f in facts}) == 3


def test_invalid_sweep_starts_no_local_ray(ray_dir: Path, tmp_path: Path) -> None:
    temp_dir = ray_dir / "local-bad"
    sweep_dir = tmp_path / "sweep"
    out = run(
        [
            sys.executable,
            "train.py",
            "-m",
            "actor.backend=fsdp:d8,d4t2",
            RAY,
            "+hydra.launcher.launcher.ray.init.num_cpus=2",
            f"+hydra.launcher.launcher.ray.init._temp_dir={temp_dir}",
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=ROOT,
        env=ray_env(ray_dir),
    )
    assert out.returncode != 0
    assert "#1 actor.backend=d4t2" in out.stderr
    assert "no backend prefix" in out.stderr
    assert "Traceback" not in out.stderr
    assert sessions(temp_dir) == []  # Ray was never started
    assert job_dirs(sweep_dir) == []


# ------------------------------------------------------------------ a running Ray cluster


@dataclass(frozen=True)
class RayHead:
    address: str  # GCS address for ray.init
    dashboard: str  # state API
    env: dict[str, str]

    def state(self) -> dict[str, Any]:
        """Ray's own record, through its state API (in a fresh process: Ray reads its
        authentication settings once per process): ``{"tasks": {id: [name, state]},
        "drivers": [job ids]}``."""
        out = run([sys.executable, "-c", STATE_QUERY, self.dashboard], env=self.env, timeout=60)
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-2000:])
        state: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
        return state

    def new_tasks(self, before: dict[str, Any], count: int) -> dict[str, list[str]]:
        """The tasks not in ``before``, once ``count`` of them have ended (task events
        reach the state API a moment after the task ends)."""
        end = time.monotonic() + 30
        while True:
            tasks = self.state()["tasks"]
            new = {tid: t for tid, t in tasks.items() if tid not in before}
            ended = [t for t in new.values() if t[1] in ("FINISHED", "FAILED")]
            if len(ended) >= count or time.monotonic() > end:
                return new
            time.sleep(1)


STATE_QUERY = """\
import json, sys
from ray.util.state import list_jobs, list_tasks
address = sys.argv[1]
tasks = {t.task_id: [t.name, t.state] for t in list_tasks(address=address, limit=10_000)}
drivers = sorted(j.job_id or j.submission_id for j in list_jobs(address=address))
print(json.dumps({"tasks": tasks, "drivers": drivers}))
"""


def free_ports(count: int) -> list[int]:
    """Distinct ports free right now (all sockets are held until every port is picked)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


@pytest.fixture(scope="module")
def ray_head(ray_dir: Path) -> Iterator[RayHead]:
    """``ray start --head --block`` in its own process group, stopped by that group."""
    temp_dir = ray_dir / "head"
    # Every port Ray would otherwise take from a fixed default is given explicitly: a port
    # the OS hands out can be one of those defaults (52365, the agent's, failed a CI run).
    port, dashboard_port, agent_port, client_port = free_ports(4)
    env = ray_env(ray_dir)
    log = (ray_dir / "head.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
            "--num-cpus=2", "--node-ip-address=127.0.0.1", f"--port={port}",
            "--include-dashboard=true", "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard_port}", f"--dashboard-agent-listen-port={agent_port}",
            f"--ray-client-server-port={client_port}", f"--temp-dir={temp_dir}",
            "--disable-usage-stats",
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    head = RayHead(f"127.0.0.1:{port}", f"http://127.0.0.1:{dashboard_port}", env)
    try:
        _wait_for_state_api(head, proc, ray_dir / "head.log")
        yield head
    finally:
        _stop_group(proc)
        log.close()


def _wait_for_state_api(head: RayHead, proc: subprocess.Popen[bytes], log: Path) -> None:
    end = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            pytest.fail(f"ray start exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            head.state()
            return
        except RuntimeError as err:
            if time.monotonic() > end:
                pytest.fail(f"Ray's state API did not answer: {err}\n{log.read_text()[-3000:]}")
            time.sleep(1)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to ``ray start --block``, which stops the processes it started; then
    SIGKILL to whatever is left of its process group."""
    proc.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=15)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture
def head_env(ray_head: RayHead, monkeypatch: pytest.MonkeyPatch) -> RayHead:
    for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_USAGE_STATS_ENABLED", "PYTHONPATH"):
        monkeypatch.setenv(key, ray_head.env[key])
    return ray_head


def connect(head: RayHead) -> list[str]:
    # hydra-ray-launcher sets a default object_store_memory, which Ray refuses when
    # connecting to a running cluster: null it.
    return [
        RAY,
        f"hydra.launcher.launcher.ray.init.address={head.address}",
        "+hydra.launcher.launcher.ray.init.object_store_memory=null",
    ]


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_valid_sweep_runs_as_ray_tasks(
    head_env: RayHead, hydra_sweep_runner: TSweepRunner, tmp_path: Path
) -> None:
    import ray

    app = write_app(tmp_path)
    backends = ["fsdp:d8", "fsdp:d4t2", "fsdp:d2t4"]
    before = head_env.state()["tasks"]
    try:
        with hydra_sweep_runner(
            calling_file=str(app / "app.py"),
            calling_module=None,
            task_function=task,
            config_path="conf",
            config_name="config",
            overrides=[f"actor.backend={','.join(backends)}", *connect(head_env)],
            temp_dir=tmp_path / "sweep",
        ) as sweep:
            assert sweep.returns is not None
            values = [r.return_value for r in sweep.returns[0]]
    finally:
        ray.shutdown()  # disconnect this process from the cluster
    # every job's return value came back from a Ray worker
    assert [(v["num"], v["backend"]) for v in values] == list(enumerate(backends))
    assert all(v["pid"] != os.getpid() for v in values)
    # Ray's own record: three new tasks, the launcher's job runner, all finished, and
    # they are the tasks the jobs ran in
    new = head_env.new_tasks(before, count=3)
    assert sorted(new.values()) == [["_run_job", "FINISHED"]] * 3
    assert {v["ray_task_id"] for v in values} == set(new)


def test_invalid_sweep_starts_no_ray_task(head_env: RayHead, tmp_path: Path) -> None:
    before = head_env.state()
    out = run(
        [
            sys.executable,
            "train.py",
            "-m",
            "actor.backend=fsdp:d8,fsdp:d4,fsdp:d4t2",
            *connect(head_env),
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        cwd=ROOT,
        env=head_env.env,
    )
    assert out.returncode != 0
    assert "1 of 3 jobs failed validation; no job was launched." in out.stderr
    assert "#1 actor.backend=fsdp:d4" in out.stderr
    assert "Traceback" not in out.stderr
    # Ray's state: no task, and no driver ever connected
    after = head_env.state()
    assert after["tasks"].keys() == before["tasks"].keys()
    assert after["drivers"] == before["drivers"]


# ------------------------------------------------------------------ an AReaL command


def test_sweep_of_an_areal_command_runs_each_job_on_ray(ray_dir: Path, tmp_path: Path) -> None:
    """``python -m areal_conf sweep ... hydra/launcher=ray``: each job's AReaL command runs
    in a Ray worker of a local Ray the launcher starts; the launcher's options are written
    as for the ray launcher alone."""
    temp_dir = ray_dir / "areal-command"
    runs, sweep_dir = tmp_path / "runs", tmp_path / "sweep"
    backends = ["megatron:d4", "megatron:d2t2", "megatron:d2p2"]
    env = {**ray_env(ray_dir), "STANDIN_OUT": str(runs)}
    out = run(
        [
            sys.executable,
            "-m",
            "areal_conf",
            "sweep",
            sys.executable,
            "tests/standin_driver.py",
            "--config",
            "tests/fixtures/areal2/examples/math/gsm8k_grpo_megatron.yaml",
            "scheduler.type=local",
            f"actor.backend={','.join(backends)}",
            "hydra/launcher=ray",
            "+hydra.launcher.ray.init.num_cpus=2",
            f"+hydra.launcher.ray.init._temp_dir={temp_dir}",
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=ROOT,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "areal launcher: 3 jobs valid, launching with RayLauncher" in out.stdout + out.stderr
    assert len(sessions(temp_dir)) == 1
    received = [json.loads(p.read_text()) for p in runs.glob("*.json")]
    assert sorted(r["overrides"] for r in received) == sorted(
        ["scheduler.type=local", f"actor.backend={b}"] for b in backends
    )
    assert [
        json.loads((sweep_dir / str(n) / "areal_job.json").read_text())["exit_status"]
        for n in range(3)
    ] == [0, 0, 0]
