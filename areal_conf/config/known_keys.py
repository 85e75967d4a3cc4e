"""The keys AReaL's loader accepts, and the check that a config has no others.

AReaL's loader (``load_expr_config`` in ``areal/api/cli_args.py``) merges a config into
its config dataclasses strictly: a key that is no field of the dataclass at its place
stops the run (``Key 'bakend' not in 'PPOActorConfig'``). Those fields, read from
``cli_args.py`` at the commit of each version's rules by ``scripts/areal_keys.py``, are
package data (``areal_conf/data/areal_keys_<version>.json``); AReaL is never imported.

:func:`check_keys` runs first when a config is read (:func:`areal_conf.config.reading.read_config`)
and reports the first key that AReaL's dataclasses lack, in config order, as one
:class:`UnknownKey` with the key it may mean: in the engine sections (the roles, and any
other section with a ``backend``), ``cluster``, ``scheduler``, ``sglang``, ``vllm``,
``gconfig``, the datasets and every other section AReaL's experiment configs declare, down
to their subsections (``actor.mb_spec``, ``actor.scheduling_spec.0``). A key is valid
where any of AReaL's experiment configs (SFT, RW, DPO, PPO, GRPO) has it: ``actor.beta``
is DPO's. Top-level keys are not checked (a driver's class adds its own; an AReaL command's
are: :mod:`areal_conf.command.driver_class`), nor sections only a driver declares, nor the
keys under a ``dict`` field. The values of the keys it knows, top-level ones included,
are checked as AReaL's merge converts them (:mod:`areal_conf.config.known_values`), except
in areal-conf's own configs, whose schema types them (a null ``backend``: no such engine).

areal-conf's own configs (those with a ``model`` section, or typed by ``areal_schema``)
may also have areal-conf's keys: the ``model`` section, ``cluster.gpu_memory_gb`` and an
engine's ``allocation`` (:mod:`areal_conf.hydra.structured`). The teacher's keys of the layout
another supported AReaL version uses are left to the teacher rules, which translate them.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

from areal_conf.config.known_values import PlainField, WrongValue, wrong_value
from areal_conf.config.nodes import (
    child_of,
    children_of,
    is_written_list,
    is_written_section,
    item_of,
    keys_of,
    typed_by_areal_conf,
    written_at,
)
from areal_conf.config.required_values import missing_values
from areal_conf.errors import ErrorAtKey, override_key
from areal_conf.hints import Fix, Hint, Sentence, either, fix, sentence

#: What a field holds, in the table: a value (None), a section of a dataclass
#: (``"Name"``), a list of them (``"Name[]"``) or any keys (``"*"``).
FREE: Final = "*"
_LIST: Final = "[]"
#: How close a key must be to one it may mean (difflib's ratio).
CUTOFF: Final = 0.75
#: A section with at most this many keys lists them when a key is not close to any.
_LISTED: Final = 20
#: Top-level sections that are no engine, whatever keys they hold.
_NOT_ENGINES: Final = frozenset({"model", "hydra"})
#: The section areal-conf's own configs add (AReaL has no ``model``).
MODEL: Final = "model"
#: areal-conf's own keys, valid in its own configs only: what its schema
#: (``areal_conf.hydra.structured``, which the core does not import) adds to AReaL's engine
#: sections and cluster. A test keeps them and the schema's dataclasses equal.
OWN_ENGINE_KEYS: Final = frozenset({"allocation"})
OWN_CLUSTER_KEYS: Final = frozenset({"gpu_memory_gb"})
#: Keys whose values areal-conf parses itself, with messages of their own: their values
#: are left to that parser.
PARSED_HERE: Final = frozenset({"backend"})
#: What to do instead of an areal-conf key in a config that is not areal-conf's own.
_OWN_KEY_INSTEAD: Final = {
    "gpu_memory_gb": "AREAL_CONF_GPU_MEMORY_GB=80 gives areal-conf a GPU's memory instead, as "
    "does --gpu-memory-gb 80 on python -m areal_conf",
    "allocation": "areal-conf derives an engine's allocation from its backend",
}


@dataclass(frozen=True)
class Removed:
    """Keys AReaL refuses with a message of its own (before its merge), in ``sections``."""

    keys: frozenset[str]
    sections: tuple[str, ...]
    message: tuple[str, ...]  # AReaL's message, one entry per line


@dataclass(frozen=True)
class KeyTable:
    """The fields of AReaL's config dataclasses at one commit (one version's rules)."""

    version: str
    commit: str
    classes: Mapping[str, Mapping[str, str | None]]
    experiments: tuple[str, ...]  # BaseExperimentConfig and its subclasses
    removed: Removed | None = None
    #: The fields of a plain type of each class, which AReaL's merge converts.
    values: Mapping[str, Mapping[str, PlainField]] = dataclasses.field(default_factory=dict)
    #: The fields of each class whose section AReaL makes by default (default_factory).
    made: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)


@functools.cache
def areal_keys(version: str) -> KeyTable:
    """The table of AReaL ``version``'s config keys (package data)."""
    text = resources.files("areal_conf").joinpath("data", f"areal_keys_{version}.json")
    data = json.loads(text.read_text(encoding="utf-8"))
    gone = data.get("removed")
    return KeyTable(
        version=data["areal_version"],
        commit=data["areal_commit"],
        classes=data["classes"],
        experiments=tuple(data["experiments"]),
        removed=Removed(frozenset(gone["keys"]), tuple(gone["sections"]), tuple(gone["message"]))
        if gone
        else None,
        values={
            owner: {
                name: PlainField.of(owner, name, entry, version) for name, entry in fields.items()
            }
            for owner, fields in data["values"].items()
        },
        made={owner: frozenset(keys) for owner, keys in data.get("made", {}).items()},
    )


