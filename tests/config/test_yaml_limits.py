"""Bounded reading of YAML files (issue 32, item 1): every file areal-conf's entry points
have Hydra load is checked first (size, UTF-8, nesting, values once aliases are expanded),
and a hostile one is one message naming the file, the limit and the variable that raises
it, exit 2, no traceback, without OmegaConf ever building it.

The base config is AReaL's ``examples/math/gsm8k_grpo.yaml`` (tests/fixtures/areal/
gsm8k_grpo.yaml); each hostile file is it plus what the row adds, made in ``tmp_path``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from _helpers import ROOT, Cli, run_python, user_env
from hydra._internal.sources_registry import SourcesRegistry

from areal_conf.config.yaml_limits import LIMITS, UnreadableYaml, check_yaml_file, limits, measure

BASE = ROOT / "tests" / "fixtures" / "areal" / "gsm8k_grpo.yaml"
DRIVER = ROOT / "tests" / "standin_driver.py"
MiB = 1 << 20


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs": each level a list of ``width`` aliases of the level below."""
    lines = ["lol0: &l0 lol"]
    for i in range(1, levels + 1):
        lines.append(f"lol{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def bomb_values(levels: int = 9, width: int = 9) -> int:
    """The values :func:`alias_bomb` expands to, counted by hand: each level's list is
    itself and ``width`` copies of the level below; every level has its key too."""
    size = [1]  # lol0's value, a string
    for _ in range(levels):
        size.append(1 + width * size[-1])
    return sum(1 + s for s in size)  # each level: its key and its value


def base_values() -> int:
    return measure(BASE.read_text(), limits())[1]


class Hostile(NamedTuple):
    name: str
    content: Callable[[str], bytes]  # the file's bytes, from the base config's text
    says: tuple[str, ...]  # what the message must say beside the file's name


HOSTILE = [
    Hostile(
        "alias-bomb-9x9",
        lambda base: (base + alias_bomb()).encode(),
        (
            # the bomb's keys join the base config's top-level mapping
            f"{base_values() + bomb_values():,} values once its aliases are expanded",
            "limit of 50,000 values",
            "AREAL_CONF_YAML_MAX_NODES=",
        ),
    ),
    Hostile(
        "alias-bomb-5x9",  # 75,000 values: seconds to compose without the limits
        lambda base: (base + alias_bomb(5)).encode(),
        (
            f"{base_values() + bomb_values(5):,} values once its aliases are expanded",
            "AREAL_CONF_YAML_MAX_NODES=",
        ),
    ),
    Hostile(
        "50-MB",
        lambda base: (base + "# padding\n" * 5_000_000).encode(),
        ("the file is 50,", "limit of 1,048,576 bytes", "AREAL_CONF_YAML_MAX_BYTES=50"),
    ),
    Hostile(
        "non-utf8-byte",
        lambda base: base.encode() + b'extra:\n  backend: "fsdp:d4\xe9"\n',
        ("byte e9 at line", "column 20 is not UTF-8", "save the file as UTF-8"),
    ),
    Hostile(
        "utf16-with-bom",
        lambda base: base.encode("utf-16"),
        ("saved as UTF-16", "save the file as UTF-8", "iconv -f UTF-16 -t UTF-8"),
    ),
    Hostile(
        "utf16-without-bom",
        lambda base: base.encode("utf-16-le"),
        ("NUL byte at line 1, column 2", "UTF-16 or UTF-32", "save the file as UTF-8"),
    ),
    Hostile(
        "binary-file",
        lambda base: bytes(range(256)) * 4,
        ("NUL byte at line 1, column 1", "save the file as UTF-8"),
    ),
    Hostile(
        "sequence-10000-deep",
        lambda base: (base + "x: " + "[" * 10_000 + "]" * 10_000 + "\n").encode(),
        ("nested 10,001 levels", "limit of 64 levels", "AREAL_CONF_YAML_MAX_DEPTH=10001"),
    ),
    Hostile(
        "3000-nested-mappings",
        lambda base: (base + "x: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n").encode(),
        ("nested 3,001 levels", "limit of 64 levels", "AREAL_CONF_YAML_MAX_DEPTH=3001"),
    ),
    Hostile(
        "recursive-alias",
        lambda base: (base + "loop: &loop\n  inner:\n    again: *loop\n").encode(),
        ("alias *loop is inside the value its anchor &loop names", "contain itself"),
    ),
]


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The files OmegaConf builds a config from in this process (Hydra hands each file it
    loads to ``OmegaConf.load``)."""
    from omegaconf import OmegaConf

    loaded: list[str] = []
    real = OmegaConf.load

    def load(file: object) -> object:
        loaded.append(os.path.realpath(str(getattr(file, "name", file))))
        return real(file)  # type: ignore[arg-type]

    monkeypatch.setattr(OmegaConf, "load", staticmethod(load))
    yield loaded


def write(tmp_path: Path, row: Hostile) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_bytes(row.content(BASE.read_text()))
    return path


def assert_one_message(status: int, err: str, name: str, row: Hostile) -> None:
    assert status == 2, err
    assert "Traceback" not in err
    assert err.count("error:") == 1, err
    assert f"cannot read {name}" in err
    for part in row.says:
        assert part in err, (part, err)


#: The in-process entry points: argv for ``python -m areal_conf`` run in the folder of
#: ``cfg.yaml``.
IN_PROCESS = {
    "check": ["check", "--", "python", str(DRIVER), "--config", "cfg.yaml", "scheduler.type=local"],
    "explain": ["explain", "--config", "cfg.yaml"],
    "suggest": ["suggest", "--config", "cfg.yaml"],
}


@pytest.mark.parametrize("verb", list(IN_PROCESS))
@pytest.mark.parametrize("row", HOSTILE, ids=[r.name for r in HOSTILE])
def test_a_hostile_yaml_is_one_message_before_omegaconf_builds_it(
    cli: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    loads: list[str],
    row: Hostile,
    verb: str,
) -> None:
    path = write(tmp_path, row)
    monkeypatch.chdir(tmp_path)
    status, _, err = cli(*IN_PROCESS[verb])
    assert_one_message(status, err, "cfg.yaml", row)
    assert os.path.realpath(path) not in loads  # refused before anything built from it


@pytest.mark.parametrize("row", HOSTILE[:1] + HOSTILE[-1:], ids=["alias-bomb", "recursive"])
def test_a_hostile_file_in_the_defaults_list_is_refused_too(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loads: list[str], row: Hostile
) -> None:
    """Not only the primary config: every file Hydra loads for it."""
    (tmp_path / "evil.yaml").write_bytes(row.content(""))
    (tmp_path / "cfg.yaml").write_text(
        "defaults:\n  - evil@_global_\n  - _self_\n" + BASE.read_text()
    )
    monkeypatch.chdir(tmp_path)
    status, _, err = cli(*IN_PROCESS["check"])
    assert_one_message(status, err, "evil.yaml", row._replace(says=row.says[-1:]))
    assert os.path.realpath(tmp_path / "evil.yaml") not in loads


@pytest.mark.e2e
@pytest.mark.parametrize("row", HOSTILE, ids=[r.name for r in HOSTILE])
def test_train_py_refuses_a_hostile_yaml_in_one_message(tmp_path: Path, row: Hostile) -> None:
    write(tmp_path, row)
    proc = run_python(
        ROOT / "train.py",
        "--config-dir",
        ".",
        "--config-name",
        "cfg",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert_one_message(proc.returncode, proc.stderr, "cfg.yaml", row)
    assert proc.stderr.startswith("error: invalid config\n")
    assert not (tmp_path / "run").exists()  # refused before the job ran


@pytest.mark.e2e
@pytest.mark.parametrize("verb", ["run", "sweep"])
def test_run_and_sweep_refuse_an_alias_bomb_before_starting_the_driver(
    tmp_path: Path, verb: str
) -> None:
    row = HOSTILE[0]
    write(tmp_path, row)
    out = tmp_path / "standin"
    sweep = ["actor.backend=fsdp:d4,fsdp:d2"] if verb == "sweep" else []
    proc = run_python(
        "-m",
        "areal_conf",
        verb,
        *IN_PROCESS["check"][1:],
        *sweep,
        cwd=tmp_path,
        env=user_env(STANDIN_OUT=str(out)),
    )
    assert_one_message(proc.returncode, proc.stderr, "cfg.yaml", row)
    assert not out.exists()  # no driver started


# ------------------------------------------------------------------ the check itself


@pytest.mark.parametrize("row", HOSTILE, ids=[r.name for r in HOSTILE])
def test_check_yaml_file_refuses_each_hostile_file(tmp_path: Path, row: Hostile) -> None:
    path = write(tmp_path, row)
    with pytest.raises(UnreadableYaml) as caught:
        check_yaml_file(path, "cfg.yaml")
    assert_one_message(2, "error: " + str(caught.value), "cfg.yaml", row)


def every_fixture_yaml() -> list[Path]:
    found = [
        *(ROOT / "tests" / "fixtures").rglob("*.yaml"),
        *(ROOT / "tests" / "fixtures").rglob("*.yml"),
        *(ROOT / "conf").rglob("*.yaml"),
        *(ROOT / "hydra_plugins").rglob("*.yaml"),
    ]
    return sorted(found)


@pytest.mark.parametrize("path", every_fixture_yaml(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_real_config_is_far_below_every_limit(path: Path) -> None:
    check_yaml_file(path)
    depth, values, _ = measure(path.read_text(), limits())
    assert path.stat().st_size * 8 < LIMITS["bytes"].default
    assert depth * 8 < LIMITS["depth"].default
    assert values * 8 < LIMITS["nodes"].default


def test_the_fixture_configs_are_all_found() -> None:
    assert len(every_fixture_yaml()) >= 30


def big_but_plain(tmp_path: Path) -> Path:
    """A config padded with comments to 1.5 MiB: over the size limit, nothing else."""
    path = tmp_path / "cfg.yaml"
    padding = "# " + "x" * 97 + "\n"
    path.write_text(BASE.read_text() + padding * (3 * MiB // 2 // len(padding)))
    return path


def test_raising_the_size_limit_lets_a_big_file_through(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loads: list[str]
) -> None:
    path = big_but_plain(tmp_path)
    monkeypatch.chdir(tmp_path)
    status, _, err = cli(*IN_PROCESS["check"])
    assert status == 2 and "AREAL_CONF_YAML_MAX_BYTES=" in err
    assert os.path.realpath(path) not in loads
    monkeypatch.setenv("AREAL_CONF_YAML_MAX_BYTES", str(2 * MiB))
    status, out, err = cli(*IN_PROCESS["check"])
    assert (status, err) == (0, "")
    assert "actor" in out
    assert os.path.realpath(path) in loads  # what the hostile rows' `loads` would see


@pytest.mark.parametrize(
    ("text", "env", "value"),
    [
        ("x: " + "[" * 70 + "]" * 70 + "\n", "AREAL_CONF_YAML_MAX_DEPTH", "100"),
        ("x: [" + ", ".join(["1"] * 200_000) + "]\n", "AREAL_CONF_YAML_MAX_NODES", "300000"),
        (alias_bomb(4, 20), "AREAL_CONF_YAML_MAX_NODES", "200000"),
    ],
    ids=["depth", "values", "aliases"],
)
def test_each_limit_is_raised_by_its_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, env: str, value: str
) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    with pytest.raises(UnreadableYaml, match=env):
        check_yaml_file(path)
    monkeypatch.setenv(env, value)
    check_yaml_file(path)


def test_aliases_that_multiply_without_end_are_counted_to_a_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2,000 levels of 8 aliases each (8^2000 values): counted up to 10^18, and said so."""
    levels = ["a0: &a0 x"]
    levels += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 8) + "]" for i in range(1, 2001)]
    path = tmp_path / "cfg.yaml"
    path.write_text("\n".join(levels) + "\n")
    monkeypatch.setenv("AREAL_CONF_YAML_MAX_DEPTH", "5000")
    with pytest.raises(UnreadableYaml) as caught:
        check_yaml_file(path, "cfg.yaml")
    assert "holds more than 999,999,999,999,999,999 values" in str(caught.value)
    assert "no limit reads it" in str(caught.value)


