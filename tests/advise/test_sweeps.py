"""Parallelism sweeps (SPEC §8, issue 6): ``python -m areal_conf layouts``, the escaped
``--hydra`` override, :func:`areal_conf.advise.sweeps.engine_layouts`, and the
``hydra/sweeper=areal_layouts`` plugin in process and end to end through ``train.py``."""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _helpers import CONF, ROOT, Cli, Train, compose_config, job_dirs
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.errors import ConfigCompositionException
from hydra.plugins.sweeper import Sweeper
from hydra.test_utils.test_utils import TSweepRunner
from omegaconf import DictConfig, OmegaConf

from areal_conf.advise.sweeps import engine_layouts
from areal_conf.areal.versions import choose_rules
from areal_conf.cli import main
from areal_conf.config.reading import read_config
from areal_conf.errors import AllocationError
from areal_conf.hydra.app import EXIT_INVALID
from areal_conf.model.hardware import hardware
from areal_conf.model.shape import ModelShape, model_shape, read_hf_config
from areal_conf.overrides import hydra_value, shell_sweep_override, sweep_override
from areal_conf.perf.speed import TrainingStep, training_step
from areal_conf.spec.layouts import layouts
from areal_conf.spec.parser import parse_backend
from areal_conf.validation import validate
from hydra_plugins.areal_conf_plugin._configs import AReaLLayoutsSweeperConf
from hydra_plugins.areal_conf_plugin.areal_layouts_sweeper import AReaLLayoutsSweeper

MOE = {
    "num_layers": 48,
    "num_attention_heads": 32,
    "num_kv_heads": 4,
    "num_experts": 64,
    "max_seq_len": 32768,
}  # conf/experiment/moe_megatron.yaml


def parse_sweep(line: str) -> tuple[str, list[str]]:
    """What the shell and then Hydra make of a printed ``--hydra`` line: the key and the
    value each job gets (a sweep is expanded as the basic sweeper does, into one
    ``key=value`` override per job, and each is parsed again)."""
    words = shlex.split(line)
    assert len(words) == 1, words
    parser = OverridesParser.create()
    override = parser.parse_override(words[0])
    key = override.key_or_group
    if not override.is_sweep_override():
        return key, [override.value()]
    values = []
    for text in override.sweep_string_iterator():
        job = parser.parse_override(f"{key}={text}")
        assert not job.is_sweep_override()
        values.append(job.value())
    return key, values


# ----------------------------------------------------------------------- the CLI