@dataclass(frozen=True)
class Section:
    """The keys one section of a config may have.

    ``classes`` are AReaL's dataclasses at its place (several where the experiment
    configs differ: ``actor`` is a ``PPOActorConfig``, a ``DPOEngineConfig`` or a
    ``TrainEngineConfig``); ``fields`` what each of their keys holds; ``own``
    areal-conf's keys, valid in areal-conf's own configs; ``left`` keys that another
    AReaL version has here, which the rules of this one translate.
    """

    path: str
    classes: tuple[str, ...]
    fields: Mapping[str, frozenset[str | None]]
    own: frozenset[str] = frozenset()
    left: frozenset[str] = frozenset()
    table: KeyTable | None = None
    #: The keys that hold sections of AReaL's dataclasses, and those dataclasses.
    subsections: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    #: The keys whose values AReaL's merge converts: the field in each class that has it.
    values: Mapping[str, tuple[PlainField, ...]] = dataclasses.field(default_factory=dict)
    #: The keys every class here requires a value for, in the order they declare them.
    mandatory: tuple[str, ...] = ()
    #: The keys whose sections every class here makes by default, in that order.
    made: tuple[str, ...] = ()

    def child(self, key: str) -> Section | None:
        """The section under ``key`` (None: a value, or a section of any keys)."""
        names = self.subsections.get(key)
        if names is None or self.table is None:
            return None
        return _section(self.table.version, f"{self.path}.{key}" if self.path else key, names)

    def known(self, own_config: bool) -> list[str]:
        """The keys valid here, AReaL's first."""
        return [*self.fields, *(sorted(self.own - set(self.fields)) if own_config else ())]

    def describe(self) -> str:
        """``AReaL's PPOActorConfig or DPOEngineConfig``: the dataclasses here that are
        not part of another (``TrainEngineConfig`` is part of ``PPOActorConfig``)."""
        if not self.classes:
            return f"areal-conf's {self.path} section"
        assert self.table is not None
        keys = {name: set(self.table.classes[name]) for name in self.classes}
        widest = [
            name
            for name in self.classes
            if not any(keys[name] < keys[other] for other in self.classes if other != name)
        ]
        return "AReaL's " + " or ".join(dict.fromkeys(widest))


