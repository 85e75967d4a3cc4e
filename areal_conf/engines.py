"""The engines a config builds, and whose GPUs each one runs on: AReaL's rules, stated once.

An engine is a top-level section of the config that has a ``backend`` key. Five roles
have fixed names and rules (:data:`ROLES`); any other section with a ``backend`` (AReaL
configs have e.g. ``judge_engine``) is an *extra* engine whose kind follows from its
backend. A role section that is absent or null is no engine.

- ``ref`` is not built when ``actor.kl_ctl`` is set and ``<= 0``: AReaL builds a
  reference model only for a positive KL coefficient. It is listed with that reason and
  neither parsed nor placed.
- An empty backend means what the role table says: an error, ``actor.backend``
  (critic, ref), or a disabled engine (teacher).
- Scheduling follows AReaL's ``SchedulingStrategy``: ``type`` ``separation`` (the
  default for every engine) or ``colocation`` with ``target``, and ``fork`` (default
  true). AReaL creates engines in the order of :data:`ROLES`, then the extra engines in
  the order of the config, and a target must already exist. A chain of colocations
  may pass only through engines that fork, and resolves to the engine that owns the
  GPUs. A colocated engine matches its target's replica count (server instances for
  inference, world size for training) and GPU count.

Every function here reads a composed config (an OmegaConf DictConfig or any nested
mapping) without importing Hydra, and reports problems as one ``AllocationError`` whose
first line names the config key.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from areal_conf.allocation import ModelAllocation
from areal_conf.backends import BACKENDS, join_or
from areal_conf.errors import AllocationError
from areal_conf.parser import parse_backend
from areal_conf.plan import EnginePlan
from areal_conf.roles import (
    ALLOCATION_NODE,
    INHERIT_FROM,
    KL_ROLE,
    LEGACY_KEY,
    ROLE,
    ROLE_NAMES,
    SCHEDULING_TYPES,
    Role,
    display_order,
    example_backend,
)


def replica_text(allocation: ModelAllocation) -> str:
    n = allocation.replicas
    if allocation.is_inference:
        return f"{n} server instance{'s' if n != 1 else ''}"
    return f"{n} rank{'s' if n != 1 else ''}"


# ------------------------------------------------------------------------ discovery


def _has(section: Any, key: str) -> bool:
    # keys() rather than `in`: a struct-mode DictConfig raises (and formats) internally for
    # every absent key it is asked about.
    return key in section.keys()  # noqa: SIM118


def read_value(section: Any, key: str, where: str, default: Any = None) -> Any:
    """``section[key]`` (resolving an interpolation) or ``default`` when the key is absent;
    a value that cannot be resolved is an AllocationError naming ``where``."""
    if not _has(section, key):
        return default
    try:
        return section.get(key, default)
    except AllocationError:
        raise
    except Exception as err:  # an interpolation only the application can resolve
        get_node = getattr(section, "_get_node", None)
        node = get_node(key) if callable(get_node) else None
        written = node._value() if node is not None and hasattr(node, "_value") else None
        raise unresolvable(where, err, written) from None


def unresolvable(key: str | None, err: BaseException, written: object = None) -> AllocationError:
    """The error for a config value whose interpolation cannot be resolved (an unset
    environment variable, a missing key): the key, OmegaConf's reason, the text as
    written, and the fix."""
    reason = getattr(err, "msg", None) or str(err) or repr(err)
    # "KeyError raised while resolving interpolation: \"Environment variable ...\""
    reason = reason.split("\n")[0].split(" raised while resolving interpolation: ")[-1].strip('"')
    missing = type(err).__name__ == "MissingMandatoryValue"
    if missing:
        reason = "the value is missing (???)"
    example = f"{key}=<value>" if key else "<key>=<value>"
    if key and key.endswith(".backend"):
        example = f"{key}={example_backend(key.split('.')[0])}"
    hint = (
        f"give it a value, e.g. {example}"
        if missing
        else "fix the interpolation (the referenced key or environment variable) or write "
        f"the value itself, e.g. {example}"
    )
    where = f"{key}: " if key else "a value of the config cannot be resolved: "
    error = AllocationError(where + reason, written, None, hint=hint)
    error.key = key
    return error


def _is_mapping(value: Any) -> bool:
    is_missing = getattr(value, "_is_missing", None)  # an OmegaConf section left as ???
    missing = callable(is_missing) and bool(is_missing())
    return isinstance(value, Mapping) and not _is_null(value) and not missing


def _is_null(value: Any) -> bool:
    is_none = getattr(value, "_is_none", None)
    return value is None or (callable(is_none) and bool(is_none()))


def sections(cfg: Any) -> Iterator[tuple[str, Any]]:
    """The engine sections of ``cfg``, in config order: the roles that are present and not
    null, and every other top-level section with a ``backend`` key.

    A top-level value other than a section (a scalar, a list, an interpolation) is not
    read, so keys that only the application can resolve do not get in the way.
    """
    get_node = getattr(cfg, "_get_node", None)
    for key in list(cfg.keys()):
        name = str(key)
        if name in ROLE:
            value = read_value(cfg, name, name)
            if _is_null(value):
                continue
            if not isinstance(value, Mapping):
                raise AllocationError(
                    f"{name}: the {name} engine must be a section, got {value!r}",
                    None,
                    None,
                    hint=f"write it as a section, e.g. {name}.backend={ROLE[name].example}, "
                    f"or remove {name}",
                )
            yield name, value
            continue
        node = get_node(key) if get_node is not None else cfg[key]
        if _is_mapping(node) and _has(node, "backend"):
            yield name, read_value(cfg, name, name)


def engine_names(cfg: Any) -> list[str]:
    """The engines of ``cfg`` in display order (built or not)."""
    return display_order([name for name, _ in sections(cfg)])


def has_engines(cfg: Any) -> bool:
    """True when ``cfg`` has an engine section or the deprecated ``allocation_mode``."""
    try:
        keys = [str(k) for k in cfg]
    except (AttributeError, TypeError):
        return False
    if LEGACY_KEY in keys or any(k in ROLE for k in keys):
        return True
    try:
        return any(True for _ in sections(cfg))
    except AllocationError:
        return True


def kl_reason(cfg: Any) -> str | None:
    """Why ref is not built, or None when it is (``actor.kl_ctl`` absent or > 0)."""
    actor = read_value(cfg, INHERIT_FROM, INHERIT_FROM)
    if not _is_mapping(actor) or not _has(actor, "kl_ctl"):
        return None
    where = f"{INHERIT_FROM}.kl_ctl"
    value = read_value(actor, "kl_ctl", where)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AllocationError(
            f"{where}: must be a number, got {value!r}",
            None,
            None,
            hint=f"e.g. {where}=0.0 (no {KL_ROLE} model) or {where}=0.1",
        )
    if value > 0:
        return None
    return f"{where} is {value}: AReaL builds the {KL_ROLE} model only when {where} > 0"


def engine_backend(cfg: Any, name: str) -> tuple[str | None, str]:
    """The backend text ``name`` runs, following the role table, and the key it is read from.

    ``None`` for a disabled engine (an empty teacher backend); ``""`` when a required
    backend is empty (the caller reports it).
    """
    key = f"{name}.backend"
    section = read_value(cfg, name, name)
    written = read_value(section, "backend", key) if _is_mapping(section) else None
    if written is None or written == "":
        role = ROLE.get(name)
        if role is not None and role.empty_backend == "inherit":
            source = read_value(cfg, INHERIT_FROM, INHERIT_FROM)
            inherited = (
                read_value(source, "backend", f"{INHERIT_FROM}.backend")
                if _is_mapping(source)
                else None
            )
            return (inherited or ""), f"{INHERIT_FROM}.backend (inherited by an empty {key})"
        if role is not None and role.empty_backend == "disable":
            return None, key
        return "", key
    return written, key


def _check_allocation_node(name: str, section: Any) -> None:
    """An engine's ``allocation`` node is derived from its backend: a config that sets it
    to anything else (an override, a YAML value) would be saved with an expansion that
    disagrees with the backend the job runs."""
    if not _has(section, "allocation"):
        return
    get_node = getattr(section, "_get_node", None)
    node = get_node("allocation") if callable(get_node) else None
    if node is None or not hasattr(node, "_value"):
        return  # a plain mapping: nothing resolves it, nothing to disagree with
    written = node._value()
    if written is None or written == ALLOCATION_NODE:
        return
    raise AllocationError(
        f"{name}.allocation: is derived from {name}.backend and cannot be set",
        written if isinstance(written, str) else str(written),
        None,
        hint=f"set {name}.backend instead, and leave {name}.allocation as {ALLOCATION_NODE}",
    )


def _parse(name: str, cfg: Any, section: Any) -> EnginePlan:
    key = f"{name}.backend"
    role = ROLE.get(name)
    _check_allocation_node(name, section)
    written, where = engine_backend(cfg, name)
    inherited = where != key
    if written is None:
        return EnginePlan(
            name,
            None,
            "",
            kind=role.kind if role is not None else "training",
            not_built=f"disabled: {key} is empty",
        )
    if written == "":
        example = example_backend(name, "inference")
        reason = (
            f"an empty {name} backend means {INHERIT_FROM}.backend, and there is no "
            f"{INHERIT_FROM} backend"
            if inherited
            else f"{name} needs a backend and none is set"
        )
        raise AllocationError(
            f"{key}: {reason}",
            "",
            None,
            hint=f"set one, e.g. {key}={example}, or remove the {name} section",
        )
    try:
        alloc = parse_backend(written)
    except AllocationError as err:
        raise err.with_context(where) from None
    if role is not None:
        _check_kind(role, key, alloc, written)
    kind, target, fork = _scheduling(name, section)
    return EnginePlan(
        name,
        alloc,
        "" if inherited else written,
        INHERIT_FROM if inherited else None,
        (target or "") if kind == "colocation" else None,
        kind="inference" if alloc.is_inference else "training",
        fork=fork,
    )


def _scheduling(name: str, section: Any) -> tuple[str, str | None, bool]:
    prefix = f"{name}.scheduling_strategy"
    strategy = read_value(section, "scheduling_strategy", prefix)
    if _is_null(strategy):
        return "separation", None, True
    if not isinstance(strategy, Mapping):
        raise AllocationError(
            f"{prefix}: must be a section with type, target and fork, got {strategy!r}",
            None,
            None,
            hint=f"e.g. {prefix}.type=colocation {prefix}.target={INHERIT_FROM}",
        )
    kind = read_value(strategy, "type", f"{prefix}.type")
    kind = "separation" if kind is None or kind == "" else kind
    if kind not in SCHEDULING_TYPES:
        raise AllocationError(
            f"{prefix}.type: unknown scheduling type {kind!r}",
            kind if isinstance(kind, str) else None,
            None,
            hint=f"use {' or '.join(SCHEDULING_TYPES)}",
        )
    target = read_value(strategy, "target", f"{prefix}.target")
    if target is not None and not isinstance(target, str):
        raise AllocationError(
            f"{prefix}.target: must be an engine name, got {target!r}",
            None,
            None,
            hint=f"e.g. {prefix}.target={INHERIT_FROM}",
        )
    fork = read_value(strategy, "fork", f"{prefix}.fork", True)
    fork = True if fork is None else fork
    if not isinstance(fork, bool):
        raise AllocationError(
            f"{prefix}.fork: must be true or false, got {fork!r}",
            None,
            None,
            hint=f"{prefix}.fork=true (new processes on the target's GPUs, the default) or "
            "false (reuse the target's processes)",
        )
    return kind, target or None, fork


def _check_kind(role: Role, key: str, alloc: ModelAllocation, written: str) -> None:
    have = "inference" if alloc.is_inference else "training"
    if have == role.kind:
        return
    names = [b for b, rule in BACKENDS.items() if rule.kind == role.kind]
    if role.kind == "inference":
        example = f"{names[0]}:{alloc.parallel.body()}"
    else:
        example = f"{names[0]}:d{alloc.world_size}"
    raise AllocationError(
        f"{key}: {role.name} needs {'an' if role.kind == 'inference' else 'a'} {role.kind} "
        f"backend, got {alloc.backend}",
        written,
        0,
        length=len(alloc.backend),
        hint=f"use {join_or(names)}, e.g. {key}={example}",
    )


def read_engines(cfg: Any) -> dict[str, EnginePlan]:
    """Every engine of ``cfg`` in display order: parsed, or not built with the reason.

    Raises AllocationError when there is no engine at all.
    """
    found = dict(sections(cfg))
    if not found:
        raise AllocationError(
            "the config has no engine: no top-level section with a backend",
            None,
            None,
            hint="add one, e.g. +actor.backend=fsdp:d8 (training) or "
            "+rollout.backend=sglang:d2t4 (inference)",
        )
    ref_reason = kl_reason(cfg) if KL_ROLE in found else None
    engines: dict[str, EnginePlan] = {}
    for name in display_order(list(found)):
        if name == KL_ROLE and ref_reason is not None:
            role = ROLE[name]
            engines[name] = EnginePlan(name, None, "", kind=role.kind, not_built=ref_reason)
            continue
        engines[name] = _parse(name, cfg, found[name])
    if not any(e.enabled for e in engines.values()):
        first = next(iter(engines.values()))
        reasons = "; ".join(f"{e.name}: {e.not_built}" for e in engines.values())
        raise AllocationError(
            f"{first.name}: the config builds no engine ({reasons})",
            None,
            None,
            hint=f"give an engine a backend, e.g. {first.name}.backend={ROLE[first.name].example}"
            if first.name in ROLE
            else "give an engine a backend",
        )
    return engines


# ----------------------------------------------------------------------- colocation


def creation_order(engines: Mapping[str, EnginePlan]) -> list[str]:
    """AReaL's creation order: the roles in table order, then extras as in the config."""
    return [n for n in ROLE_NAMES if n in engines] + [n for n in engines if n not in ROLE]


