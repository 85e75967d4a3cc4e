"""One message, never a traceback (issue 12): ``areal_conf.run_validated`` and what
``train.py`` prints for every bad input a user can reach; ``from areal_conf import
validate``; the CLI behind a closed pipe; progress of long validations."""

from __future__ import annotations

import importlib
import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from _helpers import SUBPROCESS_TIMEOUT, TRAIN, Train, run_python, run_shell, user_env
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import InterpolationKeyError

import areal_conf
import areal_conf.hydra.structured
from areal_conf import AllocationError, parse_backend
from areal_conf.hydra.app import EXIT_HYDRA, EXIT_INVALID, report, run_validated
from areal_conf.progress import Progress


def raised(action: Callable[[], Any]) -> BaseException:
    try:
        action()
    except Exception as exc:
        return exc
    raise AssertionError("nothing raised")


def bad_backend() -> BaseException:
    return raised(lambda: parse_backend("fsdp:d4p2"))


def launcher_list() -> BaseException:
    exc = ConfigCompositionException("areal launcher: 1 of 3 jobs failed validation; ...")
    exc.__cause__ = AllocationError("1 of 3 jobs failed validation")
    return exc


def hydra_override_error() -> BaseException:
    exc = ConfigCompositionException("Could not override 'foo'.")
    exc.__cause__ = InterpolationKeyError("Key 'foo' not in 'AReaLConfig'")
    return exc


def resolve(yaml: str) -> Callable[[], BaseException]:
    return lambda: raised(lambda: OmegaConf.to_container(OmegaConf.create(yaml), resolve=True))


class Report(NamedTuple):
    """An exception that reaches ``report`` and what the user is shown."""

    name: str  # the test id
    make: Callable[[], BaseException]
    argv: list[str]  # the command line
    parts: tuple[str, ...]  # parts of the one message
    status: int | None  # the exit status; None: not ours, the traceback stays


REPORTS: list[Report] = [
    Report(
        name="allocation error",
        make=bad_backend,
        argv=[],
        parts=("error: invalid allocation\nfsdp does not support pipeline parallelism (p)", "^^"),
        status=EXIT_INVALID,
    ),
    Report(
        name="the launcher's list of invalid jobs",
        make=launcher_list,
        argv=[],
        parts=("areal launcher: 1 of 3 jobs failed validation; ...",),
        status=EXIT_INVALID,
    ),
    Report(
        name="another compact Hydra error keeps Hydra's status",
        make=hydra_override_error,
        argv=[],
        parts=("Could not override 'foo'.\nKey 'foo' not in 'AReaLConfig'",),
        status=EXIT_HYDRA,
    ),
    Report(
        name="a Hydra that refuses '..' in a defaults list: AReaL's pins to install",
        make=lambda: ConfigCompositionException(
            "In x: Parent traversal ('..') in Defaults List config paths is not supported "
            "('../math/gsm8k_grpo_megatron')."
        ),
        argv=[],
        parts=(
            "('../math/gsm8k_grpo_megatron')",
            "Keep the file as it is and install AReaL's pins: python -m pip install "
            "hydra-core==1.4.0.dev1 omegaconf==2.4.0.dev2",
        ),
        status=EXIT_HYDRA,
    ),
    Report(
        name="interpolation with its key (OmegaConf knows it)",
        make=resolve("actor:\n  backend: ${nope}\n"),
        argv=[],
        parts=(
            "error: invalid config\nactor.backend: Interpolation key 'nope' not found\n"
            "    ${nope}\nhint: fix the interpolation",
            "e.g. actor.backend=fsdp:d8",
        ),
        status=EXIT_INVALID,
    ),
    Report(
        name="interpolation without its key: the override that wrote it",
        make=lambda: InterpolationKeyError("Interpolation key 'actor.nope' not found"),
        argv=["-m", "critic.backend=${actor.nope}"],
        parts=(
            "critic.backend: Interpolation key 'actor.nope' not found\n    ${actor.nope}\n",
            "e.g. critic.backend=fsdp:d8",
        ),
        status=EXIT_INVALID,
    ),
    Report(
        name="interpolation found nowhere",
        make=lambda: InterpolationKeyError("Interpolation key 'actor.nope' not found"),
        argv=[],
        parts=(
            "a value of the config cannot be resolved: Interpolation key 'actor.nope' not found",
            "--cfg job shows the config",
        ),
        status=EXIT_INVALID,
    ),
    Report(
        name="a resolver's allocation error: the override that holds the string",
        make=resolve("rollout:\n  x: ${areal.alloc:fsdp:d4p2}\n"),
        argv=["--cfg", "job", "--resolve", "rollout.backend=fsdp:d4p2"],
        parts=("error: invalid allocation\nrollout.x: fsdp does not support pipeline",),
        status=EXIT_INVALID,
    ),
    Report(name="a bug", make=lambda: KeyError("x"), argv=[], parts=(), status=None),
]


