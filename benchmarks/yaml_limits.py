"""The cost of areal-conf's YAML limits on reading a normal AReaL config.

Composes AReaL's ``examples/math/gsm8k_grpo.yaml`` (tests/fixtures/areal/) and the largest
of AReaL 2.0's example configs (``examples/swe/qwen3_30b_a3b_grpo.yaml``) with Hydra's
compose API, as ``areal_conf.hydra.explain.compose_file`` does, alternately without the check
(Hydra's own ``file://`` source) and with it (``areal_conf.hydra.files``), in one
process; prints the median of each and their ratio, and the check alone
(``check_yaml_file``) with PyYAML's C parser and with its pure Python one; then how long
the check takes to refuse alias bombs of 5 and 9 levels of 9 aliases appended to the
first config, and how long Hydra takes to compose the 5-level one without the check (the
9-level one runs for minutes, its memory growing).
Run: python benchmarks/yaml_limits.py
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from hydra import compose, initialize_config_dir

from areal_conf.config.yaml_limits import UnreadableYaml, check_yaml_file
from areal_conf.hydra.compat import VERSION_BASE
from areal_conf.hydra.files import checked_yaml_files

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = (
    ROOT / "tests" / "fixtures" / "areal" / "gsm8k_grpo.yaml",
    ROOT / "tests" / "fixtures" / "areal2" / "examples" / "swe" / "qwen3_30b_a3b_grpo.yaml",
)
ROUNDS = 60


def compose_ms(path: Path, checked: bool) -> float:
    """One compose of ``path``, in ms, with or without the YAML limits."""
    limits = checked_yaml_files() if checked else contextlib.nullcontext()
    start = time.perf_counter()
    with limits, initialize_config_dir(config_dir=str(path.parent), **VERSION_BASE):
        compose(config_name=path.stem)
    return (time.perf_counter() - start) * 1000


def median_ms(call: Callable[[], Any], rounds: int = ROUNDS) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    for path in CONFIGS:
        compose_ms(path, False)  # warm-up: imports, plugin discovery
        compose_ms(path, True)
        plain, checked = [], []
        for _ in range(ROUNDS):  # alternately, so both see the same machine
            plain.append(compose_ms(path, False))
            checked.append(compose_ms(path, True))
        before, after = statistics.median(plain), statistics.median(checked)
        c_parser = median_ms(lambda p=path: check_yaml_file(p))  # type: ignore[misc]
        with mock.patch.object(yaml, "CSafeLoader", None):
            py_parser = median_ms(lambda p=path: check_yaml_file(p))  # type: ignore[misc]
        print(f"{path.relative_to(ROOT)} ({path.stat().st_size:,} bytes), {ROUNDS} rounds each")
        print(f"  compose without the limits: median {before:.2f} ms")
        print(f"  compose with the limits:    median {after:.2f} ms ({after / before:.3f}×)")
        print(f"  the check alone: {c_parser:.3f} ms (C parser), {py_parser:.3f} ms (pure Python)")

    with tempfile.TemporaryDirectory() as folder:
        bomb = Path(folder) / "cfg.yaml"
        for levels in (5, 9):
            bomb.write_text(CONFIGS[0].read_text() + alias_bomb(levels))
            took = median_ms(lambda: refused(bomb), 10)
            print(f"alias bomb {levels}×9 appended to the first: refused in {took:.2f} ms", end="")
            if levels == 5:  # 9 levels run for minutes without the limits
                print(f"; composed without the limits: {compose_ms(bomb, False) / 1000:.1f} s")
            else:
                print()


def alias_bomb(levels: int) -> str:
    """A "billion laughs": each level a list of 9 aliases of the level below."""
    lines = ["lol0: &l0 lol"]
    for i in range(1, levels + 1):
        lines.append(f"lol{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def refused(path: Path) -> None:
    try:
        check_yaml_file(path)
    except UnreadableYaml:
        return
    raise AssertionError(f"{path} was not refused")


if __name__ == "__main__":
    main()
