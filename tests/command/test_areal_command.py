"""areal-conf in front of AReaL's own command: ``python -m areal_conf check|run|sweep``.

The commands under test are real: the AReaL command is ``python tests/standin_driver.py
--config <fixture> ...``, a stand-in driver that does what AReaL's drivers do first
(argparse ``--config``, Hydra ``initialize`` + ``compose`` of the rest) and writes what it
received to ``$STANDIN_OUT/<pid>.json``. One file per process started: a test counts the
files to know how many drivers ran, and reads them to know what each got.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import pty
import select
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _helpers import ROOT, SUBPROCESS_TIMEOUT, user_env
from hypothesis import given
from hypothesis import strategies as st

from areal_conf import AllocationError, check_command
from areal_conf.command.argv import parse_areal_command
from areal_conf.command.sweep import is_hydra_option, validated_launch

FIXTURE = "tests/fixtures/areal2/examples/math/gsm8k_grpo_megatron.yaml"
DRIVER = [sys.executable, "tests/standin_driver.py", "--config", FIXTURE]
LAYOUTS = ["megatron:d4", "megatron:d2t2", "megatron:d2p2"]


# ------------------------------------------------------------------ reading the command


@pytest.mark.parametrize(
    ("argv", "form", "driver", "config", "overrides"),
    [
        (
            "python examples/math/gsm8k_rl.py --config x.yaml scheduler.type=slurm a=1",
            "script",
            "examples/math/gsm8k_rl.py",
            "x.yaml",
            ["scheduler.type=slurm", "a=1"],
        ),
        ("python3 -u x.py a=1 --config=y.yaml", "script", "x.py", "y.yaml", ["a=1"]),
        (
            "python -m examples.math.gsm8k_rl --conf x.yaml",
            "module",
            "examples.math.gsm8k_rl",
            "x.yaml",
            [],
        ),
        (
            "uv run python x.py --config a.yaml --config b.yaml k=v",
            "script",
            "x.py",
            "b.yaml",
            ["k=v"],
        ),
        ("torchrun --nproc_per_node=1 x.py --config a.yaml", "script", "x.py", "a.yaml", []),
        ("./x.py --config a.yaml +k=v ~j", "script", "./x.py", "a.yaml", ["+k=v", "~j"]),
        (
            "areal train run --config a.yaml --driver examples.math.gsm8k_rl:main k=v",
            "areal train run",
            "examples.math.gsm8k_rl:main",
            "a.yaml",
            ["k=v"],
        ),
        (
            "/opt/venv/bin/areal train run k=v --driver=m:f --config=a.yaml j=w",
            "areal train run",
            "m:f",
            "a.yaml",
            ["k=v", "j=w"],
        ),
        (
            "python -m areal.v2.cli train run --config a.yaml --driver m:f",
            "areal train run",
            "m:f",
            "a.yaml",
            [],
        ),
    ],
)
def test_reads_the_command_as_areal_does(
    argv: str, form: str, driver: str, config: str, overrides: list[str]
) -> None:
    command = parse_areal_command(shlex.split(argv), "/srv/areal")
    assert (command.form, command.driver, command.config) == (form, driver, config)
    assert list(command.overrides) == overrides
    assert command.config_path == Path("/srv/areal", config)


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (  # the YAML without the option: it goes after --config, where it stands
            "python x.py exp.yaml a=1",
            "give the experiment YAML after --config: python x.py --config exp.yaml a=1",
        ),
        ("python x.py a=1", "add the experiment YAML, e.g. python x.py a=1 --config "),
    ],
)
def test_a_command_without_config_gets_one_that_runs(argv: str, hint: str) -> None:
    with pytest.raises(AllocationError) as info:
        parse_areal_command(shlex.split(argv), "/srv/areal")
    assert info.value.hint.startswith(hint)
    if "exp.yaml" in argv:  # the printed command parses, its YAML the config
        printed = shlex.split(info.value.hint.partition(": ")[2])
        assert parse_areal_command(printed, "/srv/areal").config == "exp.yaml"


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (
            "python3 -m areal.infra.launcher.local examples/math/gsm8k_rl.py --config x.yaml a=1",
            "check the command without the launcher: python examples/math/gsm8k_rl.py "
            "--config x.yaml a=1",
        ),
        ("python -m areal.launcher.slurm", "e.g. python examples/math/gsm8k_rl.py"),
    ],
)
def test_an_spmd_launcher_command_says_to_check_its_driver(argv: str, hint: str) -> None:
    """AReaL's SPMD launchers (areal/infra/launcher/local.py:293 reads allocation_mode,
    :410 starts the driver under torchrun; legacy in AReaL's docs/en/tutorial/
    quickstart.md) are not what areal-conf checks: it says so, at the launcher."""
    with pytest.raises(AllocationError) as info:
        parse_areal_command(shlex.split(argv), "/srv/areal")
    assert "is AReaL's SPMD launcher" in info.value.reason
    assert info.value.hint.startswith(hint), info.value.hint
    if "gsm8k_rl.py" in argv:  # the printed command parses
        printed = shlex.split(info.value.hint.partition(": ")[2])
        assert parse_areal_command(printed, "/srv/areal").driver == "examples/math/gsm8k_rl.py"


@pytest.mark.parametrize(
    ("argv", "fix"),
    [
        (
            "CUDA_VISIBLE_DEVICES=0,1 python x.py --config c.yaml",
            "CUDA_VISIBLE_DEVICES=0,1 python -m areal_conf check -- python x.py --config c.yaml",
        ),
        (
            "env A=1 B=2 uv run x.py --config c.yaml",
            "A=1 B=2 python -m areal_conf check -- uv run x.py --config c.yaml",
        ),
    ],
)
def test_a_variable_set_for_the_command_alone_is_refused(argv: str, fix: str) -> None:
    """areal-conf checks with its own environment (the local scheduler's GPUs,
    ${oc.env:...}): a variable only the command would see is moved in front of it."""
    with pytest.raises(AllocationError) as info:
        parse_areal_command(shlex.split(argv), "/srv/areal")
    assert "is set for the command alone" in info.value.reason
    assert info.value.hint.endswith(f"e.g. {fix}"), info.value.hint
    printed = shlex.split(fix)  # what follows areal-conf's -- is a command it reads
    assert parse_areal_command(printed[printed.index("--") + 1 :], "/srv/areal").driver == "x.py"


def test_a_job_keeps_every_argument_but_the_overrides() -> None:
    command = parse_areal_command(
        ["python", "-u", "x.py", "a=1", "--config", "c.yaml", "b=2"], "/srv/areal"
    )
    assert command.with_overrides(["a=3", "b=4"]) == [
        "python",
        "-u",
        "x.py",
        "--config",
        "c.yaml",
        "a=3",
        "b=4",
    ]
    areal = parse_areal_command(
        ["areal", "train", "run", "--driver", "m:f", "a=1", "--config", "c.yaml"]
    )
    assert areal.with_overrides(["a=2"]) == [
        "areal",
        "train",
        "run",
        "--driver",
        "m:f",
        "--config",
        "c.yaml",
        "a=2",
    ]


def _areal_parse(argv: list[str]) -> tuple[str, list[str]] | None:
    """AReaL's own reading (``parse_cli_args``: argparse with one required ``--config``,
    unknown arguments are the overrides); None where it exits with an error."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("--config", required=True)
    try:
        args, overrides = parser.parse_known_args(argv)
    except (argparse.ArgumentError, SystemExit):
        return None
    return args.config, overrides


