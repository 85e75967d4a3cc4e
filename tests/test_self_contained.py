"""The test suite reads only files of this repository.

A user's clone has nothing beside it: fixtures live in ``tests/fixtures/`` (each copied
with its source noted), and an outside tool (AReaL's loader, a cluster) is found through
an environment variable, its tests skipping with a reason when it is not set. So no test
module (or benchmark, which reads the same tables) names a team folder, a home
directory, or a path three levels above its own file.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from _helpers import ROOT

# A path outside the checkout: the team's shared folder beside it, or a machine's own
# directories (a fixed absolute path works on one machine only).
OUTSIDE = re.compile(r"(^|/)\.\./shared\b|(^|/)shared/(fixtures|areal2)\b|^/(work|root|home)(/|$)")

SOURCES = sorted(
    [
        *(p for p in (ROOT / "tests").rglob("*.py") if "fixtures" not in p.parts),
        *(ROOT / "benchmarks").glob("*.py"),
        ROOT / "noxfile.py",
    ]
)


def outside_references(source: str) -> list[str]:
    """Each string constant naming a path outside the checkout (or the ``shared`` folder
    as a path segment), and each
    ``__file__``-relative path that climbs above it (``.parent`` three times)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if OUTSIDE.search(node.value) or node.value == "shared":
                found.append(repr(node.value))
        elif isinstance(node, ast.Attribute) and node.attr == "parent":
            depth, inner = 1, node.value
            while isinstance(inner, ast.Attribute) and inner.attr == "parent":
                depth, inner = depth + 1, inner.value
            if depth >= 3:
                found.append(ast.unparse(node))
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_test_reads_outside_the_repository(path: Path) -> None:
    if path == Path(__file__).resolve():
        return  # this module names the patterns it looks for
    assert outside_references(path.read_text()) == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        # (written in two pieces, so that this file names no such path itself)
        ('P = Path("/work/' + 'shared/fixtures/areal")', 1),
        ('P = ROOT.parent / "shared" / "fixtures"', 1),
        ('P = "../' + 'shared/fixtures/perf/x.csv"', 1),
        ('P = Path(__file__).resolve().parent.parent.parent / "x"', 1),
        ('P = Path.home() / ".cache" / "areal-loader"', 0),
        ('P = Path(__file__).resolve().parent / "fixtures" / "perf"', 0),
        ('P = "/srv/areal"', 0),
    ],
)
def test_the_check_finds_what_it_looks_for(source: str, found: int) -> None:
    assert len(outside_references(source)) == found
