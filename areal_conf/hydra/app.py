"""Run an application so that an invalid config ends in one message, never a traceback.

:func:`run_validated` wraps the entry point of a Hydra application (the function
decorated with ``@hydra.main``). Whatever path the bad input takes—the task calling
``validate(cfg)``, ``--cfg job --resolve`` expanding an ``allocation`` node, the ``areal``
launcher rejecting a multirun, an interpolation that cannot be resolved—the user sees
one message on stderr and the process exits with :data:`EXIT_INVALID`, in a single run
and in a multirun alike. Errors that are not about the config keep their traceback.

A ``SIGINT`` (Ctrl-C) or ``SIGTERM`` while areal-conf validates ends the program the same
way from every entry point (:func:`interruptible`, which :func:`run_validated` and the
``python -m areal_conf`` verbs use): one line on stderr naming the signal and what was
left undone, and the status a shell gives a program the signal stopped, ``128 + N``
(130 for ``SIGINT``, 143 for ``SIGTERM``); never a traceback.

This module imports no Hydra and no OmegaConf: it recognises their exceptions by the
modules that define them, which are loaded whenever such an exception exists, and puts
areal-conf's YAML limits into Hydra's loading only when Hydra is loaded.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, TextIO, TypeVar, cast

from areal_conf.config.nodes import unresolvable
from areal_conf.config.yaml_errors import is_yaml_error, unparsable_yaml
from areal_conf.config.yaml_limits import UnreadableYaml
from areal_conf.errors import AllocationError, ConfigError, ErrorAtKey
from areal_conf.hydra.errors import OMEGACONF_ERRORS, chain, defined_in, typed_value_error

T = TypeVar("T")

#: Exit status for an invalid allocation or config, single run and multirun alike.
#: Other errors Hydra reports itself (an unknown override key, bad override syntax)
#: keep Hydra's status 1.
EXIT_INVALID = 2
EXIT_HYDRA = 1

_FULL_ERROR = "HYDRA_FULL_ERROR"

#: How Hydra 1.4.0rc3 refuses ``../x`` in a defaults list, which AReaL's
#: examples use (``- ../math/gsm8k_grpo_megatron@_global_``) and the Hydra AReaL pins
#: composes.
_PARENT_TRAVERSAL = "Parent traversal ('..')"
AREAL_HYDRA_PINS = "hydra-core==1.4.0.dev1 omegaconf==2.4.0.dev2"


#: What an interrupted program says it left undone, unless it knows more.
NOTHING_STARTED = "nothing was started"


class Interrupted(KeyboardInterrupt):
    """A signal stopped the program: ``signo``, and ``what`` it left undone (or done).

    A ``KeyboardInterrupt``, so code that lets Ctrl-C through lets it through too."""

    def __init__(self, signo: int, what: str = NOTHING_STARTED) -> None:
        super().__init__(signo, what)
        self.signo = int(signo)
        self.what = what

    @property
    def status(self) -> int:
        """The exit status a shell gives a program this signal stopped."""
        return 128 + self.signo

    def line(self) -> str:
        """The one line printed: ``interrupted by SIGINT: nothing was started``."""
        return f"interrupted by {signal.Signals(self.signo).name}: {self.what}"


@contextmanager
def interruptible(stderr: TextIO | None = None) -> Iterator[None]:
    """Within the block, ``SIGINT`` and ``SIGTERM`` end the program with one line on
    ``stderr`` and exit status ``128 + N``, never a traceback.

    ``SIGINT`` is Python's ``KeyboardInterrupt`` (raised wherever the program is, even
    inside Hydra); ``SIGTERM`` raises :class:`Interrupted` the same way for the duration
    of the block, unless it was being ignored (``nohup``) or this is not the main thread
    (where Python cannot handle signals). Code that knows more of what was left undone
    raises its own :class:`Interrupted` (a sweep: the jobs after the running one). On the
    way out, more of the same signals are ignored until the line is printed.
    """
    out = sys.stderr if stderr is None else stderr
    previous = signal.getsignal(signal.SIGTERM)
    main = threading.current_thread() is threading.main_thread()
    # Not in the main thread, nor over SIG_IGN (nohup) or a handler set outside Python.
    ours = main and previous not in (signal.SIG_IGN, None)
    if ours:
        signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        yield
    except KeyboardInterrupt as exc:
        stopped = exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)
        with _ignoring(main, signal.SIGINT, signal.SIGTERM):
            print(stopped.line(), file=out, flush=True)
        raise SystemExit(stopped.status) from None
    finally:
        if ours:
            signal.signal(signal.SIGTERM, previous)


def _raise_interrupted(signo: int, frame: object) -> None:
    raise Interrupted(signo)


@contextmanager
def _ignoring(main: bool, *signals: signal.Signals) -> Iterator[None]:
    if not main:
        yield
        return
    before = {sig: signal.signal(sig, signal.SIG_IGN) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def run_validated(
    main: Callable[..., T],
    *args: Any,
    argv: Sequence[str] | None = None,
    stderr: TextIO | None = None,
    **kwargs: Any,
) -> T:
    """Call ``main(*args, **kwargs)`` and turn a config error into one message and exit.

    * an :class:`AllocationError` from anywhere (the task, a resolver during
      ``--cfg job --resolve``): ``error: invalid allocation`` and the error, exit 2;
    * the ``areal`` launcher's list of invalid jobs: that list, exit 2;
    * an OmegaConf error (an interpolation that does not resolve, a missing ``???``
      value): its key (or the override that introduced it), the value and a fix, exit 2;
    * a YAML file that does not parse: the file, line and column, exit 2;
    * a YAML file over areal-conf's limits (size, nesting, values once aliases are
      expanded) or not UTF-8: the file, the limit and how to raise it, exit 2 (every
      file Hydra loads within the call is checked: :mod:`areal_conf.config.yaml_limits`);
    * any other error Hydra reports compactly: its message, exit 1, as Hydra does;
    * a closed stdout (``--help | head``): quietly, exit 1;
    * Hydra unable to create its output directory (``hydra.run.dir=/dev/null/x``): the
      directory, why, and the option that moves it, exit 2;
    * ``SIGINT`` or ``SIGTERM``: one line, exit 130 or 143 (:func:`interruptible`).

    Hydra prints a traceback for most exceptions before this function could see them;
    so for the duration of the call it asks Hydra to re-raise them instead
    (``HYDRA_FULL_ERROR=1``), and restores the variable afterwards. ``argv`` (default
    ``sys.argv[1:]``) is where an interpolation error without a key is looked up.
    With ``HYDRA_FULL_ERROR=1`` already set, errors are left alone (full tracebacks);
    any other value counts as unset, as it does for Hydra.
    """
    if not callable(main):
        raise ConfigError(
            f"run_validated takes the app's main function, got {type(main).__name__}",
            hint="pass the @hydra.main function itself: run_validated(main)",
        )
    out = sys.stderr if stderr is None else stderr
    with interruptible(out):
        if os.environ.get(_FULL_ERROR) == "1":
            with _yaml_limits():
                return main(*args, **kwargs)  # the user asked Hydra for full tracebacks
        return _reported(main, args, kwargs, argv, out)


def _reported(
    main: Callable[..., T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    argv: Sequence[str] | None,
    out: TextIO,
) -> T:
    with _hydra_reraises(), _yaml_limits():
        try:
            with output_may_close():
                return main(*args, **kwargs)
        except Exception as exc:
            reported = report(exc, sys.argv[1:] if argv is None else argv)
            if reported is None:
                raise
            message, status = reported
            print(message, file=out)
            raise SystemExit(status) from None


class _OutputToALeavingReader:
    """``sys.stdout`` for a reader that may stop reading (``... | head``): once the pipe
    is closed, the rest of the output goes to devnull and the program carries on, so its
    exit status is its verdict (and a command it runs still runs)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._reader_left()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_left()

    def _reader_left(self) -> None:
        # The stream's buffer is written to devnull at its next flush, not retried
        # on the closed pipe; children started from now on inherit devnull too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def output_may_close() -> Iterator[None]:
    """Within the block, a reader that closes stdout early is not an error."""
    real = sys.stdout
    sys.stdout = cast(TextIO, _OutputToALeavingReader(real))
    try:
        yield
        sys.stdout.flush()
    finally:
        sys.stdout = real


