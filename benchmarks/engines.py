"""What validating a real AReaL config costs next to composing it.

For every YAML of a directory of AReaL configs (default: the shared fixtures), compose it
with Hydra's compose API and time ``validate(cfg)`` (engine discovery, the kl_ctl rule,
colocation chains, replica counts, placement) against the composition itself. Prints
the median per file and the ratio validate / compose; no target, a figure to keep an eye
on (validation must stay a small part of a Hydra start-up).

    PYTHONPATH=. python benchmarks/engines.py [--dir DIR] [--rounds 50]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir

import areal_conf.hydra.structured  # noqa: F401  (registers areal_schema and the resolvers)
from areal_conf.errors import AllocationError
from areal_conf.validation import validate

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "areal"


def _median(fn: Any, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _validate_or_error(cfg: Any) -> str:
    try:
        plan = validate(cfg)
    except AllocationError as err:
        return "rejected: " + err.reason.split(":")[0]
    return f"{len(plan.gpus_by_engine())} engines, {plan.used_gpus} GPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=FIXTURES)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    rows = []
    with initialize_config_dir(config_dir=str(args.dir.resolve()), version_base=None):
        for path in sorted(args.dir.glob("*.yaml")):
            cfg = compose(config_name=path.stem)
            verdict = _validate_or_error(cfg)
            t_compose = _median(lambda p=path: compose(config_name=p.stem), args.rounds)
            t_validate = _median(lambda c=cfg: _validate_or_error(c), args.rounds)
            rows.append((path.stem, verdict, t_compose, t_validate))
    print("| config | verdict | compose | validate | validate / compose |")
    print("|---|---|---|---|---|")
    for name, verdict, tc, tv in rows:
        print(f"| {name} | {verdict} | {tc * 1e3:.2f} ms | {tv * 1e3:.3f} ms | {tv / tc:.3f} |")
    total_c = sum(r[2] for r in rows)
    total_v = sum(r[3] for r in rows)
    print(f"\nall files: validate / compose = {total_v / total_c:.3f}")


if __name__ == "__main__":
    main()
