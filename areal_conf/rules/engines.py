"""The engines a config builds, and whose GPUs each one runs on: AReaL's rules, stated once.

The engine sections come from :func:`areal_conf.config.reading.read_config`: the roles of the
AReaL version's engine table (``actor``, ``critic``, ``ref``, ``teacher``, ``rollout``)
and any other section with a ``backend`` (AReaL configs have e.g. ``judge_engine``), an
*extra* engine whose kind follows from its backend.

- ``ref`` is not built when ``actor.kl_ctl`` is set and ``<= 0``: AReaL builds a
  reference model only for a positive KL coefficient. It is listed with that reason and
  neither parsed nor placed.
- An empty backend means what the engine table says: an error, ``actor.backend``
  (critic, ref), or a disabled engine (teacher).
- Scheduling follows AReaL's ``SchedulingStrategy``: ``type`` ``separation`` (the
  default for every engine) or ``colocation`` with ``target``, and ``fork`` (default
  true). AReaL creates engines in the order of the version's engine table, then the
  extra engines in the order of the config, and a target must already exist. A chain of
  colocations may pass only through engines that fork, and resolves to the engine that
  owns the GPUs.

Every problem is one ``AllocationError`` whose first line names the config key.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import replace

from areal_conf.areal.roles import (
    INHERIT_FROM,
    KL_ROLE,
    ROLE,
    display_order,
    example_backend,
    example_of_kind,
)
from areal_conf.areal.versions import AReaLVersion
from areal_conf.config.run_config import EngineSection, RunConfig
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.hints import Fix, Hint, either, fix, sentence
from areal_conf.plan.plan import EnginePlan
from areal_conf.spec.allocation import ModelAllocation
from areal_conf.spec.backends import BACKENDS, join_or
from areal_conf.spec.parser import not_a_backend_string, parse_backend


def replica_text(allocation: ModelAllocation) -> str:
    n = allocation.replicas
    if allocation.is_inference:
        return f"{n} server instance{'s' if n != 1 else ''}"
    return f"{n} rank{'s' if n != 1 else ''}"


def kl_reason(run: RunConfig) -> str | None:
    """Why ref is not built, or None when it is (``actor.kl_ctl`` absent or > 0)."""
    actor = run.actor
    if actor is None or actor.kl_ctl is None or actor.kl_ctl > 0:
        return None
    where = f"{INHERIT_FROM}.kl_ctl"
    return f"{where} is {actor.kl_ctl}: AReaL builds the {KL_ROLE} model only when {where} > 0"


def engine_backend(run: RunConfig, engine: EngineSection) -> tuple[object, str]:
    """The backend ``engine`` runs, following the engine table, and the key it is read
    from: the text as written (a value that is not a string is left to the parser to
    reject), ``None`` for a disabled engine (an empty teacher backend), ``""`` when a
    required backend is empty (the caller reports it).
    """
    written = engine.backend
    if written is None or written == "":
        empty = engine.row.empty_backend if engine.row is not None else "error"
        if empty == "inherit":
            actor = run.actor
            inherited = actor.backend if actor is not None else None
            return (
                (inherited if isinstance(inherited, str) else "") or "",
                f"{INHERIT_FROM}.backend (inherited by an empty {engine.backend_key})",
            )
        if empty == "disable":
            return None, engine.backend_key
        return "", engine.backend_key
    return written, engine.backend_key


def _parse(run: RunConfig, engine: EngineSection, *, check_kind: bool) -> EnginePlan:
    name, key = engine.name, engine.backend_key
    if engine.allocation_written is not None:
        raise AllocationError(
            f"{engine.key('allocation')}: is derived from {key} and cannot be set",
            engine.allocation_written,
            hint=f"set {key} instead, and leave {engine.key('allocation')} as "
            "${areal.allocation:}",
        )
    written, where = engine_backend(run, engine)
    inherited = where != key
    section = engine.section if engine.section != name else ""
    controller = engine.controller if isinstance(engine.controller, str) else "v1"
    if written is None:
        return EnginePlan(
            name,
            None,
            "",
            kind=engine.row.kind if engine.row is not None else "training",
            not_built=f"disabled: {key} is empty",
            section=section,
            controller=controller,
        )
    if written == "":
        example = example_backend(name, "inference")
        if engine.row is not None:
            example = example_of_kind(engine.row.kind)
        example = _on_free_gpus(run, name, example)
        reason = (
            f"an empty {name} backend means {INHERIT_FROM}.backend, and there is no "
            f"{INHERIT_FROM} backend"
            if inherited
            else f"{name} needs a backend and none is set"
        )
        raise AllocationError(
            f"{key}: {reason}",
            "",
            hint=either(
                fix(f"{key}={example}", lead="e.g. ", remark=" (set one)"),
                ", or ",
                f"remove the {engine.section} section",
            ),
        )
    if not isinstance(written, str):
        kind = engine.row.kind if engine.row is not None else None
        raise not_a_backend_string(written, where, example_backend(name, kind))
    try:
        alloc = parse_backend(written, teacher_layout=run.rules.teacher_layout)
    except AllocationError as err:
        raise err.with_context(where) from None
    plan = EnginePlan(
        name,
        alloc,
        "" if inherited else str(written),
        INHERIT_FROM if inherited else None,
        (engine.strategy.target or "") if engine.strategy.colocated else None,
        kind="inference" if alloc.is_inference else "training",
        fork=engine.strategy.fork,
        section=section,
        controller=controller,
    )
    if check_kind:
        check_kind_of(plan, engine)
    return plan


def check_kind_of(plan: EnginePlan, engine: EngineSection) -> None:
    """A role runs a backend of its kind (a training backend in ``actor``, an inference
    one in ``rollout``); an extra engine's kind follows from its backend."""
    alloc = plan.allocation
    if alloc is None or engine.row is None:
        return
    kind = engine.row.kind
    have = "inference" if alloc.is_inference else "training"
    if have == kind:
        return
    key = engine.backend_key
    names = [b for b, rule in BACKENDS.items() if rule.kind == kind]
    if kind == "inference":
        example = f"{names[0]}:{alloc.parallel.body()}"
    else:
        example = f"{names[0]}:d{alloc.world_size}"
    what = plan.name if engine.section == plan.name else f"{plan.name} ({engine.section})"
    raise AllocationError(
        f"{key}: {what} needs {'an' if kind == 'inference' else 'a'} {kind} "
        f"backend, got {alloc.backend}",
        plan.written or str(alloc),
        0,
        length=len(alloc.backend),
        hint=sentence(f"use {join_or(names)}, e.g. ", fix(f"{key}={example}")),
    )


