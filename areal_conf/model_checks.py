"""Does a layout fit the model? The ``model`` section rules.

The ``model`` section has five optional keys (:data:`MODEL_KEYS`); ``None`` skips the
rule that reads it. The rules, each stated once as a row of :data:`MODEL_RULES`:

- ``num_attention_heads % tp == 0``;
- ``num_kv_heads`` is a multiple or a divisor of ``tp``;
- ``num_layers % pp == 0``, except with megatron: AReaL's Megatron engine splits the
  layers into pipeline stages of unequal length (balancing their parameters), so there
  ``pp <= num_layers`` is enough;
- ``num_experts % ep == 0`` (ep = 1 always fits; unchecked while num_experts is null);
- ``max_seq_len % (2 × cp) == 0`` when ``cp > 1``.

They apply to inference allocations too (their tp and pp; cp and ep are 1 there).
Both uses read the table: the per-dimension filters (:func:`tp_fits` …) that
:mod:`areal_conf.all_layouts` sweeps with, and the messages of :func:`model_violations`
and :func:`check_model`, so a sweep and a check can never disagree. (While num_experts
is null a sweep offers no expert layout at all: :mod:`areal_conf.all_layouts` decides
that, as the rule has nothing to hold against a layout then.)
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from areal_conf.allocation import ModelAllocation, ParallelStrategy
from areal_conf.backends import BACKENDS, join_or
from areal_conf.errors import AllocationError
from areal_conf.model_shape import SHAPE_KEYS, check_size_value
from areal_conf.strategy import divisors

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
        check_size_value(key, value, example=_EXAMPLES[key], null_means="skip its check")
        result[key] = value
    return result


_EXAMPLES: Final = {
    "num_layers": 32,
    "num_attention_heads": 32,
    "num_kv_heads": 8,
    "num_experts": 64,
    "max_seq_len": 8192,
}


# -- the rule table -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModelRule:
    """One model rule: ``key``'s value against the parallel size ``size``.

    ``fits(value, size)`` is the condition; ``reason(value, size)`` completes the
    sentence "``key=value`` …" when it fails and ``hint(value, size)`` is the fix.
    A null ``key`` skips the rule.
    """

    key: str
    size: str  # "tp", "pp", "cp" or "ep"; the size's letter in a spec is its first
    fits: Callable[[int, int], bool]
    reason: Callable[[int, int], str]
    hint: Callable[[int, int], str]
    backends: frozenset[str] | None = None  # the backends it holds for; None: every one

    def applies(self, backend: str | None) -> bool:
        """Whether the rule holds for ``backend`` (None: a layout of any backend)."""
        return self.backends is None or backend is None or backend in self.backends


def _divisible_by(key: str, size: str, backends: frozenset[str] | None = None) -> ModelRule:
    """The rule ``key % size == 0``, whose fix lists the divisors of key's value."""
    letter = size[0]
    return ModelRule(
        key,
        size,
        fits=lambda value, n: value % n == 0,
        reason=lambda value, n: f"is not divisible by {size}={n}",
        hint=lambda value, n: "use " + _choices(letter, divisors(value), n, value),
        backends=backends,
    )


# AReaL's Megatron engine lays the layers out over the pipeline stages itself, in
# stages of unequal length that balance their parameters.
_UNEVEN_PIPELINES: Final = frozenset({"megatron"})


def _kv_hint(kv: int, tp: int) -> str:
    return (
        f"use a divisor of {kv} ({_choices('t', divisors(kv), tp, kv)}) "
        f"or a multiple of {kv} (t{2 * kv}, t{3 * kv}, ...)"
    )


