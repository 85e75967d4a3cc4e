"""A dry run of the ``areal`` launcher against Hydra's own multirun of the same jobs.

For each N (default 100, 400 and 2,000), in one run and alternately:

* ``basic``: Hydra's multirun of N jobs with its basic launcher and a task that does
  nothing (each job composed, its directory and ``.hydra`` files written, as Hydra does);
* ``areal``: the same N jobs with ``hydra/launcher=areal`` and
  ``hydra.launcher.dry_run=true`` (each job composed, validated and printed, none run).

Both are the same small app on the repository's ``conf/config.yaml``, started as a user
starts it (a new ``python`` process, Hydra's default logging), sweeping
``cluster.n_nodes=range(2, N + 2)``. Prints wall time, CPU time (the child's user +
system), the ratio areal/basic and, for the dry run, when its first progress line
appeared (counted from the start of the process). Targets: ratio at most 0.5, 2,000 jobs
within 60 s, first progress line within 5 s.

    python benchmarks/dry_run.py [--jobs 100 400 2000] [--rounds 1]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 0.5
TARGET_2000_S = 60.0
TARGET_FIRST_PROGRESS_S = 5.0
PROGRESS = "validating jobs:"

APP = """\
import hydra
from areal_conf.hydra.compat import VERSION_BASE


@hydra.main(config_path={conf!r}, config_name="config", **VERSION_BASE)
def noop(cfg):
    return None


if __name__ == "__main__":
    noop()
"""


class Run:
    def __init__(self, wall: float, cpu: float, first_progress: float | None) -> None:
        self.wall = wall
        self.cpu = cpu
        self.first_progress = first_progress


def run(app: Path, launcher: str, jobs: int, sweep_dir: Path) -> Run:
    argv = [
        sys.executable,
        str(app),
        "-m",
        f"cluster.n_nodes=range(2,{jobs + 2})",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    argv += ["hydra/launcher=basic"] if launcher == "basic" else ["hydra.launcher.dry_run=true"]
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # Hydra logs to stdout; errors go to stderr: read both, as a terminal shows them.
    child = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    first: list[float] = []
    errors: list[str] = []

    def read_output() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            if PROGRESS in line and not first:
                first.append(time.perf_counter() - start)
            if "rror" in line:
                errors.append(line)

    reader = threading.Thread(target=read_output)
    reader.start()
    status = child.wait()
    reader.join()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if status != 0:
        raise SystemExit(f"{launcher}, {jobs} jobs: exit {status}\n{''.join(errors)}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(wall, cpu, first[0] if first else None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[100, 400, 2000])
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="areal-dry-run-bench-"))
    app = work / "noop_app.py"
    app.write_text(textwrap.dedent(APP.format(conf=str(ROOT / "conf"))))
    results: dict[tuple[str, int], list[Run]] = {}
    try:
        run(app, "basic", 2, work / "warm-basic")  # first imports, .pyc files
        run(app, "areal", 2, work / "warm-areal")
        for jobs in args.jobs:
            for r in range(max(1, args.rounds)):
                order = ("basic", "areal") if r % 2 == 0 else ("areal", "basic")
                for launcher in order:
                    d = work / f"{launcher}-{jobs}-{r}"
                    results.setdefault((launcher, jobs), []).append(run(app, launcher, jobs, d))
                    shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(
        f"no-op multirun (basic) vs areal dry run, cores: {os.cpu_count()}, best of "
        f"{max(1, args.rounds)}"
    )
    print(
        f"{'jobs':>6} {'basic wall':>11} {'areal wall':>11} {'ratio':>6} "
        f"{'basic CPU':>10} {'areal CPU':>10} {'ratio':>6} {'1st progress':>13}"
    )
    verdicts = []
    for jobs in args.jobs:
        basic = min(results[("basic", jobs)], key=lambda x: x.wall)
        areal = min(results[("areal", jobs)], key=lambda x: x.wall)
        first = [x.first_progress for x in results[("areal", jobs)] if x.first_progress]
        shown = f"{min(first):.1f} s" if first else "none"
        print(
            f"{jobs:>6} {basic.wall:>9.1f} s {areal.wall:>9.1f} s {areal.wall / basic.wall:>6.2f} "
            f"{basic.cpu:>8.1f} s {areal.cpu:>8.1f} s {areal.cpu / basic.cpu:>6.2f} {shown:>13}"
        )
        verdicts.append(areal.wall / basic.wall <= TARGET_RATIO)
        if first:
            verdicts.append(min(first) <= TARGET_FIRST_PROGRESS_S)
        if jobs >= 2000:
            verdicts.append(areal.wall <= TARGET_2000_S)
    print(
        f"targets: ratio <= {TARGET_RATIO}, 2,000 jobs <= {TARGET_2000_S:.0f} s, first "
        f"progress <= {TARGET_FIRST_PROGRESS_S:.0f} s ('none': done before the first "
        f"second): {'met' if all(verdicts) else 'missed'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
