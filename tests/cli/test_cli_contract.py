"""The command line's contract, for any arguments: exit 0 or 2, never a traceback, and
for 2 exactly one ``error:`` message.

Property tests (hypothesis, derandomized, bounded): each verb of ``python -m areal_conf``
gets argv built from hostile pieces (random text, numbers such as nan, inf, -1 and huge
ones for each numeric flag, unknown keys, backends that are not strings as overrides,
odd quoting) and runs in this process through :func:`areal_conf.cli.main`. ``check``,
``run`` and ``sweep`` get ``tests/standin_driver.py`` as the AReaL driver and
``tests/fixtures/areal/gsm8k_grpo.yaml`` (AReaL's ``examples/math/gsm8k_grpo.yaml``);
``run`` starts that stand-in when the check passes, ``sweep`` only with ``--dry-run``.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Sequence

import pytest
from _helpers import CONF, ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from areal_conf.cli import main

Y = str(ROOT / "tests" / "fixtures" / "areal" / "gsm8k_grpo.yaml")
D = str(ROOT / "tests" / "standin_driver.py")
OWN = str(CONF / "config.yaml")

# Text a user (or a script gone wrong) might type, and numbers at every edge.
NUMBERS = st.sampled_from(
    ["-1", "0", "1", "8", "nan", "inf", "-inf", "1e9", "1.5", "0x10", str(2**64), "9" * 5000, ""]
)
#: A value of a numeric flag: as often a sane one as one at an edge.
NUM = st.one_of(st.sampled_from(["1", "4", "8", "80", "4096"]), NUMBERS)
TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=12
)
QUOTED = st.sampled_from(["'", '"', "'fsdp:d8", '"a b"', "\\", "${", "${oc.env:NOPE}", "=", "--"])
KEYS = st.sampled_from(
    [
        "actor.backend",
        "rollout.backend",
        "cluster.n_nodes",
        "cluster.n_gpus_per_node",
        "cluster.gpu_memory_gb",
        "actor.mb_spec.max_tokens_per_mb",
        "gconfig.n_samples",
        "gconfig.max_new_tokens",
        "train_dataset.batch_size",
        "rollout.max_head_offpolicyness",
        "sglang.mem_fraction_static",
        "scheduler.type",
        "scheduler",
        "actor",
        "model.num_layers",
        "no_such_key",
        "actor.no_such_key",
    ]
)
VALUES = st.one_of(
    NUMBERS,
    TEXT,
    QUOTED,
    st.sampled_from(["null", "true", "[a,b]", "[fsdp:d4]", "{x: 1}", "8.5", "fsdp:d8", "''"]),
)
OVERRIDES = st.builds(
    lambda prefix, key, value: f"{prefix}{key}={value}",
    st.sampled_from(["", "+", "++"]),
    KEYS,
    VALUES,
)
PIECES = st.lists(st.one_of(OVERRIDES, TEXT, QUOTED), max_size=3)
GPUS = st.sampled_from(["h100", "a100", "nope", "", "H200"])
BACKENDS = st.sampled_from(["fsdp", "megatron", "sglang", "vllm", "archon", "nope", "", "8"])
SPECS = st.sampled_from(["fsdp:d8", "sglang:d2t4", "megatron:d2p2t2", "fsdp:d0", "x:", "(", ""])


def _flag(name: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    """``[name, value]`` or nothing."""
    return st.one_of(st.just([]), st.builds(lambda v: [name, v], values))


def _flags(*options: st.SearchStrategy[list[str]]) -> st.SearchStrategy[list[str]]:
    return st.tuples(*options).map(lambda parts: [token for part in parts for token in part])


OWN_OPTIONS = _flags(
    _flag("--gpu-memory-gb", NUM),
    _flag("--gpu", GPUS),
    _flag("--mean-response-tokens", NUM),
    _flag("--areal-version", st.sampled_from(["2.0", "1.0", "3", "", "v2.0"])),
    _flag("--model", st.sampled_from(["num_layers=nan", "x=1", "num_layers=-1", "hf_config="])),
)
COMMAND = st.builds(
    lambda pieces: ["--", "python", D, "--config", Y, "scheduler.type=local", *pieces], PIECES
)


def _run(argv: Sequence[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(argv))
        except SystemExit as stop:  # argparse: --help, --version, a usage error
            code = stop.code
            status = code if isinstance(code, int) else (0 if code is None else 2)
    return status, err.getvalue()


def _holds(argv: Sequence[str]) -> None:
    status, err = _run(argv)
    shown = f"argv={list(argv)!r}\nstatus={status}\nstderr:\n{err}"
    assert status in (0, 2), shown
    assert "Traceback" not in err, shown
    if status == 2:
        # one message: argparse's usage error or areal-conf's `error:` and its text
        assert sum(line.lstrip().count("error:") for line in err.splitlines()) == 1, shown


BOUNDED = settings(
    derandomize=True,
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(autouse=True)
def _no_settings_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["python -m areal_conf"])


@BOUNDED
@given(
    specs=st.lists(st.one_of(SPECS, TEXT, QUOTED), max_size=3),
    flags=_flags(
        _flag("--nodes", NUM),
        _flag("--gpus-per-node", NUM),
        _flag("--order", st.one_of(TEXT, st.just("tp-cp-ep-dp-pp"))),
        _flag("--areal-version", st.sampled_from(["2.0", "9", ""])),
    ),
)
def test_explain_backend_strings(specs: list[str], flags: list[str]) -> None:
    _holds(["explain", *flags, *(["--"] if specs else []), *specs])


@BOUNDED
@given(
    overrides=st.lists(OVERRIDES, max_size=3),
    flags=_flags(
        _flag("--gpu-memory-gb", NUM),
        _flag("--gpu", GPUS),
        _flag("--model", st.sampled_from(["num_layers=nan", "x=1", "num_layers=-1"])),
    ),
)
def test_explain_a_config(overrides: list[str], flags: list[str]) -> None:
    _holds(["explain", "--config", OWN, *flags, *overrides])


@BOUNDED
@given(
    legacy=st.one_of(TEXT, QUOTED, st.sampled_from(["sglang:d4t2+fsdp:d8", "sglang:d2+d2", "8"]))
)
def test_migrate(legacy: str) -> None:
    _holds(["migrate", "--", legacy])
    _holds(["migrate", "--yaml", "--", legacy])


@settings(BOUNDED, max_examples=60)
@given(
    backend=BACKENDS,
    gpus=NUM,
    flags=_flags(
        _flag("--max-tokens-per-mb", NUM),
        _flag("--max-tp", st.one_of(NUM, st.just("none"))),
        _flag("--top", NUM),
        _flag("--tokens-per-step", NUM),
        _flag("--concurrent", NUM),
        _flag("--context-tokens", NUM),
        _flag("--gpu-memory-gb", NUM),
        _flag("--gpu", GPUS),
        _flag("--engine", st.one_of(TEXT, st.sampled_from(["actor", "rollout", "gconfig"]))),
        _flag("--model", st.sampled_from(["num_layers=4", "num_layers=nan", "num_experts=8"])),
        st.sampled_from([[], ["--fits"], ["--rank"], ["--hydra"], ["--gradient-checkpointing"]]),
        _flag("--fp8", st.one_of(TEXT, st.sampled_from(["delayed", "mxfp8"]))),
    ),
)
def test_layouts(backend: str, gpus: str, flags: list[str]) -> None:
    _holds(["layouts", backend, "--gpus", gpus, *flags])


@BOUNDED
@given(flags=OWN_OPTIONS, command=COMMAND, json=st.booleans())
def test_check(flags: list[str], command: list[str], json: bool) -> None:
    _holds(["check", *flags, *(["--json"] if json else []), *command])


@settings(BOUNDED, max_examples=8)
@given(flags=OWN_OPTIONS, command=COMMAND)
def test_run(flags: list[str], command: list[str]) -> None:
    _holds(["run", *flags, *command])  # the stand-in driver only prints what it loaded


@settings(BOUNDED, max_examples=10)
@given(
    flags=OWN_OPTIONS,
    sweep=st.lists(
        st.sampled_from(
            ["actor.backend=fsdp:d4,fsdp:d2t2", "cluster.n_nodes=1,inf", "gconfig.n_samples=-1,2"]
        ),
        max_size=2,
    ),
    command=COMMAND,
)
def test_sweep_dry_run(flags: list[str], sweep: list[str], command: list[str]) -> None:
    _holds(["sweep", "--dry-run", *flags, *command, *sweep])


@settings(BOUNDED, max_examples=15)
@given(
    top=_flag("--top", NUM),
    flags=OWN_OPTIONS,
    overrides=st.lists(OVERRIDES, max_size=2),
)
def test_suggest(top: list[str], flags: list[str], overrides: list[str]) -> None:
    _holds(["suggest", *top, *flags, "--config", Y, "scheduler.type=local", *overrides])


RUNS = ROOT / "tests" / "fixtures" / "areal_runs"
TUNED = str(RUNS / "configs" / "sc_grpo_25.yaml")


@settings(BOUNDED, max_examples=15)
@given(
    run=st.one_of(
        st.sampled_from([str(RUNS / "sc_grpo_25"), str(RUNS / "sc_empty"), str(RUNS), ""]),
        TEXT,
    ),
    top=_flag("--top", NUM),
    flags=OWN_OPTIONS,
    json=st.sampled_from([[], ["--json"]]),
    overrides=st.lists(OVERRIDES, max_size=2),
)
def test_tune(
    run: str, top: list[str], flags: list[str], json: list[str], overrides: list[str]
) -> None:
    _holds(["tune", run, *top, *flags, *json, "--config", TUNED, *overrides])


@settings(BOUNDED, max_examples=10)
@given(version=st.one_of(st.just([]), st.builds(lambda v: ["--areal-version", v], TEXT)))
def test_schema(version: list[str]) -> None:
    _holds(["schema", *version])
