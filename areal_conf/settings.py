"""areal-conf's own knobs: what a user gives areal-conf beside an AReaL config.

AReaL's loader rejects any key its dataclasses lack, so what only areal-conf uses never
goes into an AReaL YAML. It comes from areal-conf's command line
(``python -m areal_conf ... --areal-version 2.0 --gpu-memory-gb 141 --model hf_config=...``)
or from the environment, which train.py, the launcher and ``validate`` read:

- ``AREAL_CONF_AREAL_VERSION``: the AReaL version whose rules apply (``1.0``, ``2.0``);
- ``AREAL_CONF_GPU_MEMORY_GB``: memory of one GPU in GB (10^9 bytes), default 80;
- ``AREAL_CONF_GPU``: the GPU by name (``a100``, ``h100``, ``h200``, ``b200``), whose
  memory counts when ``AREAL_CONF_GPU_MEMORY_GB`` is not given;
- ``AREAL_CONF_MODEL``: the model's shape for the layout and memory checks: a
  ``config.json``, a model directory or a Hugging Face id (by default the shape comes
  from ``actor.path``);
- ``AREAL_CONF_MEAN_RESPONSE_TOKENS``: the mean response length the predicted step time
  assumes (default: half of ``gconfig.max_new_tokens``);
- ``AREAL_CONF_DEVICE_DIR``: where areal-conf counts the machine's GPUs for AReaL's local
  scheduler (default ``/dev``, where AReaL counts them; the test suite points it at an
  empty directory so that a GPU machine plans as CI does).

The environment also gives the GPUs AReaL's local scheduler would have where areal-conf
runs (``CUDA_VISIBLE_DEVICES``, else the machine's devices: :mod:`areal_conf.areal.local_gpus`).

areal-conf's own application configs (those listing ``areal_schema``) may also set
``cluster.gpu_memory_gb`` and the ``model`` section; a setting given here wins over them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from areal_conf.areal.local_gpus import DEVICE_DIR, GpuCount, machine_gpus
from areal_conf.arguments import mapping, optional_whole, positive, text
from areal_conf.errors import AllocationError, ConfigError, from_variable

GPU_MEMORY_ENV: Final = "AREAL_CONF_GPU_MEMORY_GB"
GPU_ENV: Final = "AREAL_CONF_GPU"
MODEL_ENV: Final = "AREAL_CONF_MODEL"
MEAN_RESPONSE_ENV: Final = "AREAL_CONF_MEAN_RESPONSE_TOKENS"
DEVICE_DIR_ENV: Final = "AREAL_CONF_DEVICE_DIR"


@dataclass(frozen=True)
class Settings:
    """areal-conf's knobs for one validation; None: not given.

    ``areal_version`` is what ``--areal-version`` asked for (the environment variable is
    read by :func:`areal_conf.areal.versions.choose_rules`); ``model`` holds model-section
    keys (``hf_config`` a file, directory or Hugging Face id; sizes such as
    ``num_layers``) with ``model_from`` naming where they came from; ``gpu`` the GPU by
    its name in ``areal_conf.model.hardware.HARDWARE``; ``mean_response_tokens`` the mean
    response length the predicted step time assumes; ``machine_gpus`` the GPUs AReaL's
    local scheduler would have where areal-conf runs (None: none visible here).
    """

    areal_version: str | None = None
    gpu: str | None = None
    gpu_memory_gb: float | None = None
    gpu_memory_from: str = ""
    model: Mapping[str, Any] = field(default_factory=dict)
    model_from: str = ""
    mean_response_tokens: int | None = None
    machine_gpus: GpuCount | None = None


#: The memory of one GPU when nothing says (an H100's, the most common training GPU).
DEFAULT_GPU_MEMORY_GB: Final = 80.0


def gpu_memory_of(settings: Settings, config_gb: float | None = None) -> tuple[float, str, bool]:
    """A GPU's memory in GB, where it came from, and whether it is assumed: areal-conf's
    setting (``--gpu-memory-gb``, ``--gpu``, or their environment variables), else the
    config's (``cluster.gpu_memory_gb`` of areal-conf's own configs), else
    :data:`DEFAULT_GPU_MEMORY_GB` (assumed: what does not fit it is a warning only)."""
    if settings.gpu_memory_gb is not None:
        return settings.gpu_memory_gb, settings.gpu_memory_from, False
    if config_gb is not None:
        return config_gb, "cluster.gpu_memory_gb", False
    return DEFAULT_GPU_MEMORY_GB, "assumed", True


def optional_settings(settings: object) -> Settings | None:
    """The ``settings`` argument of a public function: a :class:`Settings` or None, each
    field of the type it has (a value a field cannot hold is an AllocationError naming
    the field). Whether a text names what it should (a known GPU, a supported AReaL
    version, a model's file) is checked where it is used."""
    if settings is None:
        return None
    if not isinstance(settings, Settings):
        raise ConfigError(
            f"settings must be a Settings or None, got {type(settings).__name__}",
            hint="give areal_conf.settings.Settings(gpu_memory_gb=80, ...), or None for the "
            "environment's",
        )
    for name in ("areal_version", "gpu"):
        value = getattr(settings, name)
        if value is not None:
            text(f"settings.{name}", value, example=f"or None, e.g. {_EXAMPLES[name]}")
    for name in ("gpu_memory_from", "model_from"):
        text(f"settings.{name}", getattr(settings, name), example='e.g. "" (not given)')
    if settings.gpu_memory_gb is not None:
        positive("settings.gpu_memory_gb", settings.gpu_memory_gb, example="e.g. 80, or None")
    mapping("settings.model", settings.model, example='e.g. {"hf_config": "Qwen/Qwen3-8B"}')
    optional_whole(
        "settings.mean_response_tokens",
        settings.mean_response_tokens,
        example="e.g. Settings(mean_response_tokens=2048), or None for half of "
        "gconfig.max_new_tokens",
    )
    if settings.machine_gpus is not None and not isinstance(settings.machine_gpus, GpuCount):
        raise ConfigError(
            f"settings.machine_gpus must be a GpuCount or None, got "
            f"{type(settings.machine_gpus).__name__}",
            hint="leave it None: areal-conf counts the GPUs AReaL's local scheduler sees",
        )
    return settings


#: An example of each text field of :class:`Settings`, for its message.
_EXAMPLES: Final = {"areal_version": '"2.0"', "gpu": '"h100"'}


def positive_tokens(value: object, where: str) -> int:
    """``value`` as a positive whole number of tokens, else an AllocationError."""
    number: int | None = None
    if isinstance(value, str) and value.strip().isdigit():
        number = int(value)
    elif type(value) is int:
        number = value
    if number is None or number < 1:
        raise _not_positive(where, value, "whole number of tokens", f"e.g. {where}=2048")
    return number


def positive_gb(value: object, where: str) -> float:
    """``value`` as a positive number of GB, else an AllocationError naming ``where``."""
    number: float | None = None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    if number is None or not number > 0 or number == float("inf"):
        raise _not_positive(
            where,
            value,
            "number of GB (10^9 bytes)",
            f"e.g. {where}=80 for an 80 GB GPU, {where}=141 for an H200",
        )
    return number


def _not_positive(where: str, value: object, what: str, hint: str) -> AllocationError:
    return AllocationError(
        f"{where}: must be a positive {what}, got {value!r}",
        value if isinstance(value, str) else None,
        hint=hint,
    )


def from_environment(
    environ: Mapping[str, str] | None = None, *, areal_version: str | None = None
) -> Settings:
    """The settings the environment gives (``AREAL_CONF_GPU_MEMORY_GB``,
    ``AREAL_CONF_MODEL``, ..., the machine's GPUs), plus ``areal_version`` from a command
    line."""
    env = os.environ if environ is None else environ
    gb_text = env.get(GPU_MEMORY_ENV, "")
    with from_variable(GPU_MEMORY_ENV):
        gpu_gb = positive_gb(gb_text, GPU_MEMORY_ENV) if gb_text != "" else None
    gb_from = GPU_MEMORY_ENV if gpu_gb is not None else ""
    gpu = env.get(GPU_ENV, "") or None
    if gpu is not None:
        from areal_conf.model.hardware import hardware

        with from_variable(GPU_ENV):
            known = hardware(gpu, GPU_ENV)
        if gpu_gb is None:
            gpu_gb, gb_from = known.hbm_gb, f"{GPU_ENV}={gpu}"
    model_text = env.get(MODEL_ENV, "")
    model = {"hf_config": model_text} if model_text else {}
    response_text = env.get(MEAN_RESPONSE_ENV, "")
    with from_variable(MEAN_RESPONSE_ENV):
        response = positive_tokens(response_text, MEAN_RESPONSE_ENV) if response_text else None
    return Settings(
        areal_version=areal_version,
        gpu=gpu,
        gpu_memory_gb=gpu_gb,
        gpu_memory_from=gb_from,
        model=model,
        model_from=MODEL_ENV if model else "",
        mean_response_tokens=response,
        machine_gpus=machine_gpus(env, Path(env.get(DEVICE_DIR_ENV, "") or DEVICE_DIR)),
    )


_IN_FORCE: ContextVar[Settings | None] = ContextVar("areal_conf_settings", default=None)


@contextmanager
def in_force(settings: Settings) -> Iterator[None]:
    """Within the block, a validation given no settings uses ``settings`` instead of the
    environment's: how areal-conf's command-line options reach the checks a Hydra
    launcher makes in this process (``python -m areal_conf sweep --gpu-memory-gb 141``)."""
    token = _IN_FORCE.set(settings)
    try:
        yield
    finally:
        _IN_FORCE.reset(token)


def default_settings(*, areal_version: str | None = None) -> Settings:
    """The settings of a validation given none: those :func:`in_force`, else the
    environment's (with ``areal_version`` from a command line)."""
    given = _IN_FORCE.get()
    return given if given is not None else from_environment(areal_version=areal_version)
