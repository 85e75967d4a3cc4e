"""Files areal-conf writes are replaced in one step: a kill at any moment leaves either
the old file or the new one, never a half-written one."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from _helpers import ROOT, SUBPROCESS_TIMEOUT, TRAIN, user_env
from omegaconf import OmegaConf

from areal_conf.files import TEMP_SUFFIX, write_atomic


def test_a_write_replaces_the_file_with_the_new_text(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    target.write_text("old\n")
    write_atomic(target, "new\n")
    assert target.read_text() == "new\n"
    assert os.listdir(tmp_path) == ["plan.json"]  # no temporary file left


def test_modes_are_those_of_a_plain_write_unless_given(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "a.json", "{}\n")
        write_atomic(tmp_path / "command.sh", "#!/bin/sh\n", mode=0o755)
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "command.sh").stat().st_mode) == 0o755


def test_a_write_interrupted_before_the_rename_leaves_the_old_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "areal_job.json"
    target.write_text('{"exit_status": null}\n')

    def interrupted(src: object, dst: object) -> None:
        raise KeyboardInterrupt  # Ctrl-C between the temporary file and the rename

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, '{"exit_status": 0}\n')
    assert target.read_text() == '{"exit_status": null}\n'
    assert os.listdir(tmp_path) == ["areal_job.json"]  # the temporary file is removed


_KILLED_BEFORE_RENAME = """
import os, sys, time
from areal_conf.files import write_atomic
def rename_never(src, dst):
    open(sys.argv[2], "w").close()  # the new text is in the temporary file: kill me now
    time.sleep(60)
