"""Write a file so that a kill at any moment leaves either its old content or its new one.

Every file areal-conf writes (``train.py``'s ``allocation_plan.json``; a sweep's
``allocation_plan.json``, ``areal_job.json`` and ``command.sh`` in each job's directory;
the sweep's ``multirun.yaml``) goes through :func:`write_atomic`: the text is written to a
temporary file in the same directory, flushed to disk (``fsync``) and renamed over the
target with ``os.replace``, which is atomic within one file system. A reader never sees a
half-written file; a process killed before the rename leaves the old file (or none) and a
hidden ``.<name>.<random>.tmp`` beside it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

#: How a temporary file is named: hidden, and never matching ``*.json`` or ``*.yaml``.
TEMP_SUFFIX = ".tmp"


def write_atomic(path: str | os.PathLike[str], text: str, *, mode: int | None = None) -> None:
    """Replace ``path`` by a file holding ``text`` (UTF-8) in one step.

    The new file gets ``mode`` when given (``0o755`` for a script), else the mode a plain
    ``open(path, "w")`` would give a new file (``0o666`` less the umask). ``OSError``
    when the directory does not exist or cannot be written; the target is then unchanged.
    """
    target = Path(path)
    fd, temp = _create_temp(target)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _create_temp(target: Path) -> tuple[int, Path]:
    """A new file beside ``target``, opened for writing, created as ``open()`` would."""
    while True:
        temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
        try:
            return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), temp
        except FileExistsError:  # another writer's temporary file: take another name
            continue
