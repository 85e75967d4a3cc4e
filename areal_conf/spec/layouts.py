"""Every valid layout of a backend on exactly N GPUs.

The enumeration walks divisors, never the full product of sizes: pp divides N, tp
divides N/pp, cp divides N/(pp·tp) and dp is what is left; the expert pairs (ep, etp)
are chosen per pp among the divisors of N/pp. Every size is filtered as soon as it is
chosen, by the backend's dimensions, the ``max_tp`` cap and the model rules of
:mod:`areal_conf.spec.model_checks` (the same predicates ``check_model`` uses).
The canonical text is assembled from :mod:`areal_conf.spec.strategy`'s pieces, each computed
once per (pp, tp, cp) or per (pp, ep, etp); tests check that every string equals
``str(parse_backend(s))``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from areal_conf.arguments import optional_whole, whole
from areal_conf.errors import AllocationError
from areal_conf.spec.backends import BACKENDS, MAX_SIZE, BackendRule, join_or
from areal_conf.spec.model_checks import (
    ModelSpec,
    cp_fits,
    ep_fits,
    etp_fits,
    pp_fits,
    tp_fits,
    validate_model,
)
from areal_conf.spec.strategy import (
    archon_allows,
    attn_text,
    divisors,
    expert_text,
    ffn_text,
    flat_body,
    hybrid_body,
)


def layouts(
    backend: str,
    gpus: int,
    *,
    model: Mapping[str, int | None] | None = None,
    max_tp: int | None = None,
) -> list[str]:
    """Canonical specs of every distinct valid ``backend`` layout on exactly ``gpus`` GPUs.

    A layout is a ``(dp, tp, pp, cp, ep, etp)`` with ``dp·tp·pp·cp == gpus`` that the
    parser accepts for ``backend`` (its dimensions, the flat expert rule ``edp =
    gpus/(pp·etp·ep)`` whole, the hybrid form for megatron and archon, Archon's rules).
    Expert layouts (``ep > 1`` or ``etp > 1``) appear only when ``model`` sets
    ``num_experts``. Layouts that break a model rule of the backend are left out;
    ``max_tp`` caps both ``tp`` and ``etp`` (None: no cap).

    Order: ascending by ``(pp, tp, cp, ep, etp)``, then by ``dp``/``edp``. Given
    ``gpus`` those five sizes determine dp and edp, so the key is unique and the
    order is total and deterministic.

    Raises AllocationError (with a hint) for an unknown backend, ``gpus`` outside
    1..2**20, a ``max_tp`` that is not a positive integer, or a bad model section.
    """
    rule = _check_backend(backend)
    n = _check_gpus(gpus)
    cap = _check_max_tp(max_tp)
    spec = validate_model(model)
    return _enumerate(backend, rule, n, cap, spec)


def _enumerate(backend: str, rule: BackendRule, n: int, cap: int, m: ModelSpec) -> list[str]:
    dims = rule.dims
    div_n = divisors(n)
    # Expert layouts need experts: on a dense model (or while num_experts is unknown)
    # the ffn section would shard nothing.
    experts = (m["num_experts"] or None) if "e" in dims else None
    hybrid = rule.hybrid and experts is not None
    archon = backend == "archon"
    prefix = backend + ":"
    out: list[str] = []
    append = out.append

    pps = [p for p in div_n if p == 1 or ("p" in dims and pp_fits(m, p, backend))]
    for pp in pps:
        per_stage = n // pp  # dp·tp·cp, and edp·etp·ep
        div_stage = [d for d in div_n if per_stage % d == 0]
        tps = [
            t for t in div_stage if t == 1 or ("t" in dims and t <= cap and tp_fits(m, t, backend))
        ]
        # Expert pairs (ep, etp), ascending, with their canonical text: ep·etp must
        # divide the GPUs of a stage (edp = per_stage / (ep·etp) whole).
        pairs: list[tuple[int, int, str]] = [(1, 1, "")]
        if experts is not None:
            pairs = []
            for ep in div_stage:
                if not ep_fits(m, ep, backend):
                    continue
                pairs.append((ep, 1, expert_text(ep)))
                if hybrid:
                    rest = per_stage // ep
                    for etp in div_stage:
                        if 1 < etp <= cap and rest % etp == 0 and etp_fits(m, etp, backend):
                            pairs.append((ep, etp, ffn_text(rest // etp, pp, etp, ep)))
        for tp in tps:
            per_tp = per_stage // tp
            cps = [
                c
                for c in div_stage
                if per_tp % c == 0 and (c == 1 or ("c" in dims and cp_fits(m, c, backend, tp=tp)))
            ]
            for cp in cps:
                dp = per_tp // cp
                attn = attn_text(dp, pp, tp, cp)
                for ep, etp, text in pairs:
                    if archon and not archon_allows(dp, tp, cp, ep, etp):
                        continue
                    if etp == 1:
                        append(prefix + flat_body(attn, text))
                    else:
                        append(prefix + hybrid_body(attn, text))
    return out


# -- argument checks ------------------------------------------------------------------


def _check_backend(backend: object) -> BackendRule:
    known = join_or(list(BACKENDS))
    if type(backend) is not str:
        raise AllocationError(
            f"backend must be a string, got {type(backend).__name__}",
            backend,
            hint=f"give a backend name: {known}",
        )
    rule = BACKENDS.get(backend)
    if rule is not None:
        return rule
    name = backend.strip(" \t")
    if name.lower() in BACKENDS:
        hint = f"backend names are lower case: {name.lower()}"
    elif ":" in name:
        hint = f"give the backend name only, e.g. {name.split(':', 1)[0].strip() or 'fsdp'}"
    else:
        close = difflib.get_close_matches(name.lower(), list(BACKENDS), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else f"known backends: {known}"
    raise AllocationError(
        f"unknown backend {backend!r}", backend, 0, length=len(backend), hint=hint
    )


def _check_gpus(gpus: object) -> int:
    return whole(
        "gpus",
        gpus,
        example="the number of GPUs the engine uses, e.g. 8",
        maximum=MAX_SIZE,
        why="the backend grammar's limit",
    )


def _check_max_tp(max_tp: object) -> int:
    checked = optional_whole(
        "max_tp",
        max_tp,
        example="the largest tensor parallel size to try, e.g. the GPUs per node (8), "
        "or None for no cap",
        maximum=MAX_SIZE,
        why="the backend grammar's limit",
    )
    return MAX_SIZE if checked is None else checked
