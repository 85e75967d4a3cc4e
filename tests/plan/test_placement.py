"""Placement of engines on nodes (SPEC §7): each allocation alone on a 2 × 8 cluster."""

from __future__ import annotations

import pytest
from _helpers import Train, compose_config

from areal_conf import AllocationError, parse_backend, rank_groups
from areal_conf.plan.placement import place
from areal_conf.plan.report import plan_table
from areal_conf.validation import validate

# Placement of plain configs follows AReaL 1.0's order (the rollout first); the 2.0 order
# (creation order) is tested with the 2.0 rules.
pytestmark = pytest.mark.usefixtures("areal_1_0")

COLOCATED = {"type": "colocation", "target": "actor"}


def placed_alone(spec: str, nodes: int = 2, per_node: int = 8) -> list[tuple[int, int]]:
    return list(place([("engine", parse_backend(spec))], nodes, per_node)["engine"])


def instances(slots: list[tuple[int, int]], size: int) -> list[list[tuple[int, int]]]:
    return [slots[i : i + size] for i in range(0, len(slots), size)]


def test_three_instances_of_four_do_not_straddle_and_leave_four_idle() -> None:
    slots = placed_alone("sglang:d3t4")
    groups = instances(slots, 4)
    assert len(groups) == 3
    assert all(len({node for node, _ in g}) == 1 for g in groups)
    assert 16 - len(set(slots)) == 4


def test_instances_of_six_take_one_node_each() -> None:
    groups = instances(placed_alone("sglang:d2t6"), 6)
    assert [{node for node, _ in g} for g in groups] == [{0}, {1}]


def test_instance_of_sixteen_spans_both_whole_nodes() -> None:
    slots = placed_alone("sglang:d1t16")
    assert sorted(slots) == [(n, g) for n in range(2) for g in range(8)]


def test_instance_larger_than_a_node_needs_whole_nodes() -> None:
    with pytest.raises(AllocationError, match="not a whole number of nodes"):
        placed_alone("sglang:d1t12")


def test_three_instances_of_six_are_rejected_with_what_fits() -> None:
    with pytest.raises(AllocationError) as info:
        placed_alone("sglang:d3t6")
    err = info.value
    assert "does not fit on 2 × 8 GPUs" in err.reason
    assert "one node holds 1 (6 of its 8 GPUs)" in err.reason
    assert "divides 8" in err.hint and "cluster.n_nodes=3" in err.hint


def test_training_tensor_parallel_groups_stay_within_a_node() -> None:
    engines = [("rollout", parse_backend("sglang:d2t6")), ("actor", parse_backend("fsdp:d2t2"))]
    placed = place(engines, 2, 8)
    actor = list(placed["actor"])
    for group in instances(actor, 2):
        assert len({node for node, _ in group}) == 1
    assert not set(actor) & set(placed["rollout"])


# -- the same rules through a whole plan ---------------------------------------------------


def tp_groups_nodes(slots: tuple[tuple[int, int], ...], spec: str) -> list[set[int]]:
    """The nodes of each tensor-parallel group; slots are indexed by engine-local rank."""
    return [{slots[rank][0] for rank in group} for group in rank_groups(spec)["tp"]]


def test_default_config_actor_tp_groups_lie_within_one_node() -> None:
    plan = validate(compose_config())
    actor = plan.engines["actor"]
    assert actor.allocation is not None and actor.allocation.parallel.tp_size == 2
    assert len(actor.slots) == actor.gpus == 8
    nodes = tp_groups_nodes(actor.slots, str(actor.allocation))
    assert len(nodes) == 4
    assert all(len(group) == 1 for group in nodes)


@pytest.mark.parametrize(
    ("rollout", "actor", "n_nodes"),
    [
        ("sglang:d3t4", "megatron:d2p2t4", 4),  # rollout leaves 4 GPUs on node 1
        ("sglang:d3t2", "megatron:(attn:d2p2t4|ffn:d2p2t2e2)", 3),  # 2 on node 0
        ("sglang:d5t2", "fsdp:d3t2", 2),  # odd leftovers: 6 on node 1
        ("sglang:d1t16", "megatron:d2p2t8", 6),  # an inference instance on whole nodes
    ],
)
def test_actor_tp_groups_never_straddle_after_rollout(
    rollout: str, actor: str, n_nodes: int
) -> None:
    plan = validate(
        {
            "rollout": {"backend": rollout},
            "actor": {"backend": actor},
            "critic": {"backend": "", "scheduling_strategy": COLOCATED},
            "ref": {"backend": "", "scheduling_strategy": COLOCATED},
            "cluster": {"n_nodes": n_nodes, "n_gpus_per_node": 8},
        }
    )
    slots = plan.engines["actor"].slots
    assert all(len(group) == 1 for group in tp_groups_nodes(slots, actor))
    assert not set(slots) & set(plan.engines["rollout"].slots)
    assert plan.engines["critic"].slots == plan.engines["ref"].slots == slots