class TestLayoutsCommand:
    def test_one_layout_per_line(self, cli: Cli) -> None:
        code, out, err = cli("layouts", "megatron", "--gpus", "16")
        assert (code, err) == (0, "")
        assert out.splitlines() == layouts("megatron", 16, max_tp=8)
        assert out.splitlines()[:3] == ["megatron:d16", "megatron:d8c2", "megatron:d4c4"]

    def test_max_tp_defaults_to_8_and_none_lifts_the_cap(self, cli: Cli) -> None:
        _, default, _ = cli("layouts", "fsdp", "--gpus", "16")
        _, capped, _ = cli("layouts", "fsdp", "--gpus", "16", "--max-tp", "4")
        _, uncapped, _ = cli("layouts", "fsdp", "--gpus", "16", "--max-tp", "none")
        assert default.splitlines() == layouts("fsdp", 16, max_tp=8)
        assert capped.splitlines() == layouts("fsdp", 16, max_tp=4)
        assert uncapped.splitlines() == layouts("fsdp", 16)
        assert "fsdp:t16" in uncapped.splitlines()
        assert "fsdp:t16" not in default.splitlines()

    def test_help_states_the_max_tp_default(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit):
            main(["layouts", "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "default 8, the typical GPUs per node" in text

    @pytest.mark.parametrize(
        "model_args",
        [
            [
                "--model",
                "num_experts=64",
                "num_layers=48",
                "num_attention_heads=32",
                "num_kv_heads=4",
                "max_seq_len=32768",
            ],
            [
                "--model",
                "num_experts=64",
                "--model",
                "model.num_layers=48",
                "--model",
                "num_attention_heads=32",
                "num_kv_heads=4",
                "max_seq_len=32768",
            ],
        ],
    )
    def test_model_section(self, cli: Cli, model_args: list[str]) -> None:
        code, out, _ = cli("layouts", "megatron", "--gpus", "16", *model_args)
        assert code == 0
        assert out.splitlines() == layouts("megatron", 16, model=MOE, max_tp=8)
        assert any(line.startswith("megatron:(attn:") for line in out.splitlines())

    def test_null_model_value_skips_the_check(self, cli: Cli) -> None:
        _, out, _ = cli("layouts", "megatron", "--gpus", "8", "--model", "num_experts=null")
        assert out.splitlines() == layouts("megatron", 8, max_tp=8)

    @pytest.mark.parametrize(
        "argv, part",
        [
            (["layouts", "fdsp", "--gpus", "8"], "did you mean fsdp?"),
            (["layouts", "fsdp", "--gpus", "0"], "gpus must be a positive integer"),
            (
                ["layouts", "fsdp", "--gpus", "8", "--model", "num_expert=8"],
                "did you mean num_experts?",
            ),
            (
                ["layouts", "fsdp", "--gpus", "8", "--model", "num_layers=x"],
                "'x' is not a whole number",
            ),
            (["layouts", "fsdp", "--gpus", "8", "--model", "num_layers"], "KEY=VALUE"),
            (
                ["layouts", "fsdp", "--gpus", "8", "--engine", "rollout"],
                "rollout needs an inference backend, got fsdp",
            ),
            (
                ["layouts", "sglang", "--gpus", "8", "--engine", "actor", "--hydra"],
                "actor needs a training backend, got sglang",
            ),
        ],
    )
    def test_errors(self, cli: Cli, argv: list[str], part: str) -> None:
        code, out, err = cli(*argv)
        assert code == 2
        assert out == ""
        assert err.startswith("error: ")
        assert part in err
        assert "hint:" in err

    @pytest.mark.parametrize("max_tp", ["0", "-1", "x"])
    def test_bad_max_tp_is_a_usage_error(
        self, capsys: pytest.CaptureFixture[str], max_tp: str
    ) -> None:
        with pytest.raises(SystemExit) as exc:
            main(["layouts", "fsdp", "--gpus", "8", "--max-tp", max_tp])
        assert exc.value.code == 2
        assert "positive integer or 'none'" in capsys.readouterr().err


class TestHydraOverride:
    @pytest.mark.parametrize(
        "argv, key, expected",
        [
            (["megatron", "--gpus", "16"], "actor.backend", layouts("megatron", 16, max_tp=8)),
            (
                ["megatron", "--gpus", "16", "--model", *(f"{k}={v}" for k, v in MOE.items())],
                "actor.backend",
                layouts("megatron", 16, model=MOE, max_tp=8),
            ),
            (
                ["archon", "--gpus", "8", "--model", "num_experts=8", "--engine", "critic"],
                "critic.backend",
                layouts("archon", 8, model={"num_experts": 8}, max_tp=8),
            ),
            (
                ["sglang", "--gpus", "8", "--max-tp", "4"],
                "rollout.backend",
                layouts("sglang", 8, max_tp=4),
            ),
            (["vllm", "--gpus", "1"], "rollout.backend", ["vllm:d1"]),
            (  # AReaL 2.0's teacher engines are sections of teacher
                ["sglang", "--gpus", "2", "--engine", "teacher.rollout"],
                "teacher.rollout.backend",
                layouts("sglang", 2, max_tp=8),
            ),
        ],
    )
    def test_round_trip_through_shell_and_hydra(
        self,
        cli: Cli,
        argv: list[str],
        key: str,
        expected: list[str],
    ) -> None:
        code, out, _ = cli("layouts", *argv, "--hydra")
        assert code == 0
        assert out.count("\n") == 1
        assert parse_sweep(out.strip()) == (key, expected)

    def test_hybrid_values_are_quoted_for_hydra_and_the_line_for_the_shell(self, cli: Cli) -> None:
        _, out, _ = cli(
            "layouts",
            "megatron",
            "--gpus",
            "2",
            "--max-tp",
            "2",
            "--model",
            "num_experts=2",
            "--hydra",
        )
        assert out.strip() == (
            "\"actor.backend=megatron:d2,'megatron:(attn:d2|ffn:t2)',megatron:d2e2,"
            "megatron:c2,'megatron:(attn:c2|ffn:t2)',megatron:c2e2,megatron:t2,"
            "'megatron:(attn:t2|ffn:t2)',megatron:t2e2,megatron:p2\""
        )

    def test_flat_layouts_need_no_quotes(self, cli: Cli) -> None:
        _, out, _ = cli("layouts", "fsdp", "--gpus", "4", "--hydra")
        assert out.strip() == "actor.backend=fsdp:d4,fsdp:d2c2,fsdp:c4,fsdp:d2t2,fsdp:t2c2,fsdp:t4"

    def test_hydra_value(self) -> None:
        assert hydra_value("fsdp:d8") == "fsdp:d8"
        assert hydra_value("megatron:(attn:d2|ffn:t2)") == "'megatron:(attn:d2|ffn:t2)'"
        assert hydra_value("null") == "'null'"

    def test_sweep_override_needs_values(self) -> None:
        with pytest.raises(AllocationError, match="non-empty list"):
            sweep_override("actor.backend", [])
        with pytest.raises(AllocationError, match="non-empty list"):
            sweep_override("actor.backend", "fsdp:d8")

    def test_every_layout_of_several_cases_round_trips(self) -> None:
        cases = [
            layouts("megatron", 24, model={"num_experts": 6}),
            layouts("archon", 16, model={"num_experts": 16}),
            layouts("fsdp", 12),
        ]
        for values in cases:
            line = shell_sweep_override("actor.backend", values)
            assert parse_sweep(line) == ("actor.backend", values)


# ---------------------------------------------------------- engine_layouts (no Hydra)


def config(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "rollout": {"backend": "sglang:d2t4"},
        "actor": {"backend": "fsdp:d4t2"},
        "critic": {"backend": ""},
        "ref": {"backend": ""},
        "teacher": {"rollout": {"backend": ""}},
        "cluster": {"n_nodes": 2, "n_gpus_per_node": 8},
        "model": {"num_layers": None},
    }
    for key, value in changes.items():
        engine, field = key.split("__")
        section = base[engine]["rollout"] if engine == "teacher" else base[engine]
        section[field] = value
    return base


class TestEngineLayouts:
    def test_defaults_come_from_the_engine(self) -> None:
        found = engine_layouts(config(), "actor")
        assert (found.backend, found.gpus, found.max_tp, found.key) == (
            "fsdp",
            8,
            8,
            "actor.backend",
        )
        assert list(found.layouts) == layouts("fsdp", 8, max_tp=8)

    def test_critic_inherits_the_actor(self) -> None:
        found = engine_layouts(config(actor__backend="megatron:d2p2"), "critic")
        assert (found.backend, found.gpus) == ("megatron", 4)
        assert found.key == "critic.backend"

    def test_rollout(self) -> None:
        found = engine_layouts(config(cluster__n_gpus_per_node=4), "rollout")
        assert list(found.layouts) == layouts("sglang", 8, max_tp=4)

    def test_explicit_values_win(self) -> None:
        found = engine_layouts(config(), "actor", backend="megatron", gpus=16, max_tp=2)
        assert list(found.layouts) == layouts("megatron", 16, max_tp=2)

    def test_the_model_section_filters(self) -> None:
        cfg = config()
        cfg["model"] = {"num_attention_heads": 6, "num_experts": 4}
        found = engine_layouts(cfg, "actor", backend="megatron")
        assert list(found.layouts) == layouts(
            "megatron", 8, model={"num_attention_heads": 6, "num_experts": 4}, max_tp=8
        )
        assert all(parse_backend(s).parallel.tp_size in (1, 2) for s in found.layouts)

    def test_disabled_teacher_needs_backend_and_gpus(self) -> None:
        with pytest.raises(AllocationError, match="teacher is disabled") as exc:
            engine_layouts(config(), "teacher")
        assert "hydra.sweeper.gpus" in exc.value.hint
        found = engine_layouts(config(), "teacher", backend="sglang", gpus=4)
        assert list(found.layouts) == layouts("sglang", 4, max_tp=8)
        assert found.key == "teacher.rollout.backend"

    @pytest.mark.parametrize(
        "cfg, engine, kwargs, part",
        [
            (config(), "actr", {}, "unknown engine actr"),
            (config(actor__backend=""), "actor", {}, "actor.backend: actor has no backend"),
            (
                config(actor__backend="d4t2"),
                "critic",
                {},
                "actor.backend (inherited by an empty critic.backend): no backend prefix",
            ),
            (config(), "rollout", {"backend": "fsdp"}, "rollout needs an inference backend"),
            (config(), "actor", {"backend": "sglang"}, "actor needs a training backend"),
            (config(), "actor", {"backend": "fsdp:d8"}, "unknown backend 'fsdp:d8'"),
        ],
    )
    def test_errors(
        self, cfg: dict[str, Any], engine: str, kwargs: dict[str, Any], part: str
    ) -> None:
        with pytest.raises(AllocationError) as exc:
            engine_layouts(cfg, engine, **kwargs)
        assert part in str(exc.value)

    def test_an_explicit_backend_does_not_need_a_valid_current_one(self) -> None:
        found = engine_layouts(config(actor__backend="d4t2"), "actor", backend="fsdp", gpus=2)
        assert list(found.layouts) == ["fsdp:d2", "fsdp:c2", "fsdp:t2"]


# ------------------------------------------ rank=step_time and top_k (no Hydra)

QWEN = ROOT / "tests" / "fixtures" / "hf" / "qwen2_5_7b"  # a local config.json
QWEN_KEYS = read_hf_config(str(QWEN))
SPEED_ENV = ("AREAL_CONF_GPU", "AREAL_CONF_MEAN_RESPONSE_TOKENS")


@pytest.fixture
def no_speed_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU or mean response length from the shell that started pytest: predictions on
    the default H100, responses of half of gconfig.max_new_tokens."""
    for name in SPEED_ENV:
        monkeypatch.delenv(name, raising=False)


def step_config(**parts: Any) -> dict[str, Any]:
    """The actor alone on 8 GPUs of its own, with the model's shape (a local config.json)
    and the batch that a training step's prediction needs."""
    cfg: dict[str, Any] = {
        "rollout": {"backend": "sglang:d2t4"},
        "actor": {"backend": "megatron:d4t2"},
        "cluster": {"n_nodes": 2, "n_gpus_per_node": 8},
        "model": {"hf_config": str(QWEN)},
        "train_dataset": {"batch_size": 32, "max_length": 1024},
        "gconfig": {"max_new_tokens": 4096, "n_samples": 4},
    }
    for key, value in parts.items():
        cfg[key] = {**cfg[key], **value} if isinstance(value, dict) else value
    return cfg


def step_seconds(
    cfg: Any, specs: list[str], *, gpu: str = "h100", mean_response_tokens: int | None = None
) -> list[float]:
    """Each layout's predicted seconds of the actor's training step, straight from
    TrainingStep.seconds."""
    run = read_config(cfg, choose_rules().rules)
    step = training_step(run, run.engines["actor"], mean_response_tokens)
    shape = model_shape(QWEN_KEYS)
    assert isinstance(step, TrainingStep) and isinstance(shape, ModelShape)
    n = run.cluster.n_gpus_per_node
    return [step.predict(spec, shape, hardware(gpu), n).batch_seconds for spec in specs]


def accepted(cfg: Any, spec: str) -> bool:
    """Whether validate accepts ``cfg`` with ``actor.backend=spec`` (memory included)."""
    try:
        validate({**cfg, "actor": {**cfg["actor"], "backend": spec}})
    except AllocationError:
        return False
    return True


def by_time(specs: list[str], seconds: list[float]) -> list[str]:
    """Fastest first; equal times in the layouts' own order."""
    return [spec for _, _, spec in sorted(zip(seconds, range(len(specs)), specs, strict=True))]


def expected_ranking(cfg: Any, specs: list[str], *, fits: bool = False, **speed: Any) -> list[str]:
    """rank=step_time computed here: the layouts that fit by step time, then the rest
    (``speed``: step_seconds' GPU and mean response length)."""
    seconds = dict(zip(specs, step_seconds(cfg, specs, **speed), strict=True))
    fit = [s for s in specs if accepted(cfg, s)]
    rest = [] if fits else [s for s in specs if s not in fit]
    return by_time(fit, [seconds[s] for s in fit]) + by_time(rest, [seconds[s] for s in rest])


@pytest.mark.usefixtures("no_speed_settings")
class TestRankByStepTime:
    def test_order_is_the_order_of_the_predicted_step_times(self) -> None:
        # No GPU memory given (80 GB assumed): every layout that a GPU areal-conf knows
        # holds fits, which micro-batches of 16,384 tokens make all of them (with the
        # model's 32,768, megatron:d8 needs more than a B200's 180 GB).
        cfg = step_config(actor={"mb_spec": {"max_tokens_per_mb": 16384}})
        every = list(engine_layouts(cfg, "actor").layouts)
        seconds = step_seconds(cfg, every)
        found = engine_layouts(cfg, "actor", rank="step_time")
        assert list(found.layouts) == by_time(every, seconds)
        assert list(found.layouts) != every  # the ranking changed the order
        assert found.seconds == pytest.approx(sorted(seconds))
        assert found.fitting == (True,) * len(every)
        assert found.describe() == (
            f"{len(every)} megatron layout(s) of actor on 8 GPUs (tp ≤ 8; fastest "
            "predicted step first)"
        )
        assert found.speed_note.startswith("s/step: predicted on h100 (assumed")

    def test_layouts_that_fit_come_first_and_fits_drops_the_others(self) -> None:
        cfg = step_config(cluster={"gpu_memory_gb": 80})
        every = list(engine_layouts(cfg, "actor").layouts)
        seconds = dict(zip(every, step_seconds(cfg, every), strict=True))
        fit = [s for s in every if accepted(cfg, s)]
        rest = [s for s in every if s not in fit]
        # the case in point: a layout that does not fit is faster than one that does
        assert fit and rest and min(seconds[s] for s in rest) < max(seconds[s] for s in fit)
        ranked = engine_layouts(cfg, "actor", rank="step_time")
        assert list(ranked.layouts) == expected_ranking(cfg, every)
        assert ranked.fitting == (True,) * len(fit) + (False,) * len(rest)
        kept = engine_layouts(cfg, "actor", rank="step_time", fits=True)
        assert list(kept.layouts) == expected_ranking(cfg, every, fits=True)
        assert list(kept.layouts) == list(ranked.layouts[: len(fit)])
        assert kept.fitting == (True,) * len(fit)
        # fits alone keeps the same layouts, smallest memory first
        assert sorted(engine_layouts(cfg, "actor", fits=True).layouts) == sorted(fit)

    @pytest.mark.parametrize("fits", [False, True])
    def test_top_k_keeps_the_k_fastest(self, fits: bool) -> None:
        cfg = step_config(cluster={"gpu_memory_gb": 80})
        every = list(engine_layouts(cfg, "actor").layouts)
        ranked = expected_ranking(cfg, every, fits=fits)
        seconds = dict(zip(every, step_seconds(cfg, every), strict=True))
        for k in (1, 3, len(ranked), len(ranked) + 5):
            found = engine_layouts(cfg, "actor", rank="step_time", top_k=k, fits=fits)
            assert list(found.layouts) == ranked[:k]
            assert len(found.layouts) == min(k, len(ranked))
            assert found.seconds == pytest.approx([seconds[s] for s in ranked[:k]])
            assert found.total == len(ranked)
        first = engine_layouts(cfg, "actor", rank="step_time", top_k=3, fits=fits)
        assert first.describe().startswith(f"3 of {len(ranked)} megatron layout(s) of actor")
        # the three fastest of those that fit: none left out is faster
        fit = [s for s in every if accepted(cfg, s)]
        assert len(fit) > 3 and set(first.layouts) <= set(fit)
        assert max(first.seconds) <= min(seconds[s] for s in fit if s not in first.layouts)

    def test_the_settings_gpu_and_mean_response_length(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("AREAL_CONF_GPU", "b200")  # its memory too: 180 GB
        monkeypatch.setenv("AREAL_CONF_MEAN_RESPONSE_TOKENS", "256")
        cfg = step_config()
        every = list(engine_layouts(cfg, "actor").layouts)
        speed = {"gpu": "b200", "mean_response_tokens": 256}
        seconds = dict(zip(every, step_seconds(cfg, every, **speed), strict=True))
        found = engine_layouts(cfg, "actor", rank="step_time")
        assert list(found.layouts) == expected_ranking(cfg, every, **speed)
        assert found.seconds == pytest.approx([seconds[s] for s in found.layouts])
        on_b200 = engine_layouts(cfg, "actor", rank="step_time", top_k=1)
        monkeypatch.delenv("AREAL_CONF_GPU")
        on_h100 = engine_layouts(cfg, "actor", rank="step_time", top_k=1)
        assert on_b200.seconds != pytest.approx(on_h100.seconds)
        assert found.speed_note.startswith("s/step: predicted on b200,")
        assert "mean response 256 tokens" in found.speed_note

    def test_without_a_model_section_the_hint_names_areal_conf_model(self) -> None:
        cfg = step_config()
        del cfg["model"]  # an AReaL config, not areal-conf's own
        with pytest.raises(AllocationError) as exc:
            engine_layouts(cfg, "actor", rank="step_time")
        assert "model shape unknown (no num_layers" in exc.value.reason
        assert "train_dataset" not in str(exc.value)
        assert exc.value.hint.startswith("give the model's shape with AREAL_CONF_MODEL=")


# --------------------------------------------------------------- sweeper in process


def test_sweeper_is_discovered_and_registered() -> None:
    names = [f"{c.__module__}.{c.__name__}" for c in Plugins.instance().discover(Sweeper)]
    assert f"{AReaLLayoutsSweeper.__module__}.{AReaLLayoutsSweeper.__name__}" in names
    conf = OmegaConf.structured(AReaLLayoutsSweeperConf)
    assert conf.engine == "actor"
    assert conf.backend is None and conf.gpus is None and conf.max_tp is None
    assert conf.max_batch_size is None and conf.params is None
    assert conf.fits is False and conf.rank is None and conf.top_k is None


@pytest.mark.e2e
def test_sweeper_module_is_light() -> None:
    code = (
        "import sys\n"
        "import hydra_plugins.areal_conf_plugin.areal_layouts_sweeper\n"
        "print(sorted(m for m in sys.modules if m.startswith('areal_conf')"
        " or m.endswith('_sweeper_core')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


def test_sweeper_core_does_not_import_the_plugin_module() -> None:
    # The plugin module imports _sweeper_core when a sweep runs; an import back, even
    # one for type checking only, would make the two modules a cycle.
    import hydra_plugins.areal_conf_plugin._sweeper_core as core

    imported: set[str] = set()
    for node in ast.walk(ast.parse(Path(core.__file__).read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported |= {f"{node.module}.{alias.name}" for alias in node.names}
    plugin_module = AReaLLayoutsSweeper.__module__
    assert not {name for name in imported if name.startswith(plugin_module)}


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def __call__(self, cfg: DictConfig) -> str:
        self.calls.append((str(cfg.actor.backend), int(cfg.cluster.n_nodes)))
        return str(cfg.actor.backend)


def shared_rules_app(tmp_path: Path) -> Path:
    """An application with train.py's config but no scheduler.type: the rules every
    scheduler shares (engines of less than a node, which Slurm would refuse)."""
    app = tmp_path / "app"
    (app / "conf").mkdir(parents=True)
    text = (CONF / "config.yaml").read_text()
    (app / "conf" / "config.yaml").write_text(text.replace("  type: slurm", "  type: null"))
    return app


def run_sweep(
    runner: TSweepRunner, overrides: list[str], sweep_dir: Path, task: Any, app: Path = ROOT
) -> Any:
    with runner(
        calling_file=str(app / "train.py"),
        calling_module=None,
        task_function=task,
        config_path="conf",
        config_name="config",
        overrides=["hydra/sweeper=areal_layouts", *overrides],
        temp_dir=sweep_dir,
    ) as sweep:
        return sweep.returns


@pytest.mark.e2e  # real sweeps of many jobs, in this process
@pytest.mark.usefixtures("hydra_restore_singletons")
class TestSweeperInProcess:
    def test_one_job_per_layout(self, hydra_sweep_runner: TSweepRunner, tmp_path: Path) -> None:
        task = Recorder()
        returns = run_sweep(hydra_sweep_runner, [], tmp_path, task)
        expected = layouts("fsdp", 8, max_tp=8)
        assert [backend for backend, _ in task.calls] == expected
        assert len(returns) == 1
        assert [r.overrides for r in returns[0]] == [[f"actor.backend={s}"] for s in expected]

    def test_the_basic_sweep_loop_runs_the_batches(
        self, hydra_sweep_runner: TSweepRunner, tmp_path: Path
    ) -> None:
        # The sweeper changes only how the jobs are produced: Hydra's own loop writes
        # multirun.yaml and numbers the jobs on across batches.
        assert AReaLLayoutsSweeper.sweep is BasicSweeper.sweep
        task = Recorder()
        sweep_dir = tmp_path / "sweep"
        with hydra_sweep_runner(
            calling_file=str(ROOT / "train.py"),
            calling_module=None,
            task_function=task,
            config_path="conf",
            config_name="config",
            overrides=["hydra/sweeper=areal_layouts", "hydra.sweeper.max_batch_size=3"],
            temp_dir=sweep_dir,
        ) as sweep:
            saved = OmegaConf.load(sweep_dir / "multirun.yaml")
            returns = sweep.returns
        n = len(layouts("fsdp", 8, max_tp=8))
        assert saved.hydra.sweeper._target_ == AReaLLayoutsSweeperConf._target_
        assert saved.hydra.sweeper.max_batch_size == 3
        assert [len(batch) for batch in returns] == [3] * (n // 3) + ([n % 3] if n % 3 else [])
        nums = [r.hydra_cfg.hydra.job.num for batch in returns for r in batch]
        assert nums == list(range(n))

    def test_crossed_with_params_and_batched(
        self, hydra_sweep_runner: TSweepRunner, tmp_path: Path
    ) -> None:
        # A primary config that selects the sweeper and keeps a sweep in its params (an
        # Optional[Dict] that is null cannot be set from the command line, as for the
        # basic sweeper).
        app = tmp_path / "app"
        (app / "conf").mkdir(parents=True)
        text = (CONF / "config.yaml").read_text().replace("  type: slurm", "  type: null")
        text = text.replace(
            "  - areal_schema\n", "  - areal_schema\n  - override hydra/sweeper: areal_layouts\n"
        )
        text = text.replace(  # into the config's own hydra section
            "\nhydra:\n", "\nhydra:\n  sweeper:\n    params:\n      cluster.n_nodes: 2,3\n"
        )
        (app / "conf" / "config.yaml").write_text(text)
        task = Recorder()
        returns = run_sweep(
            hydra_sweep_runner,
            [
                "hydra.sweeper.max_batch_size=4",
                "hydra.sweeper.backend=megatron",
                "hydra.sweeper.gpus=4",
            ],
            tmp_path / "sweep",
            task,
            app,
        )
        four = layouts("megatron", 4, max_tp=8)
        assert task.calls == [(s, n) for n in (2, 3) for s in four]
        n = 2 * len(four)
        assert [len(batch) for batch in returns] == [4] * (n // 4) + ([n % 4] if n % 4 else [])
        assert returns[0][0].overrides == ["cluster.n_nodes=2", "actor.backend=megatron:d4"]

    def test_a_fixed_backend_sets_the_defaults_and_is_replaced(
        self, hydra_sweep_runner: TSweepRunner, tmp_path: Path
    ) -> None:
        task = Recorder()
        returns = run_sweep(
            hydra_sweep_runner,
            ["actor.backend=megatron:d2p2", "cluster.n_nodes=3"],
            tmp_path / "sweep",
            task,
            shared_rules_app(tmp_path),
        )
        expected = layouts("megatron", 4, max_tp=8)
        assert [b for b, _ in task.calls] == expected
        assert returns[0][-1].overrides == ["cluster.n_nodes=3", f"actor.backend={expected[-1]}"]

    def test_the_fixed_backend_of_a_nested_engine_is_replaced(
        self, hydra_sweep_runner: TSweepRunner, tmp_path: Path
    ) -> None:
        # AReaL 2.0's inference teacher: its backend is teacher.rollout.backend, added
        # with '+'; each job sets that key, with the prefix, in place of the fixed one.
        returns = run_sweep(
            hydra_sweep_runner,
            [
                "hydra.sweeper.engine=teacher",
                "+teacher.rollout.backend=sglang:d2",
                "cluster.n_nodes=3",
            ],
            tmp_path / "sweep",
            lambda cfg: str(cfg.teacher.rollout.backend),
            shared_rules_app(tmp_path),
        )
        expected = layouts("sglang", 2, max_tp=8)
        assert [r.overrides for r in returns[0]] == [
            ["cluster.n_nodes=3", f"+teacher.rollout.backend={s}"] for s in expected
        ]
        assert [r.return_value for r in returns[0]] == expected

    def test_layouts_follow_each_combination(
        self, hydra_sweep_runner: TSweepRunner, tmp_path: Path
    ) -> None:
        task = Recorder()
        run_sweep(
            hydra_sweep_runner,
            ["hydra.sweeper.backend=megatron", "cluster.n_gpus_per_node=2,8", "cluster.n_nodes=8"],
            tmp_path / "sweep",
            task,
            shared_rules_app(tmp_path),
        )
        expected = layouts("megatron", 8, max_tp=2) + layouts("megatron", 8, max_tp=8)
        assert [b for b, _ in task.calls] == expected

    @pytest.mark.parametrize(
        "overrides, part",
        [
            (["actor.backend=fsdp:d8,fsdp:d4t2"], "cannot also be swept"),
            (
                ["hydra.sweeper.engine=teacher", "+teacher.rollout.backend=sglang:d2,sglang:t2"],
                "sweeps teacher.rollout.backend itself",
            ),
            (
                ["hydra.sweeper.engine=teacher", "+teacher.rollout.backend="],
                "teacher is disabled",
            ),
            (["hydra.sweeper.engine=policy"], "unknown engine policy"),
            (["hydra.sweeper.backend=sglang"], "actor needs a training backend"),
        ],
    )
    def test_errors_run_nothing(
        self,
        hydra_sweep_runner: TSweepRunner,
        tmp_path: Path,
        overrides: list[str],
        part: str,
    ) -> None:
        task = Recorder()
        with pytest.raises(ConfigCompositionException) as exc:
            run_sweep(hydra_sweep_runner, overrides, tmp_path / "sweep", task)
        assert part in str(exc.value)
        assert task.calls == []


#: Sweeper overrides of a sweep that ranks; the errors table adds to or removes from them.
RANKED = [
    f"model.hf_config={QWEN}",
    "+train_dataset.batch_size=32",
    "hydra.sweeper.rank=step_time",
]


@pytest.mark.e2e  # real sweeps, in this process
@pytest.mark.usefixtures("hydra_restore_singletons", "no_speed_settings")
class TestRankedSweep:
    def test_top_k_keeps_the_k_fastest_of_each_combination(
        self, hydra_sweep_runner: TSweepRunner, tmp_path: Path
    ) -> None:
        task = Recorder()
        app = shared_rules_app(tmp_path)
        given = [f"model.hf_config={QWEN}", "+train_dataset.batch_size=32", "cluster.n_nodes=8"]
        returns = run_sweep(
            hydra_sweep_runner,
            [
                *given,
                "hydra.sweeper.backend=megatron",
                "hydra.sweeper.rank=step_time",
                "hydra.sweeper.top_k=3",
                "cluster.n_gpus_per_node=2,8",  # the tp cap, so the layouts, follow
            ],
            tmp_path / "sweep",
            task,
            app,
        )
        expected: list[str] = []
        for n in (2, 8):
            cfg = compose_config(*given, f"cluster.n_gpus_per_node={n}", config_dir=app / "conf")
            fastest = expected_ranking(cfg, layouts("megatron", 8, model=QWEN_KEYS, max_tp=n))
            assert len(fastest) > 3
            expected += fastest[:3]
        assert [b for b, _ in task.calls] == expected  # exactly 3 a combination
        assert expected[:3] != expected[3:]
        assert [len(batch) for batch in returns] == [6]

    @pytest.mark.parametrize(
        "changes, parts",
        [
            pytest.param(
                ["hydra.sweeper.rank=fastest"],
                ["hydra.sweeper.rank: unknown ranking 'fastest'", "hydra.sweeper.rank=step_time"],
                id="unknown rank",
            ),
            pytest.param(
                ["hydra.sweeper.rank=step-time"],
                ["unknown ranking 'step-time'", "did you mean step_time?"],
                id="misspelt rank",
            ),
            pytest.param(
                ["-hydra.sweeper.rank=step_time", "hydra.sweeper.top_k=2"],
                [
                    "hydra.sweeper.top_k=2 keeps the fastest layouts, but hydra.sweeper.rank is null",
                    "hint: add hydra.sweeper.rank=step_time",
                ],
                id="top_k without rank",
            ),
            pytest.param(
                ["hydra.sweeper.top_k=0"],
                [
                    "hydra.sweeper.top_k: must be a whole number of layouts from 1, got 0",
                    "hydra.sweeper.top_k=3",
                ],
                id="top_k 0",
            ),
            pytest.param(
                ["hydra.sweeper.top_k=-2"],
                ["hydra.sweeper.top_k: ", "got -2"],
                id="top_k below 0",
            ),
            pytest.param(
                [f"-model.hf_config={QWEN}", "-+train_dataset.batch_size=32"],
                [
                    "hydra.sweeper.rank=step_time: cannot predict actor's step time: model shape "
                    "unknown (no num_layers, hidden_size, num_attention_heads, ffn_hidden_size, "
                    "vocab_size) and no train_dataset.batch_size",
                    "hint: give the model's shape with model.hf_config=",
                    "AREAL_CONF_MODEL=",
                    "and the batch with ++train_dataset.batch_size=",
                ],
                id="no shape and no batch",
            ),
            pytest.param(
                [f"-model.hf_config={QWEN}"],
                [
                    "cannot predict actor's step time: model shape unknown (no num_layers, "
                    "hidden_size, num_attention_heads, ffn_hidden_size, vocab_size)\n"
                    "hint: give the model's shape with model.hf_config="
                ],
                id="no shape",
            ),
            pytest.param(
                ["-+train_dataset.batch_size=32"],
                [
                    "cannot predict actor's step time: no train_dataset.batch_size\n"
                    "hint: give the batch with ++train_dataset.batch_size=<prompts a step>"
                ],
                id="no batch",
            ),
            pytest.param(
                ["hydra.sweeper.engine=rollout"],
                [
                    "cannot predict rollout's step time: rollout has no optimizer",
                    "rank the layouts of an engine that trains",
                ],
                id="an engine that does not train",
            ),
            pytest.param(
                ["hydra.sweeper.fits=true", "cluster.gpu_memory_gb=1"],
                ["no fsdp layout of actor on 8 GPUs fits the GPUs' memory"],
                id="fits and nothing fits",
            ),
        ],
    )
    def test_errors_run_nothing(
        self,
        hydra_sweep_runner: TSweepRunner,
        tmp_path: Path,
        changes: list[str],
        parts: list[str],
    ) -> None:
        removed = {c[1:] for c in changes if c.startswith("-")}
        overrides = [o for o in RANKED if o not in removed]
        overrides += [c for c in changes if not c.startswith("-")]
        task = Recorder()
        with pytest.raises(ConfigCompositionException) as exc:
            run_sweep(hydra_sweep_runner, overrides, tmp_path / "sweep", task)
        for part in parts:
            assert part in str(exc.value), (part, str(exc.value))
        assert task.calls == []


def documented_sweeper_errors() -> list[tuple[str, str]]:
    """The (command line, message) pairs of docs/backend-strings.md's section on the
    layouts sweeper: "For `python train.py -m ...`:" and the message's text block."""
    text = (ROOT / "docs" / "backend-strings.md").read_text(encoding="utf-8")
    _, found, rest = text.partition("\n### The layouts sweeper\n")
    assert found
    section = rest.split("\n### ", 1)[0]
    pairs = re.findall(
        r"^For `python train\.py -m ([^`]+)`[^`]*?:\n\n```text\n(.*?)\n```",
        section,
        flags=re.M | re.S,
    )
    assert len(pairs) >= 4
    return pairs


@pytest.mark.e2e  # sweeps in this process
@pytest.mark.usefixtures("hydra_restore_singletons", "no_speed_settings")
@pytest.mark.parametrize(
    ("command", "message"), [pytest.param(c, m, id=c) for c, m in documented_sweeper_errors()]
)
def test_sweeper_error_is_printed_as_documented(
    hydra_sweep_runner: TSweepRunner, tmp_path: Path, command: str, message: str
) -> None:
    overrides = [o for o in shlex.split(command) if o != "hydra/sweeper=areal_layouts"]
    task = Recorder()
    with pytest.raises(ConfigCompositionException) as exc:
        run_sweep(hydra_sweep_runner, overrides, tmp_path / "sweep", task)
    assert str(exc.value) == message
    assert task.calls == []


@pytest.mark.e2e  # real sweeps of many jobs, in this process
@pytest.mark.usefixtures("hydra_restore_singletons")
class TestSweepBounds:
    def test_more_jobs_than_max_jobs_are_refused_with_the_count(
        self, hydra_sweep_runner: TSweepRunner, tmp_path: Path
    ) -> None:
        task = Recorder()
        overrides = [
            "hydra.sweeper.gpus=720",
            "hydra.sweeper.max_tp=null",
            "hydra.sweeper.max_jobs=20",
        ]
        with pytest.raises(ConfigCompositionException) as info:
            run_sweep(hydra_sweep_runner, overrides, tmp_path, task)
        n = len(layouts("fsdp", 720, max_tp=8))
        msg = str(info.value)
        assert msg.startswith(
            f"hydra/sweeper=areal_layouts: the sweep has {n:,} jobs, more than "
            "hydra.sweeper.max_jobs=20"
        )
        assert "hydra.sweeper.max_tp" in msg and "model.num_layers" in msg
        assert f"hydra.sweeper.max_jobs={n} to run them all" in msg
        assert isinstance(info.value.__cause__, AllocationError)
        assert task.calls == []

    def test_max_jobs_counts_every_combination(
        self, hydra_sweep_runner: TSweepRunner, tmp_path: Path
    ) -> None:
        task = Recorder()
        n = len(layouts("fsdp", 8, max_tp=8))
        with pytest.raises(ConfigCompositionException, match=f"the sweep has {2 * n} jobs"):
            run_sweep(
                hydra_sweep_runner,
                ["cluster.n_nodes=2,3", f"hydra.sweeper.max_jobs={2 * n - 1}"],
                tmp_path,
                task,
            )
        assert task.calls == []

    def test_max_jobs_default_is_1000_and_null_lifts_it(self) -> None:
        from hydra_plugins.areal_conf_plugin._sweeper_core import check_job_count

        assert AReaLLayoutsSweeperConf().max_jobs == 1000
        check_job_count(10**7, None)
        check_job_count(1000, 1000)
        with pytest.raises(ConfigCompositionException, match="has 1,001 jobs"):
            check_job_count(1001, 1000)

    def test_the_whole_layout_sweep_is_validated_before_any_batch(
        self, hydra_sweep_runner: TSweepRunner, tmp_path: Path
    ) -> None:
        # the cluster.n_nodes=1 jobs (rollout 8 + actor 8 on 8 GPUs) come after the valid
        # n_nodes=2 ones; with one job per batch, none of them may run either.
        task = Recorder()
        with pytest.raises(ConfigCompositionException) as info:
            run_sweep(
                hydra_sweep_runner,
                ["hydra/launcher=areal", "cluster.n_nodes=2,1", "hydra.sweeper.max_batch_size=1"],
                tmp_path / "sweep",
                task,
                shared_rules_app(tmp_path),  # Slurm would only warn
            )
        n = len(layouts("fsdp", 8, max_tp=8))
        assert str(info.value).startswith(
            f"areal launcher: {n} of {2 * n} jobs of the sweep failed validation; "
            "no job was launched."
        )
        assert f"\n#{n} cluster.n_nodes=1 actor.backend=" in str(info.value)
        assert task.calls == []


# ------------------------------------------------------------ train.py end to end


def plans(sweep_dir: Path) -> list[dict[str, Any]]:
    files = sorted(sweep_dir.glob("*/allocation_plan.json"), key=lambda p: int(p.parent.name))
    return [json.loads(f.read_text()) for f in files]


@pytest.mark.e2e
def test_train_runs_one_job_per_fsdp_layout_of_the_actor(train: Train, sweep_dir: Path) -> None:
    out = train(
        "-m",
        "hydra/sweeper=areal_layouts",
        "hydra.sweeper.engine=actor",
        "hydra.sweeper.backend=fsdp",
    )
    assert out.returncode == 0, out.stderr
    expected = layouts("fsdp", 8, max_tp=8)
    found = plans(sweep_dir)
    assert len(found) == len(expected) == 10
    assert [p["engines"]["actor"]["spec"] for p in found] == expected
    assert all(p["engines"]["critic"]["spec"] == p["engines"]["actor"]["spec"] for p in found)
    assert "10 fsdp layout(s) of actor on 8 GPUs" in out.stderr + out.stdout


@pytest.mark.e2e
def test_train_sweep_crossed_with_another_sweep_doubles_the_jobs(
    train: Train, sweep_dir: Path
) -> None:
    out = train(
        "-m",
        "hydra/sweeper=areal_layouts",
        "hydra.sweeper.backend=fsdp",
        "cluster.n_nodes=2,3",
    )
    assert out.returncode == 0, out.stderr
    expected = layouts("fsdp", 8, max_tp=8)
    found = plans(sweep_dir)
    assert len(found) == 2 * len(expected)
    assert [(p["cluster"]["n_nodes"], p["engines"]["actor"]["spec"]) for p in found] == [
        (n, s) for n in (2, 3) for s in expected
    ]


@pytest.mark.e2e
def test_train_hybrid_layouts_through_the_validating_launcher(
    train: Train, sweep_dir: Path
) -> None:
    out = train(
        "-m",
        "+experiment=moe_megatron",
        "hydra/sweeper=areal_layouts",
        "hydra/launcher=areal",
        "hydra.sweeper.gpus=2",
        "hydra.sweeper.max_tp=2",
        "scheduler.type=null",  # 2 GPUs: less than Slurm's whole node
    )
    assert out.returncode == 0, out.stderr
    expected = layouts("megatron", 2, model=MOE, max_tp=2)
    assert sum(s.startswith("megatron:(attn:") for s in expected) == 3
    assert [p["engines"]["actor"]["spec"] for p in plans(sweep_dir)] == expected


@pytest.mark.e2e
def test_train_runs_only_the_two_fastest_megatron_layouts(
    train: Train, sweep_dir: Path, no_speed_settings: None
) -> None:
    given = [
        f"model.hf_config={QWEN}",
        "+train_dataset.batch_size=16",
        "+gconfig.max_new_tokens=2048",
    ]
    out = train(
        "-m",
        "hydra/sweeper=areal_layouts",
        "hydra.sweeper.engine=actor",
        "hydra.sweeper.backend=megatron",
        "hydra.sweeper.rank=step_time",
        "hydra.sweeper.top_k=2",
        *given,
    )
    assert out.returncode == 0, out.stderr
    cfg = compose_config(*given)
    every = layouts("megatron", 8, model=QWEN_KEYS, max_tp=8)
    fastest = expected_ranking(cfg, every)[:2]
    assert job_dirs(sweep_dir) == ["0", "1"]  # only two jobs ran
    found = plans(sweep_dir)
    assert [p["engines"]["actor"]["spec"] for p in found] == fastest
    # the plan's s/step column predicts what the sweeper ranked by
    predicted = dict(zip(every, step_seconds(cfg, every), strict=True))
    assert [p["engines"]["actor"]["step_seconds"] for p in found] == pytest.approx(
        [predicted[spec] for spec in fastest], abs=1e-3
    )
    log = out.stderr + out.stdout
    assert f"2 of {len(every)} megatron layout(s) of actor on 8 GPUs" in log
    assert "fastest predicted step first" in log


@pytest.mark.e2e
def test_train_top_k_without_rank_is_one_message(train: Train, sweep_dir: Path) -> None:
    out = train("-m", "hydra/sweeper=areal_layouts", "hydra.sweeper.top_k=2")
    assert out.returncode == EXIT_INVALID  # areal-conf's own error: exit 2, as for a config
    assert out.stderr.count("hydra.sweeper.top_k=2 keeps the fastest layouts") == 1
    assert "hint: add hydra.sweeper.rank=step_time" in out.stderr
    assert "Traceback" not in out.stderr
    assert job_dirs(sweep_dir) == []


@pytest.mark.e2e
def test_train_sweep_error_is_one_message(train: Train, sweep_dir: Path) -> None:
    out = train(
        "-m",
        "hydra/sweeper=areal_layouts",
        "hydra.sweeper.engine=rollout",
        "hydra.sweeper.backend=fsdp",
    )
    assert out.returncode == EXIT_INVALID
    assert "rollout needs an inference backend, got fsdp" in out.stderr
    assert "Traceback" not in out.stderr
    assert plans(sweep_dir) == []


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("options", "part"),
    [
        (["hydra.sweeper.engine=nope"], "hydra.sweeper.engine: unknown engine nope"),
        (["hydra.sweeper.rank=step_time", "hydra.sweeper.top_k=-1"], "hydra.sweeper.top_k:"),
        # no model shape to predict a step time with
        (["hydra.sweeper.rank=step_time"], "cannot predict actor's step time"),
        (
            ["hydra.sweeper.engine=actor", "actor.backend=fsdp:d8,fsdp:d4t2"],
            "areal_layouts sweeps actor.backend itself",
        ),
    ],
)
def test_sweeper_errors_exit_2(
    train: Train, sweep_dir: Path, options: list[str], part: str
) -> None:
    out = train("-m", "hydra/sweeper=areal_layouts", *options)
    assert out.returncode == EXIT_INVALID, out.stderr
    assert part in out.stderr
    assert "Traceback" not in out.stderr
