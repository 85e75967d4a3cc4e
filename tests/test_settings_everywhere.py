"""Every verb reads areal-conf's settings from one place: each ``AREAL_CONF_*`` variable
that applies to a verb is read by it, and a bad value is one message naming the
variable, exit 2 (the variable was not silently ignored)."""

from __future__ import annotations

from pathlib import Path

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
