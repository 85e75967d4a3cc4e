"""Which AReaL's rules areal-conf applies, and the facts that differ between AReaL versions.

AReaL 2.0 changed what a config means: the teacher moved under ``teacher.rollout`` or
``teacher.train``, engines may run on controller v2, the schedulers gained rules of their
own, and FSDP keeps its weights in ``optimizer_dtype``. areal-conf applies the rules of one
AReaL version, chosen by :func:`choose_rules`:

1. ``--areal-version`` on the command line of ``python -m areal_conf``;
2. the environment variable ``AREAL_CONF_AREAL_VERSION`` (train.py, the launcher, the
   command line, ``validate``);
3. the installed ``areal`` distribution (its nearest supported version, with a warning
   when it is not one of them);
4. else the newest supported version.

Each supported version is one row of :data:`VERSIONS`: the engines it builds in the order
it creates them and where their keys live, AReaL's defaults for the keys the rules read,
and how FSDP stores its weights. The checks each version runs are listed by
:mod:`areal_conf.validation`. A new AReaL version is a new row here and a new list there.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, get_args

from areal_conf.errors import AllocationError, from_variable

VERSION_ENV: Final = "AREAL_CONF_AREAL_VERSION"
AREAL_DISTRIBUTION: Final = "areal"


@dataclass(frozen=True)
class EngineRow:
    """One engine of a version's engine table.

    ``section`` is where its keys live (``teacher.rollout``); ``engine_type`` is the value
    of ``teacher.engine_type`` that selects this row (None: the row is always read).
    """

    name: str
    section: str
    kind: Literal["inference", "training"]
    empty_backend: Literal["error", "inherit", "disable"]
    engine_type: str | None = None


#: Where a version puts the teacher: ``flat`` (``teacher.backend``) or ``nested``
#: (``teacher.engine_type`` picks ``teacher.rollout`` or ``teacher.train``).
TeacherLayout = Literal["flat", "nested"]
TEACHER_LAYOUT_NAMES: Final[tuple[str, ...]] = get_args(TeacherLayout)


@dataclass(frozen=True)
class AReaLVersion:
    """What one AReaL version does with a config, as data."""

    version: str
    commit: str  # the AReaL commit these rules were read from
    #: The engine roles in the order AReaL creates them (extra engines follow, in
    #: config order).
    engines: tuple[EngineRow, ...]
    #: ``flat``: the teacher is an engine section itself (``teacher.backend``);
    #: ``nested``: ``teacher.engine_type`` picks ``teacher.rollout`` or ``teacher.train``.
    teacher_layout: TeacherLayout
    #: AReaL's defaults for the keys the rules read, where a key is absent.
    defaults: Mapping[str, object]
    #: The engine key whose dtype FSDP stores weights, gradients and Adam moments in.
    fsdp_storage_key: str
    #: ``display``: plans list the rollout first; ``creation``: in AReaL's creation order.
    plan_order: Literal["display", "creation"]

    def rows(self, name: str) -> tuple[EngineRow, ...]:
        return tuple(row for row in self.engines if row.name == name)


_ENGINE_DEFAULTS_2_0: Final[Mapping[str, object]] = {
    # areal/api/cli_args.py at 2.0 (cbff54d6)
    "kl_ctl": 0.1,
    "_version": "v1",
    "weight_update_mode": "xccl",
    "enable_delta_weight_update": False,
    "weight_update_delta_method": "adamw",
    "weight_update_anchor_interval": 0,
    "use_lora": False,
    "lora_rank": 32,
    "ppo_n_minibatches": 4,
    "prox_logp_method": "recompute",
    "return_routed_experts": False,
    "optimizer_dtype": "float32",
    "dtype": "bfloat16",
    "offload": False,
    "enable_offload": False,
    "engine_type": "rollout",
    "agent_mode": "inline",
}

#: The engines every version builds the same way: the trained policy and its helpers.
_TRAINED_ENGINES: Final = (
    EngineRow("actor", "actor", "training", "error"),
    EngineRow("critic", "critic", "training", "inherit"),
    EngineRow("ref", "ref", "training", "inherit"),
)

VERSIONS: Final[dict[str, AReaLVersion]] = {
    "1.0": AReaLVersion(
        version="1.0",
        commit="4aef98d8",
        engines=(
            *_TRAINED_ENGINES,
            EngineRow("teacher", "teacher", "training", "disable"),
            EngineRow("rollout", "rollout", "inference", "error"),
        ),
        teacher_layout="flat",
        defaults={**_ENGINE_DEFAULTS_2_0, "optimizer_dtype": None},
        fsdp_storage_key="dtype",
        plan_order="display",
    ),
    "2.0": AReaLVersion(
        version="2.0",
        commit="cbff54d6",
        engines=(
            *_TRAINED_ENGINES,
            EngineRow("teacher", "teacher.train", "training", "disable", engine_type="train"),
            EngineRow("rollout", "rollout", "inference", "error"),
            EngineRow("teacher", "teacher.rollout", "inference", "disable", engine_type="rollout"),
        ),
        teacher_layout="nested",
        defaults=_ENGINE_DEFAULTS_2_0,
        fsdp_storage_key="optimizer_dtype",
        plan_order="creation",
    ),
}
SUPPORTED: Final = tuple(VERSIONS)
NEWEST: Final = SUPPORTED[-1]


@dataclass(frozen=True)
class RulesChoice:
    """The rules applied, and why these: ``source`` is ``--areal-version``,
    ``environment``, ``installed`` or ``newest``."""

    rules: AReaLVersion
    source: Literal["--areal-version", "environment", "installed", "newest"]
    installed: str | None = None  # the installed areal's version, when one is
    warning: str | None = None  # the installed areal is not a supported version

    @property
    def version(self) -> str:
        return self.rules.version

    def describe(self) -> str:
        """``AReaL 2.0 (no areal installed: newest supported)`` and the like."""
        why = {
            "--areal-version": f"--areal-version {self.version}",
            "environment": f"{VERSION_ENV}={self.version}",
            "installed": f"areal {self.installed} installed",
            "newest": "no areal installed: newest supported",
        }[self.source]
        return f"AReaL {self.version} ({why})"

    def to_dict(self) -> dict[str, str | None]:
        source = {
            "--areal-version": "--areal-version",
            "environment": "environment",
            "installed": f"installed areal {self.installed}",
            "newest": "newest",
        }[self.source]
        return {"version": self.version, "source": source, "installed": self.installed}


@functools.cache
def installed_areal_version() -> str | None:
    """The version of the installed ``areal`` distribution, or None (looked up once per
    process: the environment does not change under a running validation)."""
    from importlib import metadata

    try:
        return metadata.version(AREAL_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+)?")


def _minor(text: str) -> tuple[int, int] | None:
    match = _VERSION.match(text.strip())
    return (int(match[1]), int(match[2])) if match else None


def supported_version(text: object, *, where: str) -> str:
    """``text`` as one of :data:`SUPPORTED` (``2.0``, ``2.0.1`` and ``v2.0`` are 2.0);
    anything else is an AllocationError naming ``where``."""
    minor = _minor(text) if isinstance(text, str) else None
    if minor is not None and _VERSION.fullmatch(str(text).strip()):
        name = f"{minor[0]}.{minor[1]}"
        if name in VERSIONS:
            return name
    choices = " or ".join(SUPPORTED)
    raise AllocationError(
        f"{where}: {text!r} is not an AReaL version areal-conf has rules for ({choices})",
        text if isinstance(text, str) else None,
        hint=f"use {choices}, e.g. {where}={NEWEST}" if where == VERSION_ENV else f"use {choices}",
    )


def nearest_supported(installed: str) -> tuple[str, str | None]:
    """The supported version whose rules apply to an installed ``areal``, and a warning
    when it is not exactly one of them."""
    minor = _minor(installed)
    if minor is not None and f"{minor[0]}.{minor[1]}" in VERSIONS:
        return f"{minor[0]}.{minor[1]}", None
    known = sorted((_minor(v) or (0, 0), v) for v in SUPPORTED)
    if minor is None:
        chosen = NEWEST
    else:
        below = [v for m, v in known if m <= minor]
        chosen = below[-1] if below else known[0][1]
    return chosen, (
        f"areal {installed} is installed, but areal-conf has rules for AReaL "
        f"{' and '.join(SUPPORTED)} only: it applies the rules of {chosen}, the nearest "
        f"({VERSION_ENV}=<version> chooses others)"
    )


def choose_rules(
    requested: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    installed: Callable[[], str | None] = installed_areal_version,
) -> RulesChoice:
    """The rules to apply: ``requested`` (``--areal-version``), else the environment
    variable, else the installed ``areal``, else the newest supported version."""
    if requested is not None:
        version = supported_version(requested, where="--areal-version")
        return RulesChoice(VERSIONS[version], "--areal-version")
    env = os.environ if environ is None else environ
    value = env.get(VERSION_ENV)
    if value is not None and value != "":
        with from_variable(VERSION_ENV):
            version = supported_version(value, where=VERSION_ENV)
        return RulesChoice(VERSIONS[version], "environment")
    found = installed()
    if found is None:
        return RulesChoice(VERSIONS[NEWEST], "newest")
    version, warning = nearest_supported(found)
    return RulesChoice(VERSIONS[version], "installed", found, warning)


def teacher_layout(requested: str | None = None) -> Literal["flat", "nested"]:
    """Where the rules in force put a teacher (:func:`choose_rules`): ``flat``
    (``teacher.backend``, AReaL 1.0) or ``nested`` (``teacher.train``/``teacher.rollout``,
    2.0). A bad ``AREAL_CONF_AREAL_VERSION`` gives the newest version's layout: the
    validation that reads it reports it, with its fix; a bad ``requested`` is its error."""
    try:
        return choose_rules(requested).rules.teacher_layout
    except AllocationError:
        if requested is not None:
            raise
        return VERSIONS[NEWEST].teacher_layout
