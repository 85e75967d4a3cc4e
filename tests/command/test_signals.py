"""Signals: the AReaL driver gets each one once, whoever sends it; an interrupted
validation is one line and exit 130 / 143, from every entry point.

The driver is the stand-in (``tests/standin_driver.py`` with ``STANDIN_WAIT``): it waits
for a signal, keeps listening 0.3 s for a second copy, and records every SIGINT and
SIGTERM it received in ``<pid>.signals``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _helpers import ROOT, SUBPROCESS_TIMEOUT, TRAIN, user_env

from areal_conf.hydra.app import Interrupted, interruptible, run_validated

FIXTURE = "tests/fixtures/areal2/examples/math/gsm8k_grpo_megatron.yaml"
DRIVER = [sys.executable, "tests/standin_driver.py", "--config", FIXTURE, "scheduler.type=local"]


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """``argv`` in a session (and so a process group) of its own, as a supervisor or a
    terminal starts a job: a signal to its group reaches nothing of pytest's."""
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for(where: Path, pattern: str, proc: subprocess.Popen[str]) -> list[Path]:
    end = time.monotonic() + SUBPROCESS_TIMEOUT
    while not (found := list(where.glob(pattern))):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"no {pattern} in {where}"
        time.sleep(0.05)
    return found


def _driver_signals(where: Path, proc: subprocess.Popen[str]) -> list[str]:
    (path,) = _wait_for(where, "*.signals", proc)
    names: list[str] = json.loads(path.read_text())
    return names


def _send(proc: subprocess.Popen[str], sig: signal.Signals, to_group: bool) -> None:
    if to_group:  # timeout -s INT, a supervisor, kill -INT -PGID; a terminal's Ctrl-C
        os.killpg(proc.pid, sig)
    else:  # kill PID, a scheduler
        proc.send_signal(sig)


def _driver_running(where: Path) -> int:
    (path,) = where.glob("*.ready")
    return int(path.stem)


@pytest.mark.e2e
@pytest.mark.parametrize("to_group", [True, False], ids=["to-the-group", "to-the-pid"])
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_run_gives_the_driver_each_signal_once(
    sig: signal.Signals, status: int, to_group: bool, tmp_path: Path
) -> None:
    env = user_env(STANDIN_OUT=str(tmp_path), STANDIN_WAIT="60")
    proc = _start([sys.executable, "-m", "areal_conf", "run", *DRIVER], env)
    _wait_for(tmp_path, "*.ready", proc)
    # the driver runs in a group of its own: a signal to areal-conf's group misses it
    assert os.getpgid(_driver_running(tmp_path)) != os.getpgid(proc.pid)
    _send(proc, sig, to_group)
    _, stderr = proc.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert proc.returncode == status, stderr  # the driver's status, as a shell reports it
    assert _driver_signals(tmp_path, proc) == [sig.name]  # exactly once
    assert "Traceback" not in stderr


@pytest.mark.e2e
def test_a_signal_sent_twice_in_a_row_reaches_the_driver_once(tmp_path: Path) -> None:
    """GNU timeout (``timeout -s INT``) sends its signal to its child, then to its whole
    group: areal-conf receives it twice from one sender, the driver once. The pause keeps
    the two from merging into one pending signal before areal-conf takes the first."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the sender of a signal is known on Linux (sigtimedwait)")
    env = user_env(STANDIN_OUT=str(tmp_path), STANDIN_WAIT="60")
    proc = _start([sys.executable, "-m", "areal_conf", "run", *DRIVER], env)
    _wait_for(tmp_path, "*.ready", proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert proc.returncode == 130, stderr
    assert _driver_signals(tmp_path, proc) == ["SIGINT"]


@pytest.mark.e2e
def test_a_killed_areal_conf_leaves_no_driver_behind(tmp_path: Path) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    env = user_env(STANDIN_OUT=str(tmp_path), STANDIN_WAIT="60")
    proc = _start([sys.executable, "-m", "areal_conf", "run", *DRIVER], env)
    _wait_for(tmp_path, "*.ready", proc)
    proc.kill()  # SIGKILL: areal-conf forwards nothing
    proc.communicate(timeout=SUBPROCESS_TIMEOUT)
    # the driver is told to stop (SIGTERM), as a scheduler would tell it, and stops
    assert _driver_signals(tmp_path, proc) == ["SIGTERM"]


def _validating(proc: subprocess.Popen[str]) -> None:
    """Read the sweep's output up to the areal launcher's progress line: it is then
    validating jobs (one per second at the start, then every few seconds)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if "validating jobs:" in line:
            return
    pytest.fail(f"no progress line; stderr: {proc.communicate()[1]}")


