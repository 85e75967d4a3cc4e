"""Run an application so that an invalid config ends in one message, never a traceback.

:func:`run_validated` wraps the entry point of a Hydra application (the function
decorated with ``@hydra.main``). Whatever path the bad input takes—the task calling
``validate(cfg)``, ``--cfg job --resolve`` expanding an ``allocation`` node, the ``areal``
launcher rejecting a multirun, an interpolation that cannot be resolved—the user sees
one message on stderr and the process exits with :data:`EXIT_INVALID`, in a single run
and in a multirun alike. Errors that are not about the config keep their traceback.

This module imports no Hydra and no OmegaConf: it recognises their exceptions by the
modules that define them, which are loaded whenever such an exception exists.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, TextIO, TypeVar, cast

from areal_conf.errors import AllocationError
from areal_conf.known_keys import UnknownKey
from areal_conf.reading import is_yaml_error, unparsable_yaml, unresolvable

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
    * any other error Hydra reports compactly: its message, exit 1, as Hydra does;
    * a closed stdout (``--help | head``): quietly, exit 1.

    Hydra prints a traceback for most exceptions before this function could see them;
    so for the duration of the call it asks Hydra to re-raise them instead
    (``HYDRA_FULL_ERROR=1``), and restores the variable afterwards. ``argv`` (default
    ``sys.argv[1:]``) is where an interpolation error without a key is looked up.
    With ``HYDRA_FULL_ERROR=1`` already set, errors are left alone (full tracebacks);
    any other value counts as unset, as it does for Hydra.
    """
    out = sys.stderr if stderr is None else stderr
    if os.environ.get(_FULL_ERROR) == "1":
        return main(*args, **kwargs)  # the user asked Hydra for full tracebacks
    with _hydra_reraises():
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
    if isinstance(exc, UnknownKey):
        override = exc.given_by(argv)  # the command line wrote the key: fix that override
        return f"error: invalid config\n{exc.for_override(override) if override else exc}", (
            EXIT_INVALID
        )
    if isinstance(exc, AllocationError):
        return f"error: invalid allocation\n{exc}", EXIT_INVALID
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
    return None


def typed_value_error(exc: BaseException) -> AllocationError | None:
    """A value that a typed config (``areal_schema``, the sweeper's and the launcher's
    configs) refused while Hydra composed it, from an override (``cluster.n_nodes=inf``,
    ``hydra.sweeper.fits=maybe``) or a file: the key, the value and a fix. The message is
    the one areal-conf's readers give the value (:func:`areal_conf.validation.value_error`),
    else the type the key takes and its default, from the config's dataclass."""
    found = next((e for e in _chain(exc) if _defined_in(e, _OMEGACONF, "ValidationError")), None)
    key = getattr(found, "full_key", None)
    if found is None or not key or not isinstance(key, str):
        return None
    from areal_conf.validation import value_error

    value = getattr(found, "value", None)
    error = value_error(key, value)
    if error is not None:
        return error
    reason = str(getattr(found, "msg", "") or found).split("\n")[0]
    owner, field_name = getattr(found, "object_type", None), key.rpartition(".")[2]
    fields = (
        {f.name: f for f in dataclasses.fields(cast(Any, owner))} if _is_dataclass(owner) else {}
    )
    default = fields[field_name].default if field_name in fields else dataclasses.MISSING
    if default is dataclasses.MISSING or isinstance(default, dict | list):
        hint = f"give {key} a value of its type, or leave it out"
    else:
        hint = f"e.g. {key}={_as_override(default)} (its default)"
    error = AllocationError(f"{key}: {reason}", value, None, hint=hint)
    error.key = key
    return error


def _is_dataclass(kind: object) -> bool:
    return isinstance(kind, type) and dataclasses.is_dataclass(kind)


def _as_override(value: object) -> str:
    """A value as a Hydra override writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


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
    allocation = next((e for e in _chain(exc) if isinstance(e, AllocationError)), None)
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
            None,
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


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _defined_in(exc: object, module: str, name: str) -> bool:
    # The module is loaded whenever one of its exceptions exists; never import it here.
    mod = sys.modules.get(module)
    cls = getattr(mod, name, None) if mod is not None else None
    return isinstance(cls, type) and isinstance(exc, cls)


def _is_compact_hydra_error(exc: object) -> bool:
    return _defined_in(exc, "hydra.errors", "CompactHydraException")


_OMEGACONF: Final = "omegaconf.errors"


def _is_omegaconf_error(exc: object) -> bool:
    return _defined_in(exc, _OMEGACONF, "OmegaConfBaseException")


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
