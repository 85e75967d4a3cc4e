"""Tests for the translation of the deprecated ``allocation_mode`` (SPEC §6)."""

from __future__ import annotations

import random
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from _helpers import ROOT, Cli, compose_config

from areal_conf.errors import AllocationError
from areal_conf.overrides import format_overrides, shell_line
from areal_conf.spec.legacy import migrate_allocation_mode, migration_yaml
from areal_conf.spec.parser import parse_backend
from areal_conf.validation import validate

HYBRID = "megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)"

MIGRATIONS: list[tuple[str, list[str]]] = [
    # The required cases.
    (
        "sglang:d4t2+fsdp:d8",
        [
            "rollout.backend=sglang:d4t2",
            "rollout.scheduling_strategy.type=separation",
            "actor.backend=fsdp:d8",
            "actor.scheduling_strategy.type=separation",
        ],
    ),
    (
        "sglang.d4p1t1+d4p1t1",
        [
            "rollout.backend=sglang:d4",
            "rollout.scheduling_strategy.type=separation",
            "actor.backend=fsdp:d4",
            "actor.scheduling_strategy.type=separation",
        ],
    ),
    ("d8p1t1", ["actor.backend=fsdp:d8", "actor.scheduling_strategy.type=separation"]),
    (
        "sglang:d4+megatron:d2p2",
        [
            "rollout.backend=sglang:d4",
            "rollout.scheduling_strategy.type=separation",
            "actor.backend=megatron:d2p2",
            "actor.scheduling_strategy.type=separation",
        ],
    ),
    (
        "sglang[rollout]:d2+fsdp[actor]:d4|fsdp[critic]:d4",
        [
            "rollout.backend=sglang:d2",
            "rollout.scheduling_strategy.type=separation",
            "actor.backend=fsdp:d4",
            "actor.scheduling_strategy.type=separation",
            "critic.backend=fsdp:d4",
            "critic.scheduling_strategy.type=colocation",
            "critic.scheduling_strategy.target=actor",
        ],
    ),
    (
        "vllm:d2t4+megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)",
        [
            "rollout.backend=vllm:d2t4",
            "rollout.scheduling_strategy.type=separation",
            f"actor.backend='{HYBRID}'",
            "actor.scheduling_strategy.type=separation",
        ],
    ),
    # Auto-backend rule for bare training dims: megatron when p > 1 or e > 1.
    (
        "sglang.d2t2+d2p2t1",
        [
            "rollout.backend=sglang:d2t2",
            "rollout.scheduling_strategy.type=separation",
            "actor.backend=megatron:d2p2",
            "actor.scheduling_strategy.type=separation",
        ],
    ),
    ("d4e2", ["actor.backend=megatron:d4e2", "actor.scheduling_strategy.type=separation"]),
    ("d4c2t1", ["actor.backend=fsdp:d4c2", "actor.scheduling_strategy.type=separation"]),
    ("d1p1t1", ["actor.backend=fsdp:d1", "actor.scheduling_strategy.type=separation"]),
    # Bare hybrid, with and without parentheses: megatron.
    (
        "(attn:d4p2t2c2|ffn:d2p2t4e2)",
        [f"actor.backend='{HYBRID}'", "actor.scheduling_strategy.type=separation"],
    ),
    (
        "sglang:d4+attn:d4p2|ffn:e4",
        [
            "rollout.backend=sglang:d4",
            "rollout.scheduling_strategy.type=separation",
            "actor.backend=megatron:d4p2e4",
            "actor.scheduling_strategy.type=separation",
        ],
    ),
    # Hybrid without parentheses after a backend: the '|' is not colocation.
    (
        "sglang:d4+megatron:attn:d4p2t2c2|ffn:d2p2t4e2",
        [
            "rollout.backend=sglang:d4",
            "rollout.scheduling_strategy.type=separation",
            f"actor.backend='{HYBRID}'",
            "actor.scheduling_strategy.type=separation",
        ],
    ),
    (
        "sglang:d4+archon:(attn:d2t2|ffn:t2e2)",
        [
            "rollout.backend=sglang:d4",
            "rollout.scheduling_strategy.type=separation",
            "actor.backend='archon:(attn:d2t2|ffn:t2e2)'",
            "actor.scheduling_strategy.type=separation",
        ],
    ),
    # Named components, with the auto-backend too.
    ("[actor]:d2p2", ["actor.backend=megatron:d2p2", "actor.scheduling_strategy.type=separation"]),
    (
        "sglang[rollout]:d2+[actor]:d4",
        [
            "rollout.backend=sglang:d2",
            "rollout.scheduling_strategy.type=separation",
            "actor.backend=fsdp:d4",
            "actor.scheduling_strategy.type=separation",
        ],
    ),
    # Inference only; AReaL's "+eval"/"+cpu" (evaluation on CPU, no engine).
    ("vllm:d2t4", ["rollout.backend=vllm:d2t4", "rollout.scheduling_strategy.type=separation"]),
    (
        "sglang:d4t2+eval",
        ["rollout.backend=sglang:d4t2", "rollout.scheduling_strategy.type=separation"],
    ),
    ("sglang.d4+cpu", ["rollout.backend=sglang:d4", "rollout.scheduling_strategy.type=separation"]),
    # AReaL's old "inference|training" colocation. AReaL creates the actor before the
    # rollout engine and a target must exist: the group shares the actor's GPUs.
    (
        "vllm:d2t4|megatron:d2t2p2",
        [
            "rollout.backend=vllm:d2t4",
            "rollout.scheduling_strategy.type=colocation",
            "rollout.scheduling_strategy.target=actor",
            "actor.backend=megatron:d2p2t2",
            "actor.scheduling_strategy.type=separation",
        ],
    ),
    # '+' separates engines, also where the config colocates them (AReaL's examples
    # colocate ref with actor): each separated engine says so.
    (
        "sglang:d2+fsdp:d4+fsdp[critic]:d4",
        [
            "rollout.backend=sglang:d2",
            "rollout.scheduling_strategy.type=separation",
            "actor.backend=fsdp:d4",
            "actor.scheduling_strategy.type=separation",
            "critic.backend=fsdp:d4",
            "critic.scheduling_strategy.type=separation",
        ],
    ),
    (
        "sglang[rollout]:d2+fsdp[ref]:d4|fsdp[actor]:d4+megatron[teacher]:d2p2",
        [
            "rollout.backend=sglang:d2",
            "rollout.scheduling_strategy.type=separation",
            "ref.backend=fsdp:d4",
            "ref.scheduling_strategy.type=colocation",
            "ref.scheduling_strategy.target=actor",
            "actor.backend=fsdp:d4",
            "actor.scheduling_strategy.type=separation",
            "teacher.engine_type=train",
            "teacher.train.backend=megatron:d2p2",
            "teacher.train.scheduling_strategy.type=separation",
        ],
    ),
    (
        "sglang:d4+fsdp[actor]:d4|fsdp[critic]:d2t2|fsdp[ref]:d4",
        [
            "rollout.backend=sglang:d4",
            "rollout.scheduling_strategy.type=separation",
            "actor.backend=fsdp:d4",
            "actor.scheduling_strategy.type=separation",
            "critic.backend=fsdp:d2t2",
            "critic.scheduling_strategy.type=colocation",
            "critic.scheduling_strategy.target=actor",
            "ref.backend=fsdp:d4",
            "ref.scheduling_strategy.type=colocation",
            "ref.scheduling_strategy.target=actor",
        ],
    ),
    # Blanks between tokens are ignored, as AReaL's grammar did.
    (
        " sglang [ rollout ] : d4 t2 + fsdp : d8 ",
        [
            "rollout.backend=sglang:d4t2",
            "rollout.scheduling_strategy.type=separation",
            "actor.backend=fsdp:d8",
            "actor.scheduling_strategy.type=separation",
        ],
    ),
    # Values are canonical.
    (
        "sglang:t2d4p1+fsdp:t1d8c1",
        [
            "rollout.backend=sglang:d4t2",
            "rollout.scheduling_strategy.type=separation",
            "actor.backend=fsdp:d8",
            "actor.scheduling_strategy.type=separation",
        ],
    ),
    (
        "megatron:(attn:d2p2t4|ffn:e4)",
        ["actor.backend=megatron:d2p2t4e4", "actor.scheduling_strategy.type=separation"],
    ),
]


