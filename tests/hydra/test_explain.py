"""``python -m areal_conf explain`` on a config and on backend strings (issue 5)."""

from __future__ import annotations

import pytest
from _helpers import CONF, Cli, run_cli

CONFIG = str(CONF / "config.yaml")


def test_config_prints_table_and_map(cli: Cli) -> None:
    code, out, err = cli("explain", "--config", CONFIG)
    assert code == 0, err
    assert "GPUs: 16 used of 16 (2 nodes × 8), 0 idle" in out
    assert "node 0  A A A A A A A A\nnode 1  R R R R R R R R" in out
    assert "A = actor    fsdp:d4t2    8 GPUs on node 0, shared with critic, ref (colocated)" in out
    assert "rank groups" not in out
    assert out.index("GPUs: 16 used") < out.index("node 0  A")  # table first, then the map


def test_config_directory_and_overrides(cli: Cli) -> None:
    code, out, err = cli(
        "explain",
        "-c",
        str(CONF),
        "rollout.backend=sglang:d3t4",
        "actor.backend=fsdp:d2",
        "scheduler.type=null",  # partial nodes: the rules every scheduler shares
    )
    assert code == 0, err
    assert "node 0  A A R R R R . ." in out
    assert ". = idle                  2 GPUs on node 0" in out


def test_config_experiment_override(cli: Cli) -> None:
    code, out, err = cli("explain", "--config", CONFIG, "+experiment=moe_megatron")
    assert code == 0, err
    assert "megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)" in out


def test_config_groups_for_every_training_engine(cli: Cli) -> None:
    code, out, err = cli("explain", "--config", CONFIG, "--groups")
    assert code == 0, err
    groups = out[out.index("rank groups (engine-local ranks)") :]
    assert "actor: fsdp:d4t2, order tp-cp-ep-dp-pp\n  ranks 0-7 on node 0 GPUs 0-7\n" in groups
    assert "  tp         4 groups of 2: [0, 1]  [2, 3]  [4, 5]  ... (1 more)" in groups
    assert "  dp         2 groups of 4: [0, 2, 4, 6]  [1, 3, 5, 7]" in groups
    assert "critic: fsdp:d4t2, order tp-cp-ep-dp-pp: the same groups as actor" in groups
    assert "ref: fsdp:d4t2, order tp-cp-ep-dp-pp: the same groups as actor" in groups
    assert "rollout" not in groups  # inference engines have no rank groups


def test_config_groups_of_separate_engines_and_other_order(
    cli: Cli,
) -> None:
    code, out, err = cli(
        "explain",
        "--config",
        CONFIG,
        "actor.backend='megatron:(attn:d2p2t4|ffn:d2p2t2e2)'",  # edp = dp, as the order needs
        "critic.backend=megatron:d2t4",
        "critic.scheduling_strategy.type=separation",
        "cluster.n_nodes=4",
        "--groups",
        "--order",
        "tp-cp-ep-pp-dp",
    )
    assert code == 0, err
    assert "actor: megatron:(attn:d2p2t4|ffn:d2p2t2e2), order tp-cp-ep-pp-dp" in out
    assert "ranks 0-7 on node 0 GPUs 0-7; ranks 8-15 on node 1 GPUs 0-7" in out
    assert "  pp         8 groups of 2: [0, 4]  [1, 5]  [2, 6]  ... (5 more)" in out
    assert "  dp         8 groups of 2: [0, 8]  [1, 9]  [2, 10]  ... (5 more)" in out
    assert "critic: megatron:d2t4, order tp-cp-ep-pp-dp\n  ranks 0-7 on node 2 GPUs 0-7" in out
    # ref inherits the actor's layout and shares its GPUs
    assert (
        "ref: megatron:(attn:d2p2t4|ffn:d2p2t2e2), order tp-cp-ep-pp-dp: the same groups as actor"
        in out
    )


def test_spec_with_groups(cli: Cli) -> None:
    code, out, err = cli("explain", "fsdp:d4t2", "--groups")
    assert code == 0, err
    assert out.startswith("fsdp:d4t2  (fsdp, training)\n  GPUs: 8\n")
    assert "rank groups (order tp-cp-ep-dp-pp)" in out
    assert "  tp         4 groups of 2: [0, 1]  [2, 3]  [4, 5]  ... (1 more)" in out
    assert "  tp-dp      1 group of 8: [0, 1, 2, 3, 4, 5, 6, 7]" in out


def test_spec_without_groups_is_a_description(cli: Cli) -> None:
    code, out, _ = cli("explain", "sglang:d2t4", "megatron:d2p2t4e2")
    assert code == 0
    assert "2 server instance(s) × 4 GPU(s)" in out
    assert "experts:   edp 4  pp 2  etp 1  ep 2" in out
    assert "rank groups" not in out and "node 0" not in out


