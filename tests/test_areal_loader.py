"""What areal-conf tells a user to paste into an AReaL YAML loads in AReaL's own loader.

Each row starts from one of AReaL's example YAMLs, breaks it with overrides, and takes
the fix areal-conf's message gives (the ``key=value`` overrides of its hint, or the YAML
it describes); AReaL's real ``load_expr_config`` must accept the fixed config and
areal-conf must then find nothing more to fix. A second test loads every example with and
without areal-conf installed and finds the same verdicts.

AReaL's loader runs in a virtualenv of its own, built from a copy of AReaL's repository
by ``areal_loader/setup.sh`` (a tool beside this project, not part of it):
``AREAL_LOADER_HOME`` (default ``~/.cache/areal-loader``) holds ``venv`` and
``areal-src``, ``AREAL_LOADER_DIR`` (no default) the tool's directory, with its ``load.py``.
Without them these tests skip and say so.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from _helpers import compose_config, run_python, user_env

from areal_conf import AllocationError, check_command, validate
from areal_conf.spec.legacy import migration_yaml

HOME = Path(os.environ.get("AREAL_LOADER_HOME", Path.home() / ".cache" / "areal-loader"))
# The loader tool is not part of this repository: its directory comes from the
# environment, and without it the loader tests skip.
LOADER_DIR = os.environ.get("AREAL_LOADER_DIR", "")
LOADER = Path(LOADER_DIR or "areal_loader-not-set") / "load.py"
PYTHON = HOME / "venv" / "bin" / "python"
SRC = HOME / "areal-src"
EXAMPLES = SRC / "examples"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not (LOADER_DIR and PYTHON.exists() and LOADER.exists() and EXAMPLES.is_dir()),
        reason="AReaL's loader is not set up: set AREAL_LOADER_DIR to the areal_loader "
        f"tool's directory and build its venv with its setup.sh (AREAL_LOADER_HOME={HOME})",
    ),
]


def areal_loads(
    yaml: Path, overrides: Sequence[str] = (), cls: str | None = None
) -> dict[str, Any]:
    """AReaL's verdict on ``yaml`` with ``overrides``: the loader's JSON line."""
    argv = [str(PYTHON), str(LOADER), "--areal-src", str(SRC)]
    if cls:
        argv += ["--cls", cls]
    env = {**os.environ, "SWE_RL_ADMIN_API_KEY": "test"}
    result = subprocess.run(
        [*argv, str(yaml), "--", *overrides],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode in (0, 1), result.stderr
    verdict: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return verdict


#: key=value (with +/++/~), the overrides a hint gives.
_OVERRIDE = re.compile(r"(?<![\w.])(\+{0,2}[A-Za-z_]\w*(?:\.\w+)*=(?:\[[^\]]*\]|[^\s,;()]+))")


def fix_of(err: AllocationError) -> list[str]:
    """The overrides of the first alternative of the error's hint."""
    first = re.split(r", or | or ", err.hint)[0]
    found = _OVERRIDE.findall(first)
    assert found, err.hint
    return found


def plan_or_error(yaml: Path, overrides: list[str]) -> Any:
    cfg = compose_config(*overrides, config_dir=yaml.parent, name=yaml.stem)
    try:
        return validate(cfg)
    except AllocationError as err:
        return err


class Broken(NamedTuple):
    name: str
    yaml: str  # under AReaL's examples/
    breaks: tuple[str, ...]  # overrides that make areal-conf refuse it
    key: str  # the message starts with it


