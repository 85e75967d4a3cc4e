"""What a training engine's section sets for its backend that changes its memory or its
speed (``megatron.*``, ``fsdp.*``, ``archon.*``), read for the memory check and the
step-time model, with AReaL's defaults (``areal/api/cli_args.py`` at cbff54d64):

- ``megatron.ddp.use_distributed_optimizer`` (on, 790), ``overlap_grad_reduce`` and
  ``overlap_param_gather`` (off, 787-788);
- ``megatron.recompute_granularity`` (full, 965), ``megatron.bridge_type`` (mbridge,
  1064), ``megatron.virtual_pipeline_parallel_size`` (1, 915);
- and the keys the step-time model does not price (:data:`UNPRICED_SPEED_KEYS`), for the
  plan to name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from areal_conf.config.nodes import is_mapping, read_bool, read_int, read_text, read_value

#: What a training engine's config may set that changes its speed and the step-time
#: model does not price, as AReaL names it: the key under the engine, and the values
#: that leave it off.
UNPRICED_SPEED_KEYS: Final = (
    ("megatron.fp8_config", (None,)),  # FP8 training (1061)
    ("archon.fp8_config.mode", (None, "disabled")),  # ArchonFP8Config.mode (721, 536)
    ("fsdp.offload_params", (None, False)),  # parameters on the CPU (489)
    ("archon.offload_params", (None, False)),  # (619)
    ("megatron.recompute_modules", (None,)),  # which modules are recomputed (969)
    ("megatron.recompute_num_layers", (None, 1)),  # layers a block recomputes (967)
)


def backend_knobs(node: Any, section: str, backend: object) -> dict[str, Any]:
    """The :class:`areal_conf.config.run_config.EngineSection` fields of the engine
    section ``node`` (at config key ``section``, whose ``backend`` is as read) that its
    backend's keys give."""

    def at(key: str) -> str:
        return f"{section}.{key}"

    megatron = read_value(node, "megatron", at("megatron"))
    megatron = megatron if is_mapping(megatron) else None
    ddp = read_value(megatron, "ddp", at("megatron.ddp")) if megatron is not None else None
    ddp = ddp if is_mapping(ddp) else None

    def ddp_flag(flag: str, default: bool) -> bool:
        return read_bool(ddp, flag, at(f"megatron.ddp.{flag}"), default) if ddp else default

    granularity = (
        read_value(megatron, "recompute_granularity", at("megatron.recompute_granularity"))
        if megatron is not None
        else None
    )
    virtual = (
        read_int(
            megatron,
            "virtual_pipeline_parallel_size",
            at("megatron.virtual_pipeline_parallel_size"),
            1,
            2,
        )
        if megatron is not None
        else None
    )
    bridge = (
        read_text(megatron, "bridge_type", at("megatron.bridge_type"), "mbridge")
        if megatron is not None
        else "mbridge"
    )
    return {
        "distributed_optimizer": ddp_flag("use_distributed_optimizer", True),
        "overlap_grad_reduce": ddp_flag("overlap_grad_reduce", False),
        "overlap_param_gather": ddp_flag("overlap_param_gather", False),
        "virtual_stages": virtual or 1,
        "recompute_granularity": str(granularity) if granularity is not None else "full",
        "bridge_type": str(bridge),
        "unpriced": tuple(_unpriced(node, section, backend)),
    }


def _unpriced(node: Any, section: str, backend: object) -> Iterator[str]:
    """The keys of :data:`UNPRICED_SPEED_KEYS` that the engine's section turns on, of the
    backend it names (AReaL reads ``megatron.*`` for a Megatron engine only; all of them
    when the backend is not written here, as for an engine that inherits it)."""
    # the backend's name, the text before the colon (the grammar parses the rest later)
    name = backend.partition(":")[0] if isinstance(backend, str) else ""
    for key, off in UNPRICED_SPEED_KEYS:
        if name and key.partition(".")[0] != name:
            continue
        value: Any = node
        for part in key.split("."):
            value = read_value(value, part, f"{section}.{key}") if is_mapping(value) else None
        if value not in off:
            yield f"{section}.{key}"