@pytest.mark.parametrize(("legacy", "expected"), MIGRATIONS)
def test_migrate(legacy: str, expected: list[str]) -> None:
    assert migrate_allocation_mode(legacy) == expected


def _parse_one(override: str) -> tuple[str, str]:
    """Key and value as Hydra's override parser reads ``override``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_override(override)
    value = parsed.value()
    assert isinstance(value, str), (override, value)
    return parsed.key_or_group, value


@pytest.mark.parametrize(("legacy", "expected"), MIGRATIONS)
def test_migrated_overrides_parse_in_hydra_as_canonical_values(
    legacy: str, expected: list[str]
) -> None:
    for override in migrate_allocation_mode(legacy):
        key, value = _parse_one(override)
        assert override.startswith(key + "=")
        if key.endswith(".backend"):
            assert str(parse_backend(value)) == value


def test_migrated_hybrid_composes_as_is() -> None:
    """The issue's example: Hydra's compose API takes the hybrid translation as it is."""
    import areal_conf.hydra.structured  # noqa: F401

    overrides = migrate_allocation_mode("sglang:d4p2t2+megatron:(attn:d2p2t2c2|ffn:d2p2t2e2)")
    cfg = compose_config(*overrides)
    assert cfg.actor.backend == "megatron:(attn:d2p2t2c2|ffn:d2p2t2e2)"
    assert cfg.rollout.backend == "sglang:d4p2t2"


class BadLegacy(NamedTuple):
    """An allocation_mode string the migration rejects, and where and why."""

    legacy: object  # the allocation_mode value
    position: int | None  # where the caret points (None: no caret line)
    fragment: str  # a part of the message


ERRORS: list[BadLegacy] = [
    BadLegacy(legacy="fsdp[policy]:d4", position=5, fragment="unknown component name 'policy'"),
    BadLegacy(legacy="sglang[r]:d2+fsdp[a]:d4", position=7, fragment="did you mean rollout"),
    BadLegacy(legacy="sglang:d2+fsdp[c]:d4", position=15, fragment="did you mean critic"),
    BadLegacy(legacy="sglang[actor]:d2", position=7, fragment="'actor' is a training engine"),
    BadLegacy(legacy="fsdp[rollout]:d2", position=5, fragment="'rollout' is an inference engine"),
    BadLegacy(legacy="[rollout]:d2", position=1, fragment="'rollout' is an inference engine"),
    BadLegacy(legacy="fsdp[]:d4", position=5, fragment="empty component name"),
    BadLegacy(
        legacy="fsdp[actor]:d4+fsdp[actor]:d4", position=20, fragment="engine 'actor' appears twice"
    ),
    # A second unnamed training component is ambiguous (AReaL: "ambiguous 'train'").
    BadLegacy(
        legacy="sglang:d2+fsdp:d4+fsdp:d4",
        position=18,
        fragment="second unnamed training component",
    ),
    BadLegacy(legacy="sglang:d2+fsdp:d4+fsdp:d4", position=18, fragment="fsdp[critic]:d4"),
    BadLegacy(legacy="fsdp:d4+fsdp[actor]:d4", position=0, fragment="'actor' is named elsewhere"),
    BadLegacy(legacy="sglang:d2+vllm:d2", position=10, fragment="second inference component"),
    BadLegacy(
        legacy="sglang[rollout]:d2+vllm:d2", position=19, fragment="second inference component"
    ),
    # Errors inside a component point into the whole string.
    BadLegacy(
        legacy="sglang:d4t2+fsdp:d4p2",
        position=19,
        fragment="fsdp does not support pipeline parallelism",
    ),
    BadLegacy(legacy="sglang:d4+fdsp:d8", position=10, fragment="unknown backend 'fdsp'"),
    BadLegacy(legacy="sglang:d4+FSDP[actor]:d8", position=10, fragment="unknown backend 'FSDP'"),
    BadLegacy(legacy="sglang:d4+fsdp:d2d4", position=17, fragment="duplicate dimension 'd'"),
    BadLegacy(legacy="sglang:d4+fsdp:d0", position=16, fragment="at least 1"),
    BadLegacy(
        legacy="sglang:d4+fsdp.d8", position=14, fragment="'.' between backend and dimensions"
    ),
    BadLegacy(legacy="sglang:d4+d\u0664", position=11, fragment="not an ASCII digit"),
    BadLegacy(legacy="sglang:d4+fsdp:", position=15, fragment="missing dimensions"),
    BadLegacy(
        legacy="sglang:d4c2+fsdp:d8",
        position=9,
        fragment="sglang does not support context parallelism",
    ),
    BadLegacy(
        legacy="vllm:d2+megatron:(attn:d4|ffn:d2)", position=30, fragment="world sizes differ"
    ),
    BadLegacy(
        legacy="vllm:d2+megatron:(attn:d4e2|ffn:d2)",
        position=25,
        fragment="not allowed in the attn section",
    ),
    BadLegacy(
        legacy="vllm:d2+fsdp:(attn:d4|ffn:e2)",
        position=13,
        fragment="fsdp does not support the hybrid",
    ),
    BadLegacy(
        legacy="vllm:d2+megatron:(attn:d4|x:d2)",
        position=26,
        fragment="expected the section label 'ffn:'",
    ),
    # Structure.
    BadLegacy(legacy="sglang:d4+", position=9, fragment="empty component after '+'"),
    BadLegacy(legacy="+fsdp:d4", position=0, fragment="empty component before '+'"),
    BadLegacy(legacy="sglang:d4||fsdp:d4", position=10, fragment="empty component before '|'"),
    BadLegacy(legacy="sglang:d4+  +fsdp:d4", position=12, fragment="empty component"),
    BadLegacy(
        legacy="vllm:d2+megatron:(attn:d4|ffn:d2", position=17, fragment="'(' is never closed"
    ),
    BadLegacy(legacy="vllm:d2)+fsdp:d4", position=7, fragment="')' without '('"),
    BadLegacy(legacy="fsdp[actor:d4", position=4, fragment="unexpected '['"),
    BadLegacy(legacy="fsdp:d4]", position=7, fragment="unexpected ']'"),
    BadLegacy(
        legacy="sglang:d4+[critic].d4",
        position=18,
        fragment="expected ':' after the component name",
    ),
    BadLegacy(legacy="fsdp[actor]:d4|eval", position=15, fragment="'eval' cannot be colocated"),
    BadLegacy(legacy="eval", position=None, fragment="names no engine"),
    # Colocated components share GPUs: world sizes must match (AReaL rejects too).
    BadLegacy(legacy="sglang:d2|fsdp:d4", position=10, fragment="needs 4 GPUs, not 2"),
    BadLegacy(legacy="", position=None, fragment="empty allocation_mode"),
    BadLegacy(legacy="  ", position=None, fragment="empty allocation_mode"),
    BadLegacy(legacy=8, position=None, fragment="must be a string"),
    BadLegacy(legacy=None, position=None, fragment="must be a string"),
]


@pytest.mark.parametrize(BadLegacy._fields, ERRORS)
def test_migrate_errors(legacy: object, position: int | None, fragment: str) -> None:
    with pytest.raises(AllocationError) as info:
        migrate_allocation_mode(legacy)  # type: ignore[arg-type]
    err = info.value
    assert isinstance(err, ValueError)
    assert err.position == position
    assert fragment in str(err)
    assert err.spec == legacy
    assert err.hint, "every error states a fix"


def test_error_caret_points_into_the_whole_string() -> None:
    with pytest.raises(AllocationError) as info:
        migrate_allocation_mode("sglang:d4t2+fsdp[actor]:d4p2")
    lines = str(info.value).splitlines()
    assert lines[1] == "    sglang:d4t2+fsdp[actor]:d4p2"
    assert lines[2] == "    " + " " * 26 + "^^"
    assert lines[3].startswith("hint: ")


def test_parser_error_for_legacy_string_gives_translation() -> None:
    with pytest.raises(AllocationError) as info:
        parse_backend("sglang:d4t2+fsdp:d8")
    assert (
        "rollout.backend=sglang:d4t2 rollout.scheduling_strategy.type=separation "
        "actor.backend=fsdp:d8 actor.scheduling_strategy.type=separation"
    ) in info.value.hint


WITH_TEACHER = "sglang:d2+fsdp[actor]:d4+megatron[teacher]:d2p2"
TEACHER_2_0 = (
    "teacher.engine_type=train teacher.train.backend=megatron:d2p2 "
    "teacher.train.scheduling_strategy.type=separation"
)
TEACHER_1_0 = "teacher.backend=megatron:d2p2 teacher.scheduling_strategy.type=separation"


class TeacherIn(NamedTuple):
    how: str  # where the AReaL version comes from
    env: str | None  # AREAL_CONF_AREAL_VERSION
    layout: str | None  # parse_backend's teacher_layout
    areal_version: str | None  # validate's
    translation: str


TEACHER_IN = [
    TeacherIn("newest by default", None, None, None, TEACHER_2_0),
    TeacherIn("AREAL_CONF_AREAL_VERSION=1.0", "1.0", None, None, TEACHER_1_0),
    TeacherIn("AREAL_CONF_AREAL_VERSION=2.0", "2.0", None, None, TEACHER_2_0),
    TeacherIn("a bad AREAL_CONF_AREAL_VERSION", "9", None, None, TEACHER_2_0),
    TeacherIn("teacher_layout flat", "2.0", "flat", None, TEACHER_1_0),
    TeacherIn("teacher_layout nested", "1.0", "nested", None, TEACHER_2_0),
]


@pytest.mark.parametrize("row", TEACHER_IN, ids=[row.how for row in TEACHER_IN])
def test_a_legacy_strings_teacher_is_translated_for_the_areal_version(
    row: TeacherIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AReaL 1.0's teacher is flat (``teacher.backend``); 2.0 nests a training teacher
    under ``teacher.train`` with ``teacher.engine_type: train``."""
    if row.env is not None:
        monkeypatch.setenv("AREAL_CONF_AREAL_VERSION", row.env)
    with pytest.raises(AllocationError) as info:
        parse_backend(WITH_TEACHER, teacher_layout=row.layout)
    assert info.value.hint.endswith(row.translation), info.value.hint