@pytest.mark.e2e
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_validation_is_one_line(
    sig: signal.Signals, status: int, tmp_path: Path
) -> None:
    """A multirun of 2000 jobs takes several seconds to validate; Ctrl-C (a SIGINT to the
    group, as a terminal sends it) or a SIGTERM meanwhile: one line, 128 + N, and not a
    job started (no job directory)."""
    sweep = tmp_path / "sweep"
    argv = [sys.executable, str(TRAIN), "-m", "cluster.n_nodes=range(2,2002)"]
    proc = _start([*argv, f"hydra.sweep.dir={sweep}"], user_env())
    _validating(proc)
    _send(proc, sig, to_group=True)
    _, stderr = proc.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert proc.returncode == status, stderr
    assert stderr == f"interrupted by {sig.name}: nothing was started\n"
    assert not (sweep / "0").exists()


# ------------------------------------------------------------------ in process


def _interrupted_by(sig: signal.Signals) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(5)  # the signal arrives first
    raise AssertionError("the signal was not delivered")


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_run_validated_turns_a_signal_into_one_line(
    sig: signal.Signals, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as exited:
        run_validated(_interrupted_by, sig, argv=[])
    assert exited.value.code == status
    captured = capsys.readouterr()
    assert captured.err == f"interrupted by {sig.name}: nothing was started\n"
    assert signal.getsignal(signal.SIGTERM) is before  # put back as it was


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_cli_verb_interrupted_while_it_works_is_one_line(
    sig: signal.Signals,
    status: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from areal_conf import cli
    from areal_conf.cli import explain

    monkeypatch.setattr(explain, "explain_specs", lambda *a, **k: _interrupted_by(sig))
    with pytest.raises(SystemExit) as exited:
        cli.main(["explain", "fsdp:d8"])
    assert exited.value.code == status
    assert capsys.readouterr().err == f"interrupted by {sig.name}: nothing was started\n"


@pytest.mark.parametrize(
    ("raised", "line", "status"),
    [
        (KeyboardInterrupt(), "interrupted by SIGINT: nothing was started", 130),
        (Interrupted(signal.SIGTERM), "interrupted by SIGTERM: nothing was started", 143),
        (
            Interrupted(signal.SIGHUP, "the jobs after it were not started"),
            "interrupted by SIGHUP: the jobs after it were not started",
            129,
        ),
    ],
    ids=["ctrl-c", "sigterm", "own-account"],
)
def test_interruptible_prints_one_line_and_exits_128_plus_n(
    raised: KeyboardInterrupt, line: str, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited, interruptible():
        raise raised
    assert exited.value.code == status
    assert capsys.readouterr().err == line + "\n"


def test_interruptible_leaves_an_ignored_sigterm_ignored() -> None:
    """Under ``nohup`` (SIGTERM ignored), areal-conf keeps ignoring it."""
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with interruptible():
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)


def test_an_interrupt_survives_pickling() -> None:
    """A job run in another process (joblib, submitit) hands its interrupt back pickled."""
    import pickle

    copy: Any = pickle.loads(pickle.dumps(Interrupted(signal.SIGTERM, "what")))
    assert (copy.signo, copy.what, copy.status) == (signal.SIGTERM, "what", 143)


# ------------------------------------------------------------------ Hydra's directory


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["hydra.run.dir=/dev/null/x"], "hydra.run.dir"),
        (["-m", "hydra.sweep.dir=/dev/null/x", "cluster.n_nodes=2,3"], "hydra.sweep.dir"),
    ],
    ids=["run", "multirun"],
)
def test_an_output_directory_that_cannot_be_made_is_one_message(args: list[str], key: str) -> None:
    out = subprocess.run(
        [sys.executable, str(TRAIN), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=user_env(),
        timeout=SUBPROCESS_TIMEOUT,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr == (
        "error: invalid config\n"
        "Hydra cannot create the output directory '/dev/null/x': Not a directory\n"
        f"hint: set {key} to a directory that can be created, e.g. "
        f"{key}={'outputs/run1' if key == 'hydra.run.dir' else 'multirun/sweep1'}\n"
    )
