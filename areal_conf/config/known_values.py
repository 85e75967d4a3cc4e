"""The values AReaL's loader converts when it merges a config, checked as it checks them.

AReaL's loader merges the config into its config dataclasses (``OmegaConf.merge`` of
``OmegaConf.structured(cls)`` and the YAML, ``areal/api/cli_args.py``), and OmegaConf
converts every value of a field typed ``bool``, ``int``, ``float`` or ``str`` as it
merges: ``actor.optimizer.lr=abc`` stops the run (``Value 'abc' of type 'str' could not be
converted to Float``), as does ``total_train_epochs=1.5`` or null for a field that is not
optional. The types are package data beside the keys (``values`` of
``areal_conf/data/areal_keys_<version>.json``, read from ``cli_args.py`` by
``scripts/areal_keys.py``). A value is converted as OmegaConf's node of the type converts
it (``omegaconf/nodes.py``, ``_validate_and_convert_impl`` of ``IntegerNode``,
``FloatNode``, ``BooleanNode`` and ``StringNode``, the same in omegaconf 2.3.1 and AReaL's
2.4.0.dev2), written here in plain Python: the core does not import OmegaConf. A test
holds the two to AReaL's loader.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from areal_conf.errors import ErrorAtKey, container_said
from areal_conf.hints import either, fix

#: A field's type as a message says it.
_SAID: Final = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "text"}
#: A value for a field with no default the source writes: AReaL's example of the type.
_EXAMPLE: Final = {"bool": True, "int": 1, "float": 1.0, "str": "x"}
NO_DEFAULT: Final = object()


class Choices(NamedTuple):
    """The texts a field takes: ``values``, or text ``pattern`` matches (said as
    ``pattern_said``), and where AReaL says so."""

    values: tuple[str | None, ...]
    source: str
    pattern: str | None = None
    pattern_said: str = ""


#: The values a text field takes where the dataclass's ``__post_init__`` checks it after
#: the merge (``if self.metric not in _VALID_METRICS: raise ValueError``), by AReaL
#: version, class and field, with where AReaL says so (``areal/`` at cbff54d64).
CHOICES: Final[Mapping[str, Mapping[tuple[str, str], Choices]]] = {
    "2.0": {
        ("NormConfig", "mean_level"): Choices(("batch", "group", None), "api/cli_args.py:82-86"),
        ("NormConfig", "std_level"): Choices(("batch", "group", None), "api/cli_args.py:82, 87-90"),
        ("MicroBatchSpec", "packing_algorithm"): Choices(
            ("ffd", "kk"),
            "api/cli_args.py:142-147, utils/seqpack.py:162-164",
        ),
        ("ArchonFP8Config", "mode"): Choices(("disabled", "blockwise"), "api/cli_args.py:591-595"),
        ("ArchonEngineConfig", "reshard_after_forward_policy"): Choices(
            ("default", "always", "never"),
            "api/cli_args.py:765-770",
        ),
        ("ArchonEngineConfig", "moe_router_dtype"): Choices(
            ("fp32", None), "api/cli_args.py:771-776"
        ),
        ("RejectionSamplingConfig", "level"): Choices(
            ("token", "sequence"),
            "api/cli_args.py:1606, 1613-1616",
        ),
        ("RejectionSamplingConfig", "action"): Choices(
            ("mask", "clamp"),
            "api/cli_args.py:1607, 1617-1620",
        ),
        ("RejectionSamplingConfig", "metric"): Choices(
            ("ratio", "kl_k1", "kl_k2", "kl_k3"),
            "api/cli_args.py:1608, 1621-1624",
        ),
        ("RejectionSamplingConfig", "agg"): Choices(
            ("sum", "mean", "max"),
            "api/cli_args.py:1609, 1625",
        ),
        ("PPOActorConfig", "gae_timestep_unit"): Choices(
            ("token", "turn"), "api/cli_args.py:1886-1890"
        ),
        ("SaverConfig", "mode"): Choices(("auto", "sync", "async"), "api/cli_args.py:2754-2756"),
        ("RecoverConfig", "mode"): Choices(
            ("on", "off", "auto", "disabled"),
            "api/cli_args.py:2796-2802",
        ),
        ("WandBConfig", "mode"): Choices(
            ("online", "offline", "disabled", "shared"),
            "api/cli_args.py:2830-2834",
        ),
        ("SwanlabConfig", "mode"): Choices(
            ("cloud", "local", "disabled", "offline"),
            "api/cli_args.py:2857-2861",
        ),
        ("TrackioConfig", "mode"): Choices(
            ("disabled", "online", "local"), "api/cli_args.py:2896-2900"
        ),
        # TrainEngineConfig's, which its subclasses' __post_init__ run (super(): 1986, 3316)
        **{
            (owner, "attn_impl"): Choices(
                ("eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention"),
                # engine/fsdp_utils/attn_impl.py:5-16, and transformers 5.3.0 (AReaL's
                # lock) integrations/hub_kernels.py:292-297 (is_kernel)
                "api/cli_args.py:1469-1470",
                r"^[^/:]+/[^/:]+(?:@[^/:]+)?(?::[^/:]+)?$",
                "a Hugging Face kernels repo id (org/repo[@revision][:entrypoint])",
            )
            for owner in (
                "TrainEngineConfig",
                "PPOActorConfig",
                "PPOCriticConfig",
                "DPOEngineConfig",
            )
        },
    }
}


@dataclass(frozen=True)
class PlainField:
    """A field of one of AReaL's dataclasses whose value OmegaConf converts: its class
    (``owner``), its type (``bool``, ``int``, ``float``, ``str``), whether it may be null,
    and its default as ``cli_args.py`` writes it (:data:`NO_DEFAULT`: none written);
    ``mandatory``: it has no value until the config gives one (``MISSING``)."""

    owner: str
    name: str
    type: str
    optional: bool
    default: object = NO_DEFAULT
    mandatory: bool = False
    #: The texts the dataclass then takes (None: any; see :data:`CHOICES`).
    choices: Choices | None = None

    @classmethod
    def of(cls, owner: str, name: str, entry: Mapping[str, Any], version: str) -> PlainField:
        return cls(
            owner,
            name,
            entry["type"],
            entry["optional"],
            entry.get("default", NO_DEFAULT),
            entry.get("mandatory", False),
            CHOICES.get(version, {}).get((owner, name)),
        )

    def takes(self, value: Any) -> bool:
        """Whether AReaL's loader takes ``value`` (plain data; a section is a Mapping, a
        list a Sequence) for this field: its merge converts it, and the dataclass takes
        what it converts to."""
        if value is None:
            return self.optional
        if not _CONVERTS[self.type](value):
            return False
        if self.choices is None or str(value) in self.choices.values:
            return True
        pattern = self.choices.pattern
        return pattern is not None and re.search(pattern, str(value)) is not None

    def said(self) -> str:
        null = " or null" if self.optional else ""
        if self.choices is None:
            return _SAID[self.type] + null
        listed = ", ".join(repr(value) for value in self.choices.values if value is not None)
        pattern = f", or {self.choices.pattern_said}" if self.choices.pattern else ""
        return f"one of {listed}{pattern}{null}"

    def example(self) -> object:
        """A value the field takes: its default, else an example of its type."""
        return _EXAMPLE[self.type] if self.default is NO_DEFAULT else self.default


def _converts_to_int(value: Any) -> bool:
    """IntegerNode: an int or a str ``int()`` reads (not a bool, not a float)."""
    return type(value) in (int, str) and _reads(int, value)


def _converts_to_float(value: Any) -> bool:
    """FloatNode: a float, an int or a str ``float()`` reads (not a bool)."""
    return type(value) in (float, int, str) and _reads(float, value)


def _converts_to_bool(value: Any) -> bool:
    """BooleanNode: a bool, any int, a str ``int()`` reads, or yes/y/on/true, no/n/off/false
    in any case."""
    if isinstance(value, int):
        return True
    if not isinstance(value, str):
        return False
    return _reads(int, value) or value.lower() in (
        "yes",
        "y",
        "on",
        "true",
        "no",
        "n",
        "off",
        "false",
    )


def _converts_to_str(value: Any) -> bool:
    """StringNode: anything but a section, a list or bytes."""
    return not isinstance(value, Mapping | bytes) and not (
        isinstance(value, Sequence) and not isinstance(value, str)
    )


def _reads(kind: Callable[[Any], Any], value: Any) -> bool:
    try:
        kind(value)
    except ValueError:
        return False
    return True


_CONVERTS: Final[Mapping[str, Callable[[Any], bool]]] = {
    "bool": _converts_to_bool,
    "int": _converts_to_int,
    "float": _converts_to_float,
    "str": _converts_to_str,
}


def refusal(path: str, value: Any, fields: Sequence[PlainField]) -> tuple[str, PlainField] | None:
    """Why AReaL's merge refuses ``value`` at ``path`` (a field of each of ``fields``: the
    dataclasses that may stand at that place; it is taken when one of them takes it),
    and the field whose example to write instead; None when it is taken."""
    if not fields:
        return None
    for field in fields:
        if field.takes(value):
            return None
    field = fields[0]
    shown = container_said(value) or repr(value)
    reason = (
        f"{path}: AReaL's {field.owner}.{field.name} takes {field.said()}, not {shown}; "
        "AReaL's loader refuses the config"
    )
    return reason, field


class WrongValue(ErrorAtKey):
    """A value AReaL's merge refuses at ``key``. The fix writes the field's default
    there (``instead``; an example of its type where it has none)."""

    instead: str = ""
    #: The words before the fix: what ``instead`` is (AReaL's default, an example).
    lead: str = ""

    @classmethod
    def at(cls, key: str, reason: str, field: PlainField) -> WrongValue:
        instead = override_text(field.example())
        if field.default is NO_DEFAULT:
            lead = "write a value of its type, for example: "
        elif field.choices is not None:  # the default may not be what the user meant
            lead = "write one of the values it takes, e.g. AReaL's default: "
        else:
            lead = "write AReaL's default: "
        error = cls(reason, hint=fix(f"{key}={instead}", lead=lead))
        error.key, error.instead, error.lead = key, instead, lead
        return error

    def for_override(self, override: str) -> WrongValue:
        written = override.partition("=")[0]  # as the override writes the key: ++a.b
        # The YAML's own value (or AReaL's default) comes back without the override.
        hint = either(
            fix(f"{written}={self.instead}", lead=self.lead),
            ", or ",
            f"remove the override {override} (the YAML's value, or AReaL's default, applies)",
        )
        error = WrongValue(self.reason, hint=hint)
        error.key, error.instead, error.lead = self.key, self.instead, self.lead
        return error


def override_text(value: object) -> str:
    """``value`` as a Hydra override writes it."""
    from areal_conf.overrides import hydra_value

    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return hydra_value(value)
    return repr(value) if isinstance(value, float) else str(value)


def wrong_value(node: Any, path: str, fields: Sequence[PlainField]) -> WrongValue | None:
    """The error for the value ``node`` (a config's node, or plain data) at ``path`` if
    AReaL's merge refuses it for ``fields``; an interpolation or ``???`` is left alone
    (OmegaConf converts it when it is read)."""
    raw = getattr(node, "_value", None)
    if callable(raw) and not callable(getattr(node, "_get_node", None)):
        # A value node: its own value, read once (its _is_missing and _is_interpolation
        # each read it again, the larger part of a check that runs on every value).
        value = raw()
        if isinstance(value, str) and (value == "???" or "${" in value):
            return None
    elif isinstance(node, str):
        if "${" in node:
            return None
        value = node
    else:  # a section or list (a config's, or plain data), or a plain value
        for flag in ("_is_missing", "_is_interpolation"):
            test = getattr(node, flag, None)
            if callable(test) and test():
                return None
        value = written_value(node)
    refused = refusal(path, value, fields)
    return None if refused is None else WrongValue.at(path, *refused)


def written_value(node: Any) -> Any:
    """A node's value as written: None for null, a section or list as it is, a value
    node's value (a plain value as it is)."""
    is_none = getattr(node, "_is_none", None)
    if callable(is_none) and is_none():
        return None
    if isinstance(node, Mapping) or (isinstance(node, Sequence) and not isinstance(node, str)):
        return node
    value = getattr(node, "_value", None)
    return value() if callable(value) else node
