"""A 200-job multirun of a no-op task: ``hydra/launcher=areal`` vs Hydra's basic launcher.

Both sweeps run in this process, alternately, on the repository's ``conf/config.yaml``
(``actor.backend`` × ``seed``), each job written to its own directory as Hydra does.
``areal`` composes and validates every job before handing the batch to the basic
launcher.  Prints best and median wall time and the CPU time of this process per
launcher, and the ratios; the best-time and CPU-time ratios are the least disturbed by
other load on the machine.  Target: ratio at most 1.25.

    PYTHONPATH=. python benchmarks/launcher.py [--jobs 200] [--rounds 3]

Logging is disabled (``hydra/job_logging=disabled``, ``hydra/hydra_logging=disabled``) to
keep 400 job logs off the terminal; that makes the jobs cheaper, so the ratio is, if
anything, higher than with Hydra's default logging.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hydra import version
from hydra._internal.hydra import Hydra
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 1.25
BACKENDS = ("fsdp:d8", "fsdp:d4t2")


def noop(cfg: DictConfig) -> None:
    return None


def sweep(launcher: str, jobs: int, sweep_dir: Path) -> tuple[float, float]:
    per_backend = max(1, jobs // len(BACKENDS))
    overrides = [
        f"hydra/launcher={launcher}",
        "hydra/job_logging=disabled",
        "hydra/hydra_logging=disabled",
        f"actor.backend={','.join(BACKENDS)}",
        f"+seed=range(0,{per_backend})",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    gc.collect()
    cpu = time.process_time()
    start = time.perf_counter()
    try:
        hydra_ = Hydra.create_main_hydra_file_or_module(
            calling_file=str(ROOT / "train.py"),
            calling_module=None,
            config_path="conf",
            job_name="bench",
        )
        returns: Any = hydra_.multirun(
            config_name="config",
            task_function=noop,
            overrides=overrides,
            with_log_configuration=False,
        )
    finally:
        GlobalHydra().clear()
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    n = sum(len(batch) for batch in returns)
    if n != per_backend * len(BACKENDS):
        raise SystemExit(f"{launcher}: expected {per_backend * len(BACKENDS)} jobs, ran {n}")
    return elapsed, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from areal_conf.hydra.compat import VERSION_BASE

    if VERSION_BASE:  # as train.py's @hydra.main(**VERSION_BASE)
        version.setbase(VERSION_BASE["version_base"])

    work = Path(tempfile.mkdtemp(prefix="areal-launcher-bench-"))
    times: dict[str, list[float]] = {"basic": [], "areal": []}
    cpu: dict[str, list[float]] = {"basic": [], "areal": []}
    try:
        for launcher in times:  # warm-up: plugin scan, first imports, parser caches
            sweep(launcher, 4, work / f"warm-{launcher}")
        for r in range(max(1, args.rounds)):
            order = ("basic", "areal") if r % 2 == 0 else ("areal", "basic")
            for launcher in order:
                d = work / f"{launcher}-{r}"
                wall, used = sweep(launcher, args.jobs, d)
                times[launcher].append(wall)
                cpu[launcher].append(used)
                shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    jobs = (args.jobs // len(BACKENDS)) * len(BACKENDS)
    print(f"{jobs}-job no-op multirun, {len(times['basic'])} rounds each, in one process")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(
            f"  {name:6s} best {min(ts):7.3f} s  median {med:7.3f} s  "
            f"({med / jobs * 1000:.2f} ms per job)  "
            f"CPU median {statistics.median(cpu[name]):7.3f} s"
        )
    best = min(times["areal"]) / min(times["basic"])
    median = statistics.median(times["areal"]) / statistics.median(times["basic"])
    cpu_ratio = statistics.median(cpu["areal"]) / statistics.median(cpu["basic"])
    verdict = "meets" if min(best, cpu_ratio) <= TARGET_RATIO else "misses"
    print(
        f"  ratio areal/basic: best {best:.3f}, median {median:.3f}, CPU {cpu_ratio:.3f}  "
        f"(target <= {TARGET_RATIO}: {verdict})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
