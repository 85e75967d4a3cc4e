"""Does a layout fit the model? The model-shape rules of each backend, in one table.

Each rule of :data:`MODEL_RULES` is one condition an engine's start-up code (or the
Megatron-Core, SGLang or vLLM code it calls) puts on the model's shape and the parallel
sizes, with the backends it holds for and where that code states it. The rules read the
sizes of :data:`RULE_KEYS`; a null size skips every rule that reads it. Everything reads
this table: the per-size filters (:func:`tp_fits` …) that :mod:`areal_conf.spec.layouts`
sweeps with, and the messages and fixes of :func:`model_violations` and
:func:`check_model`, so a sweep and a check never disagree, and a fix only names sizes
that break no rule.

A model whose shape is known in full (every size the memory model needs) and has no
``num_experts`` is dense, as the memory model takes it: expert parallelism is refused
there. While the shape is partial, a missing ``num_experts`` skips the expert rules.
(A sweep offers expert layouts only when ``num_experts`` is known; on a dense model the
ffn section's expert tensor size shards nothing, so a sweep leaves those spellings out,
though AReaL accepts them.)
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple

from areal_conf.errors import AllocationError
from areal_conf.model.shape import REQUIRED, SHAPE_KEYS, check_shape_values, check_size_value
from areal_conf.spec.allocation import ModelAllocation, ParallelStrategy
from areal_conf.spec.backends import BACKENDS, join_or
from areal_conf.spec.strategy import divisors

#: The layout keys of the ``model`` section: null skips the rules that read them.
MODEL_KEYS: Final = (
    "num_layers",
    "num_attention_heads",
    "num_kv_heads",
    "num_experts",
)
#: Every size the rules read: the layout keys and two of the memory model's.
RULE_KEYS: Final = (*MODEL_KEYS, "ffn_hidden_size", "moe_ffn_hidden_size")

#: ``num_experts`` of a model known to be dense (in a validated :data:`ModelSpec` only;
#: a user never writes it).
NO_EXPERTS: Final = 0

# A validated model: every key of RULE_KEYS, value a positive int or None (unknown);
# num_experts may also be NO_EXPERTS.
ModelSpec = dict[str, int | None]

# At most this many suggested sizes in a fix; more are thinned to those nearest the
# current size.
_MAX_CHOICES: Final = 10


# -- validation of the section --------------------------------------------------------


def validate_model(model: object) -> ModelSpec:
    """The sizes the rules read, from a model section (or a resolved shape).

    Unknown keys and values that are not positive integers (or ``None``) are rejected.
    ``num_experts`` is :data:`NO_EXPERTS` when the shape is known in full and names no
    experts.
    """
    if model is None:
        return dict.fromkeys(RULE_KEYS)
    if not isinstance(model, Mapping):
        raise AllocationError(
            f"the model section must be a mapping, got {type(model).__name__}",
            model,
            hint="give a mapping with some of the keys " + ", ".join(MODEL_KEYS),
        )
    known = (*MODEL_KEYS, *SHAPE_KEYS)
    for key, value in model.items():
        if key in SHAPE_KEYS:
            continue  # the shape keys are checked together below
        if key not in MODEL_KEYS:
            shown = key if isinstance(key, str) else repr(key)
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}? " if close else ""
            raise AllocationError(
                f"unknown key {shown!s} in the model section",
                shown,
                hint=hint + "the model section's keys are " + ", ".join(known),
            )
        check_size_value(key, value, example=_EXAMPLES[key], null_means="skip its check")
    check_shape_values(model)
    spec: ModelSpec = {key: model.get(key) for key in RULE_KEYS}
    if spec["num_experts"] is None and all(model.get(key) is not None for key in REQUIRED):
        spec["num_experts"] = NO_EXPERTS
    return spec


_EXAMPLES: Final = {
    "num_layers": 32,
    "num_attention_heads": 32,
    "num_kv_heads": 8,
    "num_experts": 64,
}


# -- the rule table -------------------------------------------------------------------


class Sizes(NamedTuple):
    """The parallel sizes the rules read."""

    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 1

    @classmethod
    def of(cls, p: ParallelStrategy) -> Sizes:
        return cls(p.tp_size, p.pp_size, p.cp_size, p.ep_size, p.etp_size)


#: How a fix writes a size: ``t4``; the expert tensor size is the ffn section's ``t``.
SIZE_PREFIX: Final = {"tp": "t", "pp": "p", "cp": "c", "ep": "e", "etp": "t"}
_SECTION: Final = {"etp": "ffn "}

_Condition = Callable[[ModelSpec, Sizes], bool]


@dataclass(frozen=True, slots=True)
class ModelRule:
    """One rule: ``fits(model, sizes)`` (``condition`` in words) must hold for the
    ``backends``.

    ``size`` is the parallel size the rule limits (its fix changes it) and ``reads`` every
    size it reads. ``keys`` are the model sizes it reads: a null one skips the rule.
    ``broken(model, sizes)`` says what is wrong when it does not hold.
    ``choices(model, sizes)`` lists every size of ``size`` the rule may take (None: it
    sets no bound, and ``examples`` lists some it takes); a fix is the sizes from the
    shortest such list that every rule reading ``size`` takes. ``source`` says where the
    engine (or the library it calls) states the rule.
    """

    name: str
    size: str
    keys: tuple[str, ...]
    backends: frozenset[str]
    condition: str
    fits: _Condition
    broken: Callable[[ModelSpec, Sizes], str]
    source: tuple[str, ...]
    choices: Callable[[ModelSpec, Sizes], list[int] | None] = lambda m, s: None
    examples: Callable[[ModelSpec, Sizes], list[int]] = lambda m, s: []
    reads: tuple[str, ...] = ()

    def applies(self, backend: str | None) -> bool:
        """Whether the rule holds for ``backend`` (None: a layout of any backend)."""
        return backend is None or backend in self.backends

    def checked(self, model: ModelSpec) -> bool:
        """Whether the model gives every size the rule reads."""
        return all(model[key] is not None for key in self.keys)


def _n(model: ModelSpec, key: str) -> int:
    """A model size a rule reads (its rules run only when it is known)."""
    value = model[key]
    assert value is not None, key
    return value


def _has_experts(model: ModelSpec) -> bool:
    return (model["num_experts"] or NO_EXPERTS) > NO_EXPERTS


def _replicates(a: int, b: int) -> bool:
    """``a`` is a multiple or a divisor of ``b``."""
    return a % b == 0 or b % a == 0


def _multiples(n: int | None) -> list[int]:
    """The divisors of ``n`` and its first multiples (for a rule that takes both)."""
    return [] if n is None else [*divisors(n), 2 * n, 3 * n, 4 * n]


def _local_heads(model: ModelSpec, s: Sizes, key: str) -> int | None:
    """``key``'s heads on one tensor-parallel rank, or None while tp does not divide them
    (the tp rules report that)."""
    heads = _n(model, key)
    return heads // s.tp if heads % s.tp == 0 else None


def _ulysses_kv(model: ModelSpec, s: Sizes) -> bool:
    kv = _local_heads(model, s, "num_kv_heads")
    return kv is None or _replicates(kv, s.cp)


def _ulysses_heads_choices(model: ModelSpec, s: Sizes) -> list[int] | None:
    heads = _local_heads(model, s, "num_attention_heads")
    return None if heads is None else divisors(heads)


def _heads_divisible_by_tp(
    rule_id: str, key: str, backends: frozenset[str], *, source: tuple[str, ...]
) -> ModelRule:
    """The rule that tp divides ``key``'s heads, each rank holding whole heads."""
    return ModelRule(
        rule_id,
        "tp",
        (key,),
        backends,
        condition=f"{key} divisible by tp",
        fits=lambda m, s: _n(m, key) % s.tp == 0,
        broken=lambda m, s: f"{key}={m[key]} is not divisible by tp={s.tp}",
        choices=lambda m, s: divisors(_n(m, key)),
        source=source,
    )


