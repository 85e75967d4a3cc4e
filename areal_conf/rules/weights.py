"""PPOTrainer's checks (E7-E15): delta weight transfer, offload, the weight update a
colocated rollout needs, v1 AWEX's backends, routed experts, Megatron LoRA, controller
versions and the v1 weight update mode."""

from __future__ import annotations

from typing import Final

from areal_conf.errors import ConfigError
from areal_conf.hints import either, fix, sentence
from areal_conf.rules.common import quoted, v1_awex
from areal_conf.rules.context import Context
from areal_conf.spec.backends import written_backend_name

COLOCATED_UPDATES: Final = ("disk", "awex")  # weight updates that reach a colocated rollout
V1_UPDATES: Final = ("disk", "xccl", "awex")


def pair_colocated(ctx: Context) -> bool:
    """The actor and the rollout are colocated, as the config writes it (either way)."""
    return ctx.run.actor_rollout_colocated


def check_delta_weight_update(ctx: Context) -> None:
    """E7: what AReaL's delta weight transfer (DTE) requires, in AReaL's order."""
    actor, rollout = ctx.run.actor, ctx.run.rollout
    if actor is None or rollout is None or not actor.enable_delta_weight_update:
        return
    actor_backend = _backend_name(ctx, "actor")
    rollout_backend = _backend_name(ctx, "rollout")
    needs = (
        (
            rollout.strategy.type == "separation",
            "rollout.scheduling_strategy.type",
            f"is {rollout.strategy.type}",
            "a separated rollout",
            fix("rollout.scheduling_strategy.type=separation"),
        ),
        (
            actor.weight_update_delta_method == "adamw",
            "actor.weight_update_delta_method",
            f"is {quoted(actor.weight_update_delta_method)}",
            "the adamw method",
            fix("actor.weight_update_delta_method=adamw"),
        ),
        (
            actor.weight_update_anchor_interval >= 0,
            "actor.weight_update_anchor_interval",
            f"is {actor.weight_update_anchor_interval}",
            "an anchor interval of 0 or more",
            fix("actor.weight_update_anchor_interval=0"),
        ),
        (
            actor_backend == "megatron",
            "actor.backend",
            f"is {actor_backend}",
            "a megatron actor",
            "actor.backend=megatron:<layout>",
        ),
        (
            rollout_backend == "sglang",
            "rollout.backend",
            f"is {rollout_backend}",
            "an sglang rollout",
            "rollout.backend=sglang:<layout>",
        ),
        (
            actor.controller == "v2",
            "actor._version",
            f"is {quoted(actor.controller)}",
            "controller v2",
            fix("actor._version=v2", "rollout._version=v2"),
        ),
        (
            rollout.controller == "v2",
            "rollout._version",
            f"is {quoted(rollout.controller)}",
            "controller v2",
            fix("rollout._version=v2"),
        ),
        (
            actor.weight_update_mode == "awex",
            "actor.weight_update_mode",
            f"is {quoted(actor.weight_update_mode)}",
            "AWEX weight updates",
            fix("actor.weight_update_mode=awex"),
        ),
        (not actor.use_lora, "actor.use_lora", "is true", "no LoRA", fix("actor.use_lora=false")),
    )
    for ok, key, have, need, change in needs:
        if not ok:
            raise ConfigError(
                f"{key}: {have}, but actor.enable_delta_weight_update (delta weight transfer) "
                f"needs {need}",
                hint=either(change, ", or ", fix("actor.enable_delta_weight_update=false")),
            )


def _backend_name(ctx: Context, name: str) -> str:
    e = ctx.engines.get(name)
    if e is not None and e.allocation is not None:
        return e.allocation.backend
    return written_backend_name(ctx.run.engines[name].backend)


def check_offload(ctx: Context) -> None:
    """E8: AReaL's offload (``enable_offload``) must be on when any engine offloads:
    an actor and a rollout that share GPUs, or an ``offload: true`` engine."""
    run = ctx.run
    if run.workload.enable_offload:
        return
    flags: list[tuple[str, str]] = []  # (the reason, the change that removes it)
    for flag, _ in run.offload_flags():
        if flag == "colocation":
            rollout = run.rollout
            who = "rollout" if rollout is not None and rollout.strategy.colocated else "actor"
            flags.append(
                (
                    "the actor and the rollout share GPUs (colocation)",
                    f"{who}.scheduling_strategy.type=separation",
                )
            )
        else:
            flags.append((f"{flag} is true", f"{flag}=false"))
    if not flags:
        return
    now = "is false" if run.workload.enable_offload_given else "is false (the default)"
    raise ConfigError(
        f"enable_offload: {now}, but "
        + " and ".join(why for why, _ in flags)
        + ": AReaL moves engines off the GPUs between steps only with enable_offload",
        hint=either(fix("enable_offload=true"), ", or ", fix(*(change for _, change in flags))),
    )