BROKEN = [
    Broken("scheduler", "math/gsm8k_grpo.yaml", ("scheduler.type=kubernetes",), "scheduler.type"),
    Broken(
        "trainer gpu",
        "math/gsm8k_grpo.yaml",
        ("scheduler.type=local", "actor.scheduling_spec.0.gpu=2"),
        "actor.scheduling_spec",
    ),
    Broken(
        "colocated rollout",
        "math/gsm8k_grpo.yaml",
        (
            "scheduler.type=local",
            "rollout.backend=sglang:d8",
            "actor.backend=fsdp:d8",
            "+rollout.scheduling_strategy.type=colocation",
            "+rollout.scheduling_strategy.target=actor",
        ),
        "enable_offload",
    ),
    Broken(
        "controller versions",
        "math/gsm8k_grpo.yaml",
        ("scheduler.type=local", "+actor._version=v2"),
        "rollout._version",
    ),
    Broken(
        "weight update",
        "math/gsm8k_grpo.yaml",
        ("scheduler.type=local", "actor.weight_update_mode=nccl"),
        "actor.weight_update_mode",
    ),
    Broken(
        "slurm whole nodes",
        "math/gsm8k_grpo.yaml",
        ("scheduler.type=slurm", "actor.backend=fsdp:d2", "rollout.backend=sglang:d6"),
        "actor.backend",
    ),
    Broken(  # AReaL's own example, which its loader refuses
        "kpop rejection metric",
        "math/gsm8k_kpop.yaml",
        ("scheduler.type=local",),
        "actor.rejection_sampling.metric",
    ),
    Broken(
        "AWEX on slurm",
        "math/gsm8k_grpo_awex_colocate.yaml",
        ("scheduler.type=slurm", "cluster.n_gpus_per_node=2"),
        "rollout.scheduling_strategy",
    ),
]


@pytest.mark.parametrize("row", BROKEN, ids=[row.name for row in BROKEN])
def test_every_fix_areal_conf_gives_loads_in_areal(row: Broken) -> None:
    yaml = EXAMPLES / row.yaml
    overrides = list(row.breaks)
    first = plan_or_error(yaml, overrides)
    assert isinstance(first, AllocationError) and first.reason.startswith(f"{row.key}: "), first
    outcome: Any = first
    for _ in range(4):  # a fix may uncover the next rule AReaL checks
        if not isinstance(outcome, AllocationError):
            break
        overrides += fix_of(outcome)
        verdict = areal_loads(yaml, overrides)
        assert verdict["ok"], (overrides, verdict["error_first_line"])
        outcome = plan_or_error(yaml, overrides)
    assert not isinstance(outcome, AllocationError), outcome


def test_the_fix_for_a_missing_ref_backend_is_the_actors_and_loads() -> None:
    """As AReaL's examples write it (ref.backend: ${actor.backend}), quoted for a shell."""
    yaml = EXAMPLES / "math" / "gsm8k_grpo.yaml"
    argv = [sys.executable, "examples/math/gsm8k_rl.py", "--config", str(yaml)]
    base = ["scheduler.type=local", "~ref.backend"]
    with pytest.raises(AllocationError) as info:
        check_command([*argv, *base], cwd=SRC)
    assert info.value.reason.startswith("ref.backend: missing")
    fixed = shlex.split(info.value.hint.partition("e.g. ")[2])
    assert fixed == ["++ref.backend=${actor.backend}"]
    assert areal_loads(yaml, [*base, *fixed])["ok"]
    check_command([*argv, *base, *fixed], cwd=SRC)


def test_the_fix_for_a_missing_scheduling_spec_loads() -> None:
    yaml = EXAMPLES / "math" / "gsm8k_grpo.yaml"
    overrides = ["scheduler.type=local", "~rollout.scheduling_spec"]
    plan = plan_or_error(yaml, overrides)
    (warning,) = [w for w in plan.warnings if "no rollout.scheduling_spec" in w]
    fix = _OVERRIDE.findall(warning)
    assert fix == ["+rollout.scheduling_spec=[{gpu:1}]"]
    assert areal_loads(yaml, [*overrides, *fix])["ok"]
    assert not any("scheduling_spec" in w for w in plan_or_error(yaml, [*overrides, *fix]).warnings)


def _blocks(section: str) -> dict[str, list[str]]:
    """The keys of a YAML section's body (indented by two), each with its lines."""
    blocks: dict[str, list[str]] = {}
    for line in section.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            blocks[line.split(":")[0].strip()] = [line]
        elif blocks and line.strip():
            blocks[list(blocks)[-1]].append(line)
    return blocks