_ALL: Final = frozenset(BACKENDS)
_INFERENCE: Final = frozenset({"sglang", "vllm"})
_WHOLE_KV_HEADS: Final = frozenset({"fsdp", "archon", "megatron"})
_ULYSSES: Final = frozenset({"fsdp", "archon"})
_EXPERTS: Final = frozenset({"megatron", "archon"})

# Where each rule is stated. AReaL's paths are at its commit cbff54d64 (AReaL 2.0).
_AREAL: Final = "AReaL cbff54d64 "
_MCORE: Final = "Megatron-Core 0.17.0 (AReaL's pin) megatron/core/"
_SGLANG: Final = "SGLang 0.5.10.post1 (AReaL's pin) python/sglang/srt/"
_VLLM: Final = "vLLM 0.19.1 (AReaL's pin) vllm/"

#: In the order the messages list broken rules.
MODEL_RULES: Final = (
    _heads_divisible_by_tp(
        "heads-tp",
        "num_attention_heads",
        _ALL,
        source=(
            "fsdp: " + _AREAL + "areal/engine/fsdp_utils/parallel.py:240-246",
            "archon: " + _AREAL + "areal/experimental/models/archon/utils.py:35-38",
            "megatron: " + _MCORE + "transformer/transformer_config.py:1043-1047",
            "sglang: " + _SGLANG + "layers/linear.py:922 (QKVParallelLinear)",
            "vllm: " + _VLLM + "config/model.py:1111-1116",
        ),
    ),
    _heads_divisible_by_tp(
        "kv-heads-tp",
        "num_kv_heads",
        _WHOLE_KV_HEADS,
        source=(
            "fsdp: " + _AREAL + "areal/engine/fsdp_utils/parallel.py:240-246",
            "archon: " + _AREAL + "areal/experimental/models/archon/utils.py:40-43",
            "megatron: " + _AREAL + "areal/models/mcore/hf_load.py:63-72 (the weight "
            "loader gives each tp rank whole key-value heads; Megatron-Core itself also "
            "takes a divisor: transformer/transformer_config.py:1058-1065)",
        ),
    ),
    ModelRule(
        "kv-heads-tp-replicated",
        "tp",
        ("num_kv_heads",),
        _INFERENCE,
        condition="num_kv_heads a multiple or a divisor of tp",
        fits=lambda m, s: _replicates(_n(m, "num_kv_heads"), s.tp),
        broken=lambda m, s: (
            f"num_kv_heads={m['num_kv_heads']} is neither a multiple nor a divisor of tp={s.tp}"
        ),
        examples=lambda m, s: _multiples(_n(m, "num_kv_heads")),
        source=(
            "sglang: " + _SGLANG + "layers/linear.py:923-928 (KV heads are replicated "
            "when tp exceeds them)",
            "vllm: " + _VLLM + "model_executor/layers/linear.py:1012-1017",
        ),
    ),
    ModelRule(
        "ffn-tp",
        "tp",
        ("ffn_hidden_size",),
        frozenset({"megatron", "sglang", "vllm"}),
        condition="ffn_hidden_size divisible by tp (a model without experts)",
        fits=lambda m, s: _has_experts(m) or _n(m, "ffn_hidden_size") % s.tp == 0,
        broken=lambda m, s: f"ffn_hidden_size={m['ffn_hidden_size']} is not divisible by tp={s.tp}",
        choices=lambda m, s: None if _has_experts(m) else divisors(_n(m, "ffn_hidden_size")),
        source=(
            "megatron: "
            + _MCORE
            + "tensor_parallel/layers.py:822, 1150; "
            + _AREAL
            + "areal/models/mcore/hf_load.py:152-155",
            "sglang: " + _SGLANG + "layers/linear.py:340, 1369",
            "vllm: " + _VLLM + "model_executor/layers/linear.py:451, 1417",
        ),
    ),
    ModelRule(
        "moe-ffn-etp",
        "etp",
        ("moe_ffn_hidden_size", "num_experts"),
        frozenset({"megatron"}),
        condition="moe_ffn_hidden_size divisible by etp (the ffn section's t)",
        fits=lambda m, s: not _has_experts(m) or _n(m, "moe_ffn_hidden_size") % s.etp == 0,
        broken=lambda m, s: (
            f"moe_ffn_hidden_size={m['moe_ffn_hidden_size']} is not divisible by "
            f"the expert tensor parallel size {s.etp}"
        ),
        choices=lambda m, s: divisors(_n(m, "moe_ffn_hidden_size")) if _has_experts(m) else None,
        source=("megatron: " + _MCORE + "extensions/transformer_engine.py:1745-1749",),
    ),
    ModelRule(
        "layers-pp-megatron",
        "pp",
        ("num_layers",),
        frozenset({"megatron"}),
        condition="pp ≤ num_layers + 2",
        fits=lambda m, s: s.pp <= _n(m, "num_layers") + 2,
        broken=lambda m, s: (
            f"num_layers={m['num_layers']} is fewer than pp-2={s.pp - 2}: AReaL's "
            "Megatron engine balances the stages, and every stage but the first and the "
            "last needs a layer"
        ),
        choices=lambda m, s: list(range(1, _n(m, "num_layers") + 3)),
        source=(
            "megatron: " + _AREAL + "areal/engine/megatron_utils/pipeline_parallel.py:"
            "120-146 (stages of unequal length; an empty first or last stage holds the "
            "embedding or the loss)",
        ),
    ),
    ModelRule(
        "layers-pp-archon",
        "pp",
        ("num_layers",),
        frozenset({"archon"}),
        condition="2 × pp ≤ num_layers + 2",
        fits=lambda m, s: 2 * s.pp <= _n(m, "num_layers") + 2,
        broken=lambda m, s: (
            f"num_layers={m['num_layers']} is fewer than 2×pp-2={2 * s.pp - 2}: Archon's "
            "default schedule (Interleaved1F1B) runs 2 stages per pipeline rank, each "
            "with a layer (the first and the last count the embedding and the output as one)"
        ),
        choices=lambda m, s: list(range(1, (_n(m, "num_layers") + 2) // 2 + 1)),
        source=(
            "archon: " + _AREAL + "areal/experimental/models/archon/pipeline_parallel.py:"
            "131-146, 449-451 (defaults: areal/api/cli_args.py:668-706)",
        ),
    ),
    ModelRule(
        "layers-pp-inference",
        "pp",
        ("num_layers",),
        _INFERENCE,
        condition="pp ≤ num_layers",
        fits=lambda m, s: s.pp <= _n(m, "num_layers"),
        broken=lambda m, s: (
            f"num_layers={m['num_layers']} is fewer than pp={s.pp}: every pipeline stage "
            "needs a layer"
        ),
        choices=lambda m, s: list(range(1, _n(m, "num_layers") + 1)),
        source=(
            "sglang: " + _SGLANG + "utils/common.py:632 (stages of unequal length: "
            "distributed/utils.py:99-135)",
            "vllm: " + _VLLM + "distributed/utils.py:95-140 (stages of unequal length; "
            "vLLM states no bound: a stage without a layer is refused as with SGLang)",
        ),
    ),
    ModelRule(
        "heads-cp-ulysses",
        "cp",
        ("num_attention_heads",),
        _ULYSSES,
        condition="num_attention_heads divisible by tp × cp",
        fits=lambda m, s: (
            (heads := _local_heads(m, s, "num_attention_heads")) is None or heads % s.cp == 0
        ),
        broken=lambda m, s: (
            f"num_attention_heads={m['num_attention_heads']} is not divisible by "
            f"tp×cp={s.tp * s.cp}: context parallelism (Ulysses) splits each tensor-parallel "
            "rank's heads over cp"
        ),
        choices=_ulysses_heads_choices,
        reads=("tp",),
        source=(
            "fsdp: " + _AREAL + "areal/models/transformers/ulyssess_patch.py:165-168 "
            "(at start-up, all heads), 43-54 and areal/models/fsdp/ulysses.py:180-183 "
            "(each rank's heads split into cp equal parts)",
            "archon: " + _AREAL + "areal/experimental/models/archon/utils.py:68-75",
        ),
    ),
    ModelRule(
        "kv-heads-cp-ulysses",
        "cp",
        ("num_kv_heads",),
        _ULYSSES,
        condition="num_kv_heads / tp a multiple or a divisor of cp",
        fits=_ulysses_kv,
        examples=lambda m, s: _multiples(_local_heads(m, s, "num_kv_heads")),
        broken=lambda m, s: (
            f"num_kv_heads={m['num_kv_heads']} over tp={s.tp} gives "
            f"{_n(m, 'num_kv_heads') // s.tp} per rank, neither a multiple nor a divisor "
            f"of cp={s.cp}"
        ),
        reads=("tp",),
        source=(
            "fsdp: " + _AREAL + "areal/models/transformers/ulyssess_patch.py:169-177 "
            "(at start-up, all heads), 46-48 (each rank's heads repeated up to cp)",
            "archon: " + _AREAL + "areal/experimental/models/archon/utils.py:77-93",
        ),
    ),
    ModelRule(
        "experts-ep-dense",
        "ep",
        ("num_experts",),
        _EXPERTS,
        condition="ep = 1 on a model without experts",
        fits=lambda m, s: _has_experts(m) or s.ep == 1,
        broken=lambda m, s: (
            f"ep={s.ep} shards experts, and the model has none (its shape names no num_experts)"
        ),
        choices=lambda m, s: None if _has_experts(m) else [1],
        source=(
            "megatron: " + _MCORE + "transformer/transformer_config.py:1167-1168",
            "archon: " + _AREAL + "areal/experimental/models/archon/utils.py:120-127",
        ),
    ),
    ModelRule(
        "experts-ep",
        "ep",
        ("num_experts",),
        _EXPERTS,
        condition="num_experts divisible by ep",
        fits=lambda m, s: not _has_experts(m) or _n(m, "num_experts") % s.ep == 0,
        broken=lambda m, s: f"num_experts={m['num_experts']} is not divisible by ep={s.ep}",
        choices=lambda m, s: divisors(_n(m, "num_experts")) if _has_experts(m) else None,
        source=(
            "megatron: " + _MCORE + "transformer/moe/moe_layer.py:169",
            "archon: " + _AREAL + "areal/experimental/models/archon/utils.py:135-139",
        ),
    ),
)

#: The order sizes are chosen in a sweep: a rule may read sizes chosen before its own.
SIZES: Final = ("pp", "ep", "etp", "tp", "cp")


@functools.cache
def _rules(size: str, backend: str | None) -> tuple[ModelRule, ...]:
    """The rules on ``size`` for ``backend``, in table order."""
    return tuple(r for r in MODEL_RULES if r.size == size and r.applies(backend))


@functools.cache
def _rules_reading(size: str, backend: str | None) -> tuple[ModelRule, ...]:
    """The rules whose outcome depends on ``size`` (on it, or reading it)."""
    return tuple(
        r for r in MODEL_RULES if (r.size == size or size in r.reads) and r.applies(backend)
    )


def _all_fit(rules: Iterable[ModelRule], model: ModelSpec, sizes: Sizes) -> bool:
    return all(not rule.checked(model) or rule.fits(model, sizes) for rule in rules)


# -- per-size filters (shared with layouts) -------------------------------------------


def tp_fits(model: ModelSpec, tp: int, backend: str | None = None) -> bool:
    """The rules on a tensor parallel size ``tp`` of ``backend`` (None: every backend's
    rules)."""
    return _all_fit(_rules("tp", backend), model, Sizes(tp=tp))


def pp_fits(model: ModelSpec, pp: int, backend: str | None = None) -> bool:
    return _all_fit(_rules("pp", backend), model, Sizes(pp=pp))


def cp_fits(model: ModelSpec, cp: int, backend: str | None = None, *, tp: int = 1) -> bool:
    """The rules on a context parallel size ``cp`` beside tensor parallel size ``tp``."""
    return _all_fit(_rules("cp", backend), model, Sizes(tp=tp, cp=cp))


def ep_fits(model: ModelSpec, ep: int, backend: str | None = None) -> bool:
    return _all_fit(_rules("ep", backend), model, Sizes(ep=ep))


def etp_fits(model: ModelSpec, etp: int, backend: str | None = None) -> bool:
    """The rules on an expert tensor parallel size (the ffn section's ``t``)."""
    return _all_fit(_rules("etp", backend), model, Sizes(etp=etp))


# -- the messages ---------------------------------------------------------------------


class Violation(NamedTuple):
    """A broken rule: the rule, what is wrong, and the fix for its size."""

    rule: ModelRule
    text: str
    fix: str


def violations(
    p: ParallelStrategy | Sizes, model: ModelSpec, backend: str | None
) -> list[Violation]:
    """Each rule of ``backend`` the layout ``p`` breaks, in the order of MODEL_RULES."""
    sizes = p if isinstance(p, Sizes) else Sizes.of(p)
    fixes: dict[str, str] = {}
    found: list[Violation] = []
    for rule in MODEL_RULES:
        if not rule.applies(backend) or not rule.checked(model) or rule.fits(model, sizes):
            continue
        if rule.size not in fixes:
            fixes[rule.size] = fix_for(rule.size, model, sizes, backend)
        found.append(Violation(rule, rule.broken(model, sizes), fixes[rule.size]))
    return found


def fix_for(size: str, model: ModelSpec, sizes: Sizes, backend: str | None) -> str:
    """``use t1 or t2``: the values of ``size`` that break no rule, the other sizes kept."""
    rules = _rules_reading(size, backend)
    on_size = [rule for rule in _rules(size, backend) if rule.checked(model)]
    bounded = [c for c in (rule.choices(model, sizes) for rule in on_size) if c is not None]
    if bounded:
        candidates = min(bounded, key=len)
    else:  # no rule bounds the size: some sizes each rule takes, and more beyond
        candidates = sorted({1, *(n for rule in on_size for n in rule.examples(model, sizes))})
    current: int = getattr(sizes, size)
    good = [n for n in candidates if _all_fit(rules, model, sizes._replace(**{size: n}))]
    if not good:  # the other sizes break a rule with every value: fix this size's own
        good = [n for n in candidates if _all_fit(on_size, model, sizes._replace(**{size: n}))]
    prefix = SIZE_PREFIX[size]
    use = "use " + _SECTION.get(size, "")
    if not bounded:
        return use + ", ".join(f"{prefix}{n}" for n in good) + ", ..."
    if len(good) > _MAX_CHOICES and good == list(range(1, len(good) + 1)):
        return f"{use}at most {prefix}{good[-1]}"
    return use + _choices(prefix, good, current)


def model_violations(allocation: ModelAllocation, model: Mapping[str, object]) -> list[str]:
    """One sentence per model rule the allocation breaks (rule, numbers, fix); [] if none.

    E.g. ``"num_attention_heads=12 is not divisible by tp=8; use t1, t2, t3, t4, t6 or
    t12"``. Raises AllocationError when ``model`` has an unknown key or a value that
    is not a positive integer or None.
    """
    checked = validate_model(model)
    return [
        f"{v.text}; {v.fix}" for v in violations(allocation.parallel, checked, allocation.backend)
    ]


def check_model(
    engine: str, allocation: ModelAllocation, model: Mapping[str, object], model_name: str = ""
) -> None:
    """Raise one AllocationError naming the engine, its backend and every broken rule
    (and ``model_name``, the model's, when it is not the actor's).

    The error's ``spec`` is the canonical backend string, ``position`` is None and the
    hint holds the fixes, one per size to change.
    """
    checked = validate_model(model)
    found = violations(allocation.parallel, checked, allocation.backend)
    if not found:
        return
    spec = str(allocation)
    count = "a model rule" if len(found) == 1 else f"{len(found)} model rules"
    if model_name:
        count += f" of its model {model_name}"
    fixes = {v.rule.size: v.fix for v in found}
    raise AllocationError(
        f"{engine}: {spec} breaks {count}: " + "; ".join(v.text for v in found),
        spec,
        hint="; ".join(f"{size}: {fix}" if len(fixes) > 1 else fix for size, fix in fixes.items()),
    )


# -- helpers --------------------------------------------------------------------------


def _choices(prefix: str, sizes: list[int], current: int) -> str:
    """``t1, t2, t4 or t8``; thinned to the sizes nearest ``current`` if there are many."""
    if len(sizes) > _MAX_CHOICES:
        nearest = sorted(sizes, key=lambda s: (abs(s - current), s))[:_MAX_CHOICES]
        shown = [f"{prefix}{s}" for s in sorted(nearest)]
        return ", ".join(shown) + f" or another of the {len(sizes)} sizes that fit"
    return join_or([f"{prefix}{s}" for s in sizes])
