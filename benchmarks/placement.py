"""Time ``plan.place`` (GPUs on nodes) as the cluster grows to 2**20 GPUs.

Target: 2**20 GPUs placed in at most 1 s, and time linear in the number of GPUs: the
time per GPU stays flat from 2**14 to 2**20 GPUs (the old first-fit placement grew with
the square of the size). Each size is a full 8-GPU-per-node cluster shared by a rollout
(a quarter of the GPUs, 4-GPU instances) and a Megatron actor (tp 8, on the rest), plus
the same after a rollout with 3-GPU instances that leaves leftovers on every node.
Prints best and median of several runs and the per-GPU time relative to the smallest.

    PYTHONPATH=. python benchmarks/placement.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from areal_conf.plan.placement import place
from areal_conf.spec.allocation import ModelAllocation
from areal_conf.spec.parser import parse_backend

TARGET_S = 1.0
PER_NODE = 8


def engines(gpus: int, leftovers: bool) -> list[tuple[str, ModelAllocation]]:
    if leftovers:
        # 3-GPU instances, two per node: 2 GPUs left on each rollout node.
        nodes = gpus // PER_NODE // 4
        rollout = parse_backend(f"sglang:d{2 * nodes}t3")
        actor = parse_backend(f"fsdp:d{(gpus - nodes * PER_NODE) // 2}t2")
    else:
        rollout = parse_backend(f"sglang:d{gpus // 16}t4")
        actor = parse_backend(f"megatron:d{gpus * 3 // 4 // 8}t8")
    return [("rollout", rollout), ("actor", actor)]


def timed(gpus: int, leftovers: bool, runs: int) -> list[float]:
    pair = engines(gpus, leftovers)
    times = []
    for _ in range(runs):
        tic = time.perf_counter()
        placed = place(pair, gpus // PER_NODE, PER_NODE)
        times.append(time.perf_counter() - tic)
        assert sum(len(s) for s in placed.values()) == sum(a.world_size for _, a in pair)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for leftovers in (False, True):
        print("rollout with leftovers on its nodes" if leftovers else "whole-node rollout")
        base = None
        for exp in (14, 16, 18, 20):
            gpus = 2**exp
            times = timed(gpus, leftovers, args.runs)
            best, median = min(times), statistics.median(times)
            per_gpu = median / gpus
            base = base or per_gpu
            print(
                f"  2**{exp} GPUs: best {best * 1e3:8.1f} ms  median {median * 1e3:8.1f} ms  "
                f"per GPU {per_gpu * 1e9:6.0f} ns ({per_gpu / base:.2f}× of 2**14)"
                + (f"  {median / TARGET_S:.2f}× of the 1 s target" if exp == 20 else "")
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
