"""Run a command as a child, as a shell would, and pass each signal on to it once.

:func:`run_forwarding` starts the command with the caller's environment and working
directory (or those given), waits for it and returns its exit status the way a shell
reports it: the command's own status, or ``128 + N`` when signal ``N`` killed it (137 for
``SIGKILL``).

**Each signal reaches the driver once, whoever sends it.** The command runs in a process
group of its own, so a signal sent to areal-conf's group (a terminal's Ctrl-C, ``timeout
-s INT``, a supervisor's ``kill -INT -PGID``) reaches areal-conf only, and a signal sent
to areal-conf's process alone reaches it as well. Each ``SIGINT``, ``SIGTERM``,
``SIGHUP``, ``SIGQUIT``, ``SIGUSR1`` and ``SIGUSR2`` areal-conf receives while the
command runs is then sent on, once, to the command's whole group: the driver and the
processes it started see what a terminal's Ctrl-C would give them. A sender that sends
one signal twice in a row, as ``timeout`` does (to its child, then to its group), is seen
once: the same signal from the same process within :data:`ECHO_SECONDS` is not sent on
again (Linux; the terminal's own Ctrl-C comes from the kernel and is never dropped).

**No orphan.** On Linux the command is started with ``PR_SET_PDEATHSIG``: if areal-conf
dies without forwarding anything (``SIGKILL``), the driver receives ``SIGTERM``, as a
scheduler's ``kill`` would give it, and can stop the processes it started.

**Job control.** At a terminal, Ctrl-Z stops areal-conf's group: areal-conf stops the
command's group, then itself, so the shell reports the job as stopped; ``fg`` or ``bg``
continue areal-conf, which continues the command (any ``SIGCONT`` is passed on). The
command's group is not the terminal's foreground group, so a command that reads from the
terminal (a ``breakpoint()`` in the driver) is stopped by it (``SIGTTIN``); areal-conf
then hands the terminal to the command's group and continues it, and from then on the
terminal's Ctrl-C and Ctrl-Z reach the command directly (once, still) and areal-conf
takes the terminal back when the command stops or ends. This hand-over needs Linux
(``sigtimedwait``, ``waitid``); elsewhere signals are forwarded the same way but a
command reading from the terminal stays stopped.

Signals are forwarded only when this runs in the main thread (where Python can wait for
them); in another thread the command runs in areal-conf's own group and is simply
waited for, so signals sent to the group reach it directly.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType

#: The signals passed on to the child's group.
FORWARDED: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
#: A signal a process sends again this soon after the same one is an echo of it (GNU
#: timeout sends its signal to its child, then at once to its group), not sent on again.
ECHO_SECONDS = 0.25
#: What the child receives when areal-conf dies first (Linux).
PARENT_DIED = signal.SIGTERM
_PR_SET_PDEATHSIG = 1
#: The stop signals a terminal sends, and the ones it sends a background reader/writer.
_TERMINAL_STOP = getattr(signal, "SIGTSTP", None)
_TERMINAL_IO = frozenset(
    getattr(signal, name) for name in ("SIGTTIN", "SIGTTOU") if hasattr(signal, name)
)


@dataclass(frozen=True)
class Finished:
    """How the child ended: ``status`` as a shell reports it (``128 + N`` for a child
    killed by signal ``N``), and the signals this process received and passed on while it
    ran (job control's ``SIGTSTP``/``SIGCONT`` are passed on but not listed)."""

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
    environ = None if env is None else dict(env)
    if threading.current_thread() is not threading.main_thread():
        child = subprocess.Popen(list(argv), cwd=cwd, env=environ, preexec_fn=_child_setup(False))
        return Finished(shell_status(child.wait()))
    received: list[int] = []
    early: list[int] = []
    # Until the child exists, remember signals instead of dying of them (SIGTERM) or
    # raising KeyboardInterrupt here; exec gives the child the default handlers back.
    previous = {sig: signal.signal(sig, _remember(early)) for sig in FORWARDED}
    try:
        child = subprocess.Popen(list(argv), cwd=cwd, env=environ, preexec_fn=_child_setup(True))
        if hasattr(signal, "sigtimedwait") and hasattr(os, "waitid"):
            _Waiter(child).wait(early, received)
        else:
            _wait_portable(child, early, received)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return Finished(shell_status(child.returncode), tuple(received))


def _child_setup(own_group: bool) -> Callable[[], None]:
    """What the child does between fork and exec: its own process group (``own_group``)
    and, on Linux, :data:`PARENT_DIED` when this process dies."""
    parent = os.getpid()
    prctl = _prctl()

    def setup() -> None:
        if own_group:
            os.setpgid(0, 0)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(PARENT_DIED), 0, 0, 0)
            if os.getppid() != parent:  # the parent died before the request: as if after
                os.kill(os.getpid(), PARENT_DIED)

    return setup


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


def _remember(into: list[int]) -> Callable[[int, FrameType | None], None]:
    def handler(signo: int, frame: FrameType | None) -> None:
        into.append(signo)

    return handler