def plan_order(run: RunConfig, names: list[str]) -> list[str]:
    """The order of a plan's engines: AReaL's creation order, or (1.0) the rollout first."""
    if run.rules.plan_order == "creation":
        return creation_order(run, names)
    return display_order(names)


def parse_engines(run: RunConfig, *, check_kinds: bool = True) -> dict[str, EnginePlan]:
    """Every engine of ``run`` in plan order: parsed, or not built with the reason.

    Raises AllocationError when there is no engine at all. ``check_kinds`` checks each
    role's backend kind while parsing (AReaL 1.0's order; 2.0 checks kinds later, with
    PPOTrainer's other checks).
    """
    found = run.engines
    if not found:
        raise ConfigError(
            "the config has no engine: no top-level section with a backend",
            hint=either(
                sentence("add one, e.g. ", fix("+actor.backend=fsdp:d8"), " (training)"),
                " or ",
                fix("+rollout.backend=sglang:d2t4", remark=" (inference)"),
            ),
        )
    ref_reason = kl_reason(run) if KL_ROLE in found else None
    engines: dict[str, EnginePlan] = {}
    for name in plan_order(run, list(found)):
        engine = found[name]
        unbuilt = ref_reason if name == KL_ROLE else None
        if run.driver is not None and not run.driver.builds(name):
            unbuilt = run.driver.not_built(name)
        if unbuilt is not None:
            kind = engine.row.kind if engine.row is not None else "training"
            engines[name] = EnginePlan(name, None, "", kind=kind, not_built=unbuilt)
            continue
        engines[name] = _parse(run, engine, check_kind=check_kinds)
    if not any(e.enabled for e in engines.values()):
        first = next(iter(engines.values()))
        reasons = "; ".join(f"{e.name}: {e.not_built}" for e in engines.values())
        section = found[first.name]
        kind = section.row.kind if section.row is not None else "training"
        raise ConfigError(
            f"{first.name}: the config builds no engine ({reasons})",
            hint=sentence(
                "give an engine a backend, e.g. ",
                fix(f"{section.backend_key}={example_of_kind(kind)}"),
            ),
        )
    return engines


