"""Run a command as a child, as a shell would, and pass signals on to it.

:func:`run_forwarding` starts the command with the caller's environment and working
directory (or those given), waits for it and returns its exit status the way a shell
reports it: the command's own status, or ``128 + N`` when signal ``N`` killed it (137 for
``SIGKILL``). ``SIGINT``, ``SIGTERM``, ``SIGHUP``, ``SIGQUIT``, ``SIGUSR1`` and ``SIGUSR2``
sent to this process while the child runs are sent on to the child, once: a signal the
terminal sends (Ctrl-C, Ctrl-\\) already reaches every process of the foreground group,
the child included, so that one is not sent again (AReaL's driver would see a second
``KeyboardInterrupt`` while it shuts down). On Linux the terminal's signals are told
apart exactly (``sigtimedwait`` reports who sent a signal); elsewhere a ``SIGINT`` or
``SIGQUIT`` is taken for the terminal's while this process is in the terminal's
foreground group.

Signals are forwarded only when this runs in the main thread (where Python can wait for
them); in another thread the child is simply waited for.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType

#: The signals passed on to the child.
FORWARDED: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
#: The signals a terminal sends to its whole foreground process group.
FROM_TERMINAL = frozenset(
    getattr(signal, name) for name in ("SIGINT", "SIGQUIT") if hasattr(signal, name)
)
#: ``si_code`` of a signal the kernel sent (a terminal's Ctrl-C), not a process (Linux).
_SI_KERNEL = 0x80


@dataclass(frozen=True)
class Finished:
    """How the child ended: ``status`` as a shell reports it (``128 + N`` for a child
    killed by signal ``N``), and the signals this process received while it ran."""

    status: int
    received: tuple[int, ...] = ()


def shell_status(returncode: int) -> int:
    """``Popen.returncode`` as a shell reports it: a child killed by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def run_forwarding(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Finished:
    """Run ``argv`` to its end, forwarding signals (see the module's docstring). An
    ``OSError`` when the command cannot be started (not found, not executable)."""
    if threading.current_thread() is not threading.main_thread():
        child = subprocess.Popen(list(argv), cwd=cwd, env=None if env is None else dict(env))
        return Finished(shell_status(child.wait()))
    received: list[int] = []
    early: list[int] = []
    # Until the child exists, remember signals instead of dying of them (SIGTERM) or
    # raising KeyboardInterrupt here; exec gives the child the default handlers back.
    previous = {sig: signal.signal(sig, _remember(early)) for sig in FORWARDED}
    try:
        child = subprocess.Popen(list(argv), cwd=cwd, env=None if env is None else dict(env))
        if hasattr(signal, "sigtimedwait"):
            _wait_linux(child, early, received)
        else:
            _wait_portable(child, early, received)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return Finished(shell_status(child.returncode), tuple(received))


def _remember(into: list[int]) -> Callable[[int, FrameType | None], None]:
    def handler(signo: int, frame: FrameType | None) -> None:
        into.append(signo)

    return handler


def _wait_linux(child: subprocess.Popen[bytes], early: list[int], received: list[int]) -> None:
    """Wait with the signals blocked, taking each with ``sigtimedwait``, which says
    whether the kernel (a terminal) or a process sent it."""
    watched = {*FORWARDED, signal.SIGCHLD}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        for signo in early:  # came before they were blocked: pass them on
            received.append(signo)
            _send(child, signo)
        while child.poll() is None:
            info = signal.sigtimedwait(watched, 0.5)
            if info is None or info.si_signo == signal.SIGCHLD:
                continue
            received.append(info.si_signo)
            from_terminal = info.si_code == _SI_KERNEL and info.si_signo in FROM_TERMINAL
            if not (from_terminal and _same_group(child)):
                _send(child, info.si_signo)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _wait_portable(
    child: subprocess.Popen[bytes],
    early: list[int],
    received: list[int],
) -> None:
    def forward(signo: int, frame: FrameType | None) -> None:
        received.append(signo)
        if not (signo in FROM_TERMINAL and _terminal_foreground() and _same_group(child)):
            _send(child, signo)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    for signo in early:
        received.append(signo)
        _send(child, signo)
    child.wait()


def _send(child: subprocess.Popen[bytes], signo: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it has just ended
        child.send_signal(signo)


def _same_group(child: subprocess.Popen[bytes]) -> bool:
    try:
        return os.getpgid(child.pid) == os.getpgrp()
    except ProcessLookupError:
        return False


def _terminal_foreground() -> bool:
    """True when this process is in the foreground group of its terminal."""
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except (AttributeError, OSError, ValueError):
            continue
    return False