class _Waiter:
    """Wait for the child with the signals blocked, taking each with ``sigtimedwait``
    (Linux), and the child's stops with ``waitid``."""

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self.child = child
        self.terminal = _foreground_terminal()  # a terminal whose foreground group we are
        self.handed = False  # the child's group has the terminal
        self.last_sent: tuple[int, int, float] | None = None  # signal, sender, when

    def wait(self, early: list[int], received: list[int]) -> None:
        job_control = {s for s in (_TERMINAL_STOP, getattr(signal, "SIGCONT", None)) if s}
        watched = {*FORWARDED, *job_control, signal.SIGCHLD}
        # SIGTTOU blocked too: taking the terminal back from the background is allowed then.
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {*watched, *_TERMINAL_IO})
        try:
            for signo in early:  # came before they were blocked: pass them on
                received.append(signo)
                _send(self.child, signo)
            while self.child.poll() is None:
                self._child_stopped()
                info = signal.sigtimedwait(watched, 0.5)
                if info is None or info.si_signo == signal.SIGCHLD:
                    continue
                if info.si_signo == _TERMINAL_STOP:
                    _send(self.child, info.si_signo)
                    self._stop_myself()
                elif info.si_signo in job_control:  # SIGCONT
                    _send(self.child, info.si_signo)
                elif not self._echo(info):
                    received.append(info.si_signo)
                    _send(self.child, info.si_signo)
        finally:
            if self.handed:
                self._take_terminal()
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)

    def _echo(self, info: signal.struct_siginfo) -> bool:
        """``info`` repeats the signal last passed on, sent by the same process (not the
        kernel: a terminal's keys) within :data:`ECHO_SECONDS`."""
        now = time.monotonic()
        last = self.last_sent
        if (
            info.si_pid != 0
            and last is not None
            and last[:2] == (info.si_signo, info.si_pid)
            and now - last[2] < ECHO_SECONDS
        ):
            return True
        self.last_sent = (info.si_signo, info.si_pid, now)
        return False

    def _child_stopped(self) -> None:
        """When the child has stopped: at a terminal read (``SIGTTIN``/``SIGTTOU``), give
        it the terminal and continue it; by the terminal's Ctrl-Z (it had the terminal),
        take the terminal back and stop too, as the shell expects of its job."""
        try:
            info = os.waitid(os.P_PID, self.child.pid, os.WSTOPPED | os.WNOHANG)
        except ChildProcessError:
            return
        if info is None or info.si_code != os.CLD_STOPPED:
            return
        if info.si_status in _TERMINAL_IO and self.terminal is not None and not self.handed:
            self._hand_terminal()
            _send(self.child, signal.SIGCONT)
        elif info.si_status == _TERMINAL_STOP and self.handed:
            self._take_terminal()
            self._stop_myself()
            self._hand_terminal()
            _send(self.child, signal.SIGCONT)

    def _stop_myself(self) -> None:
        # Stopped until SIGCONT (the shell's fg/bg); it stays pending, and is passed on.
        os.kill(os.getpid(), signal.SIGSTOP)

    def _hand_terminal(self) -> None:
        if self.terminal is not None:
            with contextlib.suppress(OSError):
                os.tcsetpgrp(self.terminal, self.child.pid)
                self.handed = True

    def _take_terminal(self) -> None:
        if self.terminal is not None:
            with contextlib.suppress(OSError):
                os.tcsetpgrp(self.terminal, os.getpgrp())
        self.handed = False


def _wait_portable(
    child: subprocess.Popen[bytes],
    early: list[int],
    received: list[int],
) -> None:
    def forward(signo: int, frame: FrameType | None) -> None:
        received.append(signo)
        _send(child, signo)

    def stop(signo: int, frame: FrameType | None) -> None:
        _send(child, signo)
        os.kill(os.getpid(), signal.SIGSTOP)

    def cont(signo: int, frame: FrameType | None) -> None:
        _send(child, signo)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    job_control = {}
    if _TERMINAL_STOP is not None:
        job_control[_TERMINAL_STOP] = signal.signal(_TERMINAL_STOP, stop)
        job_control[signal.SIGCONT] = signal.signal(signal.SIGCONT, cont)
    try:
        for signo in early:
            received.append(signo)
            _send(child, signo)
        child.wait()
    finally:
        for sig, handler in job_control.items():
            signal.signal(sig, handler)


def _send(child: subprocess.Popen[bytes], signo: int) -> None:
    """``signo`` to the child's process group (its leader is the child)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # it has just ended
        os.killpg(child.pid, signo)


def _foreground_terminal() -> int | None:
    """The descriptor of this process's terminal when it is in the terminal's foreground
    group, else None."""
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
            if os.isatty(fd):
                return fd if os.tcgetpgrp(fd) == os.getpgrp() else None
        except (AttributeError, OSError, ValueError):
            continue
    return None
