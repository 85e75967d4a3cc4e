"""docs/backend-strings.md says what the code does.

The error catalogue is parsed from the markdown: each ``#### `` entry has an input (a
``backend: ...`` YAML line for a backend string, or a ``yaml`` block for a whole config),
one ``text`` block with the message as printed, and a ``Fix:``. A config entry may name
the AReaL rules it states with a ``Rules: AReaL 1.0`` line; without one it states the
rules areal-conf picks by itself (AReaL 2.0's in the tests, where no ``areal`` is
installed and the suite sets no ``AREAL_CONF_AREAL_VERSION``). A ``Config: areal_schema``
line says the YAML is an areal-conf config: it is merged onto the ``areal_schema``
config, as Hydra composes a config that lists it first. The test runs the input
through ``parse_backend`` or ``validate`` and compares the message line by line. Trailing
blanks are ignored on both sides: markdown does not show them and editors strip them, and
only the input line of an empty value has any. The table of example strings is checked
against the parser too.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from _helpers import ROOT
from omegaconf import OmegaConf

from areal_conf import AllocationError, check_command, parse_backend, validate
from areal_conf.areal_versions import SUPPORTED

DOC = ROOT / "docs" / "backend-strings.md"
CATALOGUE_HEADING = "## Error catalogue"
# The subsections of the catalogue each kind of entry belongs in.
SECTION_OF_KIND = {
    "backend": ("### Backend string errors",),
    "config": ("### Config errors", "### AReaL 2.0 errors"),
    "command": ("### AReaL command errors",),
}
#: Where the command entries run: it holds the files they name.
COMMANDS_DIR = ROOT / "tests" / "fixtures" / "commands"

_INPUT_LINE = re.compile(r"^Input: `(backend: .*)`$", re.M)
_COMMAND_LINE = re.compile(r"^Command: `(.*)`$", re.M)
_RULES_LINE = re.compile(r"^Rules: (.*)$", re.M)
_SCHEMA_LINE = re.compile(r"^Config: areal_schema$", re.M)
# The value of a Rules: line, and the version it asks validate for.
_RULES_VALUE = re.compile(r"AReaL (\d+\.\d+)")
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


@dataclass(frozen=True)
class Entry:
    title: str
    section: str
    kind: str  # "backend" or "config"
    source: str  # the YAML line or block as the page shows it
    message: str
    fix: str
    areal_version: str | None = None  # a Rules: line's version; None: areal-conf's choice
    with_schema: bool = False  # a Config: areal_schema line


def _parse_entry(title: str, section: str, body: str) -> Entry:
    inputs = _INPUT_LINE.findall(body)
    commands = _COMMAND_LINE.findall(body)
    blocks = _FENCE.findall(body)
    yaml_blocks = [text for lang, text in blocks if lang == "yaml"]
    text_blocks = [text for lang, text in blocks if lang == "text"]
    fixes = re.findall(r"^Fix: (.+)", body, flags=re.M)
    rules = _RULES_LINE.findall(_FENCE.sub("", body))  # outside the input and the message
    if len(inputs) + len(commands) + len(yaml_blocks) != 1:
        raise AssertionError(
            f"{title!r}: needs exactly one input (Input: line, Command: line or yaml block)"
        )
    if len(text_blocks) != 1 or len(fixes) != 1:
        raise AssertionError(f"{title!r}: needs exactly one text block and one Fix: line")
    if inputs:
        kind, source = "backend", inputs[0]
    elif commands:
        kind, source = "command", commands[0]
    else:
        kind, source = "config", yaml_blocks[0]
    version = None
    if rules:
        found = _RULES_VALUE.fullmatch(rules[0].strip())
        if len(rules) != 1 or kind != "config" or found is None:
            raise AssertionError(
                f"{title!r}: at most one 'Rules: AReaL X.Y' line, in a config entry"
            )
        version = found[1]
    message = text_blocks[0].rstrip("\n")
    with_schema = bool(_SCHEMA_LINE.search(_FENCE.sub("", body)))
    return Entry(title, section, kind, source, message, fixes[0], version, with_schema)


def catalogue() -> list[Entry]:
    text = DOC.read_text(encoding="utf-8")
    _, found, rest = text.partition("\n" + CATALOGUE_HEADING + "\n")
    assert found, f"{DOC.name} has no {CATALOGUE_HEADING!r} section"
    entries: list[Entry] = []
    section = ""
    # Split into "### " and "#### " parts; code blocks in the catalogue hold no headings.
    for part in re.split(r"^(?=###+ )", rest, flags=re.M):
        heading, _, body = part.partition("\n")
        if heading.startswith("#### "):
            entries.append(_parse_entry(heading[5:].strip(), section, body))
        elif heading.startswith("### "):
            section = heading.strip()
    return entries


ENTRIES = catalogue()
BY_KIND = {kind: [e for e in ENTRIES if e.kind == kind] for kind in SECTION_OF_KIND}


def _lines(message: str) -> list[str]:
    return [line.rstrip() for line in message.split("\n")]


def test_the_catalogue_has_entries_of_every_kind_with_unique_titles() -> None:
    assert len(BY_KIND["backend"]) >= 30
    assert len(BY_KIND["config"]) >= 30
    assert len(BY_KIND["command"]) >= 10
    titles = [e.title for e in ENTRIES]
    assert len(titles) == len(set(titles))


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.title for e in ENTRIES])
def test_entry_is_in_the_section_of_its_kind(entry: Entry) -> None:
    assert entry.section in SECTION_OF_KIND[entry.kind]


def test_entries_under_other_rules_name_a_version_areal_conf_has() -> None:
    versions = {e.areal_version for e in ENTRIES if e.areal_version is not None}
    assert versions, "no entry states AReaL 1.0's rules"
    assert versions <= set(SUPPORTED)


@pytest.mark.parametrize("entry", BY_KIND["backend"], ids=[e.title for e in BY_KIND["backend"]])
def test_backend_string_error_is_printed_as_documented(entry: Entry) -> None:
    value: Any = yaml.safe_load(entry.source)["backend"]
    with pytest.raises(AllocationError) as caught:
        parse_backend(value)
    assert _lines(str(caught.value)) == _lines(entry.message)


@pytest.mark.parametrize("entry", BY_KIND["config"], ids=[e.title for e in BY_KIND["config"]])
def test_config_error_is_printed_as_documented(entry: Entry) -> None:
    cfg = OmegaConf.create(entry.source)
    if entry.with_schema:
        from areal_conf.config import schema_node

        cfg = OmegaConf.merge(schema_node(), cfg)
    with pytest.raises(AllocationError) as caught:
        validate(cfg, areal_version=entry.areal_version)
    assert _lines(str(caught.value)) == _lines(entry.message)


@pytest.mark.parametrize("entry", BY_KIND["command"], ids=[e.title for e in BY_KIND["command"]])
def test_command_error_is_printed_as_documented(entry: Entry) -> None:
    with pytest.raises(AllocationError) as caught:
        check_command(shlex.split(entry.source), cwd=COMMANDS_DIR)
    assert _lines(str(caught.value)) == _lines(entry.message)


def _examples() -> list[tuple[str, int]]:
    """(string, GPUs) rows of the page's table of example strings."""
    rows = re.findall(r"^\| `([^`]+)` \| (\d+) \|", DOC.read_text(encoding="utf-8"), flags=re.M)
    return [(spec.replace("\\|", "|"), int(gpus)) for spec, gpus in rows]


