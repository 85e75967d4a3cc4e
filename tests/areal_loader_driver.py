"""A driver whose config load is AReaL's own, for tests/test_areal_loader.py.

Run with the AReaL loader's Python as ``python tests/areal_loader_driver.py --config YAML
[overrides ...]``, the command line of an AReaL driver. It hands its arguments to AReaL's
real ``load_expr_config`` through the loader tool (``load.py``: AReaL's source, its
pinned Hydra, no GPUs), exactly as an AReaL driver hands ``sys.argv[1:]`` to it, writes
the loader's one-line verdict to ``$STANDIN_OUT/<pid>.json`` and exits with the loader's
status (0: AReaL accepted the command line). ``AREAL_LOADER_SCRIPT`` and
``AREAL_LOADER_SRC`` say where the tool and AReaL's source are.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()  # what load_expr_config's parse_cli_args reads
    parser.add_argument("--config", required=True)
    args, overrides = parser.parse_known_args(argv)
    loader = os.environ["AREAL_LOADER_SCRIPT"]
    source = os.environ["AREAL_LOADER_SRC"]
    verdict = subprocess.run(
        [sys.executable, loader, "--areal-src", source, args.config, "--", *overrides],
        capture_output=True,
        text=True,
        # AReaL's environment as it is: not this checkout's areal-conf on the path
        env={
            **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            "SWE_RL_ADMIN_API_KEY": "test",
        },
    )
    out = Path(os.environ.get("STANDIN_OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{os.getpid()}.json").write_text(verdict.stdout)
    return verdict.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
