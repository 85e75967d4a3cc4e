"""Does a layout fit the model? The ``model`` section rules.

The ``model`` section has five optional keys (:data:`MODEL_KEYS`); ``None`` skips the
checks that read it. The rules, each stated once in :func:`_violations`:

- ``num_attention_heads % tp == 0``;
- ``num_kv_heads`` is a multiple or a divisor of ``tp``;
- ``num_layers % pp == 0``;
- ``ep > 1`` needs ``num_experts % ep == 0`` (unchecked while num_experts is null);
- ``max_seq_len % (2 × cp) == 0`` when ``cp > 1``.

They apply to inference allocations too (their tp and pp; cp and ep are 1 there).
The per-dimension predicates (:func:`tp_fits` …) are what :mod:`areal_conf.layouts`
filters with, so a sweep and a check can never disagree.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from math import isqrt
from typing import Final

from areal_conf.allocation import ModelAllocation, ParallelStrategy
from areal_conf.backends import MAX_SIZE, join_or
from areal_conf.errors import AllocationError
from areal_conf.model_shape import SHAPE_KEYS

MODEL_KEYS: Final = (
    "num_layers",
    "num_attention_heads",
    "num_kv_heads",
    "num_experts",
    "max_seq_len",
)

# A validated model section: every key of MODEL_KEYS, value a positive int or None.
ModelSpec = dict[str, int | None]

# At most this many suggested sizes in a fix; more are thinned to those nearest the
# current size.
_MAX_CHOICES: Final = 10


# -- validation of the section --------------------------------------------------------


def validate_model(model: object) -> ModelSpec:
    """The model section as a plain dict with all keys; raise AllocationError if bad.

    Unknown keys and values that are not positive integers (or ``None``) are rejected.
    """
    if model is None:
        return dict.fromkeys(MODEL_KEYS)
    if not isinstance(model, Mapping):
        raise AllocationError(
            f"the model section must be a mapping, got {type(model).__name__}",
            model,
            None,
            hint="give a mapping with some of the keys " + ", ".join(MODEL_KEYS),
        )
    result: ModelSpec = dict.fromkeys(MODEL_KEYS)
    for key, value in model.items():
        if key in SHAPE_KEYS:
            continue  # the memory model's keys (areal_conf.model_shape checks them)
        if key not in result:
            shown = key if isinstance(key, str) else repr(key)
            close = difflib.get_close_matches(str(key), (*MODEL_KEYS, *SHAPE_KEYS), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}? " if close else ""
            raise AllocationError(
                f"unknown key {shown!s} in the model section",
                shown,
                None,
                hint=hint + "the model section's keys are " + ", ".join((*MODEL_KEYS, *SHAPE_KEYS)),
            )
        if value is not None and (type(value) is not int or value < 1):
            raise AllocationError(
                f"model.{key} must be a positive integer or null, got {value!r}",
                value,
                None,
                hint=f"write e.g. model.{key}={_EXAMPLES[key]}, or null to skip its check",
            )
        result[key] = value
    return result


_EXAMPLES: Final = {
    "num_layers": 32,
    "num_attention_heads": 32,
    "num_kv_heads": 8,
    "num_experts": 64,
    "max_seq_len": 8192,
}


# -- per-dimension predicates (shared with layouts) -----------------------------------


def tp_fits(model: ModelSpec, tp: int) -> bool:
    """The head rules for a tensor parallel size ``tp``."""
    heads = model["num_attention_heads"]
    if heads is not None and heads % tp:
        return False
    kv = model["num_kv_heads"]
    return kv is None or kv % tp == 0 or tp % kv == 0


def pp_fits(model: ModelSpec, pp: int) -> bool:
    layers = model["num_layers"]
    return layers is None or layers % pp == 0


def cp_fits(model: ModelSpec, cp: int) -> bool:
    seq = model["max_seq_len"]
    return cp == 1 or seq is None or seq % (2 * cp) == 0


def ep_fits(model: ModelSpec, ep: int) -> bool:
    if ep == 1:
        return True
    experts = model["num_experts"]
    return experts is not None and experts % ep == 0


# -- the rules with their messages ----------------------------------------------------


def _violations(p: ParallelStrategy, model: ModelSpec) -> list[tuple[str, str]]:
    """(rule broken, fix) for each broken rule, in the order of the rule table."""
    found: list[tuple[str, str]] = []
    tp, pp, cp, ep = p.tp_size, p.pp_size, p.cp_size, p.ep_size
    heads = model["num_attention_heads"]
    if heads is not None and heads % tp:
        found.append(
            (
                f"num_attention_heads={heads} is not divisible by tp={tp}",
                "use " + _choices("t", _divisors(heads), tp, heads),
            )
        )
    kv = model["num_kv_heads"]
    if kv is not None and kv % tp and tp % kv:
        found.append(
            (
                f"num_kv_heads={kv} is neither a multiple nor a divisor of tp={tp}",
                (
                    f"use a divisor of {kv} ({_choices('t', _divisors(kv), tp, kv)}) "
                    f"or a multiple of {kv} (t{2 * kv}, t{3 * kv}, ...)"
                ),
            )
        )
    layers = model["num_layers"]
    if layers is not None and layers % pp:
        found.append(
            (
                f"num_layers={layers} is not divisible by pp={pp}",
                "use " + _choices("p", _divisors(layers), pp, layers),
            )
        )
    experts = model["num_experts"]
    if ep > 1 and experts is not None and experts % ep:  # null means unchecked
        found.append(
            (
                f"num_experts={experts} is not divisible by ep={ep}",
                "use " + _choices("e", _divisors(experts), ep, experts),
            )
        )
    seq = model["max_seq_len"]
    if cp > 1 and seq is not None and seq % (2 * cp):
        # cp = 1 always works; cp > 1 needs 2·cp | seq, i.e. cp | seq / 2.
        good = [1] + ([c for c in _divisors(seq // 2) if c > 1] if seq % 2 == 0 else [])
        padded = -(-seq // (2 * cp)) * (2 * cp)
        found.append(
            (
                f"max_seq_len={seq} is not divisible by 2×cp={2 * cp}",
                f"use {_choices('c', good, cp, seq // 2)}, or pad max_seq_len to {padded}",
            )
        )
    return found


def model_violations(allocation: ModelAllocation, model: Mapping[str, int | None]) -> list[str]:
    """One sentence per model rule the allocation breaks (rule, numbers, fix); [] if none.

    E.g. ``"num_attention_heads=12 is not divisible by tp=8; use t1, t2, t3, t4, t6 or
    t12"``. Raises AllocationError when ``model`` has an unknown key or a value that
    is not a positive integer or None.
    """
    checked = validate_model(model)
    return [f"{rule}; {fix}" for rule, fix in _violations(allocation.parallel, checked)]


def check_model(engine: str, allocation: ModelAllocation, model: Mapping[str, int | None]) -> None:
    """Raise one AllocationError naming the engine, its backend and every broken rule.

    The error's ``spec`` is the canonical backend string, ``position`` is None and the
    hint lists the fixes, one per broken rule.
    """
    checked = validate_model(model)
    found = _violations(allocation.parallel, checked)
    if not found:
        return
    spec = str(allocation)
    count = "a model rule" if len(found) == 1 else f"{len(found)} model rules"
    raise AllocationError(
        f"{engine}: {spec} breaks {count}: " + "; ".join(rule for rule, _ in found),
        spec,
        None,
        hint="; ".join(
            f"{rule.split('=', 1)[0]}: {fix}" if len(found) > 1 else fix for rule, fix in found
        ),
    )


# -- helpers --------------------------------------------------------------------------


def _divisors(n: int) -> list[int]:
    """Divisors of ``n`` that are at most MAX_SIZE (no size can be larger), ascending."""
    low: list[int] = []
    high: list[int] = []
    for i in range(1, min(isqrt(n), MAX_SIZE) + 1):
        if n % i == 0:
            low.append(i)
            j = n // i
            if j != i and j <= MAX_SIZE:
                high.append(j)
    return low + high[::-1]


def _choices(letter: str, sizes: list[int], current: int, of: int) -> str:
    """``t1, t2, t4 or t8``; thinned to the sizes nearest ``current`` if there are many.

    ``sizes`` are the divisors of ``of`` that work (named when the list is thinned).
    """
    if len(sizes) > _MAX_CHOICES:
        nearest = sorted(sizes, key=lambda s: (abs(s - current), s))[:_MAX_CHOICES]
        shown = [f"{letter}{s}" for s in sorted(nearest)]
        return ", ".join(shown) + f" or another divisor of {of}"
    return join_or([f"{letter}{s}" for s in sizes])