def section_of(table: KeyTable, path: str, classes: Sequence[str]) -> Section:
    """The section of AReaL's dataclasses ``classes`` (their keys together) at ``path``."""
    fields: dict[str, set[str | None]] = {}
    values: dict[str, list[PlainField]] = {}
    plains: dict[str, list[PlainField]] = {}  # the backend too: it is required all the same
    for name in classes:
        for key, kind in table.classes[name].items():
            fields.setdefault(key, set()).add(kind)
        for key, plain in table.values.get(name, {}).items():
            plains.setdefault(key, []).append(plain)
            if key not in PARSED_HERE:
                values.setdefault(key, []).append(plain)
    subsections = {}
    for key, kinds in fields.items():
        wanted = {kind.removesuffix(_LIST) for kind in kinds if kind}
        if wanted and FREE not in kinds:
            subsections[key] = tuple(n for n in table.classes if n in wanted)  # AReaL's order
    # Only what every class here requires or makes: a driver's own class may be any.
    made = {key for key in fields if all(key in table.made.get(n, ()) for n in classes)}
    own: frozenset[str] = frozenset()
    if "backend" in fields:  # an engine section
        own = OWN_ENGINE_KEYS
    elif "n_gpus_per_node" in fields:  # the cluster
        own = OWN_CLUSTER_KEYS
    return Section(
        path,
        tuple(classes),
        {key: frozenset(kinds) for key, kinds in fields.items()},
        own,
        table=table,
        subsections=subsections,
        values={key: tuple(plain) for key, plain in values.items()},
        mandatory=tuple(
            key
            for key, plain in plains.items()
            if len(plain) == len(classes) and all(p.mandatory for p in plain)
        ),
        made=tuple(key for key in subsections if key in made),
    )


def _section(version: str, path: str, classes: Sequence[str]) -> Section:
    """:func:`section_of` for AReaL ``version``, built once per place."""
    return _built_section(version, path, tuple(classes))


@functools.cache
def _built_section(version: str, path: str, classes: tuple[str, ...]) -> Section:
    return section_of(areal_keys(version), path, classes)


@functools.cache
def _model_keys() -> tuple[str, ...]:
    from areal_conf.model.shape import SHAPE_KEYS
    from areal_conf.spec.model_checks import MODEL_KEYS

    return (*MODEL_KEYS, *SHAPE_KEYS)


@functools.cache
def root_section(version: str) -> Section:
    """The top level: every experiment config's fields together."""
    return _section(version, "", areal_keys(version).experiments)


@functools.cache
def _engine_classes(version: str) -> tuple[str, ...]:
    """AReaL's engine dataclasses: those with a ``backend``, for an engine section that
    only a driver's config class declares (``judge_engine: InferenceEngineConfig``)."""
    table = areal_keys(version)
    return tuple(name for name, fields in table.classes.items() if "backend" in fields)


def top_section(version: str, name: str, node: Any) -> Section | None:
    """The section at the top-level key ``name`` (None: not checked)."""
    root = root_section(version)
    if name == MODEL:
        return _model_section()
    if name in root.fields:
        section = root.child(name)
        if section is not None and name == "teacher":
            # The teacher's other layout (AReaL 1.0's flat engine keys under 2.0, 2.0's
            # engine_type/rollout/train under 1.0): the teacher rules translate it.
            others = (_teacher(v) for v in _versions() if v != version)
            layout = {key for other in others for key in (*other.fields, *other.own)}
            section = dataclasses.replace(section, left=frozenset(layout - set(section.fields)))
        return section
    if name not in _NOT_ENGINES and is_written_section(node) and "backend" in keys_of(node):
        return _section(version, name, _engine_classes(version))
    return None


@functools.cache
def _model_section() -> Section:
    """areal-conf's ``model`` section: values only."""
    return Section(MODEL, (), dict.fromkeys(_model_keys(), frozenset({None})))


@functools.cache
def _teacher(version: str) -> Section:
    """The teacher's section under AReaL ``version``."""
    section = root_section(version).child("teacher")
    assert section is not None
    return section


def _versions() -> tuple[str, ...]:
    from areal_conf.areal.versions import SUPPORTED

    return SUPPORTED


def section_at(cfg: Any, path: str, version: str) -> Section | None:
    """The section at a dotted ``path`` of ``cfg`` (a list's items by their index), or
    None where the keys are not checked."""
    parts = path.split(".")
    node = child_of(cfg, parts[0]) if is_written_section(cfg) and parts[0] in keys_of(cfg) else None
    section = top_section(version, parts[0], node)
    for part in parts[1:]:
        if section is None:
            return None
        if part.isdigit():
            continue  # an item of a list of sections
        section = section.child(part)
    return section


