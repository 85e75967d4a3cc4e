"""What a training engine's section sets for its backend (``megatron.*``, ``fsdp.*``,
``archon.*``) and what each key does to the step time and memory areal-conf predicts.

:data:`BACKEND_KEYS` classifies every key of AReaL's backend configs (``FSDPEngineConfig``,
``ArchonEngineConfig``, ``MegatronEngineConfig`` and the sections under them,
``areal/api/cli_args.py`` at cbff54d64, lines 472-1110; AReaL 1.0 has a subset) as one of

- ``priced``: the step time reads it (its value changes the prediction);
- ``named``: it changes a step's speed and the model does not price it; AReaL's default
  (and each value in ``usual``) is what the model assumes, and a config that sets another
  value gets ``not modelled: <key>`` on its ``s/step`` line (:func:`_unpriced`);
- ``no_effect``: it does not change a training step's time (start-up, saving, the
  weight update to the rollout, numerics of a tensor too small to count), with why.

A test holds every key of both AReaL versions to a row here. :func:`backend_knobs` reads
the priced ones into :class:`areal_conf.config.run_config.EngineSection` fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

from areal_conf.config.nodes import (
    has_key,
    is_mapping,
    keys_of,
    read_bool,
    read_int,
    read_text,
    read_value,
)
from areal_conf.model.hardware import FP8_RECIPES
from areal_conf.spec.backends import written_backend_name


@dataclass(frozen=True)
class BackendKey:
    """How the step time treats one key of a backend config (see the module)."""

    effect: Literal["priced", "named", "no_effect"]
    why: str
    #: named, or priced at some values only: the values the model prices; any other is
    #: named. Empty for a key priced at every value or without effect.
    usual: tuple[object, ...] = ()


def _priced(why: str, *only: object) -> BackendKey:
    return BackendKey("priced", why, only)


def _named(why: str, *usual: object) -> BackendKey:
    return BackendKey("named", why, usual)


def _none(why: str) -> BackendKey:
    return BackendKey("no_effect", why)


_FP8_DETAIL = "a detail of FP8 training that does not change its speed"
_SAVE = "checkpoint saving, not the training step"
_RECOMPUTE = "which layers or modules Megatron recomputes"

#: Every key of AReaL's backend configs, by its path under the engine's section.
BACKEND_KEYS: Final[dict[str, BackendKey]] = {
    # FSDPEngineConfig (482-530)
    "fsdp.wrap_policy.transformer_layer_cls_to_wrap": _named(
        "the unit FSDP gathers and frees; priced per decoder layer, AReaL's default"
    ),
    "fsdp.offload_params": _named("parameters and optimizer step on the CPU", False),
    "fsdp.memory_efficient_load": _none("how weights are loaded at start-up"),
    "fsdp.per_layer_optim_step": _named("Adam streamed layer by layer from the CPU", False),
    "fsdp.optim_step_prefetch_layers": _none("tunes per_layer_optim_step, named itself"),
    "fsdp.shard_vision_across_sp": _none("a vision encoder's images, not a language model's"),
    # ArchonEngineConfig (606-778)
    "archon.attn_type": _named("the attention kernel; priced as varlen flash attention", "varlen"),
    "archon.offload_params": _named("parameters and optimizer step on the CPU", False),
    "archon.enable_compile": _named("torch.compile of the decoder layers", False),
    "archon.ac_mode": _priced(
        "what gradient_checkpointing recomputes: none, full layers or op-level",
        *("none", "full", "selective"),
    ),
    "archon.selective_ac_option": _priced(
        "op-level (priced) or every Nth layer recomputed (named)", "op"
    ),
    "archon.ac_memory_budget": _none("read by ac_mode memory_budget only, which is named"),
    "archon.ac_preserve_rng_state": _named("saving RNG state at each checkpoint", False),
    "archon.ac_debug": _named("capturing checkpointing debug information", False),
    "archon.pp_schedule": _priced(
        "the pipeline schedule: 1F1B, or two interleaved stages a rank; zero-bubble "
        "schedules split the backward and are named",
        *("1F1B", "Interleaved1F1B"),
    ),
    "archon.pp_layers_per_stage": _named("virtual stages from the layer count"),
    "archon.pp_first_stage_less_layers": _named("an uneven split of the layers", 1),
    "archon.pp_last_stage_less_layers": _named("an uneven split of the layers", 1),
    "archon.reshard_after_forward_policy": _named(
        "whether FSDP frees gathered weights after the forward", "default"
    ),
    "archon.fp8_config.mode": _named("FP8 matmuls", "disabled"),
    "archon.fp8_config.exclude_modules": _none(_FP8_DETAIL),
    "archon.fp8_config.include_experts": _none(_FP8_DETAIL),
    "archon.fp8_config.use_triton": _none(_FP8_DETAIL),
    "archon.use_deterministic_algorithms": _named("deterministic kernels and NCCL", False),
    "archon.moe_router_dtype": _none("the router's GEMM, well under 1% of an MoE layer's FLOPs"),
    # MegatronEngineConfig (903-1110) and DistributedDataParallelConfig (781-794)
    "megatron.wrap_with_ddp": _named("Megatron's DDP wrapper and its gradient buffers", True),
    "megatron.use_torch_fsdp2": _named("PyTorch FSDP2 instead of Megatron's DDP", False),
    "megatron.use_custom_fsdp": _named("Megatron's own FSDP instead of its DDP", False),
    "megatron.ddp.grad_reduce_in_fp32": _priced("gradients kept and reduced in fp32"),
    "megatron.ddp.overlap_grad_reduce": _priced("gradient reduction beside the backward"),
    "megatron.ddp.overlap_param_gather": _priced("weight gathers beside the forward"),
    "megatron.ddp.align_param_gather": _named("aligned weight gathers across stages", False),
    "megatron.ddp.use_distributed_optimizer": _priced("ZeRO-1: sharded optimizer state"),
    "megatron.ddp.check_for_nan_in_grad": _named("a NaN check of every gradient", False),
    "megatron.ddp.bucket_size": _named("the gradient bucket size"),
    "megatron.ddp.average_in_collective": _none("where gradients are divided, not what is sent"),
    "megatron.ddp.fp8_param_gather": _priced("weights gathered in FP8 (with fp8_config.param)"),
    "megatron.virtual_pipeline_parallel_size": _priced("interleaved pipeline stages"),
    "megatron.overlap_param_gather_with_optimizer_step": _named(
        "weight gathers beside the optimizer step", False
    ),
    "megatron.use_precision_aware_optimizer": _named("Adam moments kept in bf16", False),
    "megatron.main_grads_dtype": _named("the precision-aware optimizer's dtypes", "float32"),
    "megatron.main_params_dtype": _named("the precision-aware optimizer's dtypes", "float32"),
    "megatron.exp_avg_dtype": _named("the precision-aware optimizer's dtypes", "float32"),
    "megatron.exp_avg_sq_dtype": _named("the precision-aware optimizer's dtypes", "float32"),
    "megatron.async_save": _none(_SAVE),
    "megatron.use_checkpoint_opt_param_scheduler": _none(_SAVE),
    "megatron.use_deterministic_algorithms": _named("deterministic kernels", False),
    "megatron.recompute_granularity": _priced(
        "with gradient_checkpointing: whole layers or the attention core"
    ),
    "megatron.recompute_method": _named(_RECOMPUTE, "uniform"),
    "megatron.recompute_num_layers": _named(_RECOMPUTE, 1),
    "megatron.distribute_saved_activations": _named("checkpoints split over tp", False),
    "megatron.recompute_modules": _named(_RECOMPUTE),
    "megatron.moe_router_dtype": _none("the router's GEMM, well under 1% of an MoE layer's FLOPs"),
    "megatron.moe_shared_expert_overlap": _named("the shared expert beside the dispatch", False),
    "megatron.moe_enable_deepep": _none("selects DeepEP for the flex dispatcher, priced"),
    "megatron.moe_token_dispatcher_type": _priced(
        "all-to-all: a copy of a token for each expert; flex (DeepEP): once to each node "
        "(megatron-bridge runs all-to-all, registry.py:476-481); allgather is named",
        *("alltoall", "flex"),
    ),
    "megatron.moe_permute_fusion": _named("fused token permutation", False),
    "megatron.moe_router_fusion": _named("fused top-k routing", False),
    "megatron.moe_router_bias_update_rate": _none("a bias of one value an expert, once a step"),
    "megatron.moe_z_loss_coeff": _none("a loss term over the router's logits"),
    "megatron.enable_chunked_logits": _named("AReaL's chunked output layer", False),
    "megatron.entropy_requires_grad": _none("whether the entropy has a gradient"),
    "megatron.lm_head_loss_chunk_size": _named("the output layer's loss in chunks", 0),
    "megatron.enable_fp32_lm_head": _named("the output layer's GEMM in fp32", False),
    "megatron.cross_entropy_loss_fusion": _named("a fused cross-entropy kernel", False),
    "megatron.fp8_config": _priced("the linear layers' GEMMs in FP8"),
    "megatron.fp8_config.recipe": _priced(
        "how FP8 values are scaled: current scaling (tensorwise) reads each tensor once more",
        *FP8_RECIPES,
    ),
    "megatron.fp8_config.param": _priced(
        "weights kept in FP8 (gathered in FP8 with fp8_param_gather)"
    ),
    "megatron.fp8_config.wgrad": _named("the weight-gradient GEMMs in bf16", True),
    "megatron.fp8_config.dot_product_attention": _named("attention in FP8", False),
    "megatron.fp8_config.multi_head_attention": _named("attention in FP8", False),
    "megatron.fp8_config.first_last_layers_bf16": _named("some layers kept in bf16", False),
    **{
        f"megatron.fp8_config.{key}": _none(_FP8_DETAIL)
        for key in (
            *("mode", "margin", "amax_history_len", "amax_compute_algo", "tp_only_amax_red"),
            *("num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16", "direct_convert"),
        )
    },
    "megatron.bridge_type": _priced("megatron-bridge fuses gradient accumulation"),
    "megatron.use_mbridge_save": _none(_SAVE),
    "megatron.use_bridge_for_update_weights": _none("the weight update to the rollout"),
    "megatron.disable_grad_buffers_cpu_backup": _none("offloading between steps"),
    "megatron.enable_mtp": _named("the multi-token-prediction head", False),
}

#: Archon's pipeline schedules that run one stage a rank (the others run two by default,
#: ``areal/experimental/models/archon/pipeline_parallel.py:449-450``).
_SINGLE_STAGE_SCHEDULES: Final = ("1F1B",)
#: Archon's schedules that split the backward; op-level and memory-budget checkpointing
#: fall back to whole layers with them (``areal/experimental/engine/archon_utils.py:
#: 150-203``).
_ZERO_BUBBLE_SCHEDULES: Final = ("InterleavedZeroBubble", "ZBVZeroBubble")


def backend_knobs(node: Any, section: str, backend: object, dtype: object) -> dict[str, Any]:
    """The :class:`areal_conf.config.run_config.EngineSection` fields of the engine
    section ``node`` (at config key ``section``, whose ``backend`` is as read, computing
    in ``dtype``) that its backend's keys give, with AReaL's defaults."""

    def at(key: str) -> str:
        return f"{section}.{key}"

    def sub(parent: Any, key: str, where: str) -> Any:
        value = read_value(parent, key, where) if parent is not None else None
        return value if is_mapping(value) else None

    megatron = sub(node, "megatron", at("megatron"))
    ddp = sub(megatron, "ddp", at("megatron.ddp"))
    archon = sub(node, "archon", at("archon"))

    def ddp_flag(flag: str, default: bool) -> bool:
        return read_bool(ddp, flag, at(f"megatron.ddp.{flag}"), default) if ddp else default

    def text(parent: Any, key: str, default: object) -> str:
        if parent is None:
            return str(default)
        return str(read_text(parent, key, at(key), default))

    granularity = (
        read_value(megatron, "recompute_granularity", at("megatron.recompute_granularity"))
        if megatron is not None
        else None
    )
    vpp = (
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
    schedule = text(archon, "pp_schedule", "Interleaved1F1B")
    bridge = text(megatron, "bridge_type", "mbridge")
    fp8 = sub(megatron, "fp8_config", at("megatron.fp8_config"))
    megatron_engine = written_backend_name(backend) in ("", "megatron")
    recipe = text(fp8, "recipe", "delayed") if fp8 is not None else None
    return {
        "grad_reduce_dtype": _grad_reduce_dtype(
            node, at, backend, ddp_flag("grad_reduce_in_fp32", True), dtype
        ),
        "distributed_optimizer": ddp_flag("use_distributed_optimizer", True),
        "overlap_grad_reduce": ddp_flag("overlap_grad_reduce", False),
        "overlap_param_gather": ddp_flag("overlap_param_gather", False),
        "virtual_stages": _virtual_stages(backend, vpp or 1, schedule),
        "recompute_granularity": str(granularity) if granularity is not None else "full",
        "archon_recompute": _archon_recompute(
            text(archon, "ac_mode", "selective"),
            text(archon, "selective_ac_option", "op"),
            schedule,
        ),
        "bridge_type": bridge,
        "dedup_dispatch": written_backend_name(backend) in ("", "megatron")
        and bridge != "megatron-bridge"
        and text(megatron, "moe_token_dispatcher_type", "alltoall") == "flex",
        # AReaL reads fp8_config on a Megatron engine only (megatron_engine.py:350-351);
        # a recipe Transformer Engine does not run is named, and priced as bf16.
        "fp8_training": megatron_engine and fp8 is not None,
        "fp8_recipe": recipe if megatron_engine and recipe in FP8_RECIPES else None,
        # Megatron-Core gathers in FP8 the weights that are FP8 (fp8_config.param)
        "fp8_param_gather": fp8 is not None
        and read_bool(fp8, "param", at("megatron.fp8_config.param"), False)
        and ddp_flag("fp8_param_gather", False),
        "unpriced": tuple(_unpriced(node, section, backend)),
    }


def _grad_reduce_dtype(
    node: Any, at: Callable[[str], str], backend: object, fp32: bool, dtype: object
) -> str:
    """The dtype gradients are kept and reduced in: FSDP's ``grad_reduce_dtype``
    (``areal/engine/fsdp_utils/parallel.py:386``); Megatron's DDP fp32 or the compute
    dtype (``megatron.ddp.grad_reduce_in_fp32``); Archon's float32 always
    (``archon_engine.py:927``)."""
    name = written_backend_name(backend)
    if name == "megatron":
        return "float32" if fp32 else str(dtype)
    if name == "archon":
        return "float32"
    return str(read_text(node, "grad_reduce_dtype", at("grad_reduce_dtype"), "float32"))


def _virtual_stages(backend: object, vpp: int, schedule: str) -> int:
    """Pipeline stages a rank runs: Megatron's ``virtual_pipeline_parallel_size``;
    Archon's schedule's, two unless it is 1F1B."""
    if written_backend_name(backend) == "archon":
        return 1 if schedule in _SINGLE_STAGE_SCHEDULES else 2
    return vpp


def _archon_recompute(mode: str, option: str, schedule: str) -> str:
    """What an Archon engine recomputes when ``gradient_checkpointing`` is on
    (``archon_utils.build_ac_config``, 111-143): nothing with ``ac_mode: none``, op-level
    selective checkpointing by default, whole layers otherwise (every Nth layer and a
    memory budget are named)."""
    if mode == "none":
        return "none"
    if mode == "full" or schedule in _ZERO_BUBBLE_SCHEDULES:
        return "full"
    if mode == "selective" and option != "op":
        return "full"  # every Nth layer: named
    return "op"  # op-level; a memory budget (named) recomputes about as much


#: The rows a written value may make the plan name, and the sections that hold them.
_NAMEABLE: Final = {
    path: row for path, row in BACKEND_KEYS.items() if row.effect == "named" or row.usual
}
_HOLDING: Final = frozenset(
    path.rsplit(".", i)[0] for path in _NAMEABLE for i in range(1, path.count(".") + 1)
)


def _unpriced(node: Any, section: str, backend: object) -> Iterator[str]:
    """The keys of :data:`BACKEND_KEYS` the step time does not price at the value the
    engine's section gives, of the backend it names (AReaL reads ``megatron.*`` for a
    Megatron engine only; all of them when the backend is not written here, as for an
    engine that inherits it). Only the keys written are looked at."""
    name = written_backend_name(backend)
    for top in ("fsdp", "archon", "megatron"):
        if not name or name == top:
            yield from _named_in(node, top, section)


def _named_in(parent: Any, path: str, section: str) -> Iterator[str]:
    """The nameable keys at or under ``path`` (the last part of it a key of ``parent``)."""
    key = path.rpartition(".")[2]
    if not is_mapping(parent) or not has_key(parent, key):
        return
    value = read_value(parent, key, f"{section}.{path}")
    row = _NAMEABLE.get(path)
    if row is not None:
        if value is not None and not _is_usual(value, row.usual):
            yield f"{section}.{path}"
    elif path in _HOLDING and is_mapping(value):
        for inner in keys_of(value):
            yield from _named_in(value, f"{path}.{inner}", section)


def _is_usual(value: object, usual: tuple[object, ...]) -> bool:
    """``value`` is one of ``usual``, as AReaL's loader reads it (``"false"`` is False)."""
    if isinstance(value, str):
        return value.lower() in {str(u).lower() for u in usual}
    return any(value == u and type(value) is type(u) for u in usual)
