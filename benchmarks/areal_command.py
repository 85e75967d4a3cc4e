"""What areal-conf costs in front of an AReaL command, measured side by side in one run.

1. ``check``: the time ``python -m areal_conf check <AReaL command>`` takes (so the time
   ``run`` adds before the AReaL command starts) against AReaL's own config load, both
   as new processes: AReaL's real loader (``load.py`` of the areal_loader tool: AReaL's
   source and pinned Hydra, ``load_expr_config`` on the same YAML and overrides). Also
   the two loads alone, inside their processes: ``check_command`` against the loader's
   ``load_s`` (``load_expr_config``). Alternating, median of ``--rounds``.
2. ``sweep``: a 100-job ``python -m areal_conf sweep --dry-run`` (every job composed as
   AReaL composes it and validated; nothing started) against Hydra's own multirun of the
   same 100 jobs over the same YAML with its basic launcher and a task that does nothing.

Needs AReaL's loader, built by ``areal_loader/setup.sh`` (``AREAL_LOADER_HOME``, default
``~/.cache/areal-loader``; ``AREAL_LOADER_DIR``, the tool's directory). No target is set
by a test; the results are in ``benchmarks/README.md``.

    python benchmarks/areal_command.py [--rounds 7] [--jobs 100]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOME = Path(os.environ.get("AREAL_LOADER_HOME", Path.home() / ".cache" / "areal-loader"))
# The loader tool is not part of this repository: its directory comes from the
# environment, and without it the loader tests skip.
LOADER_DIR = os.environ.get("AREAL_LOADER_DIR", "")
LOADER = Path(LOADER_DIR or "areal_loader-not-set") / "load.py"
AREAL_PYTHON = HOME / "venv" / "bin" / "python"
SRC = HOME / "areal-src"
YAML = SRC / "examples" / "math" / "gsm8k_grpo_megatron.yaml"
OVERRIDES = ["scheduler.type=local", "actor.backend=megatron:d2t2"]
LAYOUTS = ["megatron:d4", "megatron:d2t2", "megatron:t4", "megatron:d2p2"]

# As the loader's load_s: the call alone, its modules imported before the clock starts.
IN_PROCESS_CHECK = """\
import sys, time
import hydra, omegaconf, areal_conf.validation
from areal_conf.command.check import check_command
start = time.perf_counter()
check_command(sys.argv[1:])
print(time.perf_counter() - start)
"""

NOOP_APP = """\
import hydra
from areal_conf.hydra.compat import VERSION_BASE


@hydra.main(config_path={conf!r}, config_name={name!r}, **VERSION_BASE)
def noop(cfg):
    return None


if __name__ == "__main__":
    noop()
"""


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT), out.get("PYTHONPATH", "")])
    out["SWE_RL_ADMIN_API_KEY"] = "bench"  # an example AReaL's loader reads it from
    return out


def timed(argv: list[str], environ: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, env=environ or env(), cwd=ROOT)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{argv[:4]}...: exit {out.returncode}\n{out.stdout}{out.stderr}")
    return wall, out.stdout


def areal_command() -> list[str]:
    """The AReaL command areal-conf is put in front of (its driver hands the arguments to
    AReaL's loader, tests/areal_loader_driver.py)."""
    driver = str(ROOT / "tests" / "areal_loader_driver.py")
    return [str(AREAL_PYTHON), driver, "--config", str(YAML), *OVERRIDES]


def bench_check(rounds: int) -> None:
    loader = [str(AREAL_PYTHON), str(LOADER), "--areal-src", str(SRC), str(YAML), "--", *OVERRIDES]
    loader_env = {k: v for k, v in env().items() if k != "PYTHONPATH"}
    check = [sys.executable, "-m", "areal_conf", "check", "--", *areal_command()]
    inproc = [sys.executable, "-c", IN_PROCESS_CHECK, *areal_command()]
    timed(loader, loader_env)  # first imports, .pyc files
    timed(check)
    walls: dict[str, list[float]] = {"loader": [], "check": []}
    insides: dict[str, list[float]] = {"loader": [], "check": []}
    for r in range(rounds):
        for which in ("loader", "check") if r % 2 == 0 else ("check", "loader"):
            if which == "loader":
                wall, out = timed(loader, loader_env)
                verdict = json.loads(out.strip().splitlines()[-1])
                assert verdict["ok"], verdict["error_first_line"]
                insides["loader"].append(float(verdict["load_s"]))
            else:
                wall, _ = timed(check)
                insides["check"].append(float(timed(inproc)[1].strip()))
            walls[which].append(wall)
    med = {k: statistics.median(v) for k, v in walls.items()}
    inner = {k: statistics.median(v) for k, v in insides.items()}
    print(f"check before an AReaL command, median of {rounds}, cores: {os.cpu_count()}")
    print(f"  {'':34} {'AReaL loader':>12} {'areal-conf check':>17} {'ratio':>6}")
    print(
        f"  {'new process, start to exit':34} {med['loader']:>10.2f} s "
        f"{med['check']:>15.2f} s {med['check'] / med['loader']:>6.2f}"
    )
    print(
        f"  {'the call alone (load_expr_config,':34} {inner['loader']:>10.3f} s "
        f"{inner['check']:>15.3f} s {inner['check'] / inner['loader']:>6.2f}"
    )
    print(f"  {' check_command; modules imported)':34}")


def bench_sweep(jobs: int, rounds: int) -> None:
    seeds = jobs // len(LAYOUTS)
    sweep = [f"actor.backend={','.join(LAYOUTS)}", f"seed=range({seeds})"]
    work = Path(tempfile.mkdtemp(prefix="areal-command-bench-"))
    try:
        app = work / "noop_app.py"
        app.write_text(textwrap.dedent(NOOP_APP.format(conf=str(YAML.parent), name=YAML.stem)))
        walls: dict[str, list[float]] = {"hydra": [], "areal": []}
        for r in range(rounds):
            for which in ("hydra", "areal") if r % 2 == 0 else ("areal", "hydra"):
                d = work / f"{which}-{r}"
                if which == "hydra":
                    argv = [sys.executable, str(app), "-m", OVERRIDES[0], *sweep]
                else:
                    argv = [sys.executable, "-m", "areal_conf", "sweep", "--dry-run", "--"]
                    argv += [*areal_command()[:4], OVERRIDES[0], *sweep]
                wall, out = timed([*argv, f"hydra.sweep.dir={d}"])
                if which == "areal":
                    assert out.count("    $ ") == seeds * len(LAYOUTS), out[-500:]
                walls[which].append(wall)
                shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    hydra, areal = (statistics.median(walls[k]) for k in ("hydra", "areal"))
    print(f"\n{seeds * len(LAYOUTS)}-job sweep of the same YAML, median of {rounds}")
    print(f"  Hydra's multirun, basic launcher, no-op task:  {hydra:6.1f} s")
    ratio = areal / hydra
    print(f"  areal-conf sweep --dry-run (all validated):     {areal:6.1f} s  ratio {ratio:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--sweep-rounds", type=int, default=3)
    args = parser.parse_args()
    if not (AREAL_PYTHON.exists() and LOADER.exists() and YAML.exists()):
        print(f"needs AReaL's loader (areal_loader/setup.sh): {AREAL_PYTHON}, {LOADER}, {YAML}")
        return 2
    bench_check(max(1, args.rounds))
    bench_sweep(args.jobs, max(1, args.sweep_rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