_TOKENS = st.sampled_from(
    ["--config", "--conf", "--c", "--config=a.yaml", "a.yaml", "b.yaml", "k=v", "+j=1", "~x", "-x"]
)


@given(st.lists(_TOKENS, max_size=6))
def test_the_driver_arguments_are_split_as_argparse_splits_them(tokens: list[str]) -> None:
    # argparse prints its own errors on stderr before raising; keep the output clean
    with contextlib.redirect_stderr(io.StringIO()):
        expected = _areal_parse(tokens)
    try:
        command = parse_areal_command(["python", "driver.py", *tokens], "/srv/areal")
    except AllocationError:
        assert expected is None
        return
    assert expected == (command.config, list(command.overrides))


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ([], ["hydra/launcher=areal"]),
        (["hydra.sweep.dir=/s"], ["hydra/launcher=areal", "hydra.sweep.dir=/s"]),
        (
            ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
            ["hydra/launcher=areal_joblib", "hydra.launcher.launcher.n_jobs=2"],
        ),
        (
            [
                "hydra/launcher=submitit_slurm",
                "hydra.launcher.partition=gpu",
                "hydra.launcher.dry_run=true",
            ],
            [
                "hydra/launcher=areal_submitit_slurm",
                "hydra.launcher.launcher.partition=gpu",
                "hydra.launcher.dry_run=true",
            ],
        ),
        (
            ["hydra/launcher=areal_joblib", "hydra.launcher.launcher.n_jobs=2"],
            ["hydra/launcher=areal_joblib", "hydra.launcher.launcher.n_jobs=2"],
        ),
        (
            ["hydra/launcher=my_launcher", "+hydra.launcher.x=1"],
            [
                "hydra/launcher=areal",
                "hydra/launcher@hydra.launcher.launcher=my_launcher",
                "+hydra.launcher.launcher.x=1",
            ],
        ),
        (["hydra/launcher=basic"], ["hydra/launcher=areal"]),
    ],
)
def test_hydra_options_launch_through_the_validating_launcher(
    options: list[str], expected: list[str]
) -> None:
    assert all(is_hydra_option(o) for o in options)
    assert validated_launch(options) == expected


