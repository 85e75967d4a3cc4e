"""``python -m areal_conf`` as a shell pipeline runs it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from _helpers import ROOT, SUBPROCESS_TIMEOUT, user_env


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