def engine_allocation(run: RunConfig, name: str) -> ModelAllocation | None:
    """The allocation engine ``name`` of ``run`` runs (None: not built), for the
    ``${areal.allocation:}`` resolver."""
    engine = run.engines.get(name)
    if engine is None or (name == KL_ROLE and kl_reason(run) is not None):
        return None
    return _parse(run, engine, check_kind=False).allocation


# ----------------------------------------------------------------------- colocation


def creation_order(run: RunConfig, names: list[str] | Mapping[str, object]) -> list[str]:
    """AReaL's creation order: the version's engine table, then extras as in the config."""
    present = list(names)
    ordered: list[str] = []
    for row in run.rules.engines:
        engine = run.engines.get(row.name)
        if row.name in present and engine is not None and engine.section == row.section:
            ordered.append(row.name)
    return ordered + [n for n in present if n not in ROLE]


def creation_text(rules: AReaLVersion) -> str:
    """``actor, critic, ref, teacher, rollout, then other engines in config order``."""
    parts = []
    for row in rules.engines:
        if row.engine_type is not None:
            parts.append(f"{row.name} ({row.section})")
        else:
            parts.append(row.name)
    return ", ".join(parts) + ", then other engines in config order"


def strategy_key(engine: EnginePlan, field: str = "target") -> str:
    return f"{engine.section or engine.name}.scheduling_strategy.{field}"


#: Checks that two colocated engines may share GPUs: (engine, target, owners) -> None.
ReplicaRule = Callable[[EnginePlan, EnginePlan, Mapping[str, str]], None]


def resolve_colocation(
    run: RunConfig,
    engines: dict[str, EnginePlan],
    replica_rule: ReplicaRule | None = None,
) -> dict[str, EnginePlan]:
    """Check every colocation chain and set each engine's GPU owner (the chain's end).

    ``replica_rule`` checks each colocated engine against its target (default: equal
    replica and GPU counts, AReaL 1.0's rule). Returns the engines (same order) with
    ``gpu_owner`` set on colocated ones.
    """
    order = creation_order(run, engines)
    rank = {name: i for i, name in enumerate(order)}
    owners: dict[str, str] = {}
    for name in order:
        e = engines[name]
        if not e.enabled or e.colocated_with is None:
            continue
        owners[name] = _walk(run, name, engines, rank)
    check = replica_rule or check_equal_replicas
    for name in order:
        e = engines[name]
        if name in owners and e.colocated_with is not None:
            check(e, engines[e.colocated_with], owners)
    return {
        name: replace(e, gpu_owner=owners.get(name)) if name in owners else e
        for name, e in engines.items()
    }