@pytest.mark.parametrize(
    ("areal_version", "translation"), [("1.0", TEACHER_1_0), ("2.0", TEACHER_2_0)]
)
def test_a_legacy_backend_in_a_config_is_translated_for_its_rules(
    areal_version: str, translation: str
) -> None:
    cfg = {"actor": {"backend": WITH_TEACHER}, "rollout": {"backend": "sglang:d2"}}
    with pytest.raises(AllocationError) as info:
        validate(cfg, areal_version=areal_version)
    assert info.value.reason.startswith("actor.backend: this is the deprecated")
    # (the fix then adds a node: the one-node default does not hold the translation)
    assert translation.replace("teacher.", "++teacher.") in info.value.hint, info.value.hint


def test_explain_translates_a_legacy_string_for_areal_version(cli: Cli) -> None:
    status, _, err = cli("explain", "--areal-version", "1.0", WITH_TEACHER)
    assert status == 2 and err.rstrip().endswith(TEACHER_1_0), err


def test_large_inputs_are_rejected_quickly() -> None:
    with pytest.raises(AllocationError, match="never closed"):
        migrate_allocation_mode("(" * 200_000)
    many = "sglang:d4" + "+eval" * 50_000
    assert migrate_allocation_mode(many) == [
        "rollout.backend=sglang:d4",
        "rollout.scheduling_strategy.type=separation",
    ]
    with pytest.raises(AllocationError, match="second unnamed training"):
        migrate_allocation_mode("+".join(["fsdp:d4"] * 50_000))