def test_the_teacher_layouts_areal_conf_describes_load(tmp_path: Path) -> None:
    """A 1.0 flat teacher's message describes two 2.0 layouts: both load in AReaL, and
    areal-conf plans both."""
    flat = EXAMPLES / "distillation" / "gsm8k_grpo_distill_mode_trainEngine.yaml"
    err = plan_or_error(flat, [])
    assert isinstance(err, AllocationError) and err.reason.startswith("teacher.backend: ")
    assert not areal_loads(flat)["ok"]  # AReaL refuses the flat teacher too
    (inference,) = re.findall(r'teacher\.rollout\.backend: "([^"]+)"', err.hint)
    (training,) = re.findall(r'teacher\.train\.backend: "([^"]+)"', err.hint)
    found = re.search(r"the other engine keys: ([\w, ]+)\)", err.hint)
    assert found is not None
    moved = found[1].split(", ")
    head, rest = flat.read_text().split("\nteacher:\n", 1)
    body, tail = rest.split("\nref:\n", 1)
    blocks = _blocks(body)
    stays = [
        line for key in ("path", "rl_loss_weight", "distill_loss_weight") for line in blocks[key]
    ]
    train = [f'    backend: "{training}"'] + [
        "  " + line for key in ("path", *moved) for line in blocks[key]
    ]
    layouts = {
        "train": ["teacher:", "  engine_type: train", *stays, "  train:", *train],
        "rollout": ["teacher:", *stays, "  rollout:", f'    backend: "{inference}"'],
    }
    assert set(blocks) == {"backend", "path", "rl_loss_weight", "distill_loss_weight", *moved}
    for name, teacher in layouts.items():
        fixed = tmp_path / name / "config.yaml"
        fixed.parent.mkdir()
        fixed.write_text(head + "\n" + "\n".join(teacher) + "\n\nref:\n" + tail)
        verdict = areal_loads(fixed, cls="GRPOConfig")
        assert verdict["ok"], (name, verdict["error_first_line"])
        plan = plan_or_error(fixed, [])
        assert not isinstance(plan, AllocationError), plan
        assert plan.engines["teacher"].enabled


def test_the_yaml_migrate_prints_loads(tmp_path: Path) -> None:
    """``migrate --yaml`` of an allocation_mode, pasted over the backends of the engines
    the YAML has (rollout, actor, ref)."""
    base = EXAMPLES / "math" / "gsm8k_grpo.yaml"
    for legacy in (
        "sglang:d4+fsdp:d4",
        "sglang:d2|fsdp:d2",
        "fsdp[actor]:d4|fsdp[ref]:d4+sglang:d4",
        "sglang:d4+fsdp[actor]:d4+fsdp[ref]:d4",  # ref separated from the actor
    ):
        block = migration_yaml(legacy)
        app = tmp_path / legacy.replace(":", "_").replace("|", "_").replace("+", "_")
        app.mkdir()
        (app / "gsm8k_grpo.yaml").write_text(base.read_text())
        (app / "main.yaml").write_text("defaults:\n  - gsm8k_grpo\n  - _self_\n\n" + block)
        verdict = areal_loads(app / "main.yaml", cls="GRPOConfig")
        assert verdict["ok"], (legacy, verdict["error_first_line"])


def test_the_overrides_migrate_prints_load() -> None:
    """``python -m areal_conf migrate``'s line, given as it is to AReaL's command."""
    base = EXAMPLES / "math" / "gsm8k_grpo.yaml"
    for legacy in ("sglang:d4+fsdp[actor]:d4+fsdp[ref]:d4", "sglang:d2|fsdp:d2"):
        line = run_python("-m", "areal_conf", "migrate", legacy)
        assert line.returncode == 0, line.stderr
        verdict = areal_loads(base, shlex.split(line.stdout), cls="GRPOConfig")
        assert verdict["ok"], (legacy, verdict["error_first_line"])