def test_check_command_returns_the_plan() -> None:
    plan = check_command([*DRIVER, "scheduler.type=local", "actor.backend=megatron:d2t2"], cwd=ROOT)
    assert str(plan.engines["actor"].allocation) == "megatron:d2t2"
    assert plan.used_gpus == 8
    with pytest.raises(AllocationError, match="the engines need 12 GPUs"):
        check_command([*DRIVER, "scheduler.type=local", "actor.backend=megatron:d8"], cwd=ROOT)


#: A key AReaL lacks, given as an override: (override, the message's first line, its
#: hint, the overrides the hint gives in its place). Hydra refuses to override a key the
#: YAML lacks (``key=value``) and adds any key given with ``+``, which AReaL's loader
#: refuses unless its config classes have it.
MISSPELT = [
    (
        "actor.bakend=megatron:d4",
        "actor.bakend: " + FIXTURE + " has no such key, so Hydra cannot override it",
        "did you mean actor.backend? e.g. actor.backend=megatron:d4",
        ["actor.backend=megatron:d4"],
    ),
    (  # AReaL has it, the YAML leaves it out: ++ adds it
        "actor.use_lora=false",
        "actor.use_lora: " + FIXTURE + " has no such key, so Hydra cannot override it",
        "AReaL's PPOActorConfig or DPOEngineConfig has it and the YAML leaves it out: add it "
        "with ++actor.use_lora=false",
        ["++actor.use_lora=false"],
    ),
    (  # the YAML lacks the key it may mean too: ++
        "actor.mb_spec.max_token_per_mb=4096",
        "actor.mb_spec.max_token_per_mb: " + FIXTURE + " has no such key",
        "did you mean actor.mb_spec.max_tokens_per_mb? e.g. actor.mb_spec.max_tokens_per_mb=4096",
        ["actor.mb_spec.max_tokens_per_mb=4096"],
    ),
    (
        "sglang.mem_fraction_statc=0.7",
        "sglang.mem_fraction_statc: " + FIXTURE + " has no such key",
        "did you mean sglang.mem_fraction_static? e.g. sglang.mem_fraction_static=0.7",
        ["sglang.mem_fraction_static=0.7"],
    ),
    (  # the key it may mean is AReaL's, which the YAML lacks too: ++
        "sglang.enable_metric=true",
        "sglang.enable_metric: " + FIXTURE + " has no such key",
        "did you mean sglang.enable_metrics? e.g. ++sglang.enable_metrics=true",
        ["++sglang.enable_metrics=true"],
    ),
    (  # the misspelt part is a section of the key
        "actor.mb_sepc.max_tokens_per_mb=4096",
        "actor.mb_sepc.max_tokens_per_mb: " + FIXTURE + " has no such key",
        "did you mean actor.mb_spec.max_tokens_per_mb? e.g. actor.mb_spec.max_tokens_per_mb=4096",
        ["actor.mb_spec.max_tokens_per_mb=4096"],
    ),
    (
        "acter.backend=megatron:d4",
        "acter.backend: " + FIXTURE + " has no such key",
        "did you mean actor.backend? e.g. actor.backend=megatron:d4",
        ["actor.backend=megatron:d4"],
    ),
    (
        "actor.optmizer.lr=1e-5",
        "actor.optmizer.lr: " + FIXTURE + " has no such key",
        "did you mean actor.optimizer.lr? e.g. actor.optimizer.lr=1e-5",
        ["actor.optimizer.lr=1e-5"],
    ),
    (  # a section AReaL has and the YAML leaves out: ++
        "actor.megatron.ddp.grad_reduce_in_fp322=true",
        "actor.megatron.ddp.grad_reduce_in_fp322: " + FIXTURE + " has no such key",
        "did you mean actor.megatron.ddp.grad_reduce_in_fp32? e.g. "
        "++actor.megatron.ddp.grad_reduce_in_fp32=true",
        ["++actor.megatron.ddp.grad_reduce_in_fp32=true"],
    ),
    (
        "actor.colour=red",
        "actor.colour: " + FIXTURE + " has no such key",
        "no such key in AReaL's PPOActorConfig or DPOEngineConfig either: remove the override",
        [],
    ),
    (  # added with +: Hydra takes it, the check refuses it and rewrites the override
        "+actor.bakend=megatron:d4",
        "actor.bakend: no such key in AReaL's PPOActorConfig or DPOEngineConfig; AReaL's "
        "loader refuses the config",
        "did you mean actor.backend? write actor.backend=megatron:d4 instead of "
        "+actor.bakend=megatron:d4",
        ["actor.backend=megatron:d4"],
    ),
    (
        "+sglang.mem_fraction_statc=0.7",
        "sglang.mem_fraction_statc: no such key in AReaL's SGLangConfig",
        "write sglang.mem_fraction_static=0.7 instead of +sglang.mem_fraction_statc=0.7",
        ["sglang.mem_fraction_static=0.7"],
    ),
    (
        "+sglang.enable_metric=true",
        "sglang.enable_metric: no such key in AReaL's SGLangConfig",
        "write ++sglang.enable_metrics=true instead of +sglang.enable_metric=true",
        ["++sglang.enable_metrics=true"],
    ),
    (
        "+cluster.n_node=1",
        "cluster.n_node: no such key in AReaL's ClusterSpecConfig",
        "write cluster.n_nodes=1 instead of +cluster.n_node=1",
        ["cluster.n_nodes=1"],
    ),
    (  # a section misspelt: the override moves under the right one
        "+actor.mb_sepc.max_tokens_per_mb=4096",
        "actor.mb_sepc: no such key",
        "did you mean actor.mb_spec? write ++actor.mb_spec.max_tokens_per_mb=4096 instead of "
        "+actor.mb_sepc.max_tokens_per_mb=4096",
        ["++actor.mb_spec.max_tokens_per_mb=4096"],
    ),
    (
        "+actor.lr=1e-5",
        "actor.lr: no such key",
        "did you mean actor.optimizer.lr? write actor.optimizer.lr=1e-5 instead of +actor.lr=1e-5",
        ["actor.optimizer.lr=1e-5"],
    ),
    ("+actor.colour=red", "actor.colour: no such key", "remove the override +actor.colour=red", []),
]


