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
  ``config.json``, a model directory or a Hugging Face id, or ``KEY=VALUE`` sizes
  (``num_layers=48 hidden_size=4096``), as ``--model`` takes them (by default the shape
  comes from ``actor.path``);
- ``AREAL_CONF_MEAN_RESPONSE_TOKENS``: the mean response length the predicted step time
  assumes (default: half of ``gconfig.max_new_tokens``);
- ``AREAL_CONF_DEVICE_DIR``: where areal-conf counts the machine's GPUs for AReaL's local
  scheduler (default ``/dev``, where AReaL counts them; the test suite points it at an
  empty directory so that a GPU machine plans as CI does).

Each of these but the AReaL version is one row of :data:`KNOBS`: its variable, its flag
(the same syntax) and its reader; a flag wins over its variable.

The environment also gives the GPUs AReaL's local scheduler would have where areal-conf
runs (``CUDA_VISIBLE_DEVICES``, else the machine's devices: :mod:`areal_conf.areal.local_gpus`).

areal-conf's own application configs (those listing ``areal_schema``) may also set
``cluster.gpu_memory_gb`` and the ``model`` section; a setting given here wins over them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from areal_conf.areal.drivers import DriverScope
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
    local scheduler would have where areal-conf runs (None: none visible here);
    ``driver`` what the AReaL command's driver script builds, when its source shows it
    builds no trainer (None: every engine of the config, as AReaL's trainers build them).
    """

    areal_version: str | None = None
    gpu: str | None = None
    gpu_memory_gb: float | None = None
    gpu_memory_from: str = ""
    model: Mapping[str, Any] = field(default_factory=dict)
    model_from: str = ""
    mean_response_tokens: int | None = None
    machine_gpus: GpuCount | None = None
    driver: DriverScope | None = None


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
    if settings.driver is not None and not isinstance(settings.driver, DriverScope):
        raise ConfigError(
            f"settings.driver must be a DriverScope or None, got {type(settings.driver).__name__}",
            hint="leave it None: areal-conf reads an AReaL command's driver script itself",
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


@dataclass(frozen=True)
class Knob:
    """One of areal-conf's settings as a user gives it: the :class:`Settings` field it
    sets, its environment variable and its command-line flag (the same meaning and
    syntax in both), and the reader of a given value (the text, and where it came from
    for a message)."""

    field: str
    variable: str
    flag: str
    read: Callable[[Any, str], Any]


def _known_gpu(value: Any, where: str) -> str:
    from areal_conf.model.hardware import hardware

    hardware(value, where)  # an unknown name is an AllocationError naming ``where``
    return str(value)


def read_model_setting(value: Any, where: str) -> dict[str, Any]:
    """A model setting (``--model``, ``AREAL_CONF_MODEL``): the model's ``config.json``, its
    directory or Hugging Face id; or ``KEY=VALUE`` sizes (``num_layers=48``, and
    ``hf_config=...``), as a text of blank-separated items or a list of them."""
    items = value.split() if isinstance(value, str) and "=" in value else value
    if isinstance(items, str):
        return {"hf_config": items}
    model: dict[str, Any] = {}
    for item in items:
        if "=" not in item and len(items) == 1 and not _size_key(item):
            return {"hf_config": item}
        key, sep, given = item.partition("=")
        key = key.strip().removeprefix("model.")
        if not sep or not key:
            raise AllocationError(
                f"{where} takes KEY=VALUE sizes, or the model's config.json, directory or "
                f"Hugging Face id, got {item!r}",
                item,
                hint=f"e.g. {where} Qwen/Qwen3-8B, or {where} num_experts=64 num_layers=48",
            )
        text = given.strip()
        if key == "hf_config":
            model[key] = text or None
        elif key == "tie_word_embeddings" and text.lower() in ("true", "false"):
            model[key] = text.lower() == "true"
        elif text.lower() in ("null", "none", ""):
            model[key] = None
        elif text.isascii() and text.isdigit():
            model[key] = int(text)
        else:
            raise AllocationError(
                f"{where} {key}: {given!r} is not a whole number",
                item,
                len(item) - len(given),
                length=max(1, len(given)),
                hint=f"e.g. {where} {key}=32, or {key}=null to skip its check",
            )
    return model


def _size_key(item: str) -> bool:
    """``item`` reads as a model key without its value (``num_layers``), not as a model:
    a Hugging Face id has a ``/``, and a directory of that name would exist."""
    return re.fullmatch(r"(model\.)?[a-z_]+", item) is not None and not os.path.exists(item)


#: Every setting a user gives areal-conf, on the command line or in the environment. The
#: AReaL version (``--areal-version``, ``AREAL_CONF_AREAL_VERSION``) is not here: which
#: rules apply is :func:`areal_conf.areal.versions.choose_rules`'s to decide.
KNOBS: Final = (
    Knob("gpu_memory_gb", GPU_MEMORY_ENV, "--gpu-memory-gb", positive_gb),
    Knob("gpu", GPU_ENV, "--gpu", _known_gpu),
    Knob("model", MODEL_ENV, "--model", read_model_setting),
    Knob("mean_response_tokens", MEAN_RESPONSE_ENV, "--mean-response-tokens", positive_tokens),
)


def _given(values: Mapping[str, Any], *, flags: bool) -> dict[str, tuple[Any, str]]:
    """What one source gives (the environment, or the command line when ``flags``), each
    value read by its knob: by field, with where it came from. A GPU named without a
    memory in the same source gives its memory."""
    found: dict[str, tuple[Any, str]] = {}
    for knob in KNOBS:
        value = values.get(knob.field)
        if value is None or value == "" or value == []:
            continue
        where = knob.flag if flags else knob.variable
        with nullcontext() if flags else from_variable(knob.variable):
            found[knob.field] = (knob.read(value, where), where)
    if "gpu" in found and "gpu_memory_gb" not in found:
        from areal_conf.model.hardware import hardware

        gpu, where = found["gpu"]
        named = f"{where} {gpu}" if flags else f"{where}={gpu}"
        found["gpu_memory_gb"] = (hardware(gpu, where).hbm_gb, named)
    return found


def from_environment(
    environ: Mapping[str, str] | None = None,
    *,
    areal_version: str | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Settings:
    """The settings the environment gives (each variable of :data:`KNOBS`, the machine's
    GPUs), with ``flags`` (values of a command line's options, by field) on top of them,
    and ``areal_version`` from a command line."""
    env = os.environ if environ is None else environ
    from_env = _given({k.field: env.get(k.variable, "") for k in KNOBS}, flags=False)
    layers = [_given(flags or {}, flags=True), from_env]  # a flag wins over its variable

    def first(field: str) -> tuple[Any, str] | None:
        return next((layer[field] for layer in layers if field in layer), None)

    gpu, memory, model = first("gpu"), first("gpu_memory_gb"), first("model")
    response = first("mean_response_tokens")
    return Settings(
        areal_version=areal_version,
        gpu=None if gpu is None else gpu[0],
        gpu_memory_gb=None if memory is None else memory[0],
        gpu_memory_from="" if memory is None else memory[1],
        model={} if model is None else model[0],
        model_from="" if model is None else model[1],
        mean_response_tokens=None if response is None else response[0],
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
