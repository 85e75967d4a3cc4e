"""A stand-in for an AReaL training driver (``examples/math/gsm8k_rl.py``), without AReaL.

It does what AReaL's drivers do first: ``load_expr_config(sys.argv[1:], ...)`` reads
``--config`` with argparse and passes every other argument to Hydra's
``initialize`` + ``compose`` as overrides (``areal.api.cli_args.parse_cli_args``, copied
in its steps below). Then, instead of training, it writes what it received to
``$STANDIN_OUT/<pid>.json`` (its argv, working directory, config file, overrides and a
few composed values), so a test can see which processes started and what each got.
Without ``STANDIN_OUT`` it only prints the line saying what it loaded (the README's
examples run it so).

What it does next is set by the environment, for the tests of exit statuses and signals:
``STANDIN_EXIT`` (exit with this status; with ``STANDIN_EXIT_IF``, only a run given that
override), ``STANDIN_KILL`` (send itself this signal),
``STANDIN_WAIT`` (wait this many seconds for a signal; SIGINT and SIGTERM are recorded
in ``<pid>.signals`` and end it with 130 and 143).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from hydra import compose, initialize
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from areal_conf.hydra.compat import VERSION_BASE

#: Composed values the driver reports.
REPORTED = ("actor.backend", "rollout.backend", "scheduler.type", "seed", "cluster.n_nodes")


def parse_cli_args(argv: list[str]) -> tuple[object, Path, list[str]]:
    """AReaL's ``parse_cli_args``: the same parser, the same relative config path (Hydra's
    ``initialize`` takes a path relative to the calling file), the same config name."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", help="Path to the main configuration file", required=True)
    if argv and argv[0].endswith(".py"):
        argv = argv[1:]
    args, overrides = parser.parse_known_args(argv)
    config_file = Path(args.config).absolute()
    assert config_file.exists(), f"Config file {config_file} does not exist."
    relpath = Path(os.path.relpath(str(config_file), Path(__file__).parent.absolute()))
    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    # AReaL passes version_base=None; the compatible spelling keeps newer Hydra quiet
    initialize(config_path=str(relpath.parent), job_name="app", **VERSION_BASE)
    cfg = compose(config_name=str(relpath.name).split(".yaml")[0], overrides=overrides)
    return cfg, config_file, overrides


def slurm_job() -> str | None:
    """The Slurm job this runs in, as sacct names it (``12_0`` for a task of array 12)."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID")


def args_config(argv: list[str]) -> str:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--config")
    return str(parser.parse_known_args(argv)[0].config)


def main(argv: list[str]) -> int:
    cfg, config_file, overrides = parse_cli_args(argv)
    received = {
        "started": time.time(),
        "argv": sys.argv,
        "loader_argv": argv,
        "cwd": os.getcwd(),
        "config": str(config_file),
        "overrides": overrides,
        "values": {key: OmegaConf.select(cfg, key, default=None) for key in REPORTED},
        "slurm_job_id": slurm_job(),
        "marker": os.environ.get("STANDIN_MARKER"),
    }
    print(f"stand-in driver: loaded {args_config(argv)} with {' '.join(overrides)}", flush=True)
    if "STANDIN_OUT" not in os.environ:
        return 0  # run by hand (the README's examples): nothing to report to a test
    out = Path(os.environ["STANDIN_OUT"])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{os.getpid()}.json").write_text(json.dumps(received, indent=2) + "\n")
    if os.environ.get("STANDIN_KILL"):
        os.kill(os.getpid(), int(os.environ["STANDIN_KILL"]))
    if os.environ.get("STANDIN_WAIT"):
        return wait_for_signal(out, float(os.environ["STANDIN_WAIT"]))
    only_if = os.environ.get("STANDIN_EXIT_IF")
    if only_if is not None and only_if not in overrides:
        return 0
    return int(os.environ.get("STANDIN_EXIT", "0"))


def wait_for_signal(out: Path, seconds: float) -> int:
    got: list[int] = []
    signal.signal(signal.SIGINT, lambda signo, frame: got.append(signo))
    signal.signal(signal.SIGTERM, lambda signo, frame: got.append(signo))
    (out / f"{os.getpid()}.ready").write_text("waiting\n")
    end = time.monotonic() + seconds
    while not got and time.monotonic() < end:
        time.sleep(0.02)
    time.sleep(0.3)  # a second copy of the signal, if one was sent, arrives meanwhile
    (out / f"{os.getpid()}.signals").write_text(
        json.dumps([signal.Signals(s).name for s in got]) + "\n"
    )
    if not got:
        return 0
    return 128 + got[0]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
