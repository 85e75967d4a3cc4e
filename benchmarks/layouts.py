"""Time ``layouts()``, every valid layout of an engine: megatron on 1024 GPUs, MoE model.

Target: one call ≤ 50 ms. Run from the repository root:

    python benchmarks/layouts.py [--runs 50]

Prints best and median wall time in ms, their ratio to the target, and the number
of layouts found.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from areal_conf.spec.layouts import layouts

TARGET_MS = 50.0
MODEL = {
    "num_layers": 64,
    "num_attention_heads": 64,
    "num_kv_heads": 8,
    "num_experts": 64,
    "max_seq_len": 32768,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()

    found = layouts("megatron", 1024, model=MODEL)  # warm-up (imports, caches)
    times: list[float] = []
    for _ in range(max(1, args.runs)):
        start = time.perf_counter()
        layouts("megatron", 1024, model=MODEL)
        times.append((time.perf_counter() - start) * 1e3)
    best, median = min(times), statistics.median(times)
    print(f"layouts('megatron', 1024, MoE model): {len(found)} layouts, {len(times)} runs")
    print(f"  best   {best:8.2f} ms   {best / TARGET_MS:6.3f} × target ({TARGET_MS:.0f} ms)")
    print(f"  median {median:8.2f} ms   {median / TARGET_MS:6.3f} × target")


if __name__ == "__main__":
    main()
