"""Every verb reads areal-conf's settings from one place: each ``AREAL_CONF_*`` variable
that applies to a verb is read by it, and a bad value is one message naming the
variable, exit 2 (the variable was not silently ignored)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _helpers import ROOT

from areal_conf.cli import main

Y = "tests/fixtures/areal2/examples/math/gsm8k_grpo_megatron.yaml"
COMMAND = ("python", "tests/standin_driver.py", "--config", Y, "scheduler.type=local")

#: Each verb, as a user runs it on an AReaL config.
CONFIG_VERBS = {
    "check": ("check", *COMMAND),
    "run": ("run", *COMMAND),
    "sweep": ("sweep", "--dry-run", *COMMAND),
    "explain": ("explain", "--config", Y, "scheduler.type=local"),
    "suggest": ("suggest", "--config", Y, "scheduler.type=local"),
    "tune": (
        "tune",
        "tests/fixtures/areal_runs/sc_grpo_25",
        "--config",
        "tests/fixtures/areal_runs/configs/sc_grpo_25.yaml",
    ),
}
MODEL = ("--model", "num_layers=4", "hidden_size=256", "num_attention_heads=4")
MODEL += ("ffn_hidden_size=512", "vocab_size=1000", "max_seq_len=1024")
#: ``layouts`` reads the GPU and its memory when it ranks or fits layouts.
LAYOUTS_VERBS = {
    "layouts --rank": ("layouts", "fsdp", "--gpus", "8", "--rank", *MODEL),
    "layouts --fits": ("layouts", "fsdp", "--gpus", "8", "--fits", *MODEL),
}
#: A value of each variable that no verb may take.
BAD = {
    "AREAL_CONF_GPU": "zz",
    "AREAL_CONF_GPU_MEMORY_GB": "-1",
    "AREAL_CONF_MODEL": "/no/such/model",
    "AREAL_CONF_MEAN_RESPONSE_TOKENS": "0",
    "AREAL_CONF_AREAL_VERSION": "9",
    "AREAL_CONF_YAML_MAX_BYTES": "x",
}
CASES = [(verb, argv, name) for verb, argv in CONFIG_VERBS.items() for name in BAD]
CASES += [
    (verb, argv, name)
    for verb, argv in LAYOUTS_VERBS.items()
    for name in ("AREAL_CONF_GPU", "AREAL_CONF_GPU_MEMORY_GB")
]


@pytest.mark.parametrize(("verb", "argv", "name"), CASES, ids=[f"{v} {n}" for v, _, n in CASES])
def test_every_verb_reads_each_setting_that_applies_to_it(
    verb: str,
    argv: tuple[str, ...],
    name: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("STANDIN_OUT", str(tmp_path))
    monkeypatch.setenv(name, BAD[name])
    assert main([*argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and name in err, err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # the driver never started


#: Qwen2.5-7B's sizes, as KEY=VALUE items (the same syntax as --model).
SIZES = (
    "num_layers=28 hidden_size=3584 num_attention_heads=28 num_kv_heads=4 "
    "ffn_hidden_size=18944 vocab_size=152064 max_seq_len=4096"
)
FITS = ("layouts", "fsdp", "--gpus", "8", "--fits")


#: Verbs that predict no RL step time, so take no mean response length.
WITHOUT_STEP_TIME = ("explain", "layouts")


def test_each_setting_is_one_knob_with_its_variable_and_flag() -> None:
    """One table: each knob's variable is an AREAL_CONF_* name, its flag is on every verb
    that takes settings, and no field has two."""
    from areal_conf.cli import build_parser
    from areal_conf.settings import KNOBS, Settings

    fields = [knob.field for knob in KNOBS]
    assert len(fields) == len(set(fields)) and set(fields) <= set(Settings.__dataclass_fields__)
    parser = build_parser()
    for verb in ("check", "run", "sweep", "explain", "suggest", "tune", "layouts"):
        text = _help(parser, verb)
        for knob in KNOBS:
            assert knob.variable.startswith("AREAL_CONF_")
            if knob.field == "mean_response_tokens" and verb in WITHOUT_STEP_TIME:
                continue
            assert knob.flag in text, (verb, knob.flag)


def _help(parser: Any, verb: str) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        parser.parse_args([verb, "--help"])
    return out.getvalue()


@pytest.mark.parametrize(
    ("env", "flags"),
    [
        ({"AREAL_CONF_MODEL": SIZES}, ()),  # the variable takes --model's KEY=VALUE syntax
        ({}, ("--model", *SIZES.split())),
        ({"AREAL_CONF_MODEL": "/no/such/model"}, ("--model", *SIZES.split())),  # flag wins
    ],
    ids=["variable", "flag", "flag over variable"],
)
def test_layouts_read_the_model_from_the_flag_or_the_variable(
    env: dict[str, str],
    flags: tuple[str, ...],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``layouts`` used to read only --model: AREAL_CONF_MODEL, which its own message
    named, was ignored."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main([*FITS, *flags]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.splitlines()[0].startswith("fsdp:")


def test_a_model_flag_takes_a_hugging_face_id_as_the_variable_does() -> None:
    from areal_conf.settings import from_environment

    by_flag = from_environment({}, flags={"model": ["Qwen/Qwen2.5-7B"]})
    by_variable = from_environment({"AREAL_CONF_MODEL": "Qwen/Qwen2.5-7B"})
    assert by_flag.model == by_variable.model == {"hf_config": "Qwen/Qwen2.5-7B"}
    assert (by_flag.model_from, by_variable.model_from) == ("--model", "AREAL_CONF_MODEL")


def test_a_gpu_named_gives_its_memory_and_a_flag_wins_over_its_variable() -> None:
    from areal_conf.settings import from_environment

    env = {"AREAL_CONF_GPU": "h200", "AREAL_CONF_GPU_MEMORY_GB": "100"}
    assert from_environment(env).gpu_memory_gb == 100
    named = from_environment({"AREAL_CONF_GPU": "h200"})
    assert (named.gpu_memory_gb, named.gpu_memory_from) == (141, "AREAL_CONF_GPU=h200")
    flagged = from_environment(env, flags={"gpu": "a100"})
    assert (flagged.gpu, flagged.gpu_memory_from) == ("a100", "--gpu a100")
