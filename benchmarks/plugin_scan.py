"""What an installed areal-conf costs every Hydra app, and what asking for its schema costs.

Each of ``--runs`` fresh interpreters discovers Hydra's plugins as any application does
(``Plugins.instance()``) and reports Hydra's own per-module timing of the scan; our share
is the sum over this package's modules and, on Hydra 1.4, its ``hydra.plugins`` entry
points. Target: at most 2 ms in total, on every supported Hydra version.

The same interpreter then composes an application that does not use ``areal_schema`` (it
must not import ``areal_conf.hydra.structured``) and builds ``areal_schema`` twice through the
plugin's config source: the first build (import of the dataclasses + OmegaConf.structured,
the cost an application that asks for the schema pays once) and a later one (a copy of the
built config). Prints medians over the runs and the Hydra/OmegaConf versions measured.

    python benchmarks/plugin_scan.py [--runs 21]

``python -m nox -s scan`` runs it in each environment of the version matrix.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TARGET_MS = 2.0

CHILD = """
import json, sys, time
from importlib.metadata import distribution

import hydra.core.plugins
from hydra.core.plugins import Plugins

clock = time.perf_counter
if sys.argv[2] == "cpu":  # Hydra's own accounting, clocked in this thread's CPU time
    clock = hydra.core.plugins.timer = time.thread_time

stats = Plugins.instance().get_stats()
ours = [
    f"entry point: {ep.name}"
    for ep in distribution("areal-conf").entry_points
    if ep.group == "hydra.plugins"
]
share = {
    k: v
    for k, v in stats.modules_import_time.items()
    if k.startswith("hydra_plugins.areal_conf_plugin") or k in ours
}

from hydra import compose, initialize_config_dir
from areal_conf.hydra.compat import VERSION_BASE

with initialize_config_dir(config_dir=sys.argv[1], **VERSION_BASE):
    compose("plain")
plain_imports_schema = "areal_conf.hydra.structured" in sys.modules

from hydra_plugins.areal_conf_plugin.areal_configs import build

t0 = clock()
build("areal_schema")
first = clock() - t0
t0 = clock()
build("areal_schema")
again = clock() - t0

import hydra, omegaconf
print(json.dumps({
    "hydra": hydra.__version__,
    "omegaconf": omegaconf.__version__,
    "share": share,
    "scan_total": stats.total_time,
    "plain_imports_schema": plain_imports_schema,
    "first_build": first,
    "again": again,
}))
"""


def run_once(conf_dir: Path, clock: str) -> dict[str, Any]:
    # With bytecode caches, as in any installed environment (pip compiles on install; an
    # editable install writes them on first import unless PYTHONDONTWRITEBYTECODE is set).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(conf_dir), clock],
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),  # no checkout on sys.path: the installed package only
        env=env,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="areal-scan-bench-") as tmp:
        conf_dir = Path(tmp)
        (conf_dir / "plain.yaml").write_text("lr: 0.1\n")
        run_once(conf_dir, "wall")  # warm-up: bytecode caches
        runs: dict[str, list[dict[str, Any]]] = {"wall": [], "cpu": []}
        for _ in range(max(1, args.runs)):
            for clock, results in runs.items():
                results.append(run_once(conf_dir, clock))

    first = runs["wall"][0]
    n = len(runs["wall"])
    print(f"hydra-core {first['hydra']}, omegaconf {first['omegaconf']}, {n} runs per clock")
    for clock, label in (("wall", "wall clock (Hydra's)"), ("cpu", "thread CPU time")):
        print(f"{label}:")
        report_share(runs[clock])
    all_runs = runs["wall"] + runs["cpu"]
    plain = sum(r["plain_imports_schema"] for r in all_runs)
    print(
        f"an app without areal_schema imported areal_conf.hydra.structured in {plain} "
        f"of {len(all_runs)} runs"
    )


def report_share(runs: list[dict[str, Any]]) -> None:
    modules = sorted({m for r in runs for m in r["share"]})
    for module in modules:
        times = [r["share"].get(module, 0.0) for r in runs]
        print(f"  {module:<58} median {ms(statistics.median(times))}")
    totals = [sum(r["share"].values()) for r in runs]
    scans = [r["scan_total"] for r in runs]
    ratios = [t / s for t, s in zip(totals, scans, strict=True)]
    median_total = statistics.median(totals)
    print(
        f"  our share: median {ms(median_total)}, best {ms(min(totals))}, "
        f"worst {ms(max(totals))} ({median_total * 1000 / TARGET_MS:.2f}x of the "
        f"{TARGET_MS:g} ms target); Hydra's whole scan: median "
        f"{ms(statistics.median(scans))}; our share of it: median "
        f"{statistics.median(ratios):.1%}"
    )
    builds = [r["first_build"] for r in runs]
    again = [r["again"] for r in runs]
    print(
        f"  areal_schema, only in apps that load it: first build median "
        f"{ms(statistics.median(builds))}, later loads (a copy) median "
        f"{ms(statistics.median(again))}"
    )


if __name__ == "__main__":
    main()
