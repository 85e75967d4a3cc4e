"""Progress of a long loop: the count done, the time taken and an estimate of the time left.

Nothing is shown for a loop that ends within ``delay`` seconds, so short validations
stay silent. After that, a terminal and a log get the same line
(``validating jobs: 332 of 2000, 2 s, about 10 s left``): on a terminal it is redrawn
in place (at most every ``redraw`` seconds) and cleared at the end; elsewhere (a log
file, CI) it goes to ``log`` every ``interval`` seconds. A closing line says how long
the loop took.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    """``with Progress(2000, "validating jobs", log=log.info) as p: ... p.advance()``."""

    def __init__(
        self,
        total: int,
        what: str,
        *,
        log: Callable[[str], None],
        stream: TextIO | None = None,
        delay: float = 1.0,
        interval: float = 5.0,
        redraw: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.what = what
        self.done = 0
        self._log = log
        self._stream = sys.stderr if stream is None else stream
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._interval = redraw if self._tty else interval
        self._clock = clock
        self._start = clock()
        self._next = self._start + delay
        self._shown = False
        self._drawn = 0  # length of the line drawn on the terminal

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
        line = self.line(now - self._start)
        if self._tty:
            self._stream.write("\r" + line.ljust(self._drawn))
            self._stream.flush()
            self._drawn = len(line)
        else:
            self._log(line)

    def line(self, elapsed: float) -> str:
        """``what: done of total, elapsed, about left``."""
        text = f"{self.what}: {self.done} of {self.total}, {_duration(elapsed)}"
        if 0 < self.done < self.total:
            left = elapsed * (self.total - self.done) / self.done
            text += f", about {_duration(left)} left"
        return text

    def close(self) -> None:
        if not self._shown:
            return
        self._shown = False
        elapsed = self._clock() - self._start
        if self._tty:
            self._stream.write("\r" + " " * self._drawn + "\r")
            self._stream.flush()
        self._log(f"{self.what}: {self.done} of {self.total} in {elapsed:.1f} s")


def _duration(seconds: float) -> str:
    """``4 s``, ``95 s``, ``3 min``, ``2 h 5 min``: as precise as an estimate deserves."""
    if seconds < 100:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 100:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"