def report(exc: BaseException, argv: Sequence[str] = ()) -> tuple[str, int] | None:
    """The message and exit status :func:`run_validated` gives for ``exc``, or None for
    an error that is not about the config (it keeps its traceback)."""
    if isinstance(exc, ErrorAtKey):
        override = exc.given_by(argv)  # the command line wrote the key: fix that override
        return f"error: invalid config\n{exc.for_override(override) if override else exc}", (
            EXIT_INVALID
        )
    if isinstance(exc, UnreadableYaml):
        return f"error: invalid config\n{exc}", EXIT_INVALID
    if isinstance(exc, AllocationError):
        what = "setting" if exc.variable is not None else "allocation"
        return f"error: invalid {what}\n{exc}", EXIT_INVALID
    typed = typed_value_error(exc)
    if typed is not None:
        return f"error: invalid config\n{typed}", EXIT_INVALID
    if _is_compact_hydra_error(exc):
        text = str(exc)
        if isinstance(exc.__cause__, AllocationError):
            # the areal launcher's list of invalid jobs, the layouts sweeper's refusals
            return (text if "error:" in text else f"error: {text}"), EXIT_INVALID
        if _is_omegaconf_error(exc.__cause__):
            text += "\n" + str(exc.__cause__)
        if _PARENT_TRAVERSAL in text:
            text += "\n" + parent_traversal_hint()
        return text, EXIT_HYDRA
    if _is_omegaconf_error(exc):
        return _omegaconf_message(exc, argv), EXIT_INVALID
    if is_yaml_error(exc):
        return f"error: invalid config\n{unparsable_yaml(exc)}", EXIT_INVALID
    if isinstance(exc, OSError):
        return _output_directory_message(exc)
    return None