@pytest.mark.parametrize(
    ("override", "reason", "hint", "fix"), MISSPELT, ids=[row[0] for row in MISSPELT]
)
def test_a_key_areal_lacks_points_at_its_override_and_the_fix_passes(
    override: str, reason: str, hint: str, fix: list[str]
) -> None:
    argv = [*DRIVER, "scheduler.type=local", override]
    with pytest.raises(AllocationError) as info:
        check_command(argv, cwd=ROOT)
    err = info.value
    assert err.reason.startswith(reason), err.reason
    assert hint in err.hint, err.hint
    assert err.position is not None and str(err.spec)[err.position :].startswith(override)
    fixed = check_command([*DRIVER, "scheduler.type=local", *fix], cwd=ROOT)
    assert fixed.used_gpus == 8


# ------------------------------------------------------------------ running it


def cli(
    *argv: str, out: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m areal_conf *argv`` in the checkout, the stand-in writing into ``out``."""
    return subprocess.run(
        [sys.executable, "-m", "areal_conf", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=user_env(STANDIN_OUT=str(out), **(env or {})),
        timeout=SUBPROCESS_TIMEOUT,
    )


def started(out: Path) -> list[dict[str, Any]]:
    """What each stand-in driver that started received, in the order they started."""
    found = [json.loads(p.read_text()) for p in out.glob("*.json")] if out.exists() else []
    return sorted(found, key=lambda r: r["started"])


@pytest.mark.e2e
def test_a_value_that_does_not_resolve_here_warns_check_and_stops_run(tmp_path: Path) -> None:
    """AReaL's loader resolves every value where the command runs (areal-conf reads only
    its keys): ``check`` warns of an unset ``${oc.env:X}``, ``run`` refuses to start it."""
    unset = "experiment_name=${oc.env:AREAL_CONF_TEST_UNSET_VARIABLE}"
    assert "AREAL_CONF_TEST_UNSET_VARIABLE" not in os.environ
    checked = cli("check", *DRIVER, "scheduler.type=local", unset, out=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert (
        "warning: experiment_name: Environment variable 'AREAL_CONF_TEST_UNSET_VARIABLE' not "
        "found: AReaL's loader resolves every value and stops at this one on this machine"
    ) in checked.stdout
    ran = cli("run", *DRIVER, "scheduler.type=local", unset, out=tmp_path)
    assert ran.returncode == 2 and "nothing was started" in ran.stderr
    assert started(tmp_path) == []
    env = {"AREAL_CONF_TEST_UNSET_VARIABLE": "x"}
    checked = cli("check", *DRIVER, "scheduler.type=local", unset, out=tmp_path, env=env)
    assert checked.returncode == 0 and "warning: experiment_name" not in checked.stdout


@pytest.mark.e2e
def test_check_prints_the_plan_and_starts_nothing(tmp_path: Path) -> None:
    out = cli("check", *DRIVER, "scheduler.type=local", out=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "actor    megatron:d4" in out.stdout
    assert "GPU     0 1 2 3 4 5 6 7" in out.stdout
    assert started(tmp_path) == []


@pytest.mark.e2e
@pytest.mark.parametrize("verb", ["check", "run"])
@pytest.mark.parametrize(
    ("argv", "first_line"),
    [
        (
            [sys.executable, "tests/standin_driver.py", "scheduler.type=local"],
            "error: this AReaL command has no --config: AReaL's loader requires one",
        ),
        (
            [sys.executable, "tests/standin_driver.py", "--config", "missing.yaml"],
            "error: --config missing.yaml: no such file",
        ),
        (
            [
                sys.executable,
                "tests/standin_driver.py",
                "--config",
                "tests/fixtures/commands/examples/math/broken.yaml",
            ],
            "error: cannot read tests/fixtures/commands/examples/math/broken.yaml (line 6, column 1): the YAML does not parse: found unexpected end of stream (while scanning a quoted scalar at line 3, column 12)",
        ),
        (
            [*DRIVER, "actor.backend=megatron:(attn:d4|ffn:d2)"],
            "error: Hydra cannot parse the override 'actor.backend=megatron:(attn:d4|ffn:d2)': ",
        ),
        (
            [*DRIVER, "actor.backend=fsdp:d4,fsdp:d2"],
            "error: 'actor.backend=fsdp:d4,fsdp:d2' gives several values: that is a sweep",
        ),
        (
            [sys.executable, "-c", "pass"],
            "error: cannot find the AReaL driver in this command",
        ),
        (
            [*DRIVER, "scheduler.type=local", "actor.backend=megatron:d8"],
            "error: cluster.n_gpus_per_node: the engines need 12 GPUs (actor 8 + rollout 4)",
        ),
    ],
    ids=["no-config", "missing-file", "bad-yaml", "bad-override", "sweep", "no-driver", "invalid"],
)
def test_a_command_that_cannot_be_read_or_fails_is_one_message_and_starts_nothing(
    verb: str, argv: list[str], first_line: str, tmp_path: Path
) -> None:
    out = cli(verb, *argv, out=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(first_line), out.stderr
    assert "Traceback" not in out.stderr
    assert "hint: " in out.stderr
    assert started(tmp_path) == []


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("env", "status"),
    [({}, 0), ({"STANDIN_EXIT": "1"}, 1), ({"STANDIN_EXIT": "3"}, 3), ({"STANDIN_KILL": "9"}, 137)],
    ids=["0", "1", "3", "killed"],
)
def test_run_passes_the_exit_status_through(
    env: dict[str, str], status: int, tmp_path: Path
) -> None:
    out = cli("run", *DRIVER, "scheduler.type=local", out=tmp_path, env=env)
    assert out.returncode == status, out.stderr
    (received,) = started(tmp_path)
    # the command ran unchanged: its arguments, its working directory
    assert received["argv"] == [*DRIVER[1:], "scheduler.type=local"]
    assert received["cwd"] == str(ROOT)
    assert received["values"]["scheduler.type"] == "local"


@pytest.mark.e2e
def test_run_keeps_its_own_options_out_of_the_command(tmp_path: Path) -> None:
    too_small = cli(
        "run", "--gpu-memory-gb", "30", "--", *DRIVER, "scheduler.type=local", out=tmp_path
    )
    assert too_small.returncode == 2
    assert "does not fit" in too_small.stderr or "fit" in too_small.stderr, too_small.stderr
    assert started(tmp_path) == []
    ok = cli(
        "run",
        "--gpu-memory-gb",
        "141",
        "--areal-version",
        "2.0",
        "--",
        *DRIVER,
        "scheduler.type=local",
        out=tmp_path,
        env={"STANDIN_MARKER": "env-kept"},
    )
    assert ok.returncode == 0, ok.stderr
    assert "a GPU has 141 GB" in ok.stdout
    (received,) = started(tmp_path)
    assert received["argv"] == [*DRIVER[1:], "scheduler.type=local"]
    assert received["marker"] == "env-kept"  # the same environment


def _start_waiting(tmp_path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "areal_conf", "run", *DRIVER, "scheduler.type=local"],
        cwd=ROOT,
        env=user_env(STANDIN_OUT=str(tmp_path), STANDIN_WAIT="60"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_ready(tmp_path, proc)
    return proc


def _wait_ready(tmp_path: Path, proc: subprocess.Popen[Any] | None = None) -> None:
    end = time.monotonic() + SUBPROCESS_TIMEOUT
    while not list(tmp_path.glob("*.ready")):
        assert proc is None or proc.poll() is None, "areal-conf run ended early"
        assert time.monotonic() < end, "the driver never became ready"
        time.sleep(0.05)


def _signals_seen(tmp_path: Path) -> list[str]:
    (path,) = tmp_path.glob("*.signals")
    names: list[str] = json.loads(path.read_text())
    return names


@pytest.mark.e2e
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_run_forwards_signals_to_the_driver(
    sig: signal.Signals, status: int, tmp_path: Path
) -> None:
    proc = _start_waiting(tmp_path)
    proc.send_signal(sig)  # to areal-conf's process alone, as kill or a scheduler does
    assert proc.wait(timeout=SUBPROCESS_TIMEOUT) == status
    assert _signals_seen(tmp_path) == [sig.name]  # forwarded, once


def _ctrl_c_at_a_terminal(argv: list[str], env: dict[str, str], ready: Path) -> tuple[int, str]:
    """Run ``argv`` on a terminal of its own (a pty), type Ctrl-C there once the driver
    is ready, and return its exit status and what it printed."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a new session whose terminal is the pty
        os.chdir(ROOT)
        os.execvpe(argv[0], argv, env)
    shown = b""
    try:
        end = time.monotonic() + SUBPROCESS_TIMEOUT
        while not list(ready.glob("*.ready")) and time.monotonic() < end:
            if select.select([fd], [], [], 0.05)[0]:
                shown += os.read(fd, 65536)
        os.write(fd, b"\x03")  # the terminal's interrupt character
        while True:  # drain the terminal until the process ends
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if select.select([fd], [], [], 0.05)[0]:
                with contextlib.suppress(OSError):  # the terminal closed as it ended
                    shown += os.read(fd, 65536)
    finally:
        os.close(fd)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