def _walk(run: RunConfig, start: str, engines: dict[str, EnginePlan], rank: dict[str, int]) -> str:
    # A cycle is named as such, before any of its hops is blamed for pointing forwards.
    seen = [start]
    cur: str | None = start
    while cur is not None and cur in engines and engines[cur].colocated_with is not None:
        nxt = engines[cur].colocated_with
        if nxt in seen and nxt != cur:
            cycle = " -> ".join([*seen, nxt])
            # Break the cycle where AReaL creates first: point that engine at a target
            # that already exists (or separate it), the same fixes as for a bad target.
            breaker = min(seen[seen.index(nxt) :], key=rank.__getitem__)
            raise ConfigError(
                f"{strategy_key(engines[start])}: {cycle}: the colocation targets form a cycle",
                hint=_target_fixes(breaker, engines, rank).led(
                    "end the chain at an engine that owns its GPUs: "
                ),
            )
        if nxt == cur or nxt is None:
            break
        seen.append(nxt)
        cur = nxt

    chain = [start]
    cur = start
    while True:
        e = engines[cur]
        target = e.colocated_with
        if target is None:
            return cur
        here = " -> ".join([*chain, target]) if target else " -> ".join(chain)
        key = strategy_key(e)
        if not target:
            reason = f"{here}: {cur} is colocated but names no target"
            raise _bad_target(cur, reason, engines, rank)
        if target == cur:
            raise _bad_target(cur, f"{here}: {cur} cannot be colocated with itself", engines, rank)
        if target not in engines:
            what = (
                f"the config has no {target} section"
                if target in ROLE
                else f"{target!r} is not an engine of this config"
            )
            raise _bad_target(cur, f"{here}: {what}", engines, rank, typo=target)
        other = engines[target]
        if not other.enabled:
            raise _bad_target(
                cur, f"{here}: {target} is not built ({other.not_built})", engines, rank
            )
        if rank[target] > rank[cur]:
            raise _later(run, e, other, key, here)
        if other.colocated_with is not None and not other.fork:
            owner = other.colocated_with
            raise ConfigError(
                f"{key}: {here}: the chain passes through {target}, which does not fork "
                f"({strategy_key(other, 'fork')} is false: it reuses {owner}'s processes and "
                "has none of its own to share)",
                hint=either(
                    fix(f"{key}={owner}", remark=f" (colocate with the engine {target} shares)"),
                    ", or ",
                    fix(f"{strategy_key(other, 'fork')}=true"),
                ),
            )
        chain.append(target)
        cur = target


def _on_free_gpus(run: RunConfig, name: str, example: str) -> str:
    """``example`` (a backend such as ``sglang:d2t4``) with as many copies as the GPUs of
    the cluster that the other engines, on GPUs of their own, leave to engine ``name``
    hold (one copy a GPU when they do not divide); as it is when they leave none or
    cannot be counted."""
    free = run.cluster.n_nodes * run.cluster.n_gpus_per_node
    for other in run.engines.values():
        if other.name == name or other.strategy.colocated or not isinstance(other.backend, str):
            continue
        try:
            free -= parse_backend(other.backend, teacher_layout=run.rules.teacher_layout).world_size
        except AllocationError:
            return example
    if free < 1:
        return example
    shape = parse_backend(example)
    size = shape.world_size // shape.parallel.dp_size  # one copy: its t, p, c, e
    if free % size:
        return f"{shape.backend}:d{free}"
    return example.replace(f"d{shape.parallel.dp_size}", f"d{free // size}", 1)


def _later(
    run: RunConfig, engine: EnginePlan, target: EnginePlan, key: str, chain: str
) -> AllocationError:
    name = engine.name
    swap = fix(
        f"{strategy_key(target, 'type')}=colocation",
        f"{strategy_key(target)}={name}",
        f"{strategy_key(engine, 'type')}=separation",
        lead=f"colocate {target.name} with {name} instead: ",
    )
    if name in ROLE and target.name not in ROLE:
        reason = (
            f"{chain}: a role cannot be colocated with the extra engine {target.name} "
            "(AReaL creates the roles first, so the target would not exist yet)"
        )
    else:
        reason = (
            f"{chain}: {target.name} is created after {name}, and a colocation target must "
            f"already exist (AReaL creates {creation_text(run.rules)})"
        )
    return AllocationError(f"{key}: {reason}", hint=swap)


def _bad_target(
    name: str,
    reason: str,
    engines: dict[str, EnginePlan],
    rank: dict[str, int],
    *,
    typo: str | None = None,
) -> AllocationError:
    key = strategy_key(engines[name])
    hint = _target_fixes(name, engines, rank, typo=typo)
    return AllocationError(f"{key}: {reason}", hint=hint)


