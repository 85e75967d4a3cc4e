"""``validate`` hands its callers what it read, and ``validate_run`` checks one config
with several edits as ``validate`` checks each edited config.

A sweep of an engine's layouts validates the config once per layout: the config is read
once (:func:`areal_conf.validation.read_run`), each layout is set on the config as read
(:func:`areal_conf.config.edits.edited_run`) unless a value read may depend on it, and
the model's shape is found once. Whichever way an edit is made, the plan or the error is
the one ``validate`` gives the edited config.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from _helpers import compose_config, with_overrides
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from areal_conf import AllocationError
from areal_conf.areal.versions import choose_rules
from areal_conf.config.edits import edited_run
from areal_conf.config.reading import read_config
from areal_conf.model.shape import ModelShape
from areal_conf.plan.plan import Plan
from areal_conf.settings import Settings
from areal_conf.validation import Validation, read_run, validate, validate_run

#: A Llama-3-8B-sized model: some of its layouts on 8 GPUs fit 40 GB, some do not.
LLAMA8B = {
    "num_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_kv_heads": 8,
    "ffn_hidden_size": 14336,
    "vocab_size": 128256,
    "max_seq_len": 8192,
}


def config(**parts: Any) -> dict[str, Any]:
    """An RL config of areal-conf's own schema: rollout, actor and a ref colocated with
    the actor, on 2 nodes of 8 GPUs with 40 GB each."""
    cfg: dict[str, Any] = {
        "rollout": {"backend": "sglang:d1t8"},
        "actor": {"backend": "fsdp:d2t4", "mb_spec": {"max_tokens_per_mb": 8192}},
        "ref": {
            "backend": "fsdp:d8",
            "scheduling_strategy": {"type": "colocation", "target": "actor"},
        },
        "cluster": {"n_nodes": 2, "n_gpus_per_node": 8, "gpu_memory_gb": 40},
        "model": dict(LLAMA8B),
    }
    cfg.update(parts)
    return cfg


def outcome(check: Any) -> object:
    """What a validation gives: its plan as a dict, or its error's text."""
    try:
        return check().to_dict()
    except AllocationError as err:
        return str(err)


def test_validate_returns_the_plan_with_what_it_read() -> None:
    found = validate(config(), settings=Settings(mean_response_tokens=1024))
    assert isinstance(found, Validation) and isinstance(found, Plan)
    assert found.run is not None and set(found.run.engines) == {"rollout", "actor", "ref"}
    assert found.settings is not None and found.settings.mean_response_tokens == 1024
    assert isinstance(found.shape, ModelShape) and found.shape.num_layers == 32


def test_an_unknown_shape_is_said_with_its_reason() -> None:
    cfg = config(model={})
    shape = validate(cfg).shape
    assert isinstance(shape, str) and "model shape unknown" in shape


