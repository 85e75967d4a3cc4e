"""Sweep an AReaL training command: ``python -m areal_conf sweep <AReaL command>``.

The command's overrides may give several values in Hydra's sweep grammar
(``actor.backend=megatron:d4,megatron:d2t2``, ``seed=range(3)``, ``choice()``, or the
layouts sweeper: ``hydra/sweeper=areal_layouts hydra.sweeper.engine=actor``). They become
one Hydra multirun over the ``--config`` YAML, composed as AReaL composes it, through the
validating launcher: every job is composed and validated before any starts, and one
invalid job stops the sweep with the list of failing jobs. Each job then runs the AReaL
command with that job's overrides (:class:`SweepJob`, the task function Hydra's launchers
run: in this process for the basic launcher, in the job's own process for joblib,
submitit and Ray) and leaves in its directory of Hydra's sweep directory the command it
ran (``command.sh``), its plan (``allocation_plan.json``), and its overrides and exit
status (``areal_job.json``).

Hydra's options on the same command line (``hydra/launcher=...``, ``hydra.launcher.*``,
``hydra.sweep.dir=...``) go to Hydra and never into AReaL's arguments. A launcher chosen
by its plain name (``hydra/launcher=submitit_slurm``) runs behind the validating launcher,
and its options (``hydra.launcher.partition=gpu``) are given to it there.

Hydra-facing: it drives Hydra's multirun and reads the validating launcher's names.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from areal_conf.command.argv import AReaLCommand, parse_areal_command
from areal_conf.command.check import (
    AREAL_CONFIG_SUFFIX,
    config_file,
    parse_overrides,
    with_driver_scope,
)
from areal_conf.command.process import run_forwarding
from areal_conf.errors import AllocationError
from areal_conf.files import write_atomic
from areal_conf.plan.plan import Plan
from areal_conf.settings import Settings, in_force

#: What each job leaves in its directory of the sweep.
JOB_FILE = "areal_job.json"
COMMAND_FILE = "command.sh"
PLAN_FILE = "allocation_plan.json"
#: Keys of the validating launcher's own config; any other ``hydra.launcher.<key>`` of a
#: launcher chosen by its plain name belongs to that (inner) launcher.
_AREAL_LAUNCHER_KEYS = ("launcher", "dry_run", "on_invalid", "config_root", "_target_")
#: Signals that stop the whole sweep when they reach a job's driver: the user meant the
#: sweep, not one run of it.
_STOPPING = (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", signal.SIGTERM))
#: What a sweep stopped so says it left undone (the exit status is 128 + the signal's).
_NOT_STARTED_AFTER = "the running job was stopped; the jobs after it were not started"


def is_hydra_option(override: str) -> bool:
    """True for an override of Hydra's own config (``hydra.sweep.dir=``,
    ``hydra/launcher=``, ``hydra/launcher@hydra.launcher.launcher=``)."""
    key = override.lstrip("+~").split("=", 1)[0]
    return key == "hydra" or key.startswith(("hydra.", "hydra/"))


@dataclass(frozen=True)
class SweepJob:
    """The task function of a sweep of an AReaL command: given one job's config (Hydra
    calls it with the job's ``HydraConfig`` set), it writes the job's plan and command
    into the job's directory, runs ``command`` with the job's overrides in place of the
    command's own (same working directory and environment, signals forwarded) and
    returns the driver's exit status. Picklable, so submitit and Ray run it on the node."""

    command: AReaLCommand
    settings: Settings

    def job_argv(self, overrides: Sequence[str]) -> list[str]:
        """The AReaL command of a job whose (task) overrides are ``overrides``."""
        from areal_conf.hydra.job_overrides import user_override

        return self.command.with_overrides([user_override(str(o)) for o in overrides])

    def __call__(self, cfg: Any) -> int:
        from hydra.core.hydra_config import HydraConfig

        from areal_conf.validation import validate

        hydra_cfg = HydraConfig.get()
        argv = self.job_argv(hydra_cfg.overrides.task)
        overrides = argv[len(argv) - len(hydra_cfg.overrides.task) :]
        out = Path(hydra_cfg.runtime.output_dir)
        plan = validate(cfg, settings=self.settings)
        write_atomic(out / PLAN_FILE, json.dumps(plan.to_dict(), indent=2) + "\n")
        write_atomic(
            out / COMMAND_FILE,
            f"#!/bin/sh\n# job #{hydra_cfg.job.num} of an areal-conf sweep\n"
            f"cd {shlex.quote(self.command.cwd)} && exec {shlex.join(argv)}\n",
            mode=0o755,
        )
        record: dict[str, Any] = {
            "num": hydra_cfg.job.num,
            "command": argv,
            "cwd": self.command.cwd,
            "overrides": overrides,
            "exit_status": None,
            "signals": [],
        }
        _write_json(out / JOB_FILE, record)
        print(f"areal-conf: job #{hydra_cfg.job.num}: {shlex.join(argv)}", flush=True)
        finished = run_forwarding(argv, cwd=self.command.cwd)
        record["exit_status"] = finished.status
        record["signals"] = [signal.Signals(s).name for s in finished.received]
        _write_json(out / JOB_FILE, record)
        stopping = [s for s in finished.received if s in _STOPPING]
        if stopping:
            from areal_conf.hydra.app import Interrupted

            raise Interrupted(stopping[0], _NOT_STARTED_AFTER)
        return finished.status

    def dry_run_detail(self, overrides: Sequence[str], plan: Plan) -> str:
        """What a dry run shows under a job's line: the command it would run, its plan."""
        from areal_conf.plan.report import plan_table

        table = "\n".join("    " + line for line in plan_table(plan).split("\n"))
        return f"    $ {shlex.join(self.job_argv(overrides))}\n{table}"