# ----------------------------------------------------------------- format_overrides


def _hydra_parse(tokens: list[str]) -> list[tuple[str, Any]]:
    parser_mod = pytest.importorskip("hydra.core.override_parser.overrides_parser")
    parsed = parser_mod.OverridesParser.create().parse_overrides(tokens)
    return [(o.get_key_element(), o.value()) for o in parsed]


def _round_trip(overrides: list[str]) -> None:
    line = format_overrides(overrides)
    assert "\n" not in line
    tokens = shlex.split(line)
    assert len(tokens) == len(overrides)
    expected = [tuple(o.split("=", 1)) for o in overrides]
    assert _hydra_parse(tokens) == expected


@pytest.mark.parametrize(("legacy", "expected"), MIGRATIONS)
def test_shell_line_of_a_migration_round_trips_through_shell_and_hydra(
    legacy: str, expected: list[str]
) -> None:
    overrides = migrate_allocation_mode(legacy)
    tokens = shlex.split(shell_line(overrides))
    assert tokens == overrides
    assert _hydra_parse(tokens) == [_parse_one(o) for o in overrides]


FORMATTED: list[tuple[list[str], str]] = [
    (
        ["rollout.backend=sglang:d4t2", "actor.backend=fsdp:d8"],
        "rollout.backend=sglang:d4t2 actor.backend=fsdp:d8",
    ),
    (
        [f"actor.backend={HYBRID}"],
        f"\"actor.backend='{HYBRID}'\"",
    ),
    (
        ["critic.scheduling_strategy.type=colocation", "critic.scheduling_strategy.target=actor"],
        "critic.scheduling_strategy.type=colocation critic.scheduling_strategy.target=actor",
    ),
    # Words Hydra would read as null/bool/float, and empty values, are quoted.
    (
        ["a.b=null", "a.c=True", "a.d=inf", "a.e="],
        "\"a.b='null'\" \"a.c='True'\" \"a.d='inf'\" \"a.e=''\"",
    ),
    (["+a.b=x y"], "\"+a.b='x y'\""),
    ([], ""),
]


