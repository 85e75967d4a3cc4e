"""The per-node GPU map (SPEC §7, issue 5): which engine holds each GPU, at a glance.

Plans of plain configs are made with AReaL 1.0's rules, which list (and place) the
rollout first; the default config's map is AReaL 2.0's (creation order, on Slurm)."""

from __future__ import annotations

from typing import Any

from _helpers import compose_config

from areal_conf import parse_backend
from areal_conf.plan.plan import EnginePlan, Plan
from areal_conf.plan.report import (
    engine_letters,
    node_cells,
    plan_report,
    plan_table,
    render_gpu_map,
)
from areal_conf.validation import validate

COLOCATED = {"type": "colocation", "target": "actor"}
SEPARATE = {"type": "separation"}


def plan_of(
    rollout: str,
    actor: str,
    n_nodes: int = 2,
    per_node: int = 8,
    **others: dict[str, Any],
) -> Plan:
    cfg: dict[str, Any] = {
        "rollout": {"backend": rollout},
        "actor": {"backend": actor},
        "critic": {"backend": "", "scheduling_strategy": COLOCATED},
        "ref": {"backend": "", "scheduling_strategy": COLOCATED},
        "cluster": {"n_nodes": n_nodes, "n_gpus_per_node": per_node},
    }
    cfg.update(others)
    return validate(cfg, areal_version="1.0")


def test_default_config_map() -> None:
    plan = validate(compose_config())
    assert render_gpu_map(plan) == (
        "GPU     0 1 2 3 4 5 6 7\n"
        "node 0  A A A A A A A A\n"
        "node 1  R R R R R R R R\n"
        "\n"
        "A = actor    fsdp:d4t2    8 GPUs on node 0, shared with critic, ref (colocated)\n"
        "R = rollout  sglang:d2t4  8 GPUs on node 1"
    )


def test_sixty_four_nodes_collapse_into_a_few_lines() -> None:
    plan = plan_of(
        "sglang:d45t8",
        "megatron:d4p4t8",
        n_nodes=64,
        critic={"backend": "megatron:d2t8", "scheduling_strategy": SEPARATE},
        teacher={"backend": "fsdp:d4"},
    )
    assert render_gpu_map(plan) == (
        "GPU          0 1 2 3 4 5 6 7\n"
        "nodes 0-44   R R R R R R R R\n"
        "nodes 45-60  A A A A A A A A\n"
        "nodes 61-62  C C C C C C C C\n"
        "node 63      T T T T . . . .\n"
        "\n"
        "R = rollout  sglang:d45t8     360 GPUs on nodes 0-44\n"
        "A = actor    megatron:d4p4t8  128 GPUs on nodes 45-60, shared with ref (colocated)\n"
        "C = critic   megatron:d2t8    16 GPUs on nodes 61-62\n"
        "T = teacher  fsdp:d4          4 GPUs on node 63\n"
        ". = idle                      4 GPUs on node 63"
    )


def test_sixty_four_nodes_of_two_engines_take_two_lines() -> None:
    plan = plan_of("sglang:d64t4", "fsdp:d256", n_nodes=64)
    lines = render_gpu_map(plan).splitlines()
    assert lines[1] == "nodes 0-31   R R R R R R R R"
    assert lines[2] == "nodes 32-63  A A A A A A A A"
    assert len(lines) == 6


def test_idle_gpus_are_dots_and_counted() -> None:
    plan = plan_of("sglang:d3t4", "fsdp:d2")
    assert render_gpu_map(plan) == (
        "GPU     0 1 2 3 4 5 6 7\n"
        "node 0  R R R R R R R R\n"
        "node 1  R R R R A A . .\n"
        "\n"
        "R = rollout  sglang:d3t4  12 GPUs on nodes 0-1\n"
        "A = actor    fsdp:d2      2 GPUs on node 1, shared with critic, ref (colocated)\n"
        ". = idle                  2 GPUs on node 1"
    )
    assert plan.idle_gpus == 2


def test_colocated_engines_get_no_letter_of_their_own() -> None:
    plan = plan_of(
        "sglang:d2t4",
        "fsdp:d8",
        n_nodes=3,
        # An extra engine may share a role's GPUs (same replicas: 2 instances of 4 GPUs).
        judge_engine={
            "backend": "vllm:d2t4",
            "scheduling_strategy": {"type": "colocation", "target": "rollout"},
        },
    )
    assert engine_letters(plan) == {"rollout": "R", "actor": "A"}
    text = render_gpu_map(plan)
    assert (
        "R = rollout  sglang:d2t4  8 GPUs on node 0, shared with judge_engine (colocated)" in text
    )
    assert "A = actor    fsdp:d8      8 GPUs on node 1, shared with critic, ref (colocated)" in text
    assert "node 2  . . . . . . . ." in text


