"""The ``console`` blocks of the README and the docs pages print what the commands print
today, and every link between those pages leads to a file and a heading that exist.

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


#: The README and the pages it leads to.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def console_examples() -> list[Example]:
    """Each checked ``$ command`` of the pages' console blocks."""
    text = "\n".join(page.read_text() for page in PAGES)
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
    readme = (ROOT / "README.md").read_text()
    for command in (
        "python train.py",
        "python train.py actor.backend=fsdp:d4p2",
        "python -m areal_conf check python tests/standin_driver.py",
        "python -m areal_conf suggest --gpu h100",
    ):
        assert f"\n$ {command}" in readme
        assert any(example.command.startswith(command) for example in EXAMPLES)


def test_each_command_is_shown_once() -> None:
    """An example lives on one page; the others link to it."""
    commands = [example.command for example in EXAMPLES]
    assert sorted(c for c in set(commands) if commands.count(c) > 1) == []


#: A progress line of a long validation (areal_conf.progress), shown after a second.
PROGRESS = re.compile(r"validating jobs: \d+ of \d+")


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
    if not any(PROGRESS.search(line) for line in expected):
        # a validation that takes over a second on a busy machine says how far it got
        got = [line for line in got if not PROGRESS.search(line)]
    assert len(got) == len(expected), out.stdout
    for line, want in zip(got, expected, strict=True):
        pattern = ".*".join(re.escape(part) for part in want.split("…"))
        assert re.fullmatch(pattern, line), (line, want)
    if status is not None:
        assert out.returncode == status


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, blanks to '-'."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # not a shell comment
    return {_anchor(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_link_leads_to_a_file_and_heading_that_exist(page: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no such heading")
    assert broken == []