def _sched_key(name: str, field: str = "target") -> str:
    return f"{name}.scheduling_strategy.{field}"


def resolve_colocation(engines: dict[str, EnginePlan]) -> dict[str, EnginePlan]:
    """Check every colocation chain and set each engine's GPU owner (the chain's end).

    Returns the engines (same order) with ``gpu_owner`` set on colocated ones.
    """
    order = creation_order(engines)
    rank = {name: i for i, name in enumerate(order)}
    owners: dict[str, str] = {}
    for name in order:
        e = engines[name]
        if not e.enabled or e.colocated_with is None:
            continue
        owners[name] = _walk(name, engines, rank)
    for name in order:
        e = engines[name]
        if name in owners and e.colocated_with is not None:
            _check_replicas(e, engines[e.colocated_with], owners)
    return {
        name: replace(e, gpu_owner=owners.get(name)) if name in owners else e
        for name, e in engines.items()
    }


def _walk(start: str, engines: dict[str, EnginePlan], rank: dict[str, int]) -> str:
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
            fix = _bad_target(breaker, _sched_key(breaker), "", engines, rank).hint
            raise AllocationError(
                f"{_sched_key(start)}: {cycle}: the colocation targets form a cycle",
                None,
                None,
                hint=f"end the chain at an engine that owns its GPUs: {fix}",
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
        key = _sched_key(cur)
        if not target:
            reason = f"{here}: {cur} is colocated but names no target"
            raise _bad_target(cur, key, reason, engines, rank)
        if target == cur:
            raise _bad_target(
                cur, key, f"{here}: {cur} cannot be colocated with itself", engines, rank
            )
        if target not in engines:
            what = (
                f"the config has no {target} section"
                if target in ROLE
                else f"{target!r} is not an engine of this config"
            )
            raise _bad_target(cur, key, f"{here}: {what}", engines, rank, typo=target)
        other = engines[target]
        if not other.enabled:
            raise _bad_target(
                cur, key, f"{here}: {target} is not built ({other.not_built})", engines, rank
            )
        if rank[target] > rank[cur]:
            raise _later(cur, target, key, here)
        if other.colocated_with is not None and not other.fork:
            owner = other.colocated_with
            raise AllocationError(
                f"{key}: {here}: the chain passes through {target}, which does not fork "
                f"({_sched_key(target, 'fork')} is false: it reuses {owner}'s processes and "
                "has none of its own to share)",
                None,
                None,
                hint=f"{key}={owner} (colocate with the engine {target} shares), or "
                f"{_sched_key(target, 'fork')}=true",
            )
        chain.append(target)
        cur = target


def _later(name: str, target: str, key: str, chain: str) -> AllocationError:
    swap = (
        f"colocate {target} with {name} instead: {_sched_key(target, 'type')}=colocation "
        f"{_sched_key(target)}={name} {_sched_key(name, 'type')}=separation"
    )
    if name in ROLE and target not in ROLE:
        reason = (
            f"{chain}: a role cannot be colocated with the extra engine {target} "
            "(AReaL creates the roles first, so the target would not exist yet)"
        )
    else:
        created = ", ".join(ROLE_NAMES) + ", then other engines in config order"
        reason = (
            f"{chain}: {target} is created after {name}, and a colocation target must "
            f"already exist (AReaL creates {created})"
        )
    return AllocationError(f"{key}: {reason}", None, None, hint=swap)


def _bad_target(
    name: str,
    key: str,
    reason: str,
    engines: dict[str, EnginePlan],
    rank: dict[str, int],
    *,
    typo: str | None = None,
) -> AllocationError:
    # Targets that would be valid: built, created earlier, forking if colocated, and with
    # this engine's replica and GPU counts.
    mine = engines[name].allocation
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
    fixes = []
    close = difflib.get_close_matches(typo, earlier, n=1, cutoff=0.6) if typo else []
    if close:
        fixes.append(f"{key}={close[0]} (did you mean {close[0]}?)")
    elif earlier:
        fixes.append(f"{key}={earlier[0]}")
    fixes.append(f"{_sched_key(name, 'type')}=separation")
    return AllocationError(f"{key}: {reason}", None, None, hint=" or ".join(fixes))


def _check_replicas(e: EnginePlan, target: EnginePlan, owners: dict[str, str]) -> None:
    a, t = e.allocation, target.allocation
    assert a is not None and t is not None
    if a.replicas == t.replicas and a.world_size == t.world_size:
        return
    chain = f"{e.name} -> {target.name}"
    if owners[e.name] != target.name:
        chain += f" (GPUs of {owners[e.name]})"
    if a.replicas != t.replicas:
        reason = (
            f"{chain}: {e.name} runs {replica_text(a)} ({a}) and {target.name} "
            f"{replica_text(t)} ({t}); colocated engines need the same number of replicas "
            "(server instances for inference, ranks for training)"
        )
    else:
        reason = (
            f"{chain}: {e.name} needs {a.world_size} GPUs ({a}) and {target.name} has "
            f"{t.world_size} ({t}); colocated engines share their target's GPUs"
        )
    raise AllocationError(
        f"{e.name}.backend: {reason}",
        str(a),
        None,
        hint=_replica_fix(e.name, a, target.name, t),
    )


def _replica_fix(name: str, a: ModelAllocation, target: str, t: ModelAllocation) -> str:
    """A change of backend that makes the colocation valid (the target stays as it is
    when it can)."""
    per_replica = t.world_size // t.replicas
    if a.is_inference:
        body = f"d{t.replicas}" + (f"t{per_replica}" if per_replica > 1 else "")
        return (
            f"{name}.backend={a.backend}:{body} ({t.replicas} instances of {per_replica} "
            f"GPU{'s' if per_replica != 1 else ''} on {target}'s {t.world_size} GPUs)"
        )
    if per_replica == 1:
        return f"{name}.backend={a.backend}:d{t.world_size} ({t.world_size} ranks)"
    # A training engine has one rank per GPU: the target needs one-GPU instances.
    return (
        f"give {target} one-GPU instances and {name} as many ranks: "
        f"{target}.backend={t.backend}:d{t.world_size} {name}.backend={a.backend}:d{t.world_size}"
    )
