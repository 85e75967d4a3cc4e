"""The values AReaL's loader requires: a field with no default (``MISSING`` in
``areal/api/cli_args.py``: ``experiment_name``, ``trial_name``, ``train_dataset.path``,
``saver.fileroot``, ...) must be given, in the sections the YAML writes and in those AReaL
makes by default (a ``default_factory``: ``saver``, ``stats_logger``, ``train_dataset``,
...), else ``OmegaConf.to_object`` stops the run ("Structured config of type
`TrainDatasetConfig` has missing mandatory value: path"). A value written ``???`` is no
value either. Which fields and sections these are is package data beside the keys
(``values``' ``mandatory`` and ``made`` of ``areal_conf/data/areal_keys_<version>.json``).

The key check finds them (:func:`missing_values`) and the reading keeps them; a whole
AReaL config may not lack them (the check of an AReaL command refuses it with
:func:`required_error`), a config given to ``validate`` for its layouts may.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from areal_conf.areal.roles import example_backend
from areal_conf.config.known_values import WrongValue, written_value
from areal_conf.errors import ErrorAtKey
from areal_conf.hints import fix

if TYPE_CHECKING:
    from areal_conf.config.known_keys import Section


class MissingValue(WrongValue):
    """A value AReaL requires at ``key`` that the config does not give; ``override``
    gives it (a placeholder for the value: AReaL has no default to offer)."""

    override: str = ""


def missing_values(
    children: Mapping[str, Any], path: str, section: Section
) -> Iterator[MissingValue]:
    """The required values a written section at ``path`` (its ``children``, the nodes by
    key) lacks or gives as ``???``, then those of the sections AReaL makes under it that
    the YAML leaves out. The sections it writes are the caller's to walk."""
    for key in section.mandatory:
        if key not in children:
            yield _missing(_at(path, key), section, written=False)
        elif _is_missing(children[key]):
            yield _missing(_at(path, key), section, written=True)
    for key in section.made:
        child = section.child(key)
        if key not in children and child is not None:
            yield from _made_values(_at(path, key), child, _at(path, key))


def required_error(missing: Sequence[ErrorAtKey]) -> ErrorAtKey:
    """One error for the values a whole AReaL config lacks (``missing``, in order): the
    first said, the others named, and a fix that gives them all."""
    first = missing[0]
    if len(missing) == 1:
        return first
    others = ", ".join(str(error.key) for error in missing[1:])
    error = MissingValue(
        f"{first.reason} (and {len(missing) - 1} more: {others})",
        hint=fix(
            *(overrides := [e.override for e in missing if isinstance(e, MissingValue)]),
            lead="give them values: ",
            quoted=any("$" in override for override in overrides),
        ),
    )
    error.key = first.key
    return error


def _made_values(path: str, section: Section, made: str) -> Iterator[MissingValue]:
    """The required values of a section AReaL makes with its defaults (under ``made``,
    the section the YAML leaves out): all of them."""
    for key in section.mandatory:
        yield _missing(_at(path, key), section, written=False, made=made)
    for key in section.made:
        child = section.child(key)
        if child is not None:
            yield from _made_values(_at(path, key), child, made)


def _missing(key: str, section: Section, *, written: bool, made: str = "") -> MissingValue:
    name = key.rpartition(".")[2]
    said = "??? is no value" if written else "missing"
    if made:
        said += f" (the config has no {made}: AReaL makes it with its defaults)"
    # a backend has its own example: the placeholder says less than a layout does; the
    # ref runs the actor's model, on the actor's layout in AReaL's examples
    # (ref.backend: ${actor.backend} in 52 of them)
    role = key.split(".")[0]
    value = f"<{name}>"
    if name == "backend":
        value = "${actor.backend}" if key == "ref.backend" else example_backend(role)
    override = f"{'' if written else '++'}{key}={value}"
    error = MissingValue(
        f"{key}: {said}; {section.describe()} has no default for {name}, and AReaL's loader "
        "refuses a config without a value for it",
        hint=fix(
            override,
            lead="give it a value, e.g. " if name == "backend" else "give it a value: ",
            quoted="$" in override,  # a shell would expand ${actor.backend}
        ),
    )
    error.key, error.instead, error.override = key, value, override
    return error


def _is_missing(node: Any) -> bool:
    """``???`` as written (not followed)."""
    value = written_value(node)
    return isinstance(value, str) and value == "???"


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
