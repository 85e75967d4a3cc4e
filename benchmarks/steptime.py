"""The step-time model against published measurements, and its speed.

For each table of ``shared/fixtures/perf`` it prints every row's predicted and measured
step time, then per workload (the rows one job could choose between) the Spearman rank
correlation of predicted against measured throughput per GPU and the top-1 regret: the
measured time of the layout the model ranks first over the measured best. Then the
ordinal facts of the Megatron paper's figures with the model's margin on each, and the
cost of one ``step_time`` call and of ranking every layout of a 1024-GPU engine.

    python benchmarks/steptime.py
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _perf_tables import all_rows, figure_facts, measured_per_gpu, predict, spearman

from areal_conf.model.shape import shape_of
from areal_conf.perf.ranking import rank_layouts
from areal_conf.perf.step_time import step_time


def tables() -> None:
    rows = all_rows()
    predicted = {id(row): predict(row).total for row in rows}
    header = f"{'measured s':>10} {'predicted s':>11} {'ratio':>6}"
    print(f"{'table':27} {'row':26} {'layout':20} {header}")
    for row in rows:
        p = predicted[id(row)]
        print(
            f"{row.table:27} {row.label:26} {row.spec.split(':')[1]:20} "
            f"{row.measured_s:10.2f} {p:11.2f} {p / row.measured_s:6.2f}"
        )
    print()
    print("Workloads (the layouts one job could choose between), by step time:")
    print(f"{'workload':42} {'rows':>4} {'Spearman':>9} {'top-1 regret':>13}")
    workloads: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        if row.table in ("narayanan2021_table2", "korthikanti2022_table5"):
            workloads[row.workload].append((row.measured_s, predicted[id(row)]))
    rhos = []
    for name, points in workloads.items():
        rho = spearman([m for m, _ in points], [p for _, p in points])
        chosen = min(points, key=lambda point: point[1])
        regret = chosen[0] / min(m for m, _ in points)
        rhos.append(rho)
        print(f"{name:42} {len(points):4} {rho:9.3f} {regret:13.3f}")
    print(f"{'mean':42} {'':4} {statistics.mean(rhos):9.3f}")
    print()
    print("Weak scaling (a different model each row), by TFLOPS per GPU:")
    for table in ("narayanan2021_table1", "megatron_readme_h100_2024"):
        chosen_rows = [r for r in rows if r.table == table]
        rho = spearman(
            [measured_per_gpu(r, r.measured_s) for r in chosen_rows],
            [measured_per_gpu(r, predicted[id(r)]) for r in chosen_rows],
        )
        print(f"{table:42} {len(chosen_rows):4} {rho:9.3f}")
    print()
    print("Figure facts, with the margin by which the predicted step times keep the order:")
    for fact, margin in figure_facts():
        print(f"{'holds' if margin > 0 else 'misses':7} {margin:+7.1%}  {fact}")


def speed() -> None:
    model = {
        "num_layers": 48,
        "hidden_size": 5120,
        "num_attention_heads": 40,
        "num_kv_heads": 8,
        "ffn_hidden_size": 25600,
        "vocab_size": 151936,
    }
    spec = "megatron:d8p2t4"
    knobs: dict[str, Any] = {
        "gpu": "h100",
        "tokens_per_step": 1 << 21,
        "tokens_per_microbatch": 16384,
    }
    step_time(spec, model, **knobs)
    calls = 2000
    start = time.perf_counter()
    for _ in range(calls):
        step_time(spec, model, **knobs)
    per_call = (time.perf_counter() - start) / calls
    moe = {**model, "num_experts": 128, "moe_ffn_hidden_size": 1536, "moe_router_topk": 8}
    for label, shape in (("dense", model), ("MoE, 128 experts", moe)):
        start = time.perf_counter()
        ranked = rank_layouts("megatron", 1024, shape, **knobs)
        took = time.perf_counter() - start
        print(f"rank every megatron layout of 1024 GPUs ({label}): ", end="")
        print(f"{len(ranked)} layouts in {took:.3f} s")
    parsed = shape_of(model)
    start = time.perf_counter()
    for _ in range(calls):
        step_time(spec, parsed, **knobs)
    per_shape_call = (time.perf_counter() - start) / calls
    print(f"step_time: {per_call * 1e6:.1f} µs a call with a mapping, ", end="")
    print(f"{per_shape_call * 1e6:.1f} µs with a ModelShape (mean of {calls})")


def plan_column() -> None:
    """validate() of an AReaL 2.0 example with and without the s/step check, alternating
    rounds, best of each."""
    from unittest import mock

    from areal_conf import validation
    from areal_conf.command.argv import parse_config_command
    from areal_conf.command.check import compose_as_areal
    from areal_conf.rules import registry
    from areal_conf.settings import Settings

    root = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "areal2"
    command = parse_config_command(
        ["--config", "examples/math/gsm8k_grpo_megatron.yaml", "scheduler.type=local"], cwd=root
    )
    cfg = compose_as_areal(command)
    settings = Settings(areal_version="2.0")
    with_check = registry.rules_for("2.0")
    without = tuple(rule for rule in with_check if rule.id != "speed")
    assert len(without) == len(with_check) - 1
    best = {"with": float("inf"), "without": float("inf")}
    for _ in range(30):
        for label, rules in (("without", without), ("with", with_check)):
            with mock.patch.object(validation, "rules_for", lambda version, r=rules: r):
                start = time.perf_counter()
                for _ in range(20):
                    validation.validate(cfg, settings=settings)
            best[label] = min(best[label], (time.perf_counter() - start) / 20)
    added = best["with"] - best["without"]
    print(
        f"validate of gsm8k_grpo_megatron.yaml: {best['without'] * 1e3:.3f} ms without the "
        f"s/step column, {best['with'] * 1e3:.3f} ms with it (best of 30 rounds): "
        f"{added * 1e3:.3f} ms added, {best['with'] / best['without']:.2f}×"
    )


if __name__ == "__main__":
    tables()
    print()
    speed()
    plan_column()