def sweep_command(
    argv: Sequence[str],
    *,
    settings: Settings | None = None,
    dry_run: bool = False,
    cwd: str | os.PathLike[str] | None = None,
) -> int:
    """Sweep the AReaL command ``argv``; the exit status: 0 when every job's driver
    exited 0 (and for a dry run, and for a sweeper that reports no job results), 1 when
    any did not. An invalid sweep (a job that does not validate, an argument that cannot
    be read) raises before any job starts."""
    from areal_conf.settings import default_settings

    command = parse_areal_command(argv, cwd)
    path = config_file(command)
    parse_overrides(command, command.overrides)
    chosen = with_driver_scope(command, settings) or default_settings()
    areal = [o for o in command.overrides if not is_hydra_option(o)]
    hydra = validated_launch([o for o in command.overrides if is_hydra_option(o)])
    with contextlib.ExitStack() as scratch:
        if dry_run:
            hydra.append(_LAUNCHER_DRY_RUN)
            if not any(o.lstrip("+").startswith("hydra.sweep.dir=") for o in hydra):
                # Hydra writes the sweep's multirun.yaml even when nothing runs: a dry run
                # leaves nothing in the user's tree unless they named a sweep directory.
                where = scratch.enter_context(tempfile.TemporaryDirectory(prefix="areal-conf-"))
                hydra.append(f"hydra.sweep.dir={where}")
        job = SweepJob(command, chosen)
        with in_force(chosen):
            returns = _multirun(path, job, [*areal, *hydra], task_name(command))
    if dry_run:
        return 0
    rows = job_rows(returns)
    if not rows:  # a sweeper that returns no job results (Optuna, Nevergrad, ...)
        print(f"sweep: done; each job's exit status is in its {JOB_FILE}", flush=True)
        return 0
    print(summary(rows), flush=True)
    return 0 if all(status == 0 for _, _, status, _ in rows) else 1


def validated_launch(options: Sequence[str]) -> list[str]:
    """Hydra's options with the launcher behind the validating one: a plain choice
    (``hydra/launcher=joblib``) becomes its validating form, and that launcher's options
    (``hydra.launcher.n_jobs=4``) move to where the validating launcher keeps it."""
    from areal_conf.hydra.task import validating_launcher

    out: list[str] = []
    plain = False
    chose = False
    for option in options:
        key, _, value = option.partition("=")
        if key.lstrip("+") == "hydra/launcher":
            chose = True
            plain = not (value == "areal" or value.startswith("areal_"))
            out += validating_launcher(value)
        else:
            out.append(option)
    if not chose:
        out.insert(0, "hydra/launcher=areal")
    if plain:
        out = [_to_inner(option) for option in out]
    return out


def _to_inner(option: str) -> str:
    prefix = option[: len(option) - len(option.lstrip("+~"))]
    key, eq, value = option[len(prefix) :].partition("=")
    parts = key.split(".")
    if (
        parts[:2] == ["hydra", "launcher"]
        and len(parts) > 2
        and parts[2] not in _AREAL_LAUNCHER_KEYS
    ):
        return f"{prefix}hydra.launcher.launcher.{'.'.join(parts[2:])}{eq}{value}"
    return option


