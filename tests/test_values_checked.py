"""Every value areal-conf reads is checked: from a flag, the environment, an override or
a YAML key, a bad value is one message (exit 2) naming where it came from, with a fix.

One table, one row per bad value; a row's fix, when it is an override, is applied in
place of the bad value and must pass the same command. The AReaL config is
``tests/fixtures/areal/gsm8k_grpo.yaml`` (AReaL's ``examples/math/gsm8k_grpo.yaml``),
checked through ``tests/standin_driver.py``; areal-conf's own is ``conf/config.yaml``.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from _helpers import CONF, ROOT, run_train
from _hint_text import OVERRIDE, split_hint

from areal_conf.cli import main

Y = ROOT / "tests" / "fixtures" / "areal" / "gsm8k_grpo.yaml"
D = ROOT / "tests" / "standin_driver.py"


@dataclass(frozen=True)
class Bad:
    """``argv`` of ``python -m areal_conf`` (``train``: of train.py) with the bad value
    ``given`` (the arguments a fix replaces); ``says``: what the message must contain
    (the flag, variable, override or key the value came from). ``yaml``: keys to change
    in a copy of Y (dotted key: value), for a value written in the file; ``env``: the
    environment; ``fix``: whether the fix is an override to try."""

    argv: tuple[str, ...]
    says: tuple[str, ...]
    given: tuple[str, ...] = ()
    yaml: dict[str, Any] = field(default_factory=dict)
    schema: dict[str, Any] = field(default_factory=dict)  # the same, in a copy of conf/
    env: dict[str, str] = field(default_factory=dict)
    train: bool = False
    fix: bool = True


def _check(*extra: str) -> tuple[str, ...]:
    return ("check", "--", "python", str(D), "--config", "{yaml}", "scheduler.type=local", *extra)


def _explain(*extra: str) -> tuple[str, ...]:
    return ("explain", "--config", str(CONF / "config.yaml"), *extra)


ROWS = {
    # numeric flags of the verbs (argparse's usage error names the flag)
    "layouts --max-tokens-per-mb -1": Bad(
        ("layouts", "fsdp", "--gpus", "8", "--max-tokens-per-mb", "-1"),
        ("argument --max-tokens-per-mb", "got '-1'", "e.g. --max-tokens-per-mb"),
        fix=False,
    ),
    "layouts --gpus nan": Bad(
        ("layouts", "fsdp", "--gpus", "nan"), ("argument --gpus", "'nan'"), fix=False
    ),
    "layouts --gpus 2**64": Bad(
        ("layouts", "fsdp", "--gpus", str(2**64)),
        ("gpus must be at most 1,048,576", "18446744073709551616"),
        fix=False,
    ),
    "layouts --concurrent inf": Bad(
        ("layouts", "sglang", "--gpus", "8", "--rank", "--concurrent", "inf"),
        ("argument --concurrent", "'inf'"),  # argparse's int
        fix=False,
    ),
    "layouts --concurrent 0": Bad(  # not read as "no layout keeps a sequence"
        ("layouts", "sglang", "--gpus", "8", "--rank", "--concurrent", "0"),
        ("argument --concurrent", "from 1", "'0'"),
        fix=False,
    ),
    "layouts --context-tokens 0": Bad(  # not read as "the default"
        ("layouts", "sglang", "--gpus", "8", "--rank", "--context-tokens", "0"),
        ("argument --context-tokens", "from 1", "'0'"),
        fix=False,
    ),
    "layouts --max-tp 0": Bad(
        ("layouts", "fsdp", "--gpus", "8", "--max-tp", "0"), ("argument --max-tp",), fix=False
    ),
    "layouts --engine gconfig": Bad(
        ("layouts", "fsdp", "--gpus", "8", "--hydra", "--engine", "gconfig"),
        ("--engine: 'gconfig'", "holds no engine"),
        fix=False,
    ),
    "layouts --engine nope": Bad(  # a name only a config could define: sweep from it
        ("layouts", "fsdp", "--gpus", "8", "--hydra", "--engine", "nope"),
        ("--engine: 'nope' is no engine section", "hydra.sweeper.engine=nope"),
        fix=False,
    ),
    "layouts --engine teacher.rollout with fsdp": Bad(
        ("layouts", "fsdp", "--gpus", "8", "--hydra", "--engine", "teacher.rollout"),
        ("teacher.rollout needs an inference backend", "use sglang or vllm"),
        fix=False,
    ),
    "layouts --engine 'a b'": Bad(
        ("layouts", "fsdp", "--gpus", "8", "--hydra", "--engine", "a b"),
        ("--engine: 'a b' is no config key",),
        fix=False,
    ),
    "explain --nodes -1": Bad(
        ("explain", "fsdp:d8", "--nodes", "-1"), ("--nodes must be",), fix=False
    ),
    "explain --nodes 2**40": Bad(
        ("explain", "fsdp:d8", "--nodes", str(2**40), "--gpus-per-node", "8"),
        ("--nodes must be", "at most 1,048,576 GPUs"),
        fix=False,
    ),
    "suggest --top 0": Bad(
        ("suggest", "--top", "0", "--config", str(Y)), ("--top must be",), fix=False
    ),
    "check --mean-response-tokens -1": Bad(
        ("check", "--mean-response-tokens", "-1", *_check()[1:]),
        ("argument --mean-response-tokens",),
        fix=False,
    ),
    "check --gpu-memory-gb nan": Bad(
        ("check", "--gpu-memory-gb", "nan", *_check()[1:]), ("--gpu-memory-gb",), fix=False
    ),
    # the environment
    "AREAL_CONF_GPU_MEMORY_GB=inf": Bad(
        _check(), ("AREAL_CONF_GPU_MEMORY_GB",), env={"AREAL_CONF_GPU_MEMORY_GB": "inf"}, fix=False
    ),
    "AREAL_CONF_MEAN_RESPONSE_TOKENS=-1": Bad(
        _check(),
        ("AREAL_CONF_MEAN_RESPONSE_TOKENS",),
        env={"AREAL_CONF_MEAN_RESPONSE_TOKENS": "-1"},
        fix=False,
    ),
    "AREAL_CONF_GPU=nope": Bad(
        _check(), ("AREAL_CONF_GPU",), env={"AREAL_CONF_GPU": "nope"}, fix=False
    ),
    "AREAL_CONF_AREAL_VERSION=9": Bad(
        _check(), ("AREAL_CONF_AREAL_VERSION",), env={"AREAL_CONF_AREAL_VERSION": "9"}, fix=False
    ),
    # keys of an AReaL YAML, written in the file or given as overrides
    "yaml mb_spec.max_tokens_per_mb: -5": Bad(
        _check(),
        ("actor.mb_spec.max_tokens_per_mb", "-5"),
        yaml={"actor.mb_spec.max_tokens_per_mb": -5},
    ),
    "yaml gconfig.n_samples: -1": Bad(
        _check(), ("gconfig.n_samples", "-1"), yaml={"gconfig.n_samples": -1}
    ),
    "train_dataset.batch_size=0": Bad(
        _check("train_dataset.batch_size=0"),
        ("train_dataset.batch_size", "got 0"),
        given=("train_dataset.batch_size=0",),
    ),
    "rollout.max_head_offpolicyness=-1": Bad(
        _check("rollout.max_head_offpolicyness=-1"),
        ("rollout.max_head_offpolicyness",),
        given=("rollout.max_head_offpolicyness=-1",),
    ),
    "sglang.mem_fraction_static=1.5": Bad(
        _check("sglang.mem_fraction_static=1.5"),
        ("sglang.mem_fraction_static", "from 0 to 1"),
        given=("sglang.mem_fraction_static=1.5",),
    ),
    "gconfig.max_new_tokens=-3": Bad(
        _check("gconfig.max_new_tokens=-3"),
        ("gconfig.max_new_tokens",),
        given=("gconfig.max_new_tokens=-3",),
    ),
    "cluster.n_nodes=inf (check)": Bad(
        _check("cluster.n_nodes=inf"), ("cluster.n_nodes", "inf"), given=("cluster.n_nodes=inf",)
    ),
    "yaml scheduler: [local]": Bad(
        _check(),
        ("scheduler.type=local", "scheduler is ['local']"),
        given=("scheduler.type=local",),
        yaml={"scheduler": ["local"]},
    ),
    # a value AReaL's merge converts, of a key areal-conf does not read otherwise
    "actor.optimizer.lr=abc": Bad(
        _check("actor.optimizer.lr=abc"),
        ("actor.optimizer.lr", "takes a number, not 'abc'", "AReaL's loader refuses"),
        given=("actor.optimizer.lr=abc",),
    ),
    "yaml actor.optimizer.lr: null": Bad(
        _check(), ("actor.optimizer.lr", "not null"), yaml={"actor.optimizer.lr": None}
    ),
    "yaml total_train_epochs: 1.5": Bad(
        _check(),
        ("total_train_epochs", "takes an integer, not 1.5"),
        yaml={"total_train_epochs": 1.5},
    ),
    "++actor.disable_dropout=maybe": Bad(
        _check("++actor.disable_dropout=maybe"),
        ("actor.disable_dropout", "true or false, not 'maybe'"),
        given=("++actor.disable_dropout=maybe",),
    ),
    # a backend that is not a string
    "yaml actor.backend: 8.5": Bad(
        _check(), ("actor.backend", "got a number"), yaml={"actor.backend": 8.5}
    ),
    "actor.backend=[a,b] (check)": Bad(
        _check("actor.backend=[a,b]"),
        ("actor.backend", "got a list"),
        given=("actor.backend=[a,b]",),
    ),
    "yaml actor.backend: null": Bad(
        _check(), ("actor.backend", "none is set"), yaml={"actor.backend": None}
    ),
    # typed keys of areal-conf's schema, through the CLI
    "explain cluster.n_nodes=inf": Bad(
        _explain("cluster.n_nodes=inf"), ("cluster.n_nodes", "inf"), given=("cluster.n_nodes=inf",)
    ),
    "explain ++actor=5": Bad(
        _explain("++actor=5"), ("actor: the actor engine must be a section",), given=("++actor=5",)
    ),
    "explain model.num_layers=1.5": Bad(
        _explain("model.num_layers=1.5"),
        ("model.num_layers", "1.5"),
        given=("model.num_layers=1.5",),
    ),
    "explain actor.backend=8.5": Bad(
        _explain("actor.backend=8.5"),
        ("actor.backend", "got a number"),
        given=("actor.backend=8.5",),
    ),
    # typed keys through train.py
    "train.py cluster.n_nodes=inf": Bad(
        ("cluster.n_nodes=inf",),
        ("cluster.n_nodes", "inf"),
        given=("cluster.n_nodes=inf",),
        train=True,
    ),
    "train.py actor.backend=[fsdp:d4]": Bad(
        ("actor.backend=[fsdp:d4]",),
        ("actor.backend", "got a list"),
        given=("actor.backend=[fsdp:d4]",),
        train=True,
    ),
    "train.py ++actor=5": Bad(
        ("++actor=5",), ("actor: the actor engine",), given=("++actor=5",), train=True
    ),
    "train.py model.num_layers=1.5": Bad(
        ("model.num_layers=1.5",),
        ("model.num_layers",),
        given=("model.num_layers=1.5",),
        train=True,
    ),
    "train.py cluster.gpu_memory_gb=nan": Bad(
        ("cluster.gpu_memory_gb=nan",),
        ("cluster.gpu_memory_gb", "nan"),
        given=("cluster.gpu_memory_gb=nan",),
        train=True,
    ),
    "schema YAML actor: 5 (train.py)": Bad(  # refused as the file is merged onto the schema
        ("--config-dir", "{conf}", "--config-name", "config"),
        ("actor: the actor engine must be a section, got 5",),
        schema={"actor": 5},
        train=True,
        fix=False,
    ),
    "schema YAML actor: 5 (explain)": Bad(
        ("explain", "--config", "{conf}/config.yaml"),
        ("actor: the actor engine must be a section, got 5",),
        schema={"actor": 5},
        fix=False,
    ),
    "schema YAML actor.scheduling_strategy: 5": Bad(
        ("explain", "--config", "{conf}/config.yaml"),
        ("actor.scheduling_strategy: must be a section", "got 5"),
        schema={"actor.scheduling_strategy": 5},
        fix=False,
    ),
    "train.py hydra.sweeper.engine=nope": Bad(
        ("-m", "hydra/sweeper=areal_layouts", "hydra.sweeper.engine=nope"),
        ("hydra.sweeper.engine", "nope"),
        train=True,
        fix=False,
    ),
    "train.py hydra.sweeper.top_k=-1": Bad(
        ("-m", "hydra/sweeper=areal_layouts", "hydra.sweeper.top_k=-1"),
        ("hydra.sweeper.top_k", "-1"),
        train=True,
        fix=False,
    ),
    "train.py hydra.sweeper.fits=maybe": Bad(
        ("-m", "hydra/sweeper=areal_layouts", "hydra.sweeper.fits=maybe"),
        ("hydra.sweeper.fits", "maybe", "hydra.sweeper.fits=false"),
        train=True,
        fix=False,
    ),
    "train.py hydra.sweeper.max_jobs=-1": Bad(
        ("-m", "hydra/sweeper=areal_layouts", "hydra.sweeper.max_jobs=-1"),
        ("hydra.sweeper.max_jobs", "-1", "hydra.sweeper.max_jobs=null"),
        train=True,
        fix=False,
    ),
    "train.py hydra.sweeper.max_batch_size=-1 (layouts sweeper)": Bad(
        ("-m", "hydra/sweeper=areal_layouts", "hydra.sweeper.max_batch_size=-1"),
        ("hydra.sweeper.max_batch_size", "-1", "hydra.sweeper.max_batch_size=null"),
        train=True,
        fix=False,
    ),
    "train.py hydra.sweeper.max_batch_size=0 (basic sweeper: Hydra asserts)": Bad(
        ("-m", "cluster.n_nodes=2,3", "hydra.sweeper.max_batch_size=0"),
        ("hydra.sweeper.max_batch_size", "got 0"),
        train=True,
        fix=False,
    ),
    "train.py hydra.launcher.on_invalid=skip": Bad(
        ("-m", "hydra.launcher.on_invalid=skip"),
        ("hydra.launcher.on_invalid='skip'", "hydra.launcher.on_invalid=stop"),
        train=True,
        fix=False,
    ),
}

#: A bad value of each of areal-conf's environment variables, under train.py: headed as a
#: setting, not as the allocation.
BAD_VARIABLES = {
    "AREAL_CONF_GPU_MEMORY_GB": "-1",
    "AREAL_CONF_GPU": "nope",
    "AREAL_CONF_AREAL_VERSION": "9",
    "AREAL_CONF_MEAN_RESPONSE_TOKENS": "0",
    "AREAL_CONF_YAML_MAX_BYTES": "abc",
}
ROWS |= {
    f"train.py {name}={value}": Bad(
        (), (f"error: invalid setting\n{name}",), env={name: value}, train=True, fix=False
    )
    for name, value in BAD_VARIABLES.items()
}


def _yaml_with(path: Path, changes: dict[str, Any], source: Path = Y) -> Path:
    data = yaml.safe_load(source.read_text())
    for key, value in changes.items():
        *parents, last = key.split(".")
        node = data
        for part in parents:
            node = node[part]
        node[last] = value
    path.write_text(yaml.safe_dump(data))
    return path


def _run(
    bad: Bad, argv: tuple[str, ...], tmp: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    if bad.train:
        places = (f"hydra.run.dir={tmp / 'run'}", f"hydra.sweep.dir={tmp / 'multi'}")
        done: subprocess.CompletedProcess[str] = run_train(*argv, *places, cwd=tmp)
        return done.returncode, done.stderr
    try:
        status = main(list(argv))
    except SystemExit as stop:  # argparse's usage error
        status = int(stop.code or 0)
    return status, capsys.readouterr().err


@pytest.mark.parametrize("bad", ROWS.values(), ids=ROWS.keys())
def test_a_bad_value_is_one_message_naming_its_source_with_a_fix_that_passes(
    bad: Bad, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in bad.env.items():
        monkeypatch.setenv(name, value)
    config = _yaml_with(tmp_path / "cfg.yaml", bad.yaml) if bad.yaml else Y
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    _yaml_with(conf / "config.yaml", bad.schema, CONF / "config.yaml")
    argv = tuple(a.replace("{yaml}", str(config)).replace("{conf}", str(conf)) for a in bad.argv)
    status, err = _run(bad, argv, tmp_path, capsys)
    assert status == 2, err
    assert "Traceback" not in err
    assert err.count("error:") == 1, err
    for text in bad.says:
        assert text in err, err
    if not bad.fix:
        return
    hint = next(line for line in err.splitlines() if line.startswith("hint: "))[6:]
    # the first alternative's overrides, as a sentence quotes them ("e.g. k=v, or ...")
    fix = tuple(m.group().rstrip(".,;") for m in OVERRIDE.finditer(split_hint(hint)[0][0]))
    assert fix, f"no override in the fix: {hint}"
    fixed = tuple(a for a in argv if a not in bad.given) + fix
    status, err = _run(bad, fixed, tmp_path, capsys)
    assert status == 0, f"the fix {fix} does not pass:\n{err}"