@pytest.mark.parametrize("value", ["-1", "0", "1e6", "lots", "١٠٠"])
@pytest.mark.parametrize("env", [limit.env for limit in LIMITS.values()])
def test_a_limit_that_is_no_positive_whole_number_is_refused(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str, value: str
) -> None:
    (tmp_path / "cfg.yaml").write_text(BASE.read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(env, value)
    status, _, err = cli(*IN_PROCESS["explain"])
    assert status == 2
    assert f"{env}: " in err and "must be a positive whole number" in err
    assert f"hint: e.g. {env}=" in err


def test_a_yaml_that_does_not_parse_keeps_its_message(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cfg.yaml").write_text(BASE.read_text() + "x: [1, 2\n")
    monkeypatch.chdir(tmp_path)
    status, _, err = cli(*IN_PROCESS["check"])
    assert status == 2
    assert "cannot read cfg.yaml (line" in err and "the YAML does not parse" in err


def test_a_utf8_byte_order_mark_is_read_as_hydra_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + BASE.read_bytes())
    check_yaml_file(path)


def test_only_areal_confs_own_composing_checks_files(cli: Cli, tmp_path: Path) -> None:
    """A Hydra application that merely has areal-conf installed loads files as Hydra
    does: the checking source is in Hydra's registry only while areal-conf composes."""
    import hydra_plugins.areal_conf_plugin  # noqa: F401  (what every Hydra app imports)
    from areal_conf.hydra.files import FileConfigSource as CheckingSource

    # Compared with what was registered before, not with an imported class: Hydra's
    # plugin discovery may have executed its core plugin modules a second time.
    before = SourcesRegistry.instance().types["file"]
    assert not issubclass(before, CheckingSource)
    status, _, _ = cli("explain", "--config", str(ROOT / "conf" / "config.yaml"))
    assert status == 0
    assert SourcesRegistry.instance().types["file"] is before