@pytest.mark.parametrize(("overrides", "line"), FORMATTED)
def test_format_overrides_exact(overrides: list[str], line: str) -> None:
    assert format_overrides(overrides) == line
    _round_trip(overrides)


TRICKY_VALUES = [
    "it's",
    "a\\b",
    "C:\\",
    "\\'",
    "'",
    '"quoted"',
    "$HOME",
    "`id`",
    "!!",
    "a,b",
    "x=y",
    "[1,2]",
    "{a: 1}",
    "choice(a,b)",
    "${oc.env:HOME}",
    " padded ",
    "~user",
    "#not a comment",
    "é ü 中",
    "12",
    "1.5",
    "a;b&c|d>e<f",
    "*?",
]


@pytest.mark.parametrize("value", TRICKY_VALUES)
def test_format_overrides_tricky_values(value: str) -> None:
    _round_trip([f"a.b={value}", "c.d=plain"])


def test_format_overrides_random_values() -> None:
    alphabet = "ab:|()'\"\\ $`!,=[]{}~*?#;&<>%@+-./_0é"
    rng = random.Random(0)
    overrides = [
        "k.v=" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        for _ in range(500)
    ]
    _round_trip(overrides)


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX shell")
def test_format_overrides_real_shell() -> None:
    overrides = [f"a.b={v}" for v in TRICKY_VALUES] + [f"actor.backend={HYBRID}"]
    line = format_overrides(overrides)
    script = f'for a in {line}; do printf "%s\\0" "$a"; done'
    out = subprocess.run(["sh", "-c", script], capture_output=True, check=True).stdout
    tokens = out.decode().split("\0")[:-1]
    assert tokens == shlex.split(line)
    assert _hydra_parse(tokens) == [tuple(o.split("=", 1)) for o in overrides]


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (["novalue"], "key=value"),
        (["bad key=x"], "not a Hydra config key"),
        (["a..b=x"], "not a Hydra config key"),
        (["=x"], "not a Hydra config key"),
        (["a.b=line\nbreak"], "control character"),
        ([3], "key=value"),
        ("a.b=c", "not a string"),
    ],
)
def test_format_overrides_rejects(overrides: Any, fragment: str) -> None:
    with pytest.raises(AllocationError, match=fragment):
        format_overrides(overrides)


