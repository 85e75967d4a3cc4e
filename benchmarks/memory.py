"""Time the memory check that validate runs: target < 1 ms added to validate.

Composes conf/config.yaml with Hydra's compose API and times ``validate(cfg)`` three ways:

- *without*: the memory check switched off (its row of the checks does nothing; the
  model's shape is still read, for the layout rules);
- *default*: the default config as it is (no model shape: the check notes that);
- *shaped*: ``model.hf_config`` pointing at a Qwen2.5-7B config.json and recomputation
  on, so the check runs: the file is read, every engine estimated, colocated engines
  added up.

Rounds alternate the three so that load on a shared machine hits them alike. Run from
the repository root:

    python benchmarks/memory.py [--rounds 30] [--number 20]

Prints best and median ms per validate, and the added time against the 1 ms target.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


validate_module: Any = importlib.import_module("areal_conf.validation")

TARGET_MS = 1.0
QWEN = ROOT / "tests" / "fixtures" / "hf" / "qwen2_5_7b" / "config.json"


@contextmanager
def memory_check_off() -> Iterator[None]:
    """Every version's memory row of the checks replaced by one that does nothing."""
    saved = dict(validate_module.CHECKS)
    for version, checks in saved.items():
        validate_module.CHECKS[version] = tuple(
            check._replace(run=lambda ctx: None) if check.id == "memory" else check
            for check in checks
        )
    try:
        yield
    finally:
        validate_module.CHECKS.update(saved)


def per_call_ms(fn: Callable[[], Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) * 1e3 / number


def main() -> None:
    from hydra import compose, initialize_config_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--number", type=int, default=20, help="validate calls per timing")
    args = parser.parse_args()
    validate = validate_module.validate

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        default = compose("config")
        shaped = compose(
            "config",
            overrides=[
                f"model.hf_config={QWEN}",
                "++actor.gradient_checkpointing=true",
                "++critic.gradient_checkpointing=true",
            ],
        )
    assert validate(default).engines["actor"].memory is None
    assert validate(shaped).engines["actor"].memory is not None

    times: dict[str, list[float]] = {"without": [], "default": [], "shaped": []}
    for _ in range(max(1, args.rounds)):
        with memory_check_off():
            times["without"].append(per_call_ms(lambda: validate(default), args.number))
        times["default"].append(per_call_ms(lambda: validate(default), args.number))
        times["shaped"].append(per_call_ms(lambda: validate(shaped), args.number))

    print(
        f"validate(cfg), {args.rounds} rounds × {args.number} calls "
        f"(target: < {TARGET_MS:g} ms added)"
    )
    best = {k: min(v) for k, v in times.items()}
    median = {k: statistics.median(v) for k, v in times.items()}
    for key, label in (
        ("without", "memory check off"),
        ("default", "default config (no shape)"),
        ("shaped", "default + Qwen2.5-7B hf_config"),
    ):
        print(f"  {label:32s} best {best[key]:6.3f} ms  median {median[key]:6.3f} ms")
    for key in ("default", "shaped"):
        added = median[key] - median["without"]
        print(
            f"  added on {key:8s}: median {added:6.3f} ms ({added / TARGET_MS:5.2f}× target), "
            f"best {best[key] - best['without']:6.3f} ms"
        )


if __name__ == "__main__":
    main()
