"""Write the table of AReaL's config keys that areal-conf checks configs against.

AReaL's loader (``load_expr_config`` in ``areal/api/cli_args.py``) merges a YAML into its
config dataclasses strictly: a key that is no field of the class at its place is refused.
So the keys of an AReaL config are the fields of those dataclasses. This script reads
them from ``cli_args.py`` by its syntax tree (AReaL is not imported: no torch, no Hydra
of AReaL's) and writes, for each dataclass, its fields (inherited ones first, as Python
orders them) with what each field holds:

- ``null``: a value (a number, a string, a list of them);
- ``"Name"``: a section of the dataclass ``Name`` (optional or not);
- ``"Name[]"``: a list of sections of the dataclass ``Name`` (``tuple[Name, ...]``);
- ``"*"``: a section of any keys (``dict``, ``Any``).

``values`` gives, for each field of a plain type (``bool``, ``int``, ``float``, ``str``,
or one of them or None), that type, whether it may be null and its default where the
source writes one as a literal: the types OmegaConf's merge converts a value to, or
refuses it (``Value 'abc' of type 'str' could not be converted to Float``).

``made`` gives, for each dataclass, its fields whose section is made by default (a
``default_factory`` of a dataclass): a loaded config has them whether the YAML writes them
or not, and so their mandatory fields (``values``' ``mandatory``).

``experiments`` lists the experiment classes (``BaseExperimentConfig`` and its
subclasses), whose fields are a config's top-level keys; ``removed`` the keys AReaL
refuses with a message of its own before the merge (the ``behave_imp_weight_*`` keys
that ``rejection_sampling`` replaced), with that message. The AReaL commit the file was
read at is recorded beside it.

    git --git-dir=<AReaL git dir> archive cbff54d6 areal/api/cli_args.py | tar -x -C /tmp/areal
    python scripts/areal_keys.py /tmp/areal --version 2.0 --commit cbff54d6...

``SOURCE`` is an AReaL source tree (or its ``cli_args.py``); the commit is ``--commit``,
else the tree's ``.areal_commit`` file (the areal_loader tool's copy has one), else its
git ``HEAD``. The table goes to ``areal_conf/data/areal_keys_<version>.json`` unless
``--out`` says otherwise (``-``: standard output).
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

CLI_ARGS = Path("areal") / "api" / "cli_args.py"
EXPERIMENT_BASE = "BaseExperimentConfig"
#: Annotations whose value may hold any keys.
FREE = frozenset({"dict", "Dict", "Any", "DictConfig", "Mapping"})
#: Annotations of a sequence, whose one item type (``list[X]``, ``tuple[X, ...]``) may
#: be a section.
SEQUENCES = frozenset({"list", "List", "tuple", "Tuple", "Sequence"})
DATA_DIR = Path(__file__).resolve().parent.parent / "areal_conf" / "data"


class UnknownAnnotation(ValueError):
    """An annotation this script cannot classify: read it and extend the script."""


def _is_dataclass(node: ast.ClassDef) -> bool:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and node.value is None:
        return "None"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value  # a string annotation naming a type
    return ""


def _options(node: ast.expr) -> list[ast.expr]:
    """The members of a union (``A | B``, ``Optional[A]``, ``Union[A, B]``)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _options(node.left) + _options(node.right)
    if isinstance(node, ast.Subscript) and _name(node.value) in ("Optional", "Union"):
        inner = node.slice
        parts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        return [option for part in parts for option in _options(part)]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _options(ast.parse(node.value, mode="eval").body)
    return [node]


def classify(annotation: ast.expr, dataclasses: set[str]) -> str | None:
    """What a field of this annotation holds: None (a value), a dataclass's name, that
    name with ``[]`` (a list of them) or ``*`` (any keys)."""
    kinds = set()
    for option in _options(annotation):
        name = _name(option.value if isinstance(option, ast.Subscript) else option)
        if name == "None":
            continue
        if name in FREE:
            kinds.add("*")
        elif name in dataclasses and not isinstance(option, ast.Subscript):
            kinds.add(name)
        elif name in SEQUENCES and isinstance(option, ast.Subscript):
            inner = option.slice
            items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            item = _name(items[0])
            kinds.add(f"{item}[]" if item in dataclasses else "")
        elif any(name in dataclasses for name in _names_in(option)):
            raise UnknownAnnotation(ast.unparse(annotation))
        else:
            kinds.add("")  # a value: str, int, an Enum, list[str], ...
    if "*" in kinds:
        return "*"
    sections = sorted(kind for kind in kinds if kind)
    if len(sections) > 1 or (sections and "" in kinds):
        raise UnknownAnnotation(ast.unparse(annotation))
    return sections[0] if sections else None


