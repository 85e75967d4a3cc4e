"""What the ``areal`` launcher knows of the sweep it is part of, written only by ``_core``
(a small module: the launcher makes its state when Hydra instantiates it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from areal_conf import Plan
    from hydra_plugins.areal_conf_plugin._compose import SweepLoader


@dataclass
class CheckedJob:
    """One job of the sweep as its check left it."""

    num: int
    overrides: list[str]
    plan: Plan | None
    unvalidated: bool = False  # composed, but no engine sections where they were looked for
    failure: str | None = None  # why it is invalid (or could not be composed)


@dataclass
class SweepState:
    """What a launcher knows of the sweep it is part of (it sees one batch at a time):
    the whole sweep's jobs, when the sweeper announces them
    (``expect_sweep``) or they are expanded from Hydra's basic sweeper (``expanded``: that
    was tried), whether the whole sweep was checked (or is being), what each job's check
    found by job number, how many jobs were launched, whether the jobs nothing validated
    were told, and the loader composing the jobs."""

    jobs: list[list[str]] | None = None
    expanded: bool = False
    checked: bool = False
    checking: bool = False
    results: dict[int, CheckedJob] = field(default_factory=dict)
    launched: int = 0
    told_unvalidated: bool = False
    loader: SweepLoader | None = None  # composing the sweep's jobs

    def expect(self, jobs: Sequence[Sequence[str]]) -> None:
        """The whole sweep is ``jobs``: it is checked (again) before its first batch."""
        self.jobs = [list(o) for o in jobs]
        self.checked = False
        self.results = {}