os.replace = rename_never
write_atomic(sys.argv[1], '{"new": true}\\n')
"""


@pytest.mark.e2e
def test_a_process_killed_before_the_rename_leaves_the_old_file(tmp_path: Path) -> None:
    target, ready = tmp_path / "allocation_plan.json", tmp_path / "ready"
    target.write_text('{"old": true}\n')
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_BEFORE_RENAME, str(target), str(ready)],
        cwd=ROOT,
        env=user_env(),
    )
    end = time.monotonic() + SUBPROCESS_TIMEOUT
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < end
        time.sleep(0.02)
    proc.kill()
    proc.wait(timeout=SUBPROCESS_TIMEOUT)
    assert json.loads(target.read_text()) == {"old": True}
    (temp,) = [p for p in tmp_path.iterdir() if p.name.endswith(TEMP_SUFFIX)]
    assert temp.name.startswith(".allocation_plan.json.")  # hidden, matches no *.json
    assert json.loads(temp.read_text()) == {"new": True}


def test_the_sweep_record_is_written_in_one_step_then_omegaconf_is_itself_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The areal launcher has Hydra's sweeper save ``multirun.yaml`` through
    ``write_atomic``, the same text, once; other saves are OmegaConf's own."""
    from hydra_plugins.areal_conf_plugin import _handover

    own = OmegaConf.__dict__["save"]
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}, "seed": 1})
    record, other = tmp_path / "multirun.yaml", tmp_path / "other.yaml"
    record.write_text("old: record\n")
    renamed: list[str] = []
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        renamed.append(os.path.basename(dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    _handover.write_sweep_record_atomically(config)
    OmegaConf.save(config, other)  # not the record: OmegaConf's own write
    OmegaConf.save(config, record)  # as BasicSweeper.sweep saves it
    assert OmegaConf.__dict__["save"] is own
    OmegaConf.save(config, record)  # the sweep's record is written once
    assert renamed == ["multirun.yaml"]
    assert yaml.safe_load(record.read_text()) == OmegaConf.to_container(config)
    assert other.read_text() == record.read_text()


# ------------------------------------------------------------------ the kill test

FIXTURE = "tests/fixtures/areal2/examples/math/gsm8k_grpo_megatron.yaml"
SWEEPS = {
    # train.py's multirun: a plan per job and the sweep's multirun.yaml
    "train": [sys.executable, str(TRAIN), "-m"],
    # the sweep verb: a plan, a command.sh and an areal_job.json per job, multirun.yaml
    "sweep": [
        sys.executable, "-m", "areal_conf", "sweep",
        sys.executable, "tests/standin_driver.py", "--config", FIXTURE, "scheduler.type=local",
    ],
}  # fmt: skip
#: What each sweeps: many jobs for the kill test, two to run again.
MANY = {
    "train": ["cluster.n_nodes=range(2,60)"],
    "sweep": ["actor.backend=megatron:d4,megatron:d2t2", "seed=range(4)"],
}
TWO = {"train": ["cluster.n_nodes=2,3"], "sweep": ["actor.backend=megatron:d4,megatron:d2t2"]}
KILLS = 20


def _files_that_do_not_parse(sweep_dir: Path) -> list[str]:
    """Every file areal-conf wrote that is not whole. (``.hydra/*.yaml`` are Hydra's own
    records of each job, written by Hydra in place, so they are not areal-conf's to
    check.)"""
    bad = []
    for path in sweep_dir.rglob("*"):
        if ".hydra" in path.parts or not path.is_file():
            continue
        text = path.read_text()
        try:
            if path.suffix == ".json":
                json.loads(text)
            elif path.suffix == ".yaml":
                assert isinstance(yaml.safe_load(text), dict)
            elif path.name == "command.sh":
                assert text.endswith("\n") and "exec " in text
                subprocess.run(["sh", "-n", str(path)], check=True, timeout=SUBPROCESS_TIMEOUT)
        except (ValueError, AssertionError, yaml.YAMLError, subprocess.CalledProcessError):
            bad.append(f"{path.relative_to(sweep_dir)}: {text[-80:]!r}")
    return bad


@pytest.mark.e2e
def test_a_sweep_killed_at_random_moments_never_leaves_a_file_that_does_not_parse(
    tmp_path: Path,
) -> None:
    """SIGKILL (nothing to clean up with) at 20 moments drawn with a fixed seed, half
    of them in ``train.py -m``, half in the ``sweep`` verb; each sweep goes on in the
    same directory as the one killed before it, so files are replaced as well as made."""
    rng = random.Random(32)
    env = user_env(STANDIN_OUT=str(tmp_path / "runs"))
    checked = 0
    for kill in range(KILLS):
        name = "train" if kill % 2 == 0 else "sweep"
        sweep_dir = tmp_path / name
        proc = subprocess.Popen(
            [*SWEEPS[name], *MANY[name], f"hydra.sweep.dir={sweep_dir}"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            # once the sweep exists, a moment within the next 1.5 s: its writing
            end = time.monotonic() + SUBPROCESS_TIMEOUT
            while not sweep_dir.exists() and proc.poll() is None and time.monotonic() < end:
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 1.5))
        finally:
            with_signal = proc.poll() is None
            if with_signal:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=SUBPROCESS_TIMEOUT)
        assert _files_that_do_not_parse(sweep_dir) == [], f"kill #{kill} ({name})"
        checked += with_signal
    assert checked >= KILLS // 2  # most kills landed while the sweep was running
    # Then each sweep once more, to its end, in the directory its killed runs left: on a
    # slow machine no kill may have come after a job's files were written
    for name in ("train", "sweep"):
        sweep_dir = tmp_path / name
        subprocess.run(
            [*SWEEPS[name], *MANY[name], f"hydra.sweep.dir={sweep_dir}"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=SUBPROCESS_TIMEOUT,
            check=False,
        )
        assert _files_that_do_not_parse(sweep_dir) == []
    assert list((tmp_path / "train").rglob("allocation_plan.json"))
    assert list((tmp_path / "sweep").rglob("command.sh"))


def _written_files(sweep_dir: Path) -> list[str]:
    return sorted(
        str(p.relative_to(sweep_dir))
        for p in sweep_dir.rglob("*")
        if p.is_file() and ".hydra" not in p.parts and not p.name.endswith(".log")
    )


@pytest.mark.e2e
@pytest.mark.parametrize("name", list(SWEEPS))
def test_a_sweep_run_again_replaces_each_of_its_files_instead_of_rewriting_it(
    name: str, tmp_path: Path
) -> None:
    """A file written in place keeps its inode; one renamed over it leaves the old inode
    with no name. Holding the first run's files open keeps their inodes from being reused,
    so every file areal-conf wrote must end up unlinked: replaced, not rewritten."""
    sweep_dir = tmp_path / "sweep"
    argv = [*SWEEPS[name], *TWO[name]]

    def sweep() -> None:
        done = subprocess.run(
            [*argv, f"hydra.sweep.dir={sweep_dir}"],
            cwd=ROOT,
            env=user_env(STANDIN_OUT=str(tmp_path / "runs")),
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT,
        )
        assert done.returncode == 0, done.stderr

    sweep()
    expected = {"multirun.yaml", "0/allocation_plan.json", "1/allocation_plan.json"}
    if name == "sweep":
        expected |= {f"{n}/{f}" for n in (0, 1) for f in ("areal_job.json", "command.sh")}
    assert set(_written_files(sweep_dir)) == expected
    held = {f: os.open(sweep_dir / f, os.O_RDONLY) for f in expected}
    try:
        sweep()
        assert set(_written_files(sweep_dir)) == expected
        assert [f for f, fd in held.items() if os.fstat(fd).st_nlink != 0] == []
    finally:
        for fd in held.values():
            os.close(fd)
    if name == "sweep":
        assert stat.S_IMODE((sweep_dir / "0" / "command.sh").stat().st_mode) == 0o755
