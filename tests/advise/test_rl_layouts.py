"""The layouts of the actor and the rollout that make the shortest RL step: each split's
candidates are pairs of both engines' ranked layouts, checked as a whole config."""

from __future__ import annotations

import itertools

import pytest
from _helpers import FIXTURES
from omegaconf import OmegaConf

from areal_conf.advise.rl_layouts import (
    LAYOUTS_PER_ENGINE,
    PAIRS_CHECKED,
    EngineGpus,
    _by_rank,
    fastest_rl_layouts,
)
from areal_conf.model.hardware import hardware
from areal_conf.spec.parser import parse_backend
from areal_conf.validation import read_run, validate_run


@pytest.mark.parametrize(("rows", "columns"), [(3, 3), (1, 4), (4, 1), (2, 5), (0, 3)])
def test_pairs_come_by_rank_each_once(rows: int, columns: int) -> None:
    pairs = list(_by_rank(rows, columns))
    assert sorted(pairs) == sorted(itertools.product(range(rows), range(columns)))
    # the top two of each before any third: the pairs of a k×k square come first
    ranks = [max(i, j) for i, j in pairs]
    assert ranks == sorted(ranks)
    if rows >= 2 and columns >= 2:
        assert pairs[:4] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_a_split_whose_fastest_pairs_fail_the_check_gets_the_next_ones() -> None:
    """sc_grpo_25 runs on AReaL's local scheduler, which colocates a rollout only with as
    many server instances as the actor has ranks: on its 4 GPUs, the rollout's fastest
    layouts (sglang:d2t2, sglang:p2t2) have fewer, so the top two of each engine make no
    colocated candidate; the next layouts (sglang:d4 beside fsdp:d4) do."""
    assert PAIRS_CHECKED > LAYOUTS_PER_ENGINE**2
    reading = read_run(OmegaConf.load(FIXTURES / "areal_runs" / "configs" / "sc_grpo_25.yaml"))
    shape = validate_run(reading).shape
    on = EngineGpus.available(reading)
    assert isinstance(on, EngineGpus) and shape is not None
    ranked, _ = fastest_rl_layouts(
        reading, shape, on, gpu=hardware("h100"), gpu_memory_gb=80.0, top=100
    )
    colocated = [r for r in ranked if r.colocated]
    assert colocated
    for layout in colocated:
        rollout, actor = parse_backend(layout.rollout), parse_backend(layout.actor)
        assert rollout.replicas == actor.replicas