# ------------------------------------------------------------------- migration_yaml


def _nested(overrides: list[str]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for override in overrides:
        key, value = _parse_one(override)
        node = tree
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


@pytest.mark.parametrize(("legacy", "expected"), MIGRATIONS)
def test_migration_yaml_loads_back(legacy: str, expected: list[str]) -> None:
    yaml = pytest.importorskip("yaml")
    assert yaml.safe_load(migration_yaml(legacy)) == _nested(expected)


def test_migration_yaml_exact() -> None:
    assert migration_yaml("sglang[rollout]:d2+fsdp[actor]:d4|fsdp[critic]:d4") == (
        "rollout:\n"
        '  backend: "sglang:d2"\n'
        "  scheduling_strategy:\n"
        '    type: "separation"\n'
        "actor:\n"
        '  backend: "fsdp:d4"\n'
        "  scheduling_strategy:\n"
        '    type: "separation"\n'
        "critic:\n"
        '  backend: "fsdp:d4"\n'
        "  scheduling_strategy:\n"
        '    type: "colocation"\n'
        '    target: "actor"\n'
    )
    separation = '  scheduling_strategy:\n    type: "separation"\n'
    assert migration_yaml("vllm:d2t4+megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)") == (
        f'rollout:\n  backend: "vllm:d2t4"\n{separation}actor:\n  backend: "{HYBRID}"\n{separation}'
    )


def test_migration_yaml_errors_like_migrate() -> None:
    with pytest.raises(AllocationError) as info:
        migration_yaml("fsdp[policy]:d4")
    assert info.value.position == 5


@pytest.mark.parametrize("form", ["overrides", "yaml"])
def test_a_migration_separates_what_the_areal_yaml_colocates(form: str, tmp_path: Path) -> None:
    """AReaL's example colocates ref with actor; an allocation_mode that separates them
    with '+' must separate them once migrated onto that file."""
    examples = ROOT / "tests" / "fixtures" / "areal2" / "examples" / "math"
    legacy = "sglang:d4+fsdp[actor]:d4+fsdp[ref]:d4"
    # the ref is built only with a KL penalty; 12 GPUs once it is separated
    with_ref, nodes = "actor.kl_ctl=0.1", "cluster.n_nodes=2"
    before = validate(compose_config(with_ref, config_dir=examples, name="gsm8k_grpo_megatron"))
    assert before.engines["ref"].colocated_with == "actor"
    if form == "overrides":
        # '++' as areal-conf's hints spell them where the raw YAML lacks the key (AReaL's
        # own loader, which has every key, takes them either way)
        overrides = [with_ref, nodes, *("++" + o for o in migrate_allocation_mode(legacy))]
        cfg = compose_config(*overrides, config_dir=examples, name="gsm8k_grpo_megatron")
    else:
        shutil.copy(examples / "gsm8k_grpo_megatron.yaml", tmp_path)
        main = "defaults:\n  - gsm8k_grpo_megatron\n  - _self_\n\n" + migration_yaml(legacy)
        (tmp_path / "main.yaml").write_text(main)
        cfg = compose_config(with_ref, nodes, config_dir=tmp_path, name="main")
    plan = validate(cfg)
    assert plan.engines["ref"].colocated_with is None
    assert plan.gpus_by_engine() == {"rollout": 4, "actor": 4, "ref": 4}


def test_the_migrate_command_prints_a_line_for_any_yaml(cli: Cli) -> None:
    status, out, err = cli("migrate", "sglang:d4+fsdp[actor]:d4+fsdp[ref]:d4")
    assert status == 0 and err == ""
    assert out == (
        "++rollout.backend=sglang:d4 ++rollout.scheduling_strategy.type=separation "
        "++actor.backend=fsdp:d4 ++actor.scheduling_strategy.type=separation "
        "++ref.backend=fsdp:d4 ++ref.scheduling_strategy.type=separation\n"
    )
    status, out, _ = cli("migrate", "--yaml", "fsdp:d4|fsdp[ref]:d4")
    assert status == 0
    assert out == (
        'actor:\n  backend: "fsdp:d4"\n  scheduling_strategy:\n    type: "separation"\n'
        'ref:\n  backend: "fsdp:d4"\n  scheduling_strategy:\n    type: "colocation"\n'
        '    target: "actor"\n'
    )
