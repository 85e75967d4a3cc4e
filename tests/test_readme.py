"""The README's ``console`` blocks print what the commands print today.

Each ``$ command`` followed by output lines is run from the repository root (stdout and
stderr together, as a terminal shows them) and compared line by line; ``…`` in an
expected line stands for any text (a path that changes per run). ``$ echo $?`` checks
the previous command's exit status. A command shown without output is not checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _helpers import ROOT, run_shell


@dataclass
class Example:
    command: str
    expected: list[str] = field(default_factory=list)
    status: int | None = None


def console_examples() -> list[Example]:
    """Each checked ``$ command`` of the README's console blocks."""
    text = (ROOT / "README.md").read_text()
    examples: list[Example] = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("$ ") or line == "$ echo $?":
                continue
            example = Example(line[2:].split("  #")[0].strip())
            for following in lines[i + 1 :]:
                if following.startswith("$ "):
                    break
                example.expected.append(following)
            after = i + 1 + len(example.expected)
            if lines[after : after + 1] == ["$ echo $?"]:
                example.status = int(lines[after + 1])
            if example.expected:
                examples.append(example)
    return examples


EXAMPLES = console_examples()


def test_the_readme_has_console_examples() -> None:
    commands = [example.command for example in EXAMPLES]
    assert "python train.py" in commands
    assert "python train.py actor.backend=fsdp:d4p2" in commands


@pytest.mark.e2e
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.command for e in EXAMPLES])
def test_readme_console_block(example: Example, tmp_path: Path) -> None:
    command, expected, status = example.command, example.expected, example.status
    if command.startswith("python train.py") and "--cfg" not in command:
        command += f" hydra.run.dir={tmp_path}/outputs/run"  # keep the checkout clean
    if command.startswith("python -m areal_conf sweep"):
        command += f" hydra.sweep.dir={tmp_path}/multirun"
    out = run_shell(command + " 2>&1")
    got = out.stdout.rstrip("\n").split("\n")
    assert len(got) == len(expected), out.stdout
    for line, want in zip(got, expected, strict=True):
        pattern = ".*".join(re.escape(part) for part in want.split("…"))
        assert re.fullmatch(pattern, line), (line, want)
    if status is not None:
        assert out.returncode == status