def _names_in(node: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def read_fields(source: str) -> dict[str, dict[str, ast.AnnAssign]]:
    """Every dataclass of ``source`` (a module's text): its fields' statements, in order
    (inherited ones first, as Python orders them)."""
    tree = ast.parse(source)
    nodes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef) and _is_dataclass(n)}
    out: dict[str, dict[str, ast.AnnAssign]] = {}

    def fields(name: str) -> dict[str, ast.AnnAssign]:
        if name in out:
            return out[name]
        node = nodes[name]
        found: dict[str, ast.AnnAssign] = {}
        for base in node.bases:
            if _name(base) in nodes:
                found.update(fields(_name(base)))
        for statement in node.body:
            if not isinstance(statement, ast.AnnAssign) or not isinstance(
                statement.target, ast.Name
            ):
                continue
            head = statement.annotation
            head_name = _name(head.value if isinstance(head, ast.Subscript) else head)
            if head_name in ("ClassVar", "InitVar"):
                continue
            found[statement.target.id] = statement
        out[name] = found
        return found

    for name in nodes:
        fields(name)
    return {name: out[name] for name in nodes}


def read_classes(source: str) -> dict[str, dict[str, str | None]]:
    """Every dataclass of ``source``: its fields, in order, and what each holds (see
    :func:`classify`)."""
    found = read_fields(source)
    names = set(found)
    return {
        name: {key: classify(statement.annotation, names) for key, statement in fields.items()}
        for name, fields in found.items()
    }


#: The plain types OmegaConf gives a node of its own (IntegerNode, FloatNode, ...).
PLAIN = ("bool", "int", "float", "str")
_NO_DEFAULT = object()


def plain_type(annotation: ast.expr) -> tuple[str, bool] | None:
    """``(type, optional)`` for an annotation of one plain type, alone or with None; None
    for any other (a section, a list, a union of types, an Enum)."""
    options = [_name(option) for option in _options(annotation)]
    optional = "None" in options
    rest = [option for option in options if option != "None"]
    if len(rest) == 1 and rest[0] in PLAIN:
        return rest[0], optional
    return None


def _default(statement: ast.AnnAssign) -> object:
    """The field's default where it is a literal (``= 1``, ``field(default=1)``)."""
    value = statement.value
    if isinstance(value, ast.Call) and _name(value.func) == "field":
        value = next((k.value for k in value.keywords if k.arg == "default"), None)
    if value is None:
        return _NO_DEFAULT
    try:
        return ast.literal_eval(value)
    except ValueError:  # a name or an expression: no literal to show
        return _NO_DEFAULT


def _mandatory(statement: ast.AnnAssign) -> bool:
    """The field has no value until the config gives one: ``= MISSING``,
    ``field(default=MISSING)`` or no default at all (OmegaConf's ``???``)."""
    value = statement.value
    if value is None:
        return True
    if isinstance(value, ast.Call) and _name(value.func) == "field":
        keywords = {k.arg: k.value for k in value.keywords}
        if "default" not in keywords and "default_factory" not in keywords:
            return True
        value = keywords.get("default")
    return isinstance(value, ast.Name) and value.id == "MISSING"