def task_name(command: AReaLCommand) -> str:
    """Hydra's job name for the sweep: the driver's name (``gsm8k_rl``)."""
    driver = command.driver.split(":")[0]
    if command.form == "script":
        return Path(driver).stem
    return driver.rsplit(".", 1)[-1] or "areal"


def _multirun(path: Path, job: SweepJob, overrides: list[str], name: str) -> Any:
    """Hydra's multirun of ``job`` over the config at ``path``, as ``@hydra.main`` runs
    one with ``-m`` (the same search path, modes and logging); the sweeper's result."""
    from hydra import version
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra

    from areal_conf.hydra.compat import VERSION_BASE
    from areal_conf.hydra.files import checked_yaml_files

    if "version_base" in VERSION_BASE:
        version.setbase(VERSION_BASE["version_base"])
    GlobalHydra.instance().clear()
    search_path = create_config_search_path(str(path.resolve().parent))
    try:
        # Hydra makes its config sources with its loader: every file the sweep and its
        # jobs load is within areal-conf's YAML limits.
        with checked_yaml_files():
            hydra = Hydra.create_main_hydra2(task_name=name, config_search_path=search_path)
            return hydra.multirun(
                config_name=path.name.split(AREAL_CONFIG_SUFFIX)[0],
                task_function=job,
                overrides=[*overrides, "hydra.mode=MULTIRUN"],
            )
    finally:
        GlobalHydra.instance().clear()


def job_rows(returns: Any) -> list[tuple[int | None, list[str], int | str, str]]:
    """``(job number, overrides, exit status or why it failed, directory)`` of each job
    the sweeper reports (Hydra's basic sweeper and areal_layouts: batches of results)."""
    from hydra.core.utils import JobReturn, JobStatus

    rows: list[tuple[int | None, list[str], int | str, str]] = []
    batches = returns if isinstance(returns, list) else []
    for batch in batches:
        for ret in batch if isinstance(batch, Sequence) else []:
            if not isinstance(ret, JobReturn):
                continue
            hydra_cfg = ret.hydra_cfg.hydra if ret.hydra_cfg is not None else None
            num = int(hydra_cfg.job.num) if hydra_cfg is not None else None
            where = str(hydra_cfg.runtime.output_dir) if hydra_cfg is not None else ""
            value = ret._return_value
            if ret.status == JobStatus.COMPLETED and isinstance(value, int):
                status: int | str = value
            else:
                text = str(value).strip()
                status = f"failed: {text.splitlines()[0] if text else type(value).__name__}"
            rows.append((num, list(ret.overrides or []), status, where))
    return rows


def summary(rows: Sequence[tuple[int | None, list[str], int | str, str]]) -> str:
    """One line per job and a last line saying how the sweep went."""
    from areal_conf.hydra.job_overrides import job_overrides_line

    lines = []
    for num, overrides, status, where in rows:
        shown = f"exit {status}" if isinstance(status, int) else status
        label = f"#{num}" if num is not None else "#?"
        lines.append(f"{label} {shown}: {job_overrides_line(overrides)}  ({_relative(where)})")
    ok = sum(1 for row in rows if row[2] == 0)
    total = len(rows)
    verdict = (
        f"sweep: all {total} jobs exited 0"
        if ok == total
        else f"sweep: {total - ok} of {total} jobs did not exit 0"
    )
    return "\n".join([*lines, verdict])


def _relative(where: str) -> str:
    if not where:
        return "no directory"
    relative = os.path.relpath(where)
    return where if relative.startswith("..") else relative


def _write_json(path: Path, record: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(record, indent=2) + "\n")


def report_sweep_error(exc: BaseException) -> tuple[str, int] | None:
    """The one message and exit status for an error of a sweep (an invalid job, a
    config Hydra cannot compose): exit 2, as for ``check``; None for errors that are not
    about the sweep (they keep their traceback)."""
    from areal_conf.hydra.app import EXIT_INVALID, report

    if isinstance(exc, AllocationError):
        return f"error: {exc}", EXIT_INVALID
    reported = report(exc, ())
    if reported is None:
        return None
    message, _ = reported
    # The launcher's advice names its own option; on this command line it is --dry-run.
    message = message.replace(_LAUNCHER_DRY_RUN, "python -m areal_conf sweep --dry-run ...")
    return (message if message.startswith("error:") else f"error: {message}"), EXIT_INVALID


_LAUNCHER_DRY_RUN = "hydra.launcher.dry_run=true"