# --------------------------------------------------------------------------- the check


class UnknownKey(ErrorAtKey):
    """A key that AReaL's config classes lack at its place. ``right`` is the key it may
    mean (None: none is close) and ``right_present`` whether the config has that key
    already (so an override sets it without ``++``)."""

    right: str | None = None
    right_present: bool = False

    def for_override(self, override: str) -> UnknownKey:
        """The same error, its fix written for the override ``override`` that wrote the
        key: the same override with the key it may mean."""
        if self.right is None or self.key is None:
            return unknown_error(self.reason, f"remove the override {override}", self.key)
        written, _, value = override.partition("=")
        key = override_key(written)
        moved = self.right + key[len(self.key) :]
        plus = "" if self.right_present and moved == self.right else "++"
        return unknown_error(
            self.reason,
            sentence(
                f"did you mean {self.right}? write ",
                fix(f"{plus}{moved}={value}"),
                f" instead of {override}",
            ),
            self.key,
            self.right,
            self.right_present,
        )


def unknown_error(
    reason: str,
    hint: str | Hint | Fix | Sentence,
    key: str | None,
    right: str | None = None,
    present: bool = False,
) -> UnknownKey:
    error = UnknownKey(reason, hint=hint)
    error.key, error.right, error.right_present = key, right, present
    return error


def check_keys(cfg: Any, version: str) -> tuple[WrongValue | None, tuple[WrongValue, ...]]:
    """Raise :class:`UnknownKey` for the first key of ``cfg`` that AReaL ``version``'s
    dataclasses lack at its place (see the module docstring); return the first value
    AReaL's merge refuses, if any, for the caller to raise once it has read the keys it
    reads itself (whose own messages say more), and the values AReaL requires that the
    config does not give (:mod:`areal_conf.config.required_values`)."""
    top = keys_of(cfg)
    own_config = MODEL in top
    root = root_section(version)
    wrong: list[WrongValue] = []
    missing: list[WrongValue] = []
    for name in top:
        node = child_of(cfg, name)
        plain = None if own_config else root.values.get(name)
        if plain:  # a value of the experiment configs' own (total_train_epochs)
            _add_refused(wrong, node, name, plain)
        section = top_section(version, name, node)
        if section is not None:
            _walk(node, name, section, own_config, wrong, missing)
    if not own_config:
        missing[:0] = missing_values(children_of(cfg), "", root)
    return (wrong[0] if wrong else None), tuple(missing)


def _walk(
    node: Any,
    path: str,
    section: Section,
    own_config: bool,
    wrong: list[WrongValue],
    missing: list[WrongValue],
) -> None:
    if is_written_list(node):
        for i in range(len(node)):
            _walk(item_of(node, i), f"{path}.{i}", section, own_config, wrong, missing)
        return
    if not is_written_section(node):
        return
    own = own_config or typed_by_areal_conf(node)
    children = children_of(node)
    for key in children:
        if key in section.fields or key in section.left:
            continue
        if own and key in section.own:
            continue
        raise unknown_key(node, list(children), path, key, section, own)
    if not own:
        missing.extend(missing_values(children, path, section))
    for key, value in children.items():
        plain = () if own else section.values.get(key)  # own configs: typed by own schema
        if plain:
            _add_refused(wrong, value, f"{path}.{key}", plain)
        child = section.child(key) if key in section.fields else None
        if child is not None:
            _walk(value, f"{path}.{key}", child, own_config, wrong, missing)


def _add_refused(
    wrong: list[WrongValue], node: Any, path: str, fields: Sequence[PlainField]
) -> None:
    found = wrong_value(node, path, fields)
    if found is not None:
        wrong.append(found)


