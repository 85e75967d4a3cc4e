"""What an AReaL run leaves in its text log, read back: each step's time and stats.

AReaL's ``StatsLogger.commit`` (``areal/utils/stats_logger.py:135-162``) logs, once a step
and on rank 0 only, a line ``Epoch e/E Step s/S Train step g/G done.`` and then the
step's stats as a ``tabulate`` grid (``areal/utils/printing.py``: ``fancy_grid``, four
key/value pairs a row, values as ``%.4e``). Every line starts with ``(AReaL)``, the
time (``%Y%m%d-%H:%M:%S.mmm``, the host's clock) and the logger's name, with ANSI colour
codes around them (``areal/utils/logging.py:15-22``). The log is, under
``{fileroot}/logs/{user}/{experiment}/{trial}/``, ``main.log`` for a single-controller run
(``merged.log`` holds the same lines, prefixed ``[main]``), ``trainer.log`` for one
started by AReaL's launchers. AReaL logs no step's total time: a step lasts from one
``done.`` line to the next. The files are appended to when a trial is started again;
the last start's steps are the ones read.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from areal_conf.errors import ConfigError

#: The log files AReaL writes, the most useful first.
LOG_NAMES: Final = ("main.log", "trainer.log", "merged.log")
#: How large a log areal-conf reads (a run of thousands of steps is some tens of MB).
MAX_LOG_BYTES: Final = 512 * 1024 * 1024

_ANSI: Final = re.compile(r"\x1b\[[0-9;]*m")
_PREFIX: Final = re.compile(r"^\[[\w.-]+\]\s+")
_DONE: Final = re.compile(
    r"\(AReaL\) (\d{8}-\d\d:\d\d:\d\d\.\d{3}) StatsLogger INFO: Epoch (\d+)/(\d+) "
    r"Step (\d+)/(\d+) Train step (\d+)/(\d+) done\."
)


@dataclass(frozen=True)
class LoggedStep:
    """One step as the log has it: its number (1-based ``Train step``), when its
    ``done.`` line was written (seconds since the epoch, the host's clock) and its
    stats."""

    global_step: int
    done_at: float
    stats: dict[str, float]


@dataclass(frozen=True)
class RunLog:
    """The steps of a run's log, in order, from its last start."""

    path: Path
    steps: tuple[LoggedStep, ...]
    #: Steps of earlier starts of the same trial that were left out.
    earlier: int = 0
    #: The step whose table the log ends inside (a run still writing it), or None.
    cut_at: int | None = None


def find_log(run: str | os.PathLike[str]) -> Path:
    """The log of ``run``: the file itself, or the first of :data:`LOG_NAMES` in the
    directory (or in the one trial directory below it, as ``logs/<user>/<experiment>/<trial>``)."""
    path = Path(run)
    if path.is_file():
        return path
    if not path.is_dir():
        raise ConfigError(
            f"{path}: no such file or directory",
            hint="give the run's log directory ({fileroot}/logs/{user}/{experiment}/{trial}) "
            "or its main.log / trainer.log",
        )
    for name in LOG_NAMES:
        if (path / name).is_file():
            return path / name
    found = sorted({p.parent for name in LOG_NAMES for p in path.glob(f"**/{name}")})
    if len(found) == 1:
        return find_log(found[0])
    if found:
        listed = ", ".join(str(p) for p in found[:5]) + (", ..." if len(found) > 5 else "")
        raise ConfigError(
            f"{path} holds the logs of {len(found)} runs: {listed}",
            hint="give one run's directory",
        )
    raise ConfigError(
        f"{path} has no AReaL log ({', '.join(LOG_NAMES)})",
        hint="give the run's log directory ({fileroot}/logs/{user}/{experiment}/{trial}), "
        "where AReaL writes main.log (or trainer.log when its launcher started the run)",
    )


def read_log(run: str | os.PathLike[str]) -> RunLog:
    """The steps logged by the run at ``run`` (see the module docstring); a ConfigError
    naming the file when it has none, or is not an AReaL log."""
    path = find_log(run)
    try:
        size = path.stat().st_size
        if size > MAX_LOG_BYTES:
            raise ConfigError(
                f"{path} is {size / 1e6:,.0f} MB: larger than areal-conf reads "
                f"({MAX_LOG_BYTES / 1e6:,.0f} MB)",
                hint="give a copy of its first few hundred steps: head -c 100M main.log > x.log",
            )
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as err:
        raise ConfigError(
            f"{path}: cannot be read ({err.strerror or err})",
            hint="give a log file this user can read",
        ) from None
    steps, cut_at = _steps(text.splitlines())
    if not steps:
        raise ConfigError(
            f"{path} has no step's stats: no line 'StatsLogger INFO: Epoch ... Train step "
            "N/M done.' followed by its table",
            hint="give the log of a run that finished at least one training step (AReaL's "
            "StatsLogger writes one table a step)",
        )
    last_start = 0
    for i in range(1, len(steps)):
        if steps[i].global_step <= steps[i - 1].global_step:
            last_start = i  # the trial was started again: its log was appended to
    return RunLog(path, tuple(steps[last_start:]), earlier=last_start, cut_at=cut_at)


def _steps(lines: list[str]) -> tuple[list[LoggedStep], int | None]:
    """Each ``done.`` line with the stats table that follows it, and the step whose
    table the log ends inside (a log still being written; left out), if any."""
    steps: list[LoggedStep] = []
    current: tuple[int, float] | None = None
    stats: dict[str, float] = {}
    for raw in lines:
        line = _PREFIX.sub("", _ANSI.sub("", raw)).strip()
        done = _DONE.search(line)
        if done is not None:
            when = _time(done.group(1))
            if when is not None:
                current, stats = (int(done.group(6)), when), {}
            continue
        if current is None:
            continue
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            for key, value in zip(cells[::2], cells[1::2], strict=False):
                number = _number(value)
                if key and number is not None:
                    stats[key] = number
        elif line.startswith("╘"):
            steps.append(LoggedStep(current[0], current[1], stats))
            current = None
    return steps, None if current is None else current[0]


def _time(text: str) -> float | None:
    """A log line's time in seconds, read as if on UTC (the log gives the host's clock
    without its zone; only differences between lines are used), or None for a time no
    clock shows."""
    try:
        return datetime.strptime(text, "%Y%m%d-%H:%M:%S.%f").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
