"""What the AReaL-version rules cost ``validate``, side by side with the code before them.

Every config of AReaL 2.0's examples (``tests/fixtures/areal2``) and of the AReaL 1.0
fixtures is composed once with Hydra's compose API, then ``validate(cfg)`` is timed on it
(median of ``--rounds`` calls), in fresh interpreters that alternate between this checkout
(under AReaL 2.0's rules and under 1.0's) and a git worktree of ``--before`` (default:
``main``), the code before the rules. A config the code rejects is timed all the same
(up to the error). Prints one row per config and the medians over all of them.

    python benchmarks/areal_rules.py [--before main] [--rounds 30] [--repeats 3]
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

ROOT = Path(__file__).resolve().parent.parent
DIRS = {
    "2.0 examples": ROOT / "tests" / "fixtures" / "areal2",
    "1.0 fixtures": ROOT / "tests" / "fixtures" / "areal",
}

CHILD = r"""
import json, os, statistics, sys, time
from pathlib import Path
from hydra import compose, initialize_config_dir
import areal_conf
from areal_conf import AllocationError, validate

rounds = int(sys.argv[2])
out = {}
for path in map(Path, json.loads(sys.argv[1])):
    with initialize_config_dir(config_dir=str(path.parent), version_base=None):
        cfg = compose(config_name=path.stem)
    times = []
    verdict = ""
    for _ in range(rounds):
        start = time.perf_counter()
        try:
            validate(cfg)
            verdict = "accepted"
        except AllocationError as err:
            verdict = "rejected: " + err.reason.split(":")[0]
        times.append(time.perf_counter() - start)
    out[str(path)] = (statistics.median(times), verdict)
tree = os.environ["PYTHONPATH"].split(os.pathsep)[0]
assert areal_conf.__file__.startswith(tree), areal_conf.__file__  # the tree under test
print(json.dumps(out))
"""


Timings = dict[str, tuple[float, str]]  # file -> (median seconds, verdict)


def run_child(tree: Path, files: list[Path], rounds: int, version: str | None) -> Timings:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AREAL_CONF_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    env["SWE_RL_ADMIN_API_KEY"] = "benchmark"  # the swe example interpolates it
    if version is not None:
        env["AREAL_CONF_AREAL_VERSION"] = version
    result = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps([str(f) for f in files]), str(rounds)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
        check=True,
    )
    data: Timings = json.loads(result.stdout.splitlines()[-1])
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", default="main", help="the git revision to compare with")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    files = [f for d in DIRS.values() if d.is_dir() for f in sorted(d.rglob("*.yaml"))]
    names = {
        f: f"{label}: {f.relative_to(d)}"
        for label, d in DIRS.items()
        for f in files
        if f.is_relative_to(d)
    }
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), args.before],
            check=True,
            capture_output=True,
        )
        try:
            runs: dict[str, list[Timings]] = {"before": [], "2.0": [], "1.0": []}
            for _ in range(args.repeats):  # alternate, so that machine load hits all alike
                runs["before"].append(run_child(before, files, args.rounds, None))
                runs["2.0"].append(run_child(ROOT, files, args.rounds, "2.0"))
                runs["1.0"].append(run_child(ROOT, files, args.rounds, "1.0"))
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)],
                check=True,
                capture_output=True,
            )
    print(f"validate(cfg), median of {args.rounds} calls, best of {args.repeats} interpreters")
    print("| config | before | 1.0 rules | 2.0 rules | 2.0 / before | verdict (2.0) |")
    print("|---|---|---|---|---|---|")
    ratios = []
    for f in files:
        key = str(f)
        t = {name: min(run[key][0] for run in rs) for name, rs in runs.items()}
        ratio = t["2.0"] / t["before"]
        ratios.append(ratio)
        print(
            f"| {names[f]} | {t['before'] * 1e3:.2f} ms | {t['1.0'] * 1e3:.2f} ms "
            f"| {t['2.0'] * 1e3:.2f} ms | {ratio:.2f} | {runs['2.0'][0][key][1]} |"
        )
    print(f"median 2.0 / before over {len(files)} configs: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
