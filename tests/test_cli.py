"""``python -m areal_conf`` as a shell pipeline runs it."""

from __future__ import annotations

import subprocess
import sys

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
    assert returncode == 1  # Python's documented status for a closed stdout


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