@pytest.mark.e2e
@pytest.mark.parametrize("verb", ["run", "sweep"])
def test_ctrl_c_at_a_terminal_reaches_the_driver_once(verb: str, tmp_path: Path) -> None:
    """Ctrl-C reaches the terminal's foreground group, areal-conf's; the driver, in a
    group of its own, gets it once, from areal-conf. In a sweep it also stops the
    sweep: the jobs after the running one never start."""
    env = user_env(STANDIN_OUT=str(tmp_path), STANDIN_WAIT="60")
    argv = [sys.executable, "-m", "areal_conf", verb, *DRIVER, "scheduler.type=local"]
    if verb == "sweep":
        argv += [f"actor.backend={','.join(LAYOUTS)}", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    status, shown = _ctrl_c_at_a_terminal(argv, env, tmp_path)
    assert status == 130, shown
    assert _signals_seen(tmp_path) == ["SIGINT"]
    assert len(started(tmp_path)) == 1
    if verb == "sweep":
        line = (
            "interrupted by SIGINT: the running job was stopped; the jobs after it were not started"
        )
        assert line in shown
        assert "Traceback" not in shown


# ------------------------------------------------------------------ sweeping it


def job_record(sweep_dir: Path, num: int) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((sweep_dir / str(num) / "areal_job.json").read_text())
    return record


@pytest.mark.e2e
@pytest.mark.parametrize(
    "launcher", [[], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]], ids=["basic", "joblib"]
)
def test_sweep_runs_the_driver_once_per_job_with_its_overrides(
    launcher: list[str], tmp_path: Path
) -> None:
    runs, sweep_dir = tmp_path / "runs", tmp_path / "sweep"
    out = cli(
        "sweep",
        *DRIVER,
        "scheduler.type=local",
        f"actor.backend={','.join(LAYOUTS)}",
        f"hydra.sweep.dir={sweep_dir}",
        *launcher,
        out=runs,
    )
    assert out.returncode == 0, out.stderr
    assert "areal launcher: 3 jobs valid" in out.stdout + out.stderr
    received = started(runs)
    assert sorted(r["overrides"][-1] for r in received) == sorted(
        f"actor.backend={b}" for b in LAYOUTS
    )
    for r in received:  # exactly its overrides, and no Hydra option
        assert r["argv"][:3] == DRIVER[1:]
        assert r["overrides"] == ["scheduler.type=local", r["overrides"][-1]]
        assert r["values"]["actor.backend"] == r["overrides"][-1].split("=", 1)[1]
    assert (sweep_dir / "multirun.yaml").is_file()
    for num, backend in enumerate(LAYOUTS):
        job = sweep_dir / str(num)
        record = job_record(sweep_dir, num)
        argv = [*DRIVER, "scheduler.type=local", f"actor.backend={backend}"]
        assert record["command"] == argv
        assert record["overrides"] == ["scheduler.type=local", f"actor.backend={backend}"]
        assert record["exit_status"] == 0
        assert record["cwd"] == str(ROOT)
        assert shlex.join(argv) in (job / "command.sh").read_text()
        plan = json.loads((job / "allocation_plan.json").read_text())
        assert plan["engines"]["actor"]["spec"] == backend
        assert f"#{num} exit 0: scheduler.type=local actor.backend={backend}" in out.stdout
    assert out.stdout.rstrip().endswith("sweep: all 3 jobs exited 0")