def test_a_chain_shares_the_gpus_of_its_end() -> None:
    plan = plan_of(
        "sglang:d8",
        "fsdp:d8",
        ref={"backend": "", "scheduling_strategy": {"type": "colocation", "target": "critic"}},
    )
    assert plan.engines["ref"].owner == "actor"
    assert plan.engines["ref"].slots == plan.engines["actor"].slots
    assert "A = actor    fsdp:d8    8 GPUs on node 1, shared with critic, ref (colocated)" in (
        render_gpu_map(plan)
    )


NOT_BUILT = (
    "ref: not built (actor.kl_ctl is 0: AReaL builds the ref model only when actor.kl_ctl > 0)"
)


def test_an_engine_not_built_is_said_once_with_the_reason() -> None:
    cfg: dict[str, Any] = {
        "actor": {"backend": "fsdp:d8", "kl_ctl": 0},
        "ref": {"backend": "", "scheduling_strategy": COLOCATED},
        "cluster": {"n_nodes": 1},
    }
    plan = validate(cfg, areal_version="1.0")
    gpu_map = render_gpu_map(plan)
    assert "E =" not in gpu_map and "ref" not in gpu_map  # it holds no GPU
    assert NOT_BUILT in plan_table(plan).splitlines()
    # explain prints the table above the map, and train.py does too: one line, not two
    assert plan_report(plan).count("ref: not built") == 1


def test_the_table_names_the_nodes_an_engine_runs_on() -> None:
    """The ``on`` column holds node indices, spelled as such: "0" alone read as no node."""
    plan = plan_of(
        "sglang:d2t4",
        "fsdp:d12",
        n_nodes=3,
        critic={"backend": "fsdp:d2", "scheduling_strategy": SEPARATE},
    )
    header, _, *rows = plan_table(plan).splitlines()
    start = header.index("  on  ") + 2
    end = header.index("GB/GPU")
    on = {row.split()[0]: row[start:end].strip() for row in rows[:4]}
    assert on == {
        "rollout": "node 0",  # 8 GPUs
        "actor": "nodes 1-2",  # 12 GPUs
        "critic": "node 2",
        "ref": "nodes 1-2",  # colocated with the actor
    }
    assert plan.to_dict()["engines"]["actor"]["nodes"] == [1, 2]  # the JSON keeps indices


def test_cpu_run_has_no_map() -> None:
    plan = plan_of("vllm:d1", "fsdp:d1", per_node=0)
    assert render_gpu_map(plan) == "(CPU run: no GPUs to map)"


def test_separate_engines_all_get_letters() -> None:
    plan = plan_of(
        "sglang:d2",
        "fsdp:d2",
        critic={"backend": "fsdp:d2", "scheduling_strategy": SEPARATE},
        ref={"backend": "fsdp:d2", "scheduling_strategy": SEPARATE},
        teacher={"backend": "fsdp:d2"},
    )
    assert engine_letters(plan) == {
        "rollout": "R",
        "actor": "A",
        "critic": "C",
        "ref": "E",
        "teacher": "T",
    }
    assert node_cells(plan)[0] == list("RRAACCEE")
    assert node_cells(plan)[1] == list("TT......")


def test_wide_nodes_use_two_digit_columns() -> None:
    plan = plan_of("sglang:d3t4", "fsdp:d2", n_nodes=1, per_node=16)
    lines = render_gpu_map(plan).splitlines()
    assert lines[0] == "GPU     0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15"
    assert lines[1] == "node 0  R  R  R  R  R  R  R  R  R  R  R  R  A  A  .  ."


def test_very_wide_nodes_are_compact() -> None:
    plan = plan_of("sglang:d3t4", "fsdp:d2", n_nodes=1, per_node=40)
    lines = render_gpu_map(plan).splitlines()
    assert lines[0] == "node 0  RRRRRRRRRRRRAA" + "." * 26


def test_hand_built_plan_marks_conflicts() -> None:
    alloc = parse_backend("fsdp:d2")
    plan = Plan(
        {
            "actor": EnginePlan("actor", alloc, "fsdp:d2", slots=((0, 0), (0, 1))),
            "critic": EnginePlan("critic", alloc, "fsdp:d2", slots=((0, 1), (0, 2))),
        },
        1,
        4,
    )
    text = render_gpu_map(plan)
    assert "node 0  A ! C ." in text
    assert "! = conflict  " in text and "1 GPU on node 0 held twice" in text


def test_disabled_engines_are_left_out() -> None:
    plan = plan_of("sglang:d8", "fsdp:d8")
    assert "teacher" not in render_gpu_map(plan)
