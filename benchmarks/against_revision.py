"""Today's code beside an earlier revision, in one run: is a change no slower?

For this checkout and for ``--baseline`` (a git revision, extracted to a temporary
directory), alternately, each in fresh interpreters that see only that tree's
``areal_conf`` and ``hydra_plugins`` (the editable install's finder is switched off by a
``sitecustomize`` on ``PYTHONPATH``):

* ``validate``: every AReaL config of ``tests/fixtures/areal`` and ``tests/fixtures/areal2``
  (this checkout's copies for both trees, so the inputs are the same), loaded once and
  validated ``--number`` times; the median per config, summed (an invalid config's
  message is part of the work);
* ``plugin scan``: ``Plugins.instance()`` as any Hydra app runs it; Hydra's own timing of
  this package's modules (our share of the scan);
* ``dry run``: ``hydra/launcher=areal hydra.launcher.dry_run=true`` over ``--jobs`` jobs
  (``cluster.n_nodes=range(...)``) of a small app on the tree's own ``conf/``, wall time.

Prints the median of ``--rounds`` for each tree and the ratio today/baseline.

    python benchmarks/against_revision.py [--baseline de13daf] [--rounds 5] [--jobs 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Hides the editable install, so that a child imports the tree on PYTHONPATH only.
SITECUSTOMIZE = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "Editable" not in getattr(f, "__name__", "")]
sys.path_hooks[:] = [h for h in sys.path_hooks if "Editable" not in getattr(h, "__qualname__", "")]
sys.path[:] = [p for p in sys.path if "__editable__" not in p]
sys.path_importer_cache.clear()
"""

VALIDATE = """
import json, statistics, sys, time
from pathlib import Path
from omegaconf import OmegaConf
import areal_conf
from areal_conf import AllocationError, validate

assert Path(areal_conf.__file__).is_relative_to(sys.argv[1]), areal_conf.__file__
number = int(sys.argv[2])
total = 0.0
for path in sys.argv[3:]:
    cfg = OmegaConf.load(path)
    times = []
    for _ in range(number):
        t0 = time.perf_counter()
        try:
            validate(cfg)
        except AllocationError:
            pass
        times.append(time.perf_counter() - t0)
    total += statistics.median(times)
print(json.dumps(total))
"""

SCAN = """
import json, sys
import hydra_plugins.areal_conf_plugin as plugin
from hydra.core.plugins import Plugins

assert plugin.__path__[0].startswith(sys.argv[1]), plugin.__path__
stats = Plugins.instance().get_stats()
print(json.dumps(sum(
    v for k, v in stats.modules_import_time.items()
    if k.startswith("hydra_plugins.areal_conf_plugin")
)))
"""

APP = """
import hydra

@hydra.main(config_path={conf!r}, config_name="config", version_base=None)
def noop(cfg):
    return None

if __name__ == "__main__":
    noop()
"""


def extract(revision: str, into: Path) -> Path:
    """The files of ``revision`` (from this checkout's git) under ``into``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", revision],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    # Bytecode compiled up front, as this checkout's already is: a first import that
    # compiles would count against the baseline.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into)], check=True)
    return into


def child_env(tree: Path, site: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(tree)])
    return env


def run_json(code: str, *args: str, env: dict[str, str], cwd: Path) -> float:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )
    if done.returncode:
        raise SystemExit(done.stderr)
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def dry_run(tree: Path, jobs: int, env: dict[str, str], work: Path) -> float:
    app = work / "app.py"
    app.write_text(APP.format(conf=str(tree / "conf")))
    argv = [
        sys.executable,
        str(app),
        "-m",
        "hydra/launcher=areal",
        "hydra.launcher.dry_run=true",
        f"cluster.n_nodes=range(2,{jobs + 2})",
        f"hydra.sweep.dir={work / 'multirun'}",
    ]
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=work)
    wall = time.perf_counter() - t0
    if done.returncode or f"#{jobs - 1} " not in done.stdout + done.stderr:
        tail = (done.stdout + done.stderr)[-2000:]
        raise SystemExit(f"the dry run in {tree} failed (exit {done.returncode}):\n{tail}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--baseline", default="de13daf", help="the git revision to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--number", type=int, default=20, help="validations per config")
    parser.add_argument("--jobs", type=int, default=2000)
    args = parser.parse_args()
    configs = sorted(str(p) for p in (ROOT / "tests" / "fixtures").glob("areal*/**/*.yaml"))
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        site = base / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        trees = {"today": ROOT, args.baseline: extract(args.baseline, base / "baseline")}
        results: dict[str, dict[str, list[float]]] = {
            name: {"validate": [], "scan": [], "dry_run": []} for name in trees
        }
        for r in range(args.rounds):
            for name, tree in trees.items():
                env = child_env(tree, site)
                work = base / f"work-{r}-{len(results[name]['dry_run'])}-{name}"
                work.mkdir()
                validate_s = run_json(
                    VALIDATE, str(tree), str(args.number), *configs, env=env, cwd=work
                )
                results[name]["validate"].append(validate_s)
                results[name]["scan"].append(run_json(SCAN, str(tree), env=env, cwd=work))
                results[name]["dry_run"].append(dry_run(tree, args.jobs, env, work))
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    import hydra
    import omegaconf

    print(
        f"hydra-core {hydra.__version__}, omegaconf {omegaconf.__version__}, "
        f"{args.rounds} rounds, medians; {len(configs)} configs, {args.jobs:,} jobs"
    )
    print(f"{'':34}{'today':>12}{args.baseline:>12}{'ratio':>8}")
    rows = (
        ("validate, all configs (ms)", "validate", 1e3),
        ("plugin scan, our share (ms)", "scan", 1e3),
        (f"dry run of {args.jobs:,} jobs (s)", "dry_run", 1.0),
    )
    for label, key, scale in rows:
        today = statistics.median(results["today"][key]) * scale
        then = statistics.median(results[args.baseline][key]) * scale
        print(f"{label:34}{today:12.3f}{then:12.3f}{today / then:8.2f}")


if __name__ == "__main__":
    main()
