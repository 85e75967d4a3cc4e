"""Time ``rank_groups`` for every Megatron group kind of a 4096-GPU hybrid layout.

Target: at most 100 ms for all groups. Prints best and median of several runs, in ms,
and their ratio to the target (below 1.0 meets it).

    PYTHONPATH=. python benchmarks/mesh.py [--runs N] [--spec SPEC] [--order ORDER]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from areal_conf.spec.allocation import ModelAllocation, ParallelStrategy
from areal_conf.spec.mesh import DEFAULT_ORDER, rank_groups

TARGET_MS = 100.0
# megatron:(attn:d64p4t8c2|ffn:d32p4t8e4): world 64·4·8·2 = 4096 = edp·pp·etp·ep = 32·4·8·4
DEFAULT_SPEC = "megatron:(attn:d64p4t8c2|ffn:d32p4t8e4)"
DEFAULT_ALLOCATION = ModelAllocation(
    "megatron",
    ParallelStrategy(
        dp_size=64, tp_size=8, pp_size=4, cp_size=2, ep_size=4, etp_size=8, edp_size=32
    ),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--spec", default=DEFAULT_SPEC)
    parser.add_argument("--order", default=DEFAULT_ORDER)
    args = parser.parse_args()

    allocation: ModelAllocation
    try:
        from areal_conf.spec.parser import parse_backend

        allocation = parse_backend(args.spec)
    except ImportError:  # parser not there yet: the default layout, built by hand
        if args.spec != DEFAULT_SPEC:
            raise
        allocation = DEFAULT_ALLOCATION

    groups = rank_groups(allocation, args.order)  # warm-up, and the sizes to report
    n_groups = sum(len(kind) for kind in groups.values())
    n_ranks = sum(len(g) for kind in groups.values() for g in kind)

    times = []
    for _ in range(max(1, args.runs)):
        start = time.perf_counter()
        rank_groups(allocation, args.order)
        times.append((time.perf_counter() - start) * 1000.0)
    best, median = min(times), statistics.median(times)

    print(f"layout   {allocation}  order {args.order}")
    print(
        f"world    {allocation.world_size} GPUs, {len(groups)} kinds, {n_groups} groups, "
        f"{n_ranks} rank entries"
    )
    print(f"runs     {len(times)}")
    print(f"best     {best:8.2f} ms   {best / TARGET_MS:.3f} × target ({TARGET_MS:.0f} ms)")
    print(f"median   {median:8.2f} ms   {median / TARGET_MS:.3f} × target")
    return 0 if median <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