# -- training engines take whole free nodes; bounded, linear placement ---------------------


def test_training_engine_takes_a_whole_free_node_over_leftovers() -> None:
    # sglang:d3t3 on 4-GPU nodes leaves one GPU on each of nodes 0-2; the actor (4 GPUs)
    # goes to the free node 3, not over the leftovers of nodes 0-3.
    engines = [("rollout", parse_backend("sglang:d3t3")), ("actor", parse_backend("fsdp:d4"))]
    placed = place(engines, 6, 4)
    assert placed["rollout"] == tuple((n, g) for n in range(3) for g in range(3))
    assert placed["actor"] == ((3, 0), (3, 1), (3, 2), (3, 3))


def test_the_part_short_of_a_node_goes_to_leftovers_that_hold_it() -> None:
    # actor 12 GPUs: one whole free node, and the other 4 in node 0's leftovers (one node
    # holds them), so node 2 stays whole for the next engine.
    engines = [
        ("rollout", parse_backend("sglang:d1t4")),
        ("actor", parse_backend("fsdp:d6t2")),
        ("teacher", parse_backend("fsdp:d8")),
    ]
    placed = place(engines, 3, 8)
    assert {node for node, _ in placed["actor"]} == {0, 1}
    assert [slot for slot in placed["actor"] if slot[0] == 0] == [(0, g) for g in range(4, 8)]
    assert {node for node, _ in placed["teacher"]} == {2}


def test_the_default_plan_is_unchanged() -> None:
    engines = [("rollout", parse_backend("sglang:d2t4")), ("actor", parse_backend("fsdp:d4t2"))]
    placed = place(engines, 2, 8)
    assert {n for n, _ in placed["rollout"]} == {0} and {n for n, _ in placed["actor"]} == {1}


def test_training_tp_larger_than_a_node_takes_whole_nodes_and_warns() -> None:
    plan = validate(
        {
            "rollout": {"backend": "sglang:d1t4"},
            "actor": {"backend": "fsdp:t16"},
            "cluster": {"n_nodes": 3, "n_gpus_per_node": 8},
        }
    )
    assert {node for node, _ in plan.engines["actor"].slots} == {1, 2}
    assert len(plan.warnings) == 1
    warning = plan.warnings[0]
    assert warning.startswith("actor: tensor-parallel groups of 16 GPUs (fsdp:t16) span 2 nodes")
    assert "keep t ≤ 8" in warning
    assert f"warning: {warning}" in plan_table(plan)
    assert plan.to_dict()["warnings"] == [warning]


def test_no_warning_when_tp_fits_a_node() -> None:
    plan = validate(
        {
            "rollout": {"backend": "sglang:d1t8"},
            "actor": {"backend": "fsdp:d1t8"},
            "cluster": {"n_nodes": 2, "n_gpus_per_node": 8},
        }
    )
    assert plan.warnings == ()


@pytest.mark.parametrize(
    ("n_nodes", "per_node", "shown"),
    [
        (2, 1_000_000_000, "2 nodes × 1,000,000,000 GPUs is 2,000,000,000 GPUs"),
        (100_000_000, 8, "100,000,000 nodes × 8 GPUs is 800,000,000 GPUs"),
        (131_073, 8, "131,073 nodes × 8 GPUs is 1,048,584 GPUs"),
    ],
)
def test_clusters_larger_than_2_to_the_20_gpus_are_refused(
    n_nodes: int, per_node: int, shown: str
) -> None:
    with pytest.raises(AllocationError) as info:
        place([("actor", parse_backend("fsdp:d8"))], n_nodes, per_node)
    err = info.value
    assert err.reason.startswith(f"cluster: {shown}, more than the 1,048,576 (2**20)")
    assert "cluster.n_nodes and cluster.n_gpus_per_node" in err.hint


def test_two_to_the_20_gpus_are_placed() -> None:
    # The largest cluster: every GPU taken once (the speed is benchmarks/placement.py's).
    engines = [
        ("rollout", parse_backend("sglang:d65536t4")),
        ("actor", parse_backend("megatron:d98304t8")),
    ]
    placed = place(engines, 2**17, 8)
    slots = placed["rollout"] + placed["actor"]
    assert len(slots) == len(set(slots)) == 2**20
    assert placed["actor"][:8] == tuple((2**15, g) for g in range(8))


@pytest.mark.e2e
@pytest.mark.parametrize(
    "override, shown",
    [
        ("cluster.n_gpus_per_node=1000000000", "2 nodes × 1,000,000,000 GPUs"),
        ("cluster.n_nodes=100000000", "100,000,000 nodes × 8 GPUs"),
    ],
)
def test_train_refuses_huge_clusters(override: str, shown: str, train: Train) -> None:
    out = train(override)
    assert out.returncode == 2
    assert f"cluster: {shown}" in out.stderr
    assert "Traceback" not in out.stderr and "MemoryError" not in out.stderr
