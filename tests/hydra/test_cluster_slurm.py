"""Sweeps through ``hydra/launcher=areal`` + ``submitit_slurm`` on a real Slurm.

Start the one-node test cluster first (root, Debian packages slurm-wlm slurmdbd munge
mariadb-server): ``scripts/slurm-test-cluster up``.  Without it these tests skip, or fail
under ``AREAL_CONF_REQUIRE_CLUSTER=1`` (as in ``.ci/run``).

"Nothing was submitted" is read from Slurm itself: slurmctld's own submission counter
(``sdiag``), the job records of the accounting database (``sacct``) and the queue
(``squeue``), before and after.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _cluster import job_env, run, run_app, task, unavailable, write_app
from _helpers import ROOT
from hydra.test_utils.test_utils import TSweepRunner

# One group: with -n, they run one after another in one worker (one Slurm, one Ray).
pytestmark = [pytest.mark.cluster, pytest.mark.e2e, pytest.mark.xdist_group("cluster")]

HOW = "start a one-node test cluster with `sudo scripts/slurm-test-cluster up` (see its header)"
SUBMITIT_SLURM = "hydra/launcher@hydra.launcher.launcher=submitit_slurm"


def slurm_problem() -> str | None:
    """Why Slurm cannot run these tests here, or None."""
    for cmd in ("sbatch", "sacct", "sinfo", "squeue", "sdiag"):
        if shutil.which(cmd) is None:
            return f"{cmd} not found"
    sinfo = run(["sinfo", "-h", "-o", "%T"], timeout=30)
    states = sinfo.stdout.split()
    if sinfo.returncode != 0 or not {"idle", "mixed", "allocated"} & set(states):
        return f"no node up (sinfo: {(sinfo.stdout + sinfo.stderr).strip() or 'no nodes'})"
    sacct = run(["sacct", "-n", "-X", "-P", "-o", "JobID", "-S", "now"], timeout=30)
    if sacct.returncode != 0:
        return f"no job accounting, which submitit needs (sacct: {sacct.stderr.strip()})"
    return None


@pytest.fixture(scope="module")
def slurm() -> None:
    problem = slurm_problem()
    if problem is not None:
        unavailable("Slurm", problem, HOW)


@dataclass(frozen=True)
class SlurmState:
    """What Slurm itself knows about submissions."""

    submitted: int  # slurmctld's counter of accepted submissions (sdiag)
    accounted: frozenset[str]  # every job id in the accounting database (sacct)
    queued: frozenset[str]  # jobs pending or running (squeue)


def slurm_state() -> SlurmState:
    sdiag = run(["sdiag"], timeout=30)
    found = re.search(r"^\s*Jobs submitted:\s*(\d+)", sdiag.stdout, re.MULTILINE)
    assert found, sdiag.stdout + sdiag.stderr
    sacct = run(["sacct", "-a", "-X", "-n", "-P", "-o", "JobID", "-S", "2000-01-01"], timeout=30)
    assert sacct.returncode == 0, sacct.stderr
    squeue = run(["squeue", "-h", "-o", "%i"], timeout=30)
    assert squeue.returncode == 0, squeue.stderr
    return SlurmState(
        int(found.group(1)), frozenset(sacct.stdout.split()), frozenset(squeue.stdout.split())
    )


def accounting(
    job_ids: list[str], expected: str, timeout: float = 60
) -> dict[str, tuple[str, str]]:
    """``{job id: (state, exit code)}`` from sacct, once every job is in state ``expected``
    (slurmctld reports finished jobs to the accounting daemon asynchronously)."""
    end = time.monotonic() + timeout
    while True:
        out = run(
            ["sacct", "-X", "-n", "-P", "-o", "JobID,State,ExitCode", "-j", ",".join(job_ids)],
            timeout=30,
        )
        rows = {}
        for line in out.stdout.split():
            job, state, code = line.split("|")
            rows[job] = (state, code)
        if all(rows.get(j, ("",))[0] == expected for j in job_ids) or time.monotonic() > end:
            return rows
        time.sleep(0.5)


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return write_app(tmp_path)


@pytest.fixture
def jobs_on_pythonpath(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """sbatch passes the submitting environment on: the jobs import ``_cluster.task``."""
    monkeypatch.setenv("PYTHONPATH", job_env()["PYTHONPATH"])
    yield


def submitit_folders(sweep_dir: Path) -> list[str]:
    folder = sweep_dir / ".submitit"
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.exists() else []


# ------------------------------------------------------------------ the test cluster


@pytest.mark.usefixtures("slurm")
def test_accounting_reports_completed_and_failed_jobs(tmp_path: Path) -> None:
    """submitit learns that a job ended only from sacct: a job that exits non-zero without
    a result file must show up as FAILED, or a sweep waits for it forever."""
    sbatch = ["sbatch", "--parsable", f"--output={tmp_path}/%j.out", "--wrap"]
    ok = run([*sbatch, "true"], cwd=tmp_path, timeout=30)
    bad = run([*sbatch, "exit 3"], cwd=tmp_path, timeout=30)
    assert ok.returncode == 0 and bad.returncode == 0, ok.stderr + bad.stderr
    ok_id, bad_id = ok.stdout.strip(), bad.stdout.strip()
    assert accounting([ok_id], "COMPLETED")[ok_id] == ("COMPLETED", "0:0")
    assert accounting([bad_id], "FAILED")[bad_id] == ("FAILED", "3:0")


# ------------------------------------------------------------------ valid sweeps run


@pytest.mark.usefixtures("slurm", "jobs_on_pythonpath", "hydra_restore_singletons")
def test_valid_sweep_runs_every_job_through_sbatch(
    hydra_sweep_runner: TSweepRunner, app: Path, tmp_path: Path
) -> None:
    sweep_dir = tmp_path / "sweep"
    backends = ["fsdp:d8", "fsdp:d4t2", "fsdp:d2t4"]
    with hydra_sweep_runner(
        calling_file=str(app / "app.py"),
        calling_module=None,
        task_function=task,
        config_path="conf",
        config_name="config",
        overrides=[f"actor.backend={','.join(backends)}", SUBMITIT_SLURM],
        temp_dir=sweep_dir,
    ) as sweep:
        # (inside: the runner removes its sweep directory on exit)
        assert sweep.returns is not None
        returns = sweep.returns[0]
        # every job's return value came back from its Slurm job, in sweep order
        values = [r.return_value for r in returns]
        assert [(v["num"], v["backend"]) for v in values] == list(enumerate(backends))
        assert all(v["slurm_job_id"] for v in values)
        assert len({v["pid"] for v in values} | {os.getpid()}) == 4
        # submitit's job ids (array jobs, e.g. 12_0) are Hydra's job ids
        job_ids = [str(r.hydra_cfg.hydra.job.id) for r in returns]
        array = job_ids[0].split("_")[0]
        assert job_ids == [f"{array}_{i}" for i in range(3)]
        assert submitit_folders(sweep_dir) == [array, *job_ids]
        # one sbatch script for the sweep: a job array of three
        script = sweep_dir / ".submitit" / array / f"{array}_submission.sh"
        assert "#SBATCH --array=0-2" in script.read_text()
        for num, (job_id, backend) in enumerate(zip(job_ids, backends, strict=True)):
            # the job's own output, as Slurm captured it
            (log,) = (sweep_dir / ".submitit" / job_id).glob("*_log.out")
            assert f"TASK RAN {num} {backend}" in log.read_text()
            assert json.loads((sweep_dir / str(num) / "task.json").read_text()) == values[num]
    # Slurm's accounting: three completed jobs
    rows = accounting(job_ids, "COMPLETED")
    assert rows == {job_id: ("COMPLETED", "0:0") for job_id in job_ids}


# ------------------------------------------------------------------ nothing submitted


@pytest.mark.usefixtures("slurm")
def test_sweep_with_an_invalid_job_submits_nothing(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    before = slurm_state()
    out = run(
        [
            sys.executable,
            "train.py",
            "-m",
            "actor.backend=fsdp:d8,fsdp:d4,fsdp:d4t2",
            SUBMITIT_SLURM,
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=ROOT,
        env=job_env(),
    )
    assert out.returncode != 0
    assert "1 of 3 jobs failed validation; no job was launched." in out.stderr
    assert "#1 actor.backend=fsdp:d4" in out.stderr
    assert "Slurm scheduler allocates only entire nodes" in out.stderr
    assert "Traceback" not in out.stderr
    time.sleep(1)  # a submission would reach accounting within this
    assert slurm_state() == before
    assert submitit_folders(sweep_dir) == []


@pytest.mark.usefixtures("slurm")
def test_dry_run_submits_nothing(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    before = slurm_state()
    out = run(
        [
            sys.executable,
            "train.py",
            "-m",
            "actor.backend=fsdp:d8,fsdp:d4t2",
            SUBMITIT_SLURM,
            "hydra.launcher.dry_run=true",
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=ROOT,
        env=job_env(),
    )
    assert out.returncode == 0, out.stderr
    assert [line.split(" : ")[0] for line in out.stdout.splitlines() if line.startswith("#")] == [
        "#0 actor.backend=fsdp:d8",
        "#1 actor.backend=fsdp:d4t2",
    ]
    time.sleep(1)
    assert slurm_state() == before
    assert submitit_folders(sweep_dir) == []


@pytest.mark.usefixtures("slurm")
def test_without_validation_the_bad_job_fails_on_the_cluster(tmp_path: Path) -> None:
    """The contrast: the same bad value through submitit_slurm alone is submitted and runs
    on the node, and only then is its error reported."""
    sweep_dir = tmp_path / "sweep"
    before = slurm_state()
    out = run(
        [
            sys.executable,
            "train.py",
            "-m",
            "actor.backend=fsdp:d8,fsdp:d4",
            "hydra/launcher=submitit_slurm",
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=ROOT,
        env=job_env(),
    )
    # train.py's task raises the AllocationError on the node; submitit brings it back and
    # run_validated prints it as the one message, with train.py's exit status.
    assert out.returncode == 2
    assert "Slurm scheduler allocates only entire nodes" in out.stderr
    assert "Traceback" not in out.stderr
    after = slurm_state()
    assert after.submitted > before.submitted
    end = time.monotonic() + 60  # the accounting daemon records jobs asynchronously
    while len(after.accounted - before.accounted) < 2 and time.monotonic() < end:
        time.sleep(0.5)
        after = slurm_state()
    new = sorted(after.accounted - before.accounted)
    assert len(new) == 2, new
    rows = accounting(new, "COMPLETED")
    # Both jobs ran on the cluster (the bad one only to fail there): submitit's job script
    # catches the task's exception and returns it, so Slurm records both as completed.
    assert sorted(rows.values()) == [("COMPLETED", "0:0"), ("COMPLETED", "0:0")]


# ------------------------------------------------------------------ a job that raises


@pytest.mark.usefixtures("slurm")
def test_job_that_raises_is_reported_as_submitit_reports_it(app: Path, tmp_path: Path) -> None:
    """A task that raises on the node: the sweep fails with Hydra's report of the job's
    exception, exactly as with submitit_slurm alone."""

    def sweep(launcher: str, name: str) -> tuple[int, list[str]]:
        out = run_app(
            app,
            [
                "-m",
                "actor.backend=fsdp:d8,fsdp:d4t2",
                "fail_on=fsdp:d4t2",
                launcher,
                f"hydra.sweep.dir={tmp_path / name}",
            ],
        )
        # Hydra's report: which job, then the exception (the traceback between them
        # is the same code path in both runs)
        lines = [line for line in out.stderr.splitlines() if not line.startswith(" ")]
        return out.returncode, [lines[0], lines[-1]] if lines else []

    through_areal = sweep(SUBMITIT_SLURM, "areal")
    alone = sweep("hydra/launcher=submitit_slurm", "alone")
    assert through_areal == alone
    assert through_areal == (
        1,
        [
            "Error executing job with overrides: ['actor.backend=fsdp\\\\:d4t2', 'fail_on=fsdp\\\\:d4t2']",
            "RuntimeError: task failed on purpose on fsdp:d4t2",
        ],
    )


# ------------------------------------------------------------------ an AReaL command

FIXTURE = "tests/fixtures/areal2/examples/math/gsm8k_grpo_megatron.yaml"
DRIVER = [sys.executable, "tests/standin_driver.py", "--config", FIXTURE, "scheduler.type=local"]


def sweep_areal_command(values: str, tmp_path: Path) -> tuple[object, Path]:
    """``python -m areal_conf sweep`` of the stand-in driver over ``actor.backend``, each
    job an sbatch job; what the drivers received lands in ``tmp_path/runs``."""
    runs = tmp_path / "runs"
    env = {**job_env(), "STANDIN_OUT": str(runs)}
    out = run(
        [
            sys.executable,
            "-m",
            "areal_conf",
            "sweep",
            *DRIVER,
            f"actor.backend={values}",
            "hydra/launcher=submitit_slurm",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        cwd=ROOT,
        env=env,
    )
    return out, runs


@pytest.mark.usefixtures("slurm")
def test_sweep_of_an_areal_command_is_one_slurm_job_per_training_run(tmp_path: Path) -> None:
    backends = ["megatron:d4", "megatron:d2t2", "megatron:d2p2"]
    before = settled_state()
    out, runs = sweep_areal_command(",".join(backends), tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    received = sorted(
        (json.loads(p.read_text()) for p in runs.glob("*.json")), key=lambda r: r["started"]
    )
    # each training run got exactly its overrides, inside a Slurm job of its own
    assert sorted(r["overrides"][-1] for r in received) == sorted(
        f"actor.backend={b}" for b in backends
    )
    assert all(r["overrides"][:-1] == ["scheduler.type=local"] for r in received)
    job_ids = [r["slurm_job_id"] for r in received]
    assert all(job_ids) and len(set(job_ids)) == 3
    sweep_dir = tmp_path / "sweep"
    for num in range(3):
        record = json.loads((sweep_dir / str(num) / "areal_job.json").read_text())
        assert record["exit_status"] == 0
    # Slurm's accounting: the sweep is one job array of three tasks, each completed, and
    # slurmctld counted three submissions (one per task) and no other
    array = {job.split("_")[0] for job in job_ids}
    assert len(array) == 1
    assert accounting(job_ids, "COMPLETED") == {j: ("COMPLETED", "0:0") for j in job_ids}
    tasks = run(["sacct", "-X", "-n", "-P", "-o", "JobID", "-j", array.pop()], timeout=30)
    assert sorted(tasks.stdout.split()) == sorted(job_ids)
    assert slurm_state().submitted == before.submitted + 3


def settled_state(timeout: float = 60) -> SlurmState:
    """Slurm's state once the accounting of earlier tests' jobs has arrived (two reads a
    second apart agree): the accounting daemon records jobs asynchronously."""
    end = time.monotonic() + timeout
    state = slurm_state()
    while time.monotonic() < end:
        time.sleep(1)
        again = slurm_state()
        if again == state:
            return state
        state = again
    return state


@pytest.mark.usefixtures("slurm")
def test_refused_sweep_of_an_areal_command_submits_nothing(tmp_path: Path) -> None:
    before = settled_state()
    out, runs = sweep_areal_command("megatron:d4,megatron:d2t2,megatron:d2p2,megatron:d8", tmp_path)
    assert out.returncode == 2
    assert "#3 scheduler.type=local actor.backend=megatron:d8" in out.stderr
    assert "Traceback" not in out.stderr
    time.sleep(1)  # a submission would reach accounting within this
    assert slurm_state() == before
    assert not runs.exists()