@pytest.mark.e2e
def test_sweep_with_an_invalid_value_starts_nothing(tmp_path: Path) -> None:
    runs, sweep_dir = tmp_path / "runs", tmp_path / "sweep"
    out = cli(
        "sweep",
        *DRIVER,
        "scheduler.type=local",
        f"actor.backend={','.join(LAYOUTS)},megatron:d8",
        f"hydra.sweep.dir={sweep_dir}",
        out=runs,
    )
    assert out.returncode == 2
    assert "areal launcher: 1 of 4 jobs failed validation; no job was launched." in out.stderr
    assert "#3 scheduler.type=local actor.backend=megatron:d8" in out.stderr
    assert "Traceback" not in out.stderr
    assert started(runs) == []
    assert sorted(p.name for p in sweep_dir.iterdir()) == ["multirun.yaml"]


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("override", "hint"),
    [
        ("actor.bakend", "did you mean actor.backend? e.g. actor.backend={}"),
        (
            "+actor.bakend",
            "did you mean actor.backend? write actor.backend={} instead of +actor.bakend={}",
        ),
    ],
)
def test_sweep_of_a_key_areal_lacks_names_the_key_in_each_job(
    override: str, hint: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    out = cli(
        "sweep",
        "--dry-run",
        *DRIVER,
        "scheduler.type=local",
        f"{override}={','.join(LAYOUTS[:2])}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        out=runs,
    )
    assert out.returncode == 2, out.stderr
    assert "areal launcher: 2 of 2 jobs failed validation; no job was launched." in out.stderr
    for backend in LAYOUTS[:2]:
        assert f"hint: {hint.format(backend, backend)}\n" in out.stderr, out.stderr
    assert started(runs) == []


@pytest.mark.e2e
@pytest.mark.parametrize(
    "extra",
    [
        (),
        # a key the YAML leaves out resolves to AReaL's default (1), as AReaL's loader
        # resolves it (it merges the YAML onto its dataclasses first)
        ("++actor.ppo_n_minibatches=${train_dataset.num_dataset_workers}",),
    ],
)
def test_sweep_dry_run_prints_each_command_and_plan(extra: tuple[str, ...], tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    out = cli(
        "sweep",
        "--dry-run",
        *DRIVER,
        "scheduler.type=local",
        *extra,
        "actor.backend=megatron:d4,megatron:d2t2",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        out=runs,
    )
    assert out.returncode == 0, out.stderr
    for backend in ("megatron:d4", "megatron:d2t2"):
        job = [*DRIVER, "scheduler.type=local", *extra, f"actor.backend={backend}"]
        assert f"    $ {shlex.join(job)}" in out.stdout
        assert f"    actor    {backend}" in out.stdout
    assert started(runs) == []


@pytest.mark.e2e
def test_sweep_reports_each_jobs_exit_status(tmp_path: Path) -> None:
    runs, sweep_dir = tmp_path / "runs", tmp_path / "sweep"
    out = cli(
        "sweep",
        *DRIVER,
        "scheduler.type=local",
        f"actor.backend={','.join(LAYOUTS)}",
        f"hydra.sweep.dir={sweep_dir}",
        out=runs,
        env={"STANDIN_EXIT": "3", "STANDIN_EXIT_IF": "actor.backend=megatron:d2t2"},
    )
    assert out.returncode == 1
    assert len(started(runs)) == 3  # a failed run does not stop the others
    assert [job_record(sweep_dir, n)["exit_status"] for n in range(3)] == [0, 3, 0]
    assert "#1 exit 3: scheduler.type=local actor.backend=megatron:d2t2" in out.stdout
    assert out.stdout.rstrip().endswith("sweep: 1 of 3 jobs did not exit 0")


@pytest.mark.e2e
def test_sweep_options_reach_the_check_and_not_the_command(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    small = cli(
        "sweep",
        "--gpu-memory-gb",
        "30",
        "--",
        *DRIVER,
        "scheduler.type=local",
        "actor.backend=megatron:d4,megatron:p4",
        f"hydra.sweep.dir={tmp_path / 'small'}",
        out=runs,
    )
    assert small.returncode == 2
    assert "#0 scheduler.type=local actor.backend=megatron:d4" in small.stderr  # 38 GB > 30
    assert started(runs) == []
    big = cli(
        "sweep",
        "--gpu-memory-gb",
        "141",
        "--",
        *DRIVER,
        "scheduler.type=local",
        "actor.backend=megatron:d4",
        f"hydra.sweep.dir={tmp_path / 'big'}",
        out=runs,
    )
    assert big.returncode == 0, big.stderr
    (received,) = started(runs)
    assert received["argv"] == [*DRIVER[1:], "scheduler.type=local", "actor.backend=megatron:d4"]


@pytest.mark.e2e
def test_sweep_of_every_layout_with_the_layouts_sweeper(tmp_path: Path) -> None:
    out = cli(
        "sweep",
        "--dry-run",
        *DRIVER,
        "scheduler.type=local",
        "hydra/sweeper=areal_layouts",
        "hydra.sweeper.engine=actor",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        out=tmp_path / "runs",
    )
    assert out.returncode == 0, out.stderr
    commands = [line.strip() for line in out.stdout.splitlines() if line.startswith("    $ ")]
    from areal_conf import layouts
    from areal_conf.model.shape import merge_model

    shape = merge_model(None, "Qwen/Qwen2.5-1.5B-Instruct")  # actor.path, as the sweep reads it
    expected = layouts("megatron", 4, model=shape, max_tp=8)
    assert "megatron:t4" not in expected  # 2 key-value heads: whole ones per tp rank
    assert [c.rsplit("actor.backend=", 1)[1].strip("'\"") for c in commands] == expected


@pytest.mark.e2e
def test_sigterm_to_a_sweep_stops_the_running_job_and_the_sweep(tmp_path: Path) -> None:
    runs, sweep_dir = tmp_path / "runs", tmp_path / "sweep"
    argv = [sys.executable, "-m", "areal_conf", "sweep", *DRIVER, "scheduler.type=local"]
    argv += [f"actor.backend={','.join(LAYOUTS)}", f"hydra.sweep.dir={sweep_dir}"]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=user_env(STANDIN_OUT=str(runs), STANDIN_WAIT="60"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    runs.mkdir()
    _wait_ready(runs, proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=SUBPROCESS_TIMEOUT) == 143
    assert len(started(runs)) == 1  # the jobs after it never started
    assert _signals_seen(runs) == ["SIGTERM"]
    record = job_record(sweep_dir, 0)
    assert (record["exit_status"], record["signals"]) == (143, ["SIGTERM"])
    assert not (sweep_dir / "1").exists()
