"""The messages for a YAML file that does not parse, and how messages name a file.

PyYAML's errors are recognised by their class and read by their attributes, so nothing
here imports PyYAML."""

from __future__ import annotations

import os

from areal_conf.errors import AllocationError


def is_yaml_error(err: BaseException) -> bool:
    """True for PyYAML's error about a file that does not parse (recognised by its class,
    so that nothing here imports PyYAML)."""
    return any(
        cls.__module__ == "yaml.error" and cls.__name__ == "YAMLError" for cls in type(err).__mro__
    )


def file_shown(name: str) -> str:
    """A file's name as messages show it: relative to the working directory when it is
    below it (as the user wrote it, most of the time), else as given."""
    if os.path.isabs(name) and not os.path.relpath(name).startswith(".."):
        return os.path.relpath(name)
    return name


def unparsable_yaml(
    err: BaseException, path: object = None, shown: str | None = None
) -> AllocationError:
    """The error for a YAML file that does not parse (PyYAML's error, read by its
    attributes): the file (called ``shown`` when it is ``path``), the line and column,
    PyYAML's reason."""
    mark = getattr(err, "problem_mark", None)
    name = str(getattr(mark, "name", None) or path or "a YAML file")
    if (
        shown is not None
        and path is not None
        and os.path.realpath(name) == os.path.realpath(str(path))
    ):
        name = shown
    else:
        name = file_shown(name)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    problem = getattr(err, "problem", None) or str(err).split("\n")[0]
    context, start = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and start is not None:  # where the unfinished part began
        problem += f" ({context} at line {start.line + 1}, column {start.column + 1})"
    return AllocationError(
        f"cannot read {name}{where}: the YAML does not parse: {problem}",
        hint="fix the YAML there; Hydra, and so AReaL, cannot load the file as it is",
    )
