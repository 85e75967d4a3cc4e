"""``python -m areal_conf`` as a shell pipeline runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _helpers import ROOT, SUBPROCESS_TIMEOUT, user_env

from areal_conf.cli import main


@pytest.mark.e2e
def test_layouts_piped_into_head_exits_without_a_traceback() -> None:
    # ~380 KB of layouts: far more than a pipe buffer holds, so the writer is still
    # printing when the reader (like `| head -2`) goes away.
    command = [sys.executable, "-m", "areal_conf", "layouts", "megatron", "--gpus", "1024"]
    command += ["--max-tp", "none", "--model", "num_experts=64"]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=user_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    head = [proc.stdout.readline(), proc.stdout.readline()]
    proc.stdout.close()
    stderr = proc.stderr.read()
    returncode = proc.wait(timeout=SUBPROCESS_TIMEOUT)
    assert head == ["megatron:d1024\n", "megatron:(attn:d1024|ffn:d512t2)\n"]
    assert stderr == ""  # no BrokenPipeError traceback, no "Exception ignored" note
    assert returncode == 0  # the listing succeeded; the reader only stopped reading


# The command verbs on one of AReaL's example configs, with the stand-in driver.
FIXTURE = "tests/fixtures/areal2/examples/math/gsm8k_grpo_megatron.yaml"
AREAL = ["python", "tests/standin_driver.py", "--config", FIXTURE, "scheduler.type=local"]
HF = ROOT / "tests" / "fixtures" / "hf" / "qwen2_5_7b"


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "areal_conf", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=user_env(**(env or {})),
        timeout=SUBPROCESS_TIMEOUT,
    )


@pytest.mark.e2e
def test_a_check_piped_into_head_exits_with_its_verdict() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "areal_conf", "check", *AREAL],
        cwd=ROOT,
        env=user_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the plan is printed
    stderr = proc.stderr.read()
    assert proc.wait(timeout=SUBPROCESS_TIMEOUT) == 0
    assert stderr == ""


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    from areal_conf.cli import main

    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out == f"areal-conf {version('areal-conf')}\n"


@pytest.mark.parametrize(
    "verb", [None, "check", "run", "sweep", "explain", "migrate", "layouts", "suggest", "schema"]
)
def test_help_is_plain_text(verb: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    from areal_conf.cli import main

    with pytest.raises(SystemExit):
        main([verb, "--help"] if verb else ["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage:")
    assert "``" not in out  # reStructuredText markup is for docstrings, not for help


@pytest.mark.parametrize(
    ("after", "moved"),
    [
        (["--gpu", "h100"], "--gpu h100"),
        (["--gpu-memory-gb=141"], "--gpu-memory-gb=141"),
        (["--model", "num_layers=28", "num_kv_heads=2"], "--model num_layers=28 num_kv_heads=2"),
        (["--areal-version", "2.0"], "--areal-version 2.0"),
    ],
)
def test_an_option_after_the_areal_command_is_told_to_move(
    cli: Any, after: list[str], moved: str
) -> None:
    status, out, err = cli("check", *AREAL, *after)
    assert status == 2 and out == ""
    first, shown, caret, hint = err.splitlines()
    name = after[0].split("=")[0]
    assert first == (
        f"error: {name} is areal-conf's option, and here it is part of the AReaL command, "
        "which would pass it to AReaL"
    )
    assert caret.strip().startswith("^" * len(after[0]))
    assert shown.index(after[0]) == caret.index("^")
    assert hint == (
        f"hint: put it before the AReaL command: python -m areal_conf check {moved} -- "
        + " ".join(AREAL)
    )


def test_model_takes_several_values_before_a_command_without_a_separator(cli: Any) -> None:
    # one syntax on every verb: --model KEY=VALUE [KEY=VALUE ...], repeatable
    model = ["--model", "num_layers=28", "num_kv_heads=2", "--gpu", "h100"]
    separated = cli("check", *model, "--", *AREAL)
    assert separated[0] == 0, separated[2]
    assert cli("check", *model, *AREAL) == separated
    status, _, err = cli("check", "--model", "num_layers=x", *AREAL)
    assert status == 2 and err.startswith("error: --model num_layers: 'x' is not a whole number")


def test_model_takes_a_hugging_face_id_before_a_command_without_a_separator(cli: Any) -> None:
    # --model's first value may be an id or a path, not KEY=VALUE; it was taken for the
    # AReaL command's first word, leaving --model without a value
    separated = cli("check", "--model", "Qwen/Qwen3-1.7B", "--", *AREAL)
    assert separated[0] == 0, separated[2]
    assert cli("check", "--model", "Qwen/Qwen3-1.7B", *AREAL) == separated
    status, _, err = cli("check", *AREAL, "--model", "Qwen/Qwen3-1.7B")
    assert status == 2
    assert "check --model Qwen/Qwen3-1.7B -- " in err  # the hint moves the id with it


def test_check_json_is_the_plan_as_allocation_plan_json_holds_it(cli: Any) -> None:
    from areal_conf import check_command

    status, out, err = cli("check", "--json", *AREAL)
    assert status == 0, err
    assert json.loads(out) == check_command(AREAL, cwd=ROOT).to_dict()


def test_layouts_rank_reads_the_gpu_from_the_environment(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AREAL_CONF_GPU", "h200")
    argv = ["layouts", "fsdp", "--gpus", "8", "--model", f"hf_config={HF}", "--rank"]
    status, out, err = cli(*argv, "--top", "1")
    assert status == 0, err
    assert out.splitlines()[-1].startswith("predicted on h200:")
    assert out.splitlines()[-1].endswith("GB/GPU against 141 GB")


def test_layouts_rank_in_fp8(cli: Any) -> None:
    """``--fp8 RECIPE`` ranks Megatron layouts trained in FP8 (faster than bf16); a GPU
    that does not run the recipe, or a backend AReaL does not train in FP8, is refused."""
    argv = ["layouts", "megatron", "--gpus", "8", "--model", f"hf_config={HF}", "--rank"]

    def fastest(*more: str) -> float:
        status, out, err = cli(*argv, "--top", "1", *more)
        assert status == 0, err
        return float(out.splitlines()[1].split()[2])  # the first row's s/step

    assert fastest("--fp8", "blockwise") < fastest()
    status, _, err = cli(*argv, "--fp8", "mxfp8", "--gpu", "h100")
    assert status == 2 and "compute capability 10.0" in err and "b200" in err
    status, _, err = cli(*argv[:1], "fsdp", *argv[2:], "--fp8", "delayed")
    assert status == 2 and "megatron only" in err
    status, _, err = cli(*argv[:-1], "--fp8", "delayed")
    assert status == 2 and "add --rank" in err


@pytest.mark.e2e
def test_a_dry_run_sweep_leaves_nothing_in_the_areal_tree(tmp_path: Path) -> None:
    tree = tmp_path / "areal"
    (tree / "examples").mkdir(parents=True)
    (tree / "examples" / "x.yaml").write_text((ROOT / FIXTURE).read_text())
    argv = ["python", str(ROOT / "tests" / "standin_driver.py"), "--config", "examples/x.yaml"]
    argv += ["scheduler.type=local", "actor.backend=megatron:d4,megatron:d2t2"]
    out = subprocess.run(
        [sys.executable, "-m", "areal_conf", "sweep", "--dry-run", "--", *argv],
        capture_output=True,
        text=True,
        cwd=tree,
        env=user_env(),
        timeout=SUBPROCESS_TIMEOUT,
    )
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in tree.iterdir()) == ["examples"]


# -- a GPU's memory on the command line and in the environment ----------------------------

CHECK = ["check", "--", "python", "tests/standin_driver.py", "--config"]
COMMAND_YAML = "tests/fixtures/commands/examples/math/gsm8k_grpo.yaml"
#: Every command that takes --gpu-memory-gb, with the rest of its arguments.
GPU_MEMORY_COMMANDS: list[list[str]] = [
    [
        "check",
        "--gpu-memory-gb={}",
        "--",
        "python",
        "tests/standin_driver.py",
        "--config",
        COMMAND_YAML,
    ],
    ["explain", "--config", COMMAND_YAML, "--gpu-memory-gb={}"],
    ["suggest", "--gpu-memory-gb={}", "--config", COMMAND_YAML],
    [
        "layouts",
        "fsdp",
        "--gpus",
        "8",
        "--model",
        "hf_config=Qwen/Qwen2.5-7B",
        "--fits",
        "--gpu-memory-gb={}",
    ],
]
BAD_GB = ["-5", "0", "nan", "inf", "-inf", "1e999", "eighty"]


@pytest.mark.parametrize("value", BAD_GB)
@pytest.mark.parametrize("argv", GPU_MEMORY_COMMANDS, ids=[a[0] for a in GPU_MEMORY_COMMANDS])
def test_gpu_memory_that_is_not_a_positive_number_is_one_message(
    argv: list[str], value: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("AREAL_CONF_GPU_MEMORY_GB", raising=False)
    assert main([a.format(value) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"error: --gpu-memory-gb: must be a positive number of GB (10^9 bytes), got {value!r}",
        f"    {value}",
        "hint: e.g. --gpu-memory-gb=80 for an 80 GB GPU, --gpu-memory-gb=141 for an H200",
    ]


def test_a_negative_gpu_memory_is_refused_as_its_own_argument(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--gpu-memory-gb -5``, as written in the report of the bug."""
    monkeypatch.chdir(ROOT)
    assert main(["check", "--gpu-memory-gb", "-5", *CHECK[1:], COMMAND_YAML]) == 2
    assert "--gpu-memory-gb: must be a positive number of GB" in capsys.readouterr().err


@pytest.mark.parametrize("value", BAD_GB)
def test_gpu_memory_from_the_environment_is_checked_the_same(
    value: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("AREAL_CONF_GPU_MEMORY_GB", value)
    assert main([*CHECK, COMMAND_YAML]) == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        f"error: AREAL_CONF_GPU_MEMORY_GB: must be a positive number of GB (10^9 bytes), got "
        f"{value!r}"
    )
