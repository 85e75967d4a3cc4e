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
from _helpers import ROOT, with_overrides
from _hint_text import alternatives
from omegaconf import OmegaConf

from areal_conf import AllocationError, check_command, parse_backend, validate
from areal_conf.areal.versions import SUPPORTED

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
        from areal_conf.hydra.structured import schema_node

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
    from areal_conf.spec.backends import BACKENDS
    from areal_conf.spec.model_checks import MODEL_RULES

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


# -- every fix made of overrides passes the check ------------------------------------------


def hint_fixes(entry: Entry) -> list[tuple[str, ...]]:
    """The fixes a catalogue entry's hint gives as overrides: its alternatives made of
    nothing but overrides, read from the text as a user copies them
    (``_hint_text.alternatives``). A hint whose alternatives are sentences gives none."""
    hint = " ".join(line[6:] for line in entry.message.split("\n") if line.startswith("hint: "))
    return [alternative.overrides for alternative in alternatives(hint)]


def _check_with(entry: Entry, overrides: tuple[str, ...]) -> None:
    """The entry's check again, with ``overrides`` applied as a user applies them: on the
    AReaL command line for a command entry, as Hydra's overrides of the YAML else."""
    if entry.kind == "command":
        check_command([*shlex.split(entry.source), *overrides], cwd=COMMANDS_DIR)
        return
    cfg = OmegaConf.create(entry.source)
    if entry.with_schema:
        from areal_conf.hydra.structured import schema_node

        cfg = OmegaConf.merge(schema_node(), cfg)
    validate(with_overrides(cfg, overrides), areal_version=entry.areal_version)


#: Entries whose hint gives no fix made of overrides, and why.
_LAYOUT = "it names the sizes to use in the backend string, not a whole override"
_SENTENCE = "it says in words what to change, several ways (an override in it is an example)"
_AND_MORE = "the override in it is an example; the fix also removes or rewrites what is wrong"
_YAML = "the fix is YAML (a list, or a section moved), which a hint writes as YAML"
_COMMAND = "the fix is to the command line itself (--config, the driver, quoting, sweep)"
_VALUES = "it lists the values to choose from"
PROSE_HINTS: dict[str, str] = {
    "A backend string error in a config": _LAYOUT,
    "allocation_mode that cannot be translated": _AND_MORE,
    "A role that is not a section": _AND_MORE,
    "The config builds no engine": _SENTENCE,
    "Wrong kind of backend for the role": _VALUES,
    "An allocation node that is set": _AND_MORE,
    "A value that cannot be resolved": _AND_MORE,
    "Unknown scheduling type": _VALUES,
    "Cluster larger than 2**20 GPUs": _SENTENCE,
    "Not enough GPUs": _SENTENCE,
    "Inference instance larger than a node but not whole nodes": _LAYOUT,
    "Model value that is not a positive integer": _SENTENCE,
    "Layout breaks a model rule": _LAYOUT,
    "Layout breaks several model rules": _LAYOUT,
    "A teacher's layout against its own model": _LAYOUT,
    "Layout splits key-value heads": _LAYOUT,
    "Context parallelism splits attention heads": _LAYOUT,
    "Expert parallelism on a dense model": _LAYOUT,
    "More pipeline stages than layers": _LAYOUT,
    "model.hf_config file not found": _SENTENCE,
    "cluster.gpu_memory_gb out of range": _SENTENCE,
    "A flat 1.0 teacher": _YAML,
    "The teacher's subsection is missing": _SENTENCE,
    "scheduling_spec with no entry": _YAML,
    "scheduling_spec with three entries": _YAML,
    "Two scheduling_spec entries on controller v2": _YAML,
    "Two scheduling_spec entries for more than two workers": _YAML,
    "scheduling_spec that is not a list": _YAML,
    "optimizer_dtype that AReaL does not accept": _VALUES,
    "dtype that AReaL does not accept": _VALUES,
    "Weight update mode that controller v1 does not know": _VALUES,
    "A teacher with the wrong kind of backend": _VALUES,
    "An instance larger than the machine": _SENTENCE,
    "A worker that does not divide a node": _LAYOUT,
    "A v1 inference instance larger than a node": _SENTENCE,
    "A worker over a node but not whole nodes": _LAYOUT,
    "A v2 instance larger than a node but not whole nodes": _LAYOUT,
    "AWEX with an engine in between": _SENTENCE,
    "A 2.0 teacher under AReaL 1.0's rules": _AND_MORE,
    "No --config": _COMMAND,
    "Config file not found": _COMMAND,
    "Config file that is not .yaml": _COMMAND,
    "Config file that does not parse": _COMMAND,
    "--config without a file": _COMMAND,
    "Override Hydra cannot parse": _COMMAND,
    "Override of a key the YAML lacks": _AND_MORE,
    "Override of a key AReaL has but the YAML leaves out": _AND_MORE,
    "An added key AReaL does not have": _AND_MORE,
    "Several values outside a sweep": _COMMAND,
    "No driver in the command": _COMMAND,
    "An areal command that does not train": _COMMAND,
    "--driver that is not module:function": _COMMAND,
}

#: Fixes made of overrides after which the check still refuses the entry's config: the
#: beginning of what it says then. All but the first fix the entry's own error; the
#: entry's small config then meets the next rule (these hints belong to rules other than
#: memory's, and each is a candidate for a fix of its own).
FIXES = [(entry, fix) for entry in ENTRIES if entry.kind != "backend" for fix in hint_fixes(entry)]


@pytest.mark.parametrize(
    ("entry", "fix"), FIXES, ids=[f"{e.title}: {' '.join(f)}" for e, f in FIXES]
)
def test_a_fix_in_the_catalogue_passes_the_check(entry: Entry, fix: tuple[str, ...]) -> None:
    """Applied to the entry's config (or command), the hint's fix gives one that the
    whole check accepts."""
    _check_with(entry, fix)


def test_the_hints_without_overrides_are_the_listed_ones() -> None:
    """PROSE_HINTS names exactly the config and command entries whose hint gives no fix
    made of overrides: a hint that starts to give one leaves the list, a new prose hint
    joins it with a reason."""
    prose = {e.title for e in ENTRIES if e.kind != "backend" and not hint_fixes(e)}
    assert prose == set(PROSE_HINTS)