def test_inference_spec_has_no_groups(cli: Cli) -> None:
    code, out, _ = cli("explain", "sglang:d3t4", "--groups")
    assert code == 0
    assert "rank groups: none (sglang runs 3 independent server instance(s) of 4 GPU(s))" in out


def test_spec_placed_alone_on_a_cluster(cli: Cli) -> None:
    code, out, err = cli("explain", "sglang:d3t4", "--nodes", "2")
    assert code == 0, err
    assert "node 0  S S S S S S S S\nnode 1  S S S S . . . ." in out
    assert ". = idle                 4 GPUs on node 1" in out
    code, out, err = cli("explain", "sglang:d1t16", "--gpus-per-node", "8")
    assert code == 0, err
    assert "nodes 0-1  S S S S S S S S" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explain", "fsdp:d0"], "error: data size must be at least 1"),
        (["explain", "d4t2", "--groups"], "no backend prefix"),
        (["explain"], "explain needs backend strings or a config"),
        (
            ["explain", "--config", "nowhere/config.yaml"],
            "config file 'nowhere/config.yaml' not found",
        ),
        (
            ["explain", "--config", CONFIG, "foo=1"],
            "foo: " + CONFIG + " has no such key, so Hydra cannot override it",
        ),
        (  # cluster takes any key in Hydra; validation names the one AReaL has
            ["explain", "--config", CONFIG, "cluster.n_node=3"],
            "hint: did you mean cluster.n_nodes? write cluster.n_nodes=3 instead of "
            "cluster.n_node=3",
        ),
        (
            ["explain", "--config", CONFIG, "cluster.n_nodes=abc"],
            "cluster.n_nodes: must be a positive whole number, got 'abc'",
        ),
        (["explain", "--config", CONFIG, "actor.backend='x"], "cannot compose"),
        (["explain", "--config", CONFIG, "+experiment=nah"], "Could not find 'experiment/nah'"),
        (["explain", "--config", CONFIG, "actor.backend=d4t2"], "actor.backend: no backend prefix"),
        (
            ["explain", "--config", CONFIG, "rollout.backend=sglang:d4t4", "scheduler.type=null"],
            "need 24 GPUs",
        ),
        (
            ["explain", "--config", CONFIG, "actor.backend=fsdp:d4"],
            "Slurm scheduler allocates only entire nodes",
        ),
        (["explain", "--config", CONFIG, "--areal-version", "3.0"], "--areal-version: '3.0'"),
        (
            [
                "explain",
                "--config",
                CONFIG,
                "rollout.backend=sglang:d2t6",
                "actor.backend=fsdp:t4",
                "scheduler.type=null",
            ],
            "rollout: sglang:d2t6 does not fit on 2 × 8 GPUs",
        ),
        (["explain", "--config", CONFIG, "--nodes", "3"], "a config has its cluster"),
        (["explain", "sglang:d3t6", "--nodes", "2"], "needs 18 GPUs but 2 nodes × 8 GPUs have 16"),
        (["explain", "sglang:t12", "--nodes", "2"], "not a whole number of nodes"),
        (["explain", "fsdp:d8", "--nodes", "0"], "--nodes must be a positive whole number"),
        (["explain", "fsdp:d8", "--groups", "--order", "tp-pp"], "rank order leaves out dp"),
        (
            [
                "explain",
                "megatron:(attn:d2p2t2|ffn:d1p2t2e2)",
                "--groups",
                "--order",
                "tp-cp-ep-pp-dp",
            ],
            "needs the expert data-parallel size to equal the data-parallel size",
        ),
    ],
)
def test_invalid_input_exits_2_with_a_message(cli: Cli, argv: list[str], message: str) -> None:
    code, out, err = cli(*argv)
    assert code == 2
    assert out == ""
    assert err.startswith("error: ")
    assert message in err
    assert "Traceback" not in err


@pytest.mark.e2e
def test_end_to_end_as_a_user_runs_it() -> None:
    result = run_cli("explain", "--config", CONFIG, "--groups")
    assert result.returncode == 0, result.stderr
    assert "node 0  A A A A A A A A" in result.stdout
    assert "rank groups (engine-local ranks)" in result.stdout


@pytest.mark.e2e
def test_end_to_end_error_has_no_traceback() -> None:
    result = run_cli("explain", "-c", "conf", "actor.backend=fsdp:d4p2")
    assert result.returncode == 2
    assert "actor.backend: fsdp does not support pipeline" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