def _seq_hint(seq: int, cp: int) -> str:
    # cp = 1 always works; cp > 1 needs 2·cp | seq, i.e. cp | seq / 2.
    good = [1] + ([c for c in divisors(seq // 2) if c > 1] if seq % 2 == 0 else [])
    padded = -(-seq // (2 * cp)) * (2 * cp)
    return f"use {_choices('c', good, cp, seq // 2)}, or pad max_seq_len to {padded}"


# In the order the messages list broken rules.
MODEL_RULES: Final = (
    _divisible_by("num_attention_heads", "tp"),
    ModelRule(
        "num_kv_heads",
        "tp",
        fits=lambda kv, tp: kv % tp == 0 or tp % kv == 0,
        reason=lambda kv, tp: f"is neither a multiple nor a divisor of tp={tp}",
        hint=_kv_hint,
    ),
    _divisible_by("num_layers", "pp", frozenset(BACKENDS) - _UNEVEN_PIPELINES),
    ModelRule(
        "num_layers",
        "pp",
        fits=lambda layers, pp: pp <= layers,
        reason=lambda layers, pp: f"is fewer than pp={pp}: every pipeline stage needs a layer",
        hint=lambda layers, pp: f"use at most p{layers}",
        backends=_UNEVEN_PIPELINES,
    ),
    # ep = 1 passes by the arithmetic alone (every count is divisible by 1).
    _divisible_by("num_experts", "ep"),
    ModelRule(
        "max_seq_len",
        "cp",
        fits=lambda seq, cp: cp == 1 or seq % (2 * cp) == 0,
        reason=lambda seq, cp: f"is not divisible by 2×cp={2 * cp}",
        hint=_seq_hint,
    ),
)

# -- per-dimension filters (shared with layouts) --------------------------------------

# (key, condition) of the rules on one size for one backend: the filters run often, so
# they read these tuples, built once, instead of walking MODEL_RULES on every call.
_Conditions = tuple[tuple[str, Callable[[int, int], bool]], ...]


@functools.cache
def _conditions(size: str, backend: str | None) -> _Conditions:
    return tuple(
        (rule.key, rule.fits) for rule in MODEL_RULES if rule.size == size and rule.applies(backend)
    )


def _fits(conditions: _Conditions, model: ModelSpec, n: int) -> bool:
    for key, fits in conditions:
        value = model[key]
        if value is not None and not fits(value, n):
            return False
    return True


def tp_fits(model: ModelSpec, tp: int, backend: str | None = None) -> bool:
    """The head rules for a tensor parallel size ``tp`` (of ``backend``; None: every
    backend's rules)."""
    return _fits(_conditions("tp", backend), model, tp)


def pp_fits(model: ModelSpec, pp: int, backend: str | None = None) -> bool:
    return _fits(_conditions("pp", backend), model, pp)


def cp_fits(model: ModelSpec, cp: int, backend: str | None = None) -> bool:
    return _fits(_conditions("cp", backend), model, cp)


def ep_fits(model: ModelSpec, ep: int, backend: str | None = None) -> bool:
    return _fits(_conditions("ep", backend), model, ep)


# -- the messages ---------------------------------------------------------------------


def _violations(
    p: ParallelStrategy, model: ModelSpec, backend: str | None
) -> list[tuple[str, str, str]]:
    """(key, rule broken, fix) for each broken rule, in the order of MODEL_RULES."""
    found: list[tuple[str, str, str]] = []
    for rule in MODEL_RULES:
        if not rule.applies(backend):
            continue
        value = model[rule.key]
        n: int = getattr(p, rule.size + "_size")
        if value is not None and not rule.fits(value, n):
            found.append(
                (rule.key, f"{rule.key}={value} {rule.reason(value, n)}", rule.hint(value, n))
            )
    return found


def model_violations(allocation: ModelAllocation, model: Mapping[str, int | None]) -> list[str]:
    """One sentence per model rule the allocation breaks (rule, numbers, fix); [] if none.

    E.g. ``"num_attention_heads=12 is not divisible by tp=8; use t1, t2, t3, t4, t6 or
    t12"``. Raises AllocationError when ``model`` has an unknown key or a value that
    is not a positive integer or None.
    """
    checked = validate_model(model)
    found = _violations(allocation.parallel, checked, allocation.backend)
    return [f"{rule}; {fix}" for _, rule, fix in found]


def check_model(engine: str, allocation: ModelAllocation, model: Mapping[str, int | None]) -> None:
    """Raise one AllocationError naming the engine, its backend and every broken rule.

    The error's ``spec`` is the canonical backend string, ``position`` is None and the
    hint lists the fixes, one per broken rule.
    """
    checked = validate_model(model)
    found = _violations(allocation.parallel, checked, allocation.backend)
    if not found:
        return
    spec = str(allocation)
    count = "a model rule" if len(found) == 1 else f"{len(found)} model rules"
    raise AllocationError(
        f"{engine}: {spec} breaks {count}: " + "; ".join(rule for _, rule, _ in found),
        spec,
        None,
        hint="; ".join(f"{key}: {fix}" if len(found) > 1 else fix for key, _, fix in found),
    )


# -- helpers --------------------------------------------------------------------------


def _choices(letter: str, sizes: list[int], current: int, of: int) -> str:
    """``t1, t2, t4 or t8``; thinned to the sizes nearest ``current`` if there are many.

    ``sizes`` are the divisors of ``of`` that work (named when the list is thinned).
    """
    if len(sizes) > _MAX_CHOICES:
        nearest = sorted(sizes, key=lambda s: (abs(s - current), s))[:_MAX_CHOICES]
        shown = [f"{letter}{s}" for s in sorted(nearest)]
        return ", ".join(shown) + f" or another divisor of {of}"
    return join_or([f"{letter}{s}" for s in sizes])