def _target_fixes(
    name: str, engines: dict[str, EnginePlan], rank: dict[str, int], *, typo: str | None = None
) -> Hint:
    """Point engine ``name`` at a target that would be valid, or separate it."""
    # Targets that would be valid: built, created earlier, forking if colocated, and with
    # this engine's replica and GPU counts.
    engine = engines[name]
    key = strategy_key(engine)
    mine = engine.allocation
    earlier = [
        n
        for n, e in engines.items()
        if n != name
        and e.allocation is not None
        and rank[n] < rank[name]
        and (e.colocated_with is None or e.fork)
        and (
            mine is None
            or (
                e.allocation.replicas == mine.replicas
                and e.allocation.world_size == mine.world_size
            )
        )
    ]
    earlier.sort(key=lambda n: rank[n])
    separate = fix(f"{strategy_key(engine, 'type')}=separation")
    close = difflib.get_close_matches(typo, earlier, n=1, cutoff=0.6) if typo else []
    if close:
        return either(
            fix(f"{key}={close[0]}", remark=f" (did you mean {close[0]}?)"), " or ", separate
        )
    if earlier:
        return either(fix(f"{key}={earlier[0]}"), " or ", separate)
    return either(separate)


def check_equal_replicas(e: EnginePlan, target: EnginePlan, owners: Mapping[str, str]) -> None:
    """A colocated engine runs as many replicas as its target on as many GPUs."""
    a, t = e.allocation, target.allocation
    assert a is not None and t is not None
    if a.replicas == t.replicas and a.world_size == t.world_size:
        return
    raise replica_mismatch(e, target, owners)


def replica_mismatch(
    e: EnginePlan, target: EnginePlan, owners: Mapping[str, str], why: str = ""
) -> AllocationError:
    """The error for colocated engines whose replica or GPU counts differ; ``why`` replaces
    the default reason's ending."""
    a, t = e.allocation, target.allocation
    assert a is not None and t is not None
    chain = f"{e.name} -> {target.name}"
    if owners.get(e.name, target.name) != target.name:
        chain += f" (GPUs of {owners[e.name]})"
    if a.replicas != t.replicas:
        reason = (
            f"{chain}: {e.name} runs {replica_text(a)} ({a}) and {target.name} "
            f"{replica_text(t)} ({t}); "
            + (
                why
                or "colocated engines need the same number of replicas (server instances "
                "for inference, ranks for training)"
            )
        )
    else:
        reason = (
            f"{chain}: {e.name} needs {a.world_size} GPUs ({a}) and {target.name} has "
            f"{t.world_size} ({t}); " + (why or "colocated engines share their target's GPUs")
        )
    key = f"{e.section or e.name}.backend"
    return AllocationError(
        f"{key}: {reason}",
        str(a),
        hint=replica_fix(e, a, target.name, t),
    )


def replica_fix(e: EnginePlan, a: ModelAllocation, target: str, t: ModelAllocation) -> Fix:
    """A change of backend that makes the colocation valid (the target stays as it is
    when it can)."""
    key = f"{e.section or e.name}.backend"
    per_replica = t.world_size // t.replicas
    if a.is_inference:
        body = f"d{t.replicas}" + (f"t{per_replica}" if per_replica > 1 else "")
        return fix(
            f"{key}={a.backend}:{body}",
            remark=f" ({t.replicas} instances of {per_replica} "
            f"GPU{'s' if per_replica != 1 else ''} on {target}'s {t.world_size} GPUs)",
        )
    if per_replica == 1:
        return fix(f"{key}={a.backend}:d{t.world_size}", remark=f" ({t.world_size} ranks)")
    # A training engine has one rank per GPU: the target needs one-GPU instances.
    return fix(
        f"{target}.backend={t.backend}:d{t.world_size}",
        f"{key}={a.backend}:d{t.world_size}",
        lead=f"give {target} one-GPU instances and {e.name} as many ranks: ",
    )
