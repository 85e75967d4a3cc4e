"""Progress of a long loop: a bar on a terminal, a log line now and then otherwise.

Nothing is shown for a loop that ends within ``delay`` seconds, so short validations
stay silent. On a terminal the bar redraws in place (at most ``redraw`` times a second)
and is cleared at the end; elsewhere (a log file, CI) one line every ``interval``
seconds goes to ``log`` and a closing line says how long it took.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    """``with Progress(2000, "validating jobs") as p: ... p.advance()``."""

    def __init__(
        self,
        total: int,
        what: str,
        *,
        log: Callable[[str], None],
        stream: TextIO | None = None,
        delay: float = 2.0,
        interval: float = 10.0,
        redraw: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
        width: int = 30,
    ) -> None:
        self.total = total
        self.what = what
        self.done = 0
        self._log = log
        self._stream = sys.stderr if stream is None else stream
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._delay = delay
        self._interval = interval if not self._tty else redraw
        self._clock = clock
        self._width = width
        self._start = clock()
        self._next = self._start + delay
        self._shown = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = self._clock()
        if now < self._next:
            return
        self._next = now + self._interval
        self._shown = True
        if self._tty:
            filled = self._width * self.done // max(1, self.total)
            bar = "#" * filled + "." * (self._width - filled)
            self._stream.write(f"\r{self.what} [{bar}] {self.done}/{self.total}")
            self._stream.flush()
        else:
            self._log(f"{self.what}: {self.done} of {self.total} ({now - self._start:.0f} s)")

    def close(self) -> None:
        if not self._shown:
            return
        self._shown = False
        elapsed = self._clock() - self._start
        if self._tty:
            self._stream.write("\r" + " " * (len(self.what) + self._width + 30) + "\r")
            self._stream.flush()
        self._log(f"{self.what}: {self.done} of {self.total} in {elapsed:.1f} s")