@pytest.mark.parametrize(
    Report._fields[1:],
    [row[1:] for row in REPORTS],
    ids=[row.name for row in REPORTS],
)
def test_report(
    make: Callable[[], BaseException], argv: list[str], parts: tuple[str, ...], status: int | None
) -> None:
    got = report(make(), argv)
    if status is None:
        assert got is None
        return
    assert got is not None
    message, code = got
    assert code == status
    for part in parts:
        assert part in message
    assert "Traceback" not in message


def test_run_validated_prints_one_message_and_exits() -> None:
    def main() -> None:
        assert os.environ["HYDRA_FULL_ERROR"] == "1"  # Hydra re-raises instead of printing
        parse_backend("d4t2")

    err = io.StringIO()
    with pytest.raises(SystemExit) as info:
        run_validated(main, argv=[], stderr=err)
    assert info.value.code == EXIT_INVALID
    assert err.getvalue().startswith("error: invalid allocation\nno backend prefix\n")
    assert "HYDRA_FULL_ERROR" not in os.environ


def test_run_validated_returns_the_result_and_leaves_bugs_alone() -> None:
    assert run_validated(lambda x: x + 1, 1) == 2
    with pytest.raises(ZeroDivisionError):
        run_validated(lambda: 1 / 0)
    assert "HYDRA_FULL_ERROR" not in os.environ


def test_run_validated_leaves_errors_alone_under_hydra_full_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    with pytest.raises(AllocationError):
        run_validated(lambda: parse_backend("d4t2"))
    assert os.environ["HYDRA_FULL_ERROR"] == "1"


@pytest.mark.parametrize("value", ["0", "", "false"])
def test_hydra_full_error_other_than_1_counts_as_unset(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("HYDRA_FULL_ERROR", value)
    err = io.StringIO()
    with pytest.raises(SystemExit) as info:
        run_validated(lambda: parse_backend("d4t2"), argv=[], stderr=err)
    assert info.value.code == EXIT_INVALID
    assert err.getvalue().startswith("error: invalid allocation\nno backend prefix\n")
    assert os.environ["HYDRA_FULL_ERROR"] == value  # the user's value, restored


@pytest.mark.e2e
@pytest.mark.parametrize(
    "env, status, shown",
    [
        ({}, 2, "error: invalid allocation"),
        ({"HYDRA_FULL_ERROR": "0"}, 2, "error: invalid allocation"),
        ({"HYDRA_FULL_ERROR": "1"}, 1, "Traceback (most recent call last)"),
    ],
)
def test_train_py_reads_hydra_full_error_as_hydra_does(
    env: dict[str, str], status: int, shown: str
) -> None:
    out = run_python(TRAIN, "actor.backend=d4t2", env=user_env(**env))
    assert out.returncode == status, out.stderr
    assert shown in out.stderr
    if status == 2:
        assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["+actor.bakend=fsdp:d8"], "write actor.backend=fsdp:d8 instead of +actor.bakend=fsdp:d8"),
        (
            [],
            "rename it: ~actor.bakend actor.backend=fsdp:d8 (on the command line, else the same rename in the YAML)",
        ),  # from the YAML
    ],
)
def test_a_key_areal_lacks_is_fixed_where_it_was_written(argv: list[str], hint: str) -> None:
    cfg = OmegaConf.create({"actor": {"backend": "fsdp:d4", "bakend": "fsdp:d8"}})
    exc = raised(lambda: areal_conf.validate(cfg))
    reported = report(exc, argv)
    assert reported is not None
    message, status = reported
    assert status == EXIT_INVALID
    assert message.startswith("error: invalid config\nactor.bakend: no such key")
    assert message.endswith(hint), message


def test_validate_is_the_function() -> None:
    from areal_conf import validate

    assert callable(validate) and validate.__module__ == "areal_conf.validation"
    # Importing the modules rebinds no package attribute: none is named like a function.
    importlib.import_module("areal_conf.validation")
    importlib.import_module("areal_conf.spec.layouts")
    assert areal_conf.validate is validate
    assert areal_conf.layouts.__module__ == "areal_conf.spec.layouts"
    plan = validate(
        {
            "rollout": {"backend": "sglang:d2t4"},
            "actor": {"backend": "fsdp:d8"},
            "cluster": {"n_nodes": 2},
        }
    )
    assert plan.used_gpus == 16


# --------------------------------------------------------------- train.py end to end