def _verdict(python: Path, argv: Sequence[str]) -> tuple[bool, str, str]:
    out = subprocess.run(
        [str(python), str(LOADER), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SWE_RL_ADMIN_API_KEY": "test"},
    )
    line = json.loads(out.stdout.strip().splitlines()[-1])
    return line["ok"], line["error_type"], line["error_first_line"]


@pytest.mark.own_environment
def test_areal_conf_installed_changes_no_verdict() -> None:
    """With areal-conf in AReaL's environment (``AREAL_LOADER_HOME_WITH``, default
    ``~/.cache/areal-loader-conf``), AReaL's loader accepts and refuses what it does
    without it, for every example config. Two loads at a time: each is a process of its
    own that mostly imports."""
    with_home = Path(
        os.environ.get("AREAL_LOADER_HOME_WITH", Path.home() / ".cache" / "areal-loader-conf")
    )
    with_conf = with_home / "venv" / "bin" / "python"
    if not with_conf.exists():
        pytest.skip(f"no loader with areal-conf installed at {with_home}")
    table = json.loads((LOADER.parent / "examples_map.json").read_text())["examples"]
    runs = {
        rel: ["--areal-src", str(SRC), "--cls", entry["cls"], str(SRC / rel)]
        for rel, entry in sorted(table.items())
        if not entry.get(
            "cls_file"
        )  # driver subclasses: the loader's --cls-file, covered by the tool
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        without = {rel: pool.submit(_verdict, PYTHON, argv) for rel, argv in runs.items()}
        with_it = {rel: pool.submit(_verdict, with_conf, argv) for rel, argv in runs.items()}
        differ = [
            (rel, without[rel].result(), with_it[rel].result())
            for rel in runs
            if without[rel].result() != with_it[rel].result()
        ]
    assert len(runs) >= 40  # the examples were found
    assert differ == []


def test_each_job_of_a_sweep_is_a_command_line_areal_loads(tmp_path: Path) -> None:
    """``python -m areal_conf sweep`` runs each job's AReaL command; here the driver of
    that command hands its arguments to AReaL's real loader (tests/areal_loader_driver.py),
    so every job's command line, as areal-conf wrote it, must load in AReaL. Values that
    need Hydra's quoting (a hybrid layout) are among them."""
    yaml = EXAMPLES / "math" / "gsm8k_grpo_megatron.yaml"
    backends = ["megatron:d4", "megatron:d2t2", "megatron:(attn:d2t2|ffn:d2t2)"]
    sweep = "actor.backend=" + ",".join(f"'{b}'" if "(" in b else b for b in backends)
    runs, sweep_dir = tmp_path / "runs", tmp_path / "sweep"
    out = run_python(
        "-m",
        "areal_conf",
        "sweep",
        "--",
        str(PYTHON),
        "tests/areal_loader_driver.py",
        "--config",
        str(yaml),
        "scheduler.type=local",
        "rollout.backend=sglang:d4,sglang:d2t2",
        sweep,
        f"hydra.sweep.dir={sweep_dir}",
        env=user_env(
            STANDIN_OUT=str(runs), AREAL_LOADER_SCRIPT=str(LOADER), AREAL_LOADER_SRC=str(SRC)
        ),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    verdicts = [json.loads(p.read_text()) for p in runs.glob("*.json")]
    assert len(verdicts) == 6
    assert all(v["ok"] for v in verdicts), [v["error_first_line"] for v in verdicts]
    commands = [
        json.loads((sweep_dir / str(n) / "areal_job.json").read_text())["command"] for n in range(6)
    ]
    assert {c[-1] for c in commands} == {
        f"actor.backend={b}" if "(" not in b else f"actor.backend='{b}'" for b in backends
    }


# ------------------------------------------------------------ keys AReaL does not have

REPO = Path(__file__).resolve().parent.parent
#: A git directory of AReaL's repository (what areal_loader/setup.sh reads): the source of
#: the versions other than the loader's own.
MIRROR = os.environ.get("AREAL_MIRROR")


def live_classes(src: Path, *flags: str) -> dict[str, Any]:
    """AReaL's config dataclasses as AReaL's source at ``src`` defines them, imported in the
    loader's environment (tests/areal_keys_driver.py; ``--values``: the fields whose values
    OmegaConf converts, as OmegaConf types them)."""
    driver = REPO / "tests" / "areal_keys_driver.py"
    done = subprocess.run(
        [str(PYTHON), str(driver), str(LOADER), str(src), *flags],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_the_key_table_is_areals_dataclasses() -> None:
    """Every key areal-conf calls valid is a field AReaL's strict merge accepts, and no
    other: the table's classes and fields, in order, are the imported classes'."""
    from areal_conf.config.known_keys import areal_keys

    table = areal_keys("2.0")
    assert (SRC / ".areal_commit").read_text().strip() == table.commit
    assert live_classes(SRC) == {name: dict(fields) for name, fields in table.classes.items()}


def test_the_value_types_are_omegaconfs_of_areals_dataclasses() -> None:
    """Each field whose value areal-conf checks has the type and nullability OmegaConf
    gives it in the merge AReaL's loader runs, and no other field is typed; a default the
    table shows is the field's, and a field is required (``???`` until the config gives
    it) where the table says so."""
    from areal_conf.config.known_keys import areal_keys
    from areal_conf.config.known_values import NO_DEFAULT

    live = live_classes(SRC, "--values")
    table = areal_keys("2.0").values
    assert {name: set(fields) for name, fields in live.items()} == {
        name: set(fields) for name, fields in table.items()
    }
    for owner, fields in table.items():
        for name, field in fields.items():
            seen = live[owner][name]
            assert (field.type, field.optional) == (seen["type"], seen["optional"]), (owner, name)
            if field.default is not NO_DEFAULT:
                assert field.default == seen["default"], (owner, name)
            assert field.mandatory == seen["mandatory"], (owner, name)


def test_the_sections_made_by_default_are_areals() -> None:
    """The sections AReaL's classes make when a config leaves them out (whose required
    values a whole config must then give) are the table's."""
    from areal_conf.config.known_keys import areal_keys

    live = live_classes(SRC, "--made")
    table = areal_keys("2.0").made
    assert {name: set(fields) for name, fields in live.items() if fields} == {
        name: set(fields) for name, fields in table.items()
    }


#: Values for AReaL's merge and the value check: (overrides, taken), what AReaL's loader
#: says of gsm8k_grpo.yaml with them; a number for a float, text that reads as a number,
#: 1 for a bool are taken; text, a fraction for an integer, null where a field is not
#: optional, a section for a value are not.
VALUES = [
    (("actor.optimizer.lr=abc",), False),
    (("actor.optimizer.lr=1",), True),
    (("actor.optimizer.lr='1e-5'",), True),
    (("actor.optimizer.lr=null",), False),
    (("total_train_epochs=1.5",), False),
    (("total_train_epochs='3'",), True),
    (("++actor.disable_dropout=maybe",), False),
    (("++actor.disable_dropout=1",), True),
    (("++actor.disable_dropout=yes",), True),
    (("gconfig.max_new_tokens=1.0",), False),
    (("++actor.optimizer.warmup_steps=null",), True),
    (("++actor.optimizer.lr={a: 1}",), False),
    (("actor.path=3",), True),
    (("cluster.n_gpus_per_node='8'",), True),
    (("cluster.n_nodes='1'",), True),
    (("cluster.n_nodes=one",), False),
    # a text the dataclass's __post_init__ checks against a set (known_values.CHOICES)
    (("++actor.rejection_sampling.metric=binary_kl",), False),
    (("++actor.rejection_sampling.metric=kl_k2",), True),
    (("++actor.rejection_sampling.level=sequence",), True),
    (("++actor.reward_norm.mean_level=null",), True),
    (("++actor.reward_norm.std_level=batchwise",), False),
    (("++actor.mb_spec.packing_algorithm=greedy",), False),
    (("++actor.gae_timestep_unit=turn",), True),
    (("++actor.gae_timestep_unit=step",), False),
    (("++saver.mode=later",), False),
    (("++recover.mode=off",), True),
    (("++stats_logger.wandb.mode=cloud",), False),
    (("++stats_logger.swanlab.mode=cloud",), True),
    (("++stats_logger.trackio.mode=offline",), False),
    (("++actor.attn_impl=flash_attn3",), False),
    (("++actor.attn_impl=kernels-community/flash-attn3",), True),
]


#: Required values (fields without a default) and AReaL's verdict on gsm8k_grpo.yaml
#: without them: (overrides, taken, the key areal-conf names first).
REQUIRED = [
    (("~experiment_name",), False, "experiment_name"),
    (("~actor.experiment_name",), False, "actor.experiment_name"),
    (("~saver",), False, "saver.experiment_name"),
    (("~stats_logger",), False, "stats_logger.experiment_name"),
    (("train_dataset.path=???",), False, "train_dataset.path"),
    (("~train_dataset.type",), False, "train_dataset.type"),
    (("~ref.backend",), False, "ref.backend"),  # a ref not built (kl_ctl 0) too
    (("~cluster",), True, ""),
    (("~rollout.experiment_name",), True, ""),
    (("~valid_dataset",), True, ""),
]
#: Interpolations of keys the YAML leaves out: AReaL merges the YAML onto its dataclasses
#: first, so they get the dataclass's default, unless it has none (a null teacher).
REFERENCED = [
    (
        ("~cluster.n_gpus_per_node", "++actor.mb_spec.n_mbs=${cluster.n_gpus_per_node}"),
        True,
        "",
    ),
    (
        ("~train_dataset.batch_size", "rollout.consumer_batch_size=${train_dataset.batch_size}"),
        True,
        "",
    ),
    (
        ("rollout.max_concurrent_rollouts=${teacher.rollout.max_concurrent_rollouts}",),
        False,
        "rollout.max_concurrent_rollouts",
    ),
]
#: Top-level keys the driver's config class lacks (gsm8k_rl.py loads into GRPOConfig).
TOP_LEVEL = [
    (("+total_train_epoch=1",), False, "total_train_epoch"),
    (("+launcher.x=1",), False, "launcher"),
]
#: Each row: (overrides, taken, the key areal-conf's message starts with).
CHECKED = (
    [(o, t, o[0].lstrip("+").partition("=")[0]) for o, t in VALUES]
    + REQUIRED
    + REFERENCED
    + TOP_LEVEL
)


@pytest.mark.parametrize(
    ("overrides", "taken", "key"), CHECKED, ids=[" ".join(r[0]) for r in CHECKED]
)
def test_areal_takes_the_values_the_check_takes(
    overrides: tuple[str, ...], taken: bool, key: str
) -> None:
    base = ["scheduler.type=local"]
    verdict = areal_loads(EXAMPLES / "math" / "gsm8k_grpo.yaml", [*base, *overrides])
    assert verdict["ok"] is taken, verdict["error_first_line"]
    argv = [
        sys.executable,
        "examples/math/gsm8k_rl.py",
        "--config",
        "examples/math/gsm8k_grpo.yaml",
    ]
    try:
        check_command([*argv, *base, *overrides], cwd=SRC)
    except AllocationError as err:
        assert not taken, f"areal-conf refuses {overrides}, AReaL's loader takes them: {err}"
        assert err.reason.startswith(f"{key}: "), err.reason  # a key areal-conf reads: its own
        if "missing mandatory value" in verdict["error_first_line"]:  # the same field
            assert verdict["error_first_line"].endswith(": " + key.rpartition(".")[2])
    else:
        assert taken, f"areal-conf takes {overrides}, AReaL's loader does not"


def test_the_generator_writes_the_shipped_table() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "areal_keys.py"),
            str(SRC),
            "--version",
            "2.0",
            "--out",
            "-",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    shipped = (REPO / "areal_conf" / "data" / "areal_keys_2.0.json").read_text()
    assert done.stdout == shipped


@pytest.mark.skipif(not MIRROR, reason="AREAL_MIRROR (a git directory of AReaL) is not set")
def test_the_1_0_key_table_is_areal_1_0s_dataclasses(tmp_path: Path) -> None:
    from areal_conf.config.known_keys import areal_keys

    table = areal_keys("1.0")
    archive = subprocess.run(
        ["git", f"--git-dir={MIRROR}", "archive", table.commit, "areal"],
        capture_output=True,
        timeout=300,
    )
    assert archive.returncode == 0, archive.stderr
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    assert live_classes(tmp_path) == {name: dict(f) for name, f in table.classes.items()}


class Misspelt(NamedTuple):
    name: str
    breaks: tuple[str, ...]  # overrides (after scheduler.type=local) with a key AReaL lacks
    key: str  # areal-conf's message starts with it
    fix: tuple[str, ...]  # the overrides areal-conf's hint gives in place of the breaks


MISSPELT = [
    Misspelt("cluster", ("cluster.n_node=1",), "cluster.n_node", ("cluster.n_nodes=1",)),
    Misspelt(
        "added sglang key",
        ("+sglang.mem_fraction_statc=0.7",),
        "sglang.mem_fraction_statc",
        ("sglang.mem_fraction_static=0.7",),
    ),
    Misspelt(
        "an AReaL key the YAML lacks",
        ("actor.use_lora=false",),
        "actor.use_lora",
        ("++actor.use_lora=false",),
    ),
    Misspelt("a subsection's key", ("+actor.lr=1e-5",), "actor.lr", ("actor.optimizer.lr=1e-5",)),
    Misspelt(
        "scheduling_spec",
        ("+actor.scheduling_spec.0.gpus=1",),
        "actor.scheduling_spec.0.gpus",
        ("actor.scheduling_spec.0.gpu=1",),
    ),
    Misspelt(
        "removed key", ("+actor.behave_imp_weight_cap=5.0",), "actor.behave_imp_weight_cap", ()
    ),
    Misspelt(
        "text for a number",
        ("actor.optimizer.lr=abc",),
        "actor.optimizer.lr",
        ("actor.optimizer.lr=0.001",),
    ),
    Misspelt(
        "a fraction for an integer",
        ("total_train_epochs=1.5",),
        "total_train_epochs",
        ("total_train_epochs=1",),
    ),
]


@pytest.mark.parametrize("row", MISSPELT, ids=[row.name for row in MISSPELT])
def test_areal_refuses_what_the_key_check_refuses_and_takes_its_fix(row: Misspelt) -> None:
    yaml = EXAMPLES / "math" / "gsm8k_grpo.yaml"
    base = ["scheduler.type=local"]
    argv = [
        sys.executable,
        "examples/math/gsm8k_rl.py",
        "--config",
        "examples/math/gsm8k_grpo.yaml",
    ]
    with pytest.raises(AllocationError) as info:
        check_command([*argv, *base, *row.breaks], cwd=SRC)
    assert info.value.reason.startswith(f"{row.key}: "), info.value.reason
    assert all(fix in info.value.hint for fix in row.fix), info.value.hint
    assert not areal_loads(yaml, [*base, *row.breaks])["ok"]
    verdict = areal_loads(yaml, [*base, *row.fix])
    assert verdict["ok"], verdict["error_first_line"]
    check_command([*argv, *base, *row.fix], cwd=SRC)


def test_areal_refuses_a_misspelt_yaml_key_and_takes_the_fix(tmp_path: Path) -> None:
    """The reported case: ``bakend:`` under ``actor`` in the YAML, which ref interpolates."""
    text = (EXAMPLES / "math" / "gsm8k_grpo.yaml").read_text()
    head, actor, rest = text.partition("\nactor:\n  backend:")
    assert actor, "gsm8k_grpo.yaml has no actor.backend any more"
    yaml = tmp_path / "gsm8k_grpo.yaml"
    yaml.write_text(head + "\nactor:\n  bakend:" + rest)
    err = plan_or_error(yaml, ["scheduler.type=local"])
    assert isinstance(err, AllocationError) and err.reason.startswith("actor.bakend: "), err
    fix = re.search(r"rename it: (.*) \(on the command line", err.hint)
    assert fix is not None, err.hint
    overrides = ["scheduler.type=local", *fix[1].split()]
    assert overrides[1:3] == ["~actor.bakend", "++actor.backend=fsdp:d4p1t1"]
    assert not areal_loads(yaml, ["scheduler.type=local"], cls="GRPOConfig")["ok"]
    assert areal_loads(yaml, overrides, cls="GRPOConfig")["ok"]
    assert not isinstance(plan_or_error(yaml, overrides), AllocationError)


def test_no_example_areal_loads_is_refused_for_its_keys() -> None:
    """No false alarm: of AReaL's example YAMLs, those the key and value check refuses
    (a key AReaL lacks, a value it refuses or a required value missing) are refused by
    AReaL's loader too (each composed as AReaL composes it; drivers' own classes)."""
    from areal_conf.config.known_keys import UnknownKey, check_keys
    from areal_conf.hydra.explain import compose_file

    table = json.loads((LOADER.parent / "examples_map.json").read_text())["examples"]
    refused = []
    for rel in sorted(table):
        path = SRC / rel
        try:
            wrong_value, missing = check_keys(
                compose_file(path, path.name.split(".yaml")[0]), "2.0"
            )
        except UnknownKey as err:
            refused.append((rel, err.key))
            continue
        except AllocationError:
            continue  # Hydra does not compose it here: not the key check's
        if wrong_value is not None:
            refused.append((rel, wrong_value.key))
        elif missing:  # a value AReaL requires
            refused.append((rel, missing[0].key))
    assert len(table) >= 60
    for rel, key in refused:
        entry = table[rel]
        argv = ["--cls", entry["cls"]] + (
            ["--cls-file", entry["cls_file"]] if entry.get("cls_file") else []
        )
        out = subprocess.run(
            [str(PYTHON), str(LOADER), "--areal-src", str(SRC), *argv, str(SRC / rel)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "SWE_RL_ADMIN_API_KEY": "test"},
        )
        verdict = json.loads(out.stdout.strip().splitlines()[-1])
        assert not verdict["ok"], (rel, key)
        assert str(key).rsplit(".", 1)[-1] in verdict["error"], (
            rel,
            key,
            verdict["error_first_line"],
        )