LAYOUTS = ["fsdp:d8", "fsdp:d4t2", "fsdp:d2t4", "fsdp:d1t8", "megatron:d2p2t2", "fsdp:d16"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("omegaconf", [False, True], ids=["mapping", "omegaconf"])
def test_an_edit_gives_what_validate_gives_the_edited_config(layout: str, omegaconf: bool) -> None:
    from omegaconf import OmegaConf

    cfg: Any = OmegaConf.create(config()) if omegaconf else config()
    reading = read_run(cfg)
    edit = f"actor.backend={layout}"
    assert edited_run(reading.run, [edit]) is not None  # made on the config as read
    assert outcome(lambda: validate_run(reading, [edit])) == outcome(
        lambda: validate(with_overrides(cfg, [edit]))
    )


def test_the_layouts_compared_include_one_that_does_not_fit_and_one_that_does() -> None:
    reading = read_run(config())
    outcomes = [
        outcome(lambda s=spec: validate_run(reading, [f"actor.backend={s}"])) for spec in LAYOUTS
    ]
    assert any(isinstance(o, str) and "GB" in o for o in outcomes)
    assert any(isinstance(o, dict) for o in outcomes)


def test_an_edit_that_an_interpolation_follows_reads_the_config_again() -> None:
    """``ref.backend: ${actor.backend}``: the ref follows a new actor backend, as Hydra
    composes the edited config."""
    from omegaconf import OmegaConf

    ref = {**config()["ref"], "backend": "${actor.backend}"}
    cfg = OmegaConf.create(config(ref=ref))
    reading = read_run(cfg)
    assert reading.run.interpolations == {"ref.backend": "${actor.backend}"}
    edit = "actor.backend=fsdp:d2t4"
    assert edited_run(reading.run, [edit]) is None
    plan = validate_run(reading, [edit])
    assert str(plan.engines["ref"].allocation) == "fsdp:d2t4"
    assert plan.to_dict() == validate(with_overrides(cfg, [edit])).to_dict()


@pytest.mark.parametrize(
    "edit",
    [
        "cluster.n_nodes=4",  # not a backend
        "++actor.backend=fsdp:d4t2",  # written as an addition
        "critic.backend=fsdp:d8",  # an engine the config lacks
        "actor.backend=8",  # a value Hydra reads as a number
    ],
)
def test_an_edit_other_than_a_backend_the_config_has_reads_the_config_again(edit: str) -> None:
    cfg = config()
    reading = read_run(cfg)
    assert edited_run(reading.run, [edit]) is None
    as_hydra_adds = "++" + edit.lstrip("+")  # validate_run's edits add a key, as ++ does
    assert outcome(lambda: validate_run(reading, [edit])) == outcome(
        lambda: validate(with_overrides(cfg, [as_hydra_adds]))
    )


def test_the_teacher_s_backend_is_read_again() -> None:
    run = read_config(
        {"teacher": {"rollout": {"backend": "sglang:d1t4"}}, **config()}, choose_rules("2.0").rules
    )
    assert edited_run(run, ["teacher.rollout.backend=sglang:d2t2"]) is None


@pytest.fixture
def model_resolutions(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each time the model's shape is resolved from its sources, from now on."""
    import areal_conf.config.run_reading as run_reading

    calls: list[object] = []
    real = run_reading.resolve_model

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(run_reading, "resolve_model", counted)
    return calls


def test_the_model_s_shape_is_found_once_for_every_edit_of_a_backend(
    model_resolutions: list[object],
) -> None:
    reading = read_run(config())
    for spec in ("fsdp:d2t4", "fsdp:d1t8"):  # layouts that fit
        validate_run(reading, [f"actor.backend={spec}"])
    with pytest.raises(AllocationError, match="GB per GPU"):  # its fixes are not tried
        validate_run(reading, ["actor.backend=fsdp:d8"], check_fixes=False)
    validate_run(reading)
    assert len(model_resolutions) == 1


def test_the_layouts_that_fit_find_the_shape_once(model_resolutions: list[object]) -> None:
    from areal_conf.advise.sweeps import engine_layouts

    sweep = engine_layouts(config(), "actor", fits=True)
    assert sweep.layouts and len(model_resolutions) == 1


def test_the_default_config_validates_the_same_either_way() -> None:
    cfg = compose_config()
    assert validate_run(read_run(cfg)).to_dict() == validate(cfg).to_dict()


@pytest.mark.parametrize(
    ("reading", "edits", "message"),
    [
        ("not a reading", [], "validate_run needs the reading of a config, got str"),
        (None, "actor.backend=fsdp:d8", "edits must be a list of strings"),
        ("default", ["cluster.n_nodes=abc"], "edits: cluster.n_nodes=abc cannot be applied"),
    ],
)
def test_validate_run_refuses_what_it_cannot_take(reading: Any, edits: Any, message: str) -> None:
    from omegaconf import OmegaConf

    if reading == "default":  # areal-conf's schema: its keys have types
        reading = read_run(compose_config())
    given = read_run(OmegaConf.create(config())) if reading is None else reading
    with pytest.raises(AllocationError, match=message.replace(".", r"\.")) as info:
        validate_run(given, edits)
    assert info.value.hint


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=40), max_size=3))
def test_any_edits_give_a_plan_or_one_allocation_error(edits: list[str]) -> None:
    from omegaconf import OmegaConf

    reading = read_run(OmegaConf.create(config()))
    with contextlib.suppress(AllocationError):
        validate_run(reading, edits)


def test_the_layouts_of_a_2_0_teacher_that_fit_are_set_where_its_keys_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """AReaL 2.0's teacher has its backend at ``teacher.rollout.backend``: each layout is
    checked there (``teacher.backend`` is a key AReaL 2.0 refuses, so every layout
    would be refused)."""
    from areal_conf.advise.sweeps import engine_layouts

    monkeypatch.setenv("AREAL_CONF_AREAL_VERSION", "2.0")
    cluster = {"n_nodes": 3, "n_gpus_per_node": 8, "gpu_memory_gb": 40}
    cfg = config(teacher={"rollout": {"backend": "sglang:d1t4"}}, cluster=cluster)
    sweep = engine_layouts(cfg, "teacher", fits=True)
    assert sweep.key == "teacher.rollout.backend"
    assert "sglang:t4" in sweep.layouts and "sglang:d4" in sweep.layouts


def test_the_python_api_page_s_example_runs_as_it_says() -> None:
    """docs/python-api.md's example of validate_run: it runs, and its comments hold."""
    import re

    from _helpers import ROOT

    page = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", page, flags=re.S) if "read_run" in b]
    names: dict[str, Any] = {}
    exec(compile(block, "docs/python-api.md", "exec"), names)
    assert names["plan"].gpus_by_engine() == {"actor": 4, "rollout": 4}
    assert (names["plan"].shape.num_layers, names["plan"].run.actor.backend) == (28, "fsdp:d4")
    said = re.search(r"# ([\d.]+), ([\d.]+), ([\d.]+) predicted seconds", block)
    assert said is not None
    reading = names["reading"]
    seconds = [
        round(validate_run(reading, [f"actor.backend={spec}"]).engines["actor"].step_seconds, 1)
        for spec in ("fsdp:d4", "fsdp:d2t2", "fsdp:t4")
    ]
    assert seconds == [float(s) for s in said.groups()]
