"""How soon a sweep with one bad job fails on a real Slurm: validated vs not.

The same 4-job ``train.py`` sweep, whose job #1 takes half a node (AReaL's Slurm scheduler
allocates whole nodes), through ``submitit_slurm`` twice:

* behind ``hydra/launcher=areal``: rejected before anything is submitted;
* alone: every job is submitted, the bad one starts, exits 2 on the node, and submitit
  reports it once accounting shows it FAILED.

Prints each wall time (median of ``--rounds``) and their ratio.  On a real cluster the
unvalidated failure also waits in the queue first; this one-node test cluster has no
queue, so the figure is a lower bound.  Needs the test cluster
(``sudo scripts/slurm-test-cluster up``) and the launchers extra.

    python benchmarks/cluster.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ["-m", "actor.backend=fsdp:d8,fsdp:d4,fsdp:d4t2,fsdp:d2t4"]
VARIANTS = {
    "areal + submitit_slurm": ["hydra/launcher@hydra.launcher.launcher=submitit_slurm"],
    "submitit_slurm alone": ["hydra/launcher=submitit_slurm"],
}


def failed_sweep(extra: list[str], sweep_dir: Path) -> float:
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "train.py", *SWEEP, *extra, f"hydra.sweep.dir={sweep_dir}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    elapsed = time.perf_counter() - start
    if out.returncode == 0:
        raise SystemExit(f"expected the sweep to fail:\n{out.stdout}\n{out.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sinfo = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    if "idle" not in sinfo.stdout.split():
        raise SystemExit("no idle Slurm node: run `sudo scripts/slurm-test-cluster up` first")
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            for name, extra in VARIANTS.items():
                sweep_dir = Path(tmp) / f"{i}-{len(times[name])}-{name.split()[0]}"
                times[name].append(failed_sweep(extra, sweep_dir))
                shutil.rmtree(sweep_dir, ignore_errors=True)
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        runs = ", ".join(f"{x:.1f}" for x in t)
        print(f"{name:24s} median {medians[name]:6.1f} s  (runs: {runs})")
    ratio = medians["submitit_slurm alone"] / medians["areal + submitit_slurm"]
    print(f"the unvalidated sweep takes {ratio:.1f}× as long to report the bad job")


if __name__ == "__main__":
    main()