@pytest.mark.e2e
@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ["--cfg", "job", "--resolve", "actor.backend=fsdp:d4p2"],
            "error: invalid allocation\nactor.backend: fsdp does not support pipeline "
            "parallelism (p)\n    fsdp:d4p2\n           ^^\nhint: pipeline parallelism needs "
            "megatron or archon, e.g. megatron:d4p2\n",
        ),
        (
            ["actor.backend=${oc.env:NO_SUCH_VAR}"],
            "error: invalid allocation\nactor.backend: Environment variable 'NO_SUCH_VAR' not "
            "found\n    ${oc.env:NO_SUCH_VAR}\nhint: fix the interpolation (the referenced key "
            "or environment variable) or write the value itself, e.g. actor.backend=fsdp:d8\n",
        ),
        (  # the cluster takes any key in Hydra (areal_schema): the check names AReaL's
            ["cluster.n_node=3"],
            "error: invalid config\ncluster.n_node: no such key in AReaL's ClusterSpecConfig; "
            "AReaL's loader refuses the config\nhint: did you mean cluster.n_nodes? write "
            "cluster.n_nodes=3 instead of cluster.n_node=3\n",
        ),
        (
            ["critic.backend=${actor.nope}"],
            "error: invalid allocation\ncritic.backend: Interpolation key 'actor.nope' not found\n"
            "    ${actor.nope}\nhint: fix the interpolation (the referenced key or environment "
            "variable) or write the value itself, e.g. critic.backend=fsdp:d8\n",
        ),
    ],
)
def test_train_prints_one_message_for(args: list[str], expected: str, train: Train) -> None:
    out = train(*args)
    assert out.returncode == EXIT_INVALID
    assert out.stderr.endswith(expected)
    assert "Traceback" not in out.stderr


@pytest.mark.e2e
def test_train_exit_status_is_the_same_for_a_single_run_and_a_multirun(train: Train) -> None:
    single = train("actor.backend=d4t2")
    multi = train("-m", "actor.backend=d4t2,fsdp:d8")
    assert single.returncode == multi.returncode == EXIT_INVALID
    assert "no backend prefix" in single.stderr and "no backend prefix" in multi.stderr
    good = train("actor.backend=fsdp:d8")
    assert good.returncode == 0, good.stderr


@pytest.mark.e2e
def test_train_help_into_head_is_not_an_error() -> None:
    out = run_shell("python train.py --help | head -n 1")
    assert out.stdout == "train is powered by Hydra.\n"
    assert out.stderr == ""


@pytest.mark.e2e
def test_layouts_into_head_is_not_an_error() -> None:
    # far more than a pipe buffer of output; head closes the pipe after one line
    out = run_shell(
        "python -m areal_conf layouts megatron --gpus 55440 --max-tp none "
        "--model num_experts=64 | head -n 1"
    )
    assert out.stdout == "megatron:d55440\n"
    assert out.stderr == ""


# --------------------------------------------------------------- progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run_progress(stream: io.StringIO, step: float, total: int = 100) -> list[str]:
    clock, lines = Clock(), []
    with Progress(
        total,
        "validating jobs",
        log=lines.append,
        stream=stream,
        clock=clock,
        delay=1.0,
        interval=10.0,
    ) as p:
        for _ in range(total):
            clock.now += step
            p.advance()
    return lines


def test_short_loops_show_nothing() -> None:
    stream = Terminal()
    assert run_progress(stream, step=0.005) == []
    assert stream.getvalue() == ""


def test_log_lines_with_an_estimate_when_not_a_terminal() -> None:
    stream = io.StringIO()
    lines = run_progress(stream, step=0.5)  # 50 s in all
    assert lines[0] == "validating jobs: 2 of 100, 1 s, about 49 s left"
    assert lines[1] == "validating jobs: 22 of 100, 11 s, about 39 s left"
    assert len(lines) == 6 and lines[-1] == "validating jobs: 100 of 100 in 50.0 s"
    assert stream.getvalue() == ""


def test_long_estimates_in_minutes_and_hours() -> None:
    lines = run_progress(io.StringIO(), step=60.0, total=300)  # 5 hours in all
    assert lines[0] == "validating jobs: 1 of 300, 60 s, about 4 h 59 min left"
    assert lines[1] == "validating jobs: 2 of 300, 2 min, about 4 h 58 min left"
    assert lines[-1] == "validating jobs: 300 of 300 in 18000.0 s"


def test_the_same_line_redrawn_on_a_terminal() -> None:
    stream, log = Terminal(), io.StringIO()
    lines = run_progress(stream, step=0.5)
    drawn = stream.getvalue()
    first = run_progress(log, step=0.5)[0]
    assert drawn.startswith("\r" + first)  # after the same delay, the same words
    assert "\rvalidating jobs: 60 of 100, 30 s, about 20 s left" in drawn
    assert drawn.endswith("\r")  # cleared at the end
    assert lines == ["validating jobs: 100 of 100 in 50.0 s"]


@pytest.mark.e2e
def test_runs_started_together_get_a_directory_each_and_no_empty_log(tmp_path: Path) -> None:
    # Hydra's directory name has whole seconds by default: two runs started in the
    # same second wrote into one directory. Nothing is logged, so no train.log either.
    runs = [
        subprocess.Popen(
            [sys.executable, str(TRAIN)],
            cwd=tmp_path,
            env=user_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for run in runs:
        _, err = run.communicate(timeout=SUBPROCESS_TIMEOUT)
        assert run.returncode == 0, err
    plans = sorted(tmp_path.glob("outputs/*/*/allocation_plan.json"))
    assert len(plans) == 2
    assert list(tmp_path.rglob("*.log")) == []