EXAMPLES = _examples()


def test_the_page_has_a_table_of_examples_with_a_hybrid_one() -> None:
    assert any("|ffn:" in spec for spec, _ in EXAMPLES)


@pytest.mark.parametrize(("spec", "gpus"), EXAMPLES, ids=[spec for spec, _ in EXAMPLES])
def test_example_string_uses_the_documented_gpus(spec: str, gpus: int) -> None:
    assert parse_backend(spec).world_size == gpus


def test_the_model_shape_rules_table_is_the_code_s() -> None:
    """One row per rule of ``MODEL_RULES``: its name, backends, condition and sources."""
    from areal_conf.backends import BACKENDS
    from areal_conf.model_checks import MODEL_RULES

    text = DOC.read_text(encoding="utf-8")
    section = text.split("### Model-shape rules\n", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| `([\w-]+)` \| ([^|]+) \| ([^|]+) \| (.+) \|$", section, flags=re.M)
    assert [
        (name, backends, condition, source.split("<br>"))
        for name, backends, condition, source in rows
    ] == [
        (
            rule.name,
            ", ".join(b for b in BACKENDS if b in rule.backends),
            rule.condition,
            list(rule.source),
        )
        for rule in MODEL_RULES
    ]


def test_the_readme_links_to_the_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/backend-strings.md)" in readme


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, blanks to '-'."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def test_every_link_within_the_page_names_one_of_its_headings() -> None:
    text = DOC.read_text(encoding="utf-8")
    anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert links
    assert sorted(set(links) - anchors) == []