def unknown_key(
    node: Any, keys: list[str], path: str, key: str, section: Section, own: bool
) -> UnknownKey:
    """The error for ``key`` under ``path`` (``""``: the top), a key ``section`` lacks."""
    full = f"{path}.{key}" if path else key
    gone = section.table.removed if section.table is not None else None
    if gone is not None and key in gone.keys and path in gone.sections:
        said = " ".join(gone.message[:2]) + " " + " / ".join(gone.message[2:])
        return unknown_error(
            f"{full}: AReaL removed this key; AReaL's loader refuses the config",
            fix(f"~{full}", lead="remove it: ", remark=f" (AReaL says: {said})"),
            full,
        )
    reason = f"{full}: no such key in {section.describe()}"
    if section.classes:
        reason += "; AReaL's loader refuses the config"
    if key in section.own and not own:  # an areal-conf key in an AReaL config
        instead = _OWN_KEY_INSTEAD.get(key)
        return unknown_error(
            reason + " (it is a key of areal-conf's own configs)",
            fix(f"~{full}", lead="remove it: ", remark=f" ({instead})" if instead else ""),
            full,
        )
    relative = _close(key, section, own)
    if relative is None:
        return unknown_error(
            reason,
            either(
                fix(f"~{full}", lead="remove it: "), ", or ", f"write {keys_said(section, own)}"
            ),
            full,
        )
    right = f"{path}.{relative}" if path else relative
    present = _has_path(node, relative.split("."))
    moves = _renamed(full, right, present, written_at(node, key))
    rename = (
        fix(
            *moves,
            lead=f"did you mean {right}? rename it: ",
            remark=" (on the command line, else the same rename in the YAML)",
            quoted=True,
        )
        if moves
        else f"did you mean {right}? rename it where it is written (the YAML, else the "
        f"override that sets {full})"
    )
    return unknown_error(reason, rename, full, right, present)


def _close(key: str, section: Section, own: bool) -> str | None:
    """The key ``key`` may mean, under the section: one of its keys a few letters away,
    else the same key in one of its subsections (``actor.lr``: ``actor.optimizer.lr``)."""
    close = difflib.get_close_matches(key, section.known(own), n=1, cutoff=CUTOFF)
    if close:
        return close[0]
    for name in section.fields:
        child = section.child(name)
        if child is not None and key in child.fields:
            return f"{name}.{key}"
    return None


def _has_path(node: Any, parts: Sequence[str]) -> bool:
    for part in parts:
        if not is_written_section(node) or part not in keys_of(node):
            return False
        node = child_of(node, part)
    return True


def _renamed(wrong: str, right: str, present: bool, written: Any) -> tuple[str, ...]:
    """The overrides that move ``wrong``'s value to ``right``, as Hydra reads them (``()``:
    overrides cannot say it: a list, an interpolation, many keys, a key inside a list, a
    line break in a value)."""
    from areal_conf.overrides import hydra_value

    if any(part.isdigit() for part in wrong.split(".")):
        return ()
    leaves = list(_leaves(right, written))
    if not leaves or len(leaves) > 3:
        return ()
    sets = []
    for key, value in leaves:
        plus = "" if present and key == right else "++"
        if isinstance(value, str):
            if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
                return ()
            sets.append(f"{plus}{key}={hydra_value(value)}")
        else:
            text = str(value).lower() if isinstance(value, bool) else str(value)
            sets.append(f"{plus}{key}={text}")
    return (f"~{wrong}", *sets)


def _leaves(key: str, value: Any) -> Iterator[tuple[str, Any]]:
    """``(key, value)`` for each plain value written under ``key``; nothing at all when
    one of them is not plain (a list, an interpolation, null)."""
    if isinstance(value, Mapping):
        found = [leaf for k, v in value.items() for leaf in _leaves(f"{key}.{k}", v)]
        if len(found) == sum(1 for _ in _flat(value)):
            yield from found
        return
    if isinstance(value, bool | int | float) or (
        isinstance(value, str) and value and "${" not in value
    ):
        yield key, value


def _flat(value: Mapping[str, Any]) -> Iterator[Any]:
    for v in value.values():
        if isinstance(v, Mapping):
            yield from _flat(v)
        else:
            yield v


def keys_said(section: Section, own: bool) -> str:
    """``one of its keys: a, b`` for a small section, else ``a key AReaL's X has``."""
    known = section.known(own)
    if len(known) <= _LISTED:
        return f"one of its keys: {', '.join(known)}"
    return f"a key {section.describe()} has"