def check_colocated_weight_update(ctx: Context) -> None:
    """E9: a rollout that shares the actor's GPUs gets its weights by disk or AWEX."""
    actor = ctx.run.actor
    if actor is None or not pair_colocated(ctx):
        return
    if actor.weight_update_mode in COLOCATED_UPDATES:
        return
    raise ConfigError(
        f"actor.weight_update_mode: {quoted(actor.weight_update_mode)} cannot update a rollout "
        "that shares the actor's GPUs (AReaL allows disk or awex with colocation)",
        hint=either(
            fix("actor.weight_update_mode=disk"),
            ", or ",
            "awex with a megatron actor and an sglang rollout",
            ", or ",
            fix("rollout.scheduling_strategy.type=separation"),
        ),
    )


def check_awex_backends(ctx: Context) -> None:
    """E10: v1 AWEX needs a megatron actor and an sglang rollout."""
    if not v1_awex(ctx):
        return
    for name, needed, example in (
        ("actor", "megatron", "megatron:d"),
        ("rollout", "sglang", "sglang:d"),
    ):
        have = _backend_name(ctx, name)
        if have != needed:
            e = ctx.engines[name]
            body = e.allocation.parallel.body() if e.allocation is not None else "1"
            backend = (
                fix(f"{name}.backend={needed}:{body}") if e.allocation is not None else example
            )
            raise ConfigError(
                f"{name}.backend: actor.weight_update_mode awex on controller v1 needs "
                f"{'a' if needed == 'megatron' else 'an'} {needed} {name}, got {have}",
                hint=either(backend, ", or ", fix("actor.weight_update_mode=disk")),
            )


def check_routed_experts(ctx: Context) -> None:
    """E11: only sglang returns the routed experts."""
    rollout = ctx.run.rollout
    if rollout is None or not rollout.return_routed_experts:
        return
    if _backend_name(ctx, "rollout") == "vllm":
        raise ConfigError(
            "rollout.return_routed_experts: vllm cannot return the routed experts",
            hint=either(
                "rollout.backend=sglang:<layout>",
                ", or ",
                fix("rollout.return_routed_experts=false"),
            ),
        )


def check_megatron_lora(ctx: Context) -> None:
    """E12: a megatron actor with LoRA cannot update an sglang rollout."""
    actor = ctx.run.actor
    if actor is None or not actor.use_lora:
        return
    if _backend_name(ctx, "actor") == "megatron" and _backend_name(ctx, "rollout") == "sglang":
        raise ConfigError(
            "actor.use_lora: a megatron actor with LoRA cannot update an sglang rollout",
            hint=either(
                "rollout.backend=vllm:<layout>",
                ", or ",
                fix("actor.use_lora=false"),
                ", or ",
                "another actor backend (actor.backend=fsdp:<layout>)",
            ),
        )


def check_controller_versions(ctx: Context) -> None:
    """E13: the actor and the rollout run the same controller version."""
    actor, rollout = ctx.run.actor, ctx.run.rollout
    if actor is None or rollout is None or actor.controller == rollout.controller:
        return
    raise ConfigError(
        f"rollout._version: is {quoted(rollout.controller)} but actor._version is "
        f"{quoted(actor.controller)}: AReaL runs the actor and the rollout on the same controller "
        "version",
        hint=either(
            fix(f"rollout._version={actor.controller}"),
            " or ",
            fix(f"actor._version={rollout.controller}"),
        ),
    )


def check_v1_weight_update(ctx: Context) -> None:
    """E14: controller v1 updates weights by disk, xccl or awex; W4: v2 picks its own."""
    actor = ctx.run.actor
    if actor is None:
        return
    if actor.controller == "v1" and actor.weight_update_mode not in V1_UPDATES:
        raise ConfigError(
            f"actor.weight_update_mode: {quoted(actor.weight_update_mode)} is not a weight update "
            "AReaL knows (it fails after every engine has started)",
            hint=sentence(fix("actor.weight_update_mode=xccl"), " (the default), disk or awex"),
        )
    if actor.controller == "v2" and actor.weight_update_mode_given:
        used = "disk" if actor.use_lora else "awex"
        if actor.weight_update_mode != used:
            ctx.warn(
                f"actor.weight_update_mode is {quoted(actor.weight_update_mode)}, but controller "
                f"v2 does not read it for its weight updates: it uses {used} "
                f"({'with' if actor.use_lora else 'without'} LoRA)"
            )
