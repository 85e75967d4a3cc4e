"""What an AReaL run leaves on disk, read back: each step's time and stats.

Three sources, the first found in the run's directory is read:

- **The text log.** AReaL's ``StatsLogger.commit``
  (``areal/utils/stats_logger.py:135-162``) logs, once a step and on rank 0 only, a line
  ``Epoch e/E Step s/S Train step g/G done.`` and then the step's stats as a
  ``tabulate`` grid (``areal/utils/printing.py``: ``fancy_grid``, four key/value pairs a
  row, values as ``%.4e``). Every line starts with ``(AReaL)``, the time
  (``%Y%m%d-%H:%M:%S.mmm``, the host's clock) and the logger's name, with ANSI colour
  codes around them (``areal/utils/logging.py:15-22``). The log is, under
  ``{fileroot}/logs/{user}/{experiment}/{trial}/``, ``main.log`` for a single-controller
  run (``merged.log`` holds the same lines, prefixed ``[main]``), ``trainer.log`` for one
  started by AReaL's launchers. AReaL logs no step's total time: a step lasts from one
  ``done.`` line to the next. The files are appended to when a trial is started again;
  the last start's steps are the ones read.
- **TensorBoard event files** (``events.out.tfevents.*``, where
  ``stats_logger.tensorboard.path`` points; ``stats_logger.py:110-112``, ``:145-159``):
  the same stats, one scalar an event, tagged by key, at the 0-based global step, with the
  time each was written (TFRecord framing of ``tensorboard.Event`` messages, read here
  without TensorFlow).
- **The perf tracer's JSONL** (``{log_dir}/perf_tracer/master/traces-r*.jsonl`` when
  ``perf_tracer.enabled``; ``areal/utils/perf_tracer.py:200-244``, ``:1670-1776``):
  Chrome-trace spans
  ``train.<phase>`` of each step (``rl_trainer.py:688-962``), with their durations and
  ``args.global_step``; no token counts. It is the one source a run started by AReaL's
  Ray launcher, which writes no log file, may have.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeGuard

from areal_conf.errors import ConfigError

#: The log files AReaL writes, the most useful first.
LOG_NAMES: Final = ("main.log", "trainer.log", "merged.log")
#: The other sources, as file name patterns, in the order they are looked for.
EVENT_FILES: Final = "events.out.tfevents.*"
TRACE_FILES: Final = "traces-*.jsonl"
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
    """The file to read for ``run``: the file itself, or in the directory (or the one
    run's directory below it) the first of :data:`LOG_NAMES`, else a TensorBoard event
    file, else the perf tracer's JSONL of the trainer (see the module docstring)."""
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
    for pattern in (EVENT_FILES, TRACE_FILES):
        files = sorted(path.glob(f"**/{pattern}"))
        if pattern == TRACE_FILES:  # the trainer's ranks are the master role's
            files = [f for f in files if f.parent.name == "master"] or files
        if files:
            return files[0]
    raise ConfigError(
        f"{path} has no AReaL log ({', '.join(LOG_NAMES)}), TensorBoard event file or "
        "perf tracer trace",
        hint="give the run's log directory ({fileroot}/logs/{user}/{experiment}/{trial}), "
        "where AReaL writes main.log (or trainer.log when its launcher started the run)",
    )


def read_log(run: str | os.PathLike[str]) -> RunLog:
    """The steps the run at ``run`` recorded (see the module docstring); a ConfigError
    naming the file when it has none, or is not one AReaL writes."""
    path = find_log(run)
    try:
        size = path.stat().st_size
        if size > MAX_LOG_BYTES:
            raise ConfigError(
                f"{path} is {size / 1e6:,.0f} MB: larger than areal-conf reads "
                f"({MAX_LOG_BYTES / 1e6:,.0f} MB)",
                hint="give a copy of its first few hundred steps: head -c 100M main.log > x.log",
            )
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(
            f"{path}: cannot be read ({err.strerror or err})",
            hint="give a file this user can read",
        ) from None
    cut_at: int | None = None
    if path.name.startswith("events.out.tfevents"):
        steps, what = _event_steps(data), "no scalar of a training step"
    elif path.suffix == ".jsonl":
        steps, what = _trace_steps(data), "no span train.<phase> of a training step"
    else:
        steps, cut_at = _steps(data.decode("utf-8", errors="replace").splitlines())
        what = (
            "no step's stats: no line 'StatsLogger INFO: Epoch ... Train step N/M done.' "
            "followed by its table"
        )
    if not steps:
        raise ConfigError(
            f"{path} has {what}",
            hint="give the log of a run that finished at least one training step (AReaL's "
            "StatsLogger writes one table a step)",
        )
    last_start = 0
    for i in range(1, len(steps)):
        if steps[i].global_step <= steps[i - 1].global_step:
            last_start = i  # the trial was started again: its log was appended to
    return RunLog(path, tuple(steps[last_start:]), earlier=last_start, cut_at=cut_at)


def _event_steps(data: bytes) -> list[LoggedStep]:
    """The scalars of a TensorBoard event file, by step: each TFRecord (8-byte length,
    4-byte CRC, the record, 4-byte CRC) an ``Event`` (``wall_time`` 1, ``step`` 2,
    ``summary`` 5: ``value`` 1: ``tag`` 1, ``simple_value`` 2). A record cut short ends
    the file."""
    by_step: dict[int, tuple[float, dict[str, float]]] = {}
    at = 0
    while at + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        start, end = at + 12, at + 12 + length
        if end + 4 > len(data):
            break
        at = end + 4
        try:
            event = _fields(data[start:end])
        except ValueError:
            continue
        summary = event.get(5)
        if not isinstance(summary, bytes):
            continue
        when = event.get(1)
        step = event.get(2, 0)
        if not isinstance(when, float) or not isinstance(step, int):
            continue
        try:
            values = [_fields(v) for v in _repeated(summary, 1)]
        except ValueError:
            continue
        for value in values:
            tag, number = value.get(1), value.get(2)
            if isinstance(tag, bytes) and isinstance(number, float) and math.isfinite(number):
                latest, stats = by_step.get(step, (when, {}))
                stats[tag.decode("utf-8", errors="replace")] = number
                by_step[step] = (max(latest, when), stats)
    return [
        LoggedStep(step + 1, when, stats)  # TensorBoard counts steps from 0
        for step, (when, stats) in sorted(by_step.items())
        if math.isfinite(when) and any(k.startswith("timeperf/") for k in stats)
    ]


def _fields(message: bytes) -> dict[int, Any]:
    """The last value of each field of a protobuf message: an int (varint), a float
    (fixed64 as a double, fixed32 as a float) or bytes (length-delimited)."""
    found: dict[int, Any] = {}
    at = 0
    while at < len(message):
        key, at = _varint(message, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            found[number], at = _varint(message, at)
        elif wire == 1:
            if at + 8 > len(message):
                raise ValueError("cut short")
            (found[number],) = struct.unpack_from("<d", message, at)
            at += 8
        elif wire == 5:
            if at + 4 > len(message):
                raise ValueError("cut short")
            (found[number],) = struct.unpack_from("<f", message, at)
            at += 4
        elif wire == 2:
            length, at = _varint(message, at)
            if at + length > len(message):
                raise ValueError("cut short")
            found[number] = message[at : at + length]
            at += length
        else:
            raise ValueError(f"wire type {wire}")
    return found


def _repeated(message: bytes, field: int) -> list[bytes]:
    """Every value of a repeated length-delimited field."""
    values: list[bytes] = []
    at = 0
    while at < len(message):
        key, at = _varint(message, at)
        number, wire = key >> 3, key & 7
        if wire != 2:
            return values
        length, at = _varint(message, at)
        if number == field:
            values.append(message[at : at + length])
        at += length
    return values


def _finite(x: object) -> TypeGuard[float]:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while at < len(data) and shift < 64:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
    raise ValueError("varint cut short")


#: The perf tracer's span of each ``timeperf`` key whose name differs from it
#: (``rl_trainer.py``: ``record_timing(key)`` beside ``trace_scope("train.<span>")``).
_SPAN_KEYS: Final = {
    "compute_values": "critic_values",
    "ppo_update": "train_step",
    "critic_ppo_update": "critic_train_step",
    "checkpoint": "checkpoint_for_recover",
}


def _trace_steps(data: bytes) -> list[LoggedStep]:
    """Each step's ``train.<phase>`` spans as ``timeperf/<key>`` seconds; a step ends
    when its last span does."""
    by_step: dict[int, tuple[float, dict[str, float]]] = {}
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        name, args = event.get("name"), event.get("args")
        ts, dur = event.get("ts"), event.get("dur")
        if not (isinstance(name, str) and name.startswith("train.") and isinstance(args, dict)):
            continue
        step = args.get("global_step")
        if not isinstance(step, int) or not _finite(ts) or not _finite(dur):
            continue
        span = name.removeprefix("train.")
        key = f"timeperf/{_SPAN_KEYS.get(span, span)}"
        end, stats = by_step.get(step, (0.0, {}))
        stats[key] = stats.get(key, 0.0) + float(dur) / 1e6
        by_step[step] = (max(end, (float(ts) + float(dur)) / 1e6), stats)
    return [LoggedStep(step + 1, end, stats) for step, (end, stats) in sorted(by_step.items())]


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
    """A table cell's number; None for text, and for nan and inf (no step time)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