def read_values(source: str) -> dict[str, dict[str, dict[str, Any]]]:
    """For every dataclass of ``source``, its fields of a plain type (see
    :func:`plain_type`): ``{"type": "float", "optional": false, "default": 1e-05}``
    (no ``default`` where the source gives none as a literal; ``"mandatory": true`` where
    the field has no value until the config gives one, which AReaL's loader requires)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, fields in read_fields(source).items():
        values: dict[str, dict[str, Any]] = {}
        for key, statement in fields.items():
            plain = plain_type(statement.annotation)
            if plain is None:
                continue
            entry: dict[str, Any] = {"type": plain[0], "optional": plain[1]}
            default = _default(statement)
            if default is not _NO_DEFAULT:
                entry["default"] = default
            if _mandatory(statement):
                entry["mandatory"] = True
            values[key] = entry
        out[name] = values
    return out


def read_made(source: str) -> dict[str, list[str]]:
    """For every dataclass of ``source``, its fields that hold a section made by default
    (``field(default_factory=Name)`` of a dataclass): present in every loaded config, so
    their mandatory fields are required even where the YAML does not write the section."""
    found = read_fields(source)
    out: dict[str, list[str]] = {}
    for name, fields in found.items():
        made = []
        for key, statement in fields.items():
            value = statement.value
            if not (isinstance(value, ast.Call) and _name(value.func) == "field"):
                continue
            factory = next((k.value for k in value.keywords if k.arg == "default_factory"), None)
            if factory is not None and _name(factory) in found:
                made.append(key)
        if made:
            out[name] = made
    return out


def experiments(source: str, classes: dict[str, Any]) -> list[str]:
    """``BaseExperimentConfig`` and the dataclasses that derive from it, in file order."""
    tree = ast.parse(source)
    bases = {n.name: [_name(b) for b in n.bases] for n in tree.body if isinstance(n, ast.ClassDef)}

    def derives(name: str) -> bool:
        return name == EXPERIMENT_BASE or any(derives(b) for b in bases.get(name, ()))

    return [name for name in classes if derives(name)]


#: The names under which ``cli_args.py`` lists keys it removed, and says what replaces
#: them, before its strict merge (``_migrate_legacy_rejection_sampling``).
REMOVED_KEYS = "_LEGACY_REJECTION_SAMPLING_KEYS"
REMOVED_MESSAGE = "_LEGACY_MIGRATION_MESSAGE"
REMOVED_SECTIONS = "sections_to_check"


def removed(source: str) -> dict[str, Any] | None:
    """The keys AReaL refuses with a message of their own: the keys, the sections where it
    looks for them, and its message, one entry per line (a ``->`` line joined to the line
    it continues). None when ``cli_args.py`` has no such list."""
    values: dict[str, Any] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            name = _name(node.targets[0])
            if name in (REMOVED_KEYS, REMOVED_MESSAGE, REMOVED_SECTIONS):
                values[name] = ast.literal_eval(node.value)
    if len(values) != 3:
        return None
    lines: list[str] = []
    for line in values[REMOVED_MESSAGE].splitlines():
        text = " ".join(line.split())
        if text.startswith("->") and lines:
            lines[-1] += " " + text
        elif text:
            lines.append(text)
    return {
        "keys": sorted(values[REMOVED_KEYS]),
        "sections": list(values[REMOVED_SECTIONS]),
        "message": lines,
    }


def commit_of(source: Path, given: str | None) -> str:
    if given:
        return given
    tree = source if source.is_dir() else source.parent
    recorded = tree / ".areal_commit"
    if recorded.is_file():
        return recorded.read_text().strip()
    done = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"cannot tell the AReaL commit of {source}: give --commit")
    return done.stdout.strip()


def table(source: Path, version: str, commit: str) -> dict[str, Any]:
    path = source / CLI_ARGS if source.is_dir() else source
    text = path.read_text(encoding="utf-8")
    classes = read_classes(text)
    return {
        "areal_version": version,
        "areal_commit": commit,
        "source": CLI_ARGS.as_posix(),
        "generator": "scripts/areal_keys.py",
        "experiments": experiments(text, classes),
        "removed": removed(text),
        "classes": classes,
        "values": read_values(text),
        "made": read_made(text),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="an AReaL source tree, or its cli_args.py")
    parser.add_argument("--version", required=True, help="the AReaL version, e.g. 2.0")
    parser.add_argument("--commit", help="the AReaL commit SOURCE is (default: read it)")
    parser.add_argument("--out", help="where to write (default: areal_conf/data/...; -: stdout)")
    args = parser.parse_args(argv)
    found = table(args.source, args.version, commit_of(args.source, args.commit))
    text = json.dumps(found, indent=1) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
        return 0
    out = Path(args.out) if args.out else DATA_DIR / f"areal_keys_{args.version}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}: {len(found['classes'])} classes at AReaL {found['areal_commit']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