#: Where Hydra creates a run's or a sweep's directory: (module, function) -> the option
#: that names the directory (None: the function says, in its ``job_dir_key``).
_HYDRA_MAKES_DIRECTORIES = {
    ("hydra.core.utils", "run_job"): None,
    ("hydra.core.utils", "_run_job"): None,  # hydra-core 1.4.0rc: run_job calls it
    ("hydra._internal.core_plugins.basic_sweeper", "sweep"): "hydra.sweep.dir",
    ("hydra._internal.core_plugins.basic_launcher", "launch"): "hydra.sweep.dir",
}
_EXAMPLE_DIRECTORY = {"hydra.run.dir": "outputs/run1", "hydra.sweep.dir": "multirun/sweep1"}


def _output_directory_message(exc: OSError) -> tuple[str, int] | None:
    """An ``OSError`` raised while Hydra creates the output directory of a run or a sweep
    (a path through a file, no permission): the directory, why, and the option to change;
    None for any other ``OSError`` (it keeps its traceback)."""
    key: str | None = None
    directory: object = None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        where = (frame.f_globals.get("__name__"), frame.f_code.co_name)
        if where in _HYDRA_MAKES_DIRECTORIES:
            key = _HYDRA_MAKES_DIRECTORIES[where] or frame.f_locals.get("job_dir_key")
            named = frame.f_locals.get("output_dir") or frame.f_locals.get("sweep_dir")
            directory = named or directory
        tb = tb.tb_next
    if not isinstance(key, str) or key not in _EXAMPLE_DIRECTORY:
        return None
    why = exc.strerror or type(exc).__name__
    if exc.filename is not None and str(exc.filename) != str(directory):
        why += f" ({exc.filename})"
    error = AllocationError(
        f"Hydra cannot create the output directory {str(directory)!r}: {why}",
        hint=f"set {key} to a directory that can be created, e.g. {key}={_EXAMPLE_DIRECTORY[key]}",
    )
    return f"error: invalid config\n{error}", EXIT_INVALID


def parent_traversal_hint() -> str:
    """What to do when this Hydra refuses a defaults entry that starts with ``..``."""
    hydra = sys.modules.get("hydra")
    version = getattr(hydra, "__version__", "installed")
    return (
        "hint: AReaL pins hydra-core 1.4.0.dev1, which composes '..' in a defaults list as "
        f"AReaL's examples use it; hydra-core {version} refuses it (AReaL's own loader "
        "too). Keep the file as it is and install AReaL's pins: "
        f"python -m pip install {AREAL_HYDRA_PINS}"
    )


def _omegaconf_message(exc: BaseException, argv: Sequence[str]) -> str:
    allocation = next((e for e in chain(exc) if isinstance(e, AllocationError)), None)
    key = getattr(exc, "full_key", None) or None
    if allocation is not None:
        # A resolver (an `allocation` node) rejected a backend string: name the key the
        # string came from when the command line gave it.
        if key is None and isinstance(allocation.spec, str) and allocation.spec:
            found = _override_for([allocation.spec], argv, interpolation=False)
            key = None if found is None else found.partition("=")[0]
        return "error: invalid allocation\n" + str(
            allocation.with_context(key) if key else allocation
        )
    value: object = None
    if key is None:
        reason = str(unresolvable(None, exc).reason)
        quoted = [part for i, part in enumerate(reason.split("'")) if i % 2 == 1 and part]
        found = _override_for(quoted, argv, interpolation=True)
        if found is not None:
            key, _, value = found.partition("=")
    else:
        node = getattr(exc, "child_node", None)
        value = node._value() if node is not None and hasattr(node, "_value") else None
    error = unresolvable(key, exc, value)
    if not key:
        error = AllocationError(
            error.reason,
            value,
            hint=error.hint + "; python train.py --cfg job shows the config as composed",
        )
    return "error: invalid config\n" + str(error)


def _override_for(names: Sequence[str], argv: Sequence[str], *, interpolation: bool) -> str | None:
    """The command-line override (``key=value``) an error is about: the first whose value
    contains one of ``names`` (the names an OmegaConf message quotes, or the rejected
    backend string), and with ``interpolation`` only values holding ``${``."""
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or (interpolation and "${" not in value):
            continue
        if any(name in value for name in names):
            return f"{key.lstrip('+~')}={value}"
    return None


def _is_compact_hydra_error(exc: object) -> bool:
    return defined_in(exc, "hydra.errors", "CompactHydraException")


def _is_omegaconf_error(exc: object) -> bool:
    return defined_in(exc, OMEGACONF_ERRORS, "OmegaConfBaseException")


def _yaml_limits() -> AbstractContextManager[None]:
    """Every YAML file Hydra loads within the block is checked against areal-conf's
    limits first (:mod:`areal_conf.hydra.files`); nothing to do, and no Hydra imported,
    for an application that has not loaded Hydra."""
    if "hydra" not in sys.modules:
        return nullcontext()
    from areal_conf.hydra.files import checked_yaml_files

    return checked_yaml_files()


@contextmanager
def _hydra_reraises() -> Iterator[None]:
    before = os.environ.get(_FULL_ERROR)
    os.environ[_FULL_ERROR] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(_FULL_ERROR, None)
        else:
            os.environ[_FULL_ERROR] = before
