"""An override of a key the composed YAML lacks, which Hydra refuses (``Could not
override 'actor.optmizer.lr'``): which override it was, and the key it may mean, among the
YAML's keys and AReaL's (:mod:`areal_conf.config.known_keys`), the misspelt part a section
of the key or its last part; a key AReaL has that the YAML leaves out is added with
``++``."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any, Final

from areal_conf.config.known_keys import (
    CUTOFF,
    MODEL,
    UnknownKey,
    keys_said,
    section_at,
    unknown_error,
)
from areal_conf.config.nodes import (
    is_written_section,
    keys_of,
    typed_by_areal_conf,
    written_node_at,
)
from areal_conf.errors import override_key
from areal_conf.hints import fix, sentence

#: How Hydra refuses to override a key the config does not have.
_NOT_IN_CONFIG: Final = re.compile(r"Could not override '([^']+)'\.")


def refused_override(message: str, overrides: Sequence[str]) -> str | None:
    """The override of ``overrides`` that Hydra's ``message`` refuses because the config
    lacks its key, or None (another message)."""
    found = _NOT_IN_CONFIG.search(message)
    if found is None:
        return None
    return next((o for o in overrides if "=" in o and override_key(o) == found[1]), None)


def missing_key(cfg: Any, override: str, shown: str, version: str | None) -> UnknownKey:
    """The error for ``override``, which sets a key the config ``cfg`` (composed without
    it; None: unknown) lacks, so that Hydra refuses it; ``shown`` names the config. The
    fix is the key it may mean, among the config's keys beside it and AReaL
    ``version``'s; a key AReaL has that the YAML leaves out is added with ``++``."""
    key = override_key(override)
    value = override.partition("=")[2] or "<value>"
    parts = key.split(".")  # the misspelt part may be a section (actor.optmizer.lr)
    cut = len(parts) - 1
    while cut > 0 and not _placed(cfg, ".".join(parts[:cut]), version):
        cut -= 1
    parent, leaf, tail = (
        ".".join(parts[:cut]),
        parts[cut],
        "".join("." + p for p in parts[cut + 1 :]),
    )
    node = written_node_at(cfg, parent)
    have = keys_of(node) if is_written_section(node) else []
    section = section_at(cfg, parent, version) if version and parent and cfg is not None else None
    own = MODEL in keys_of(cfg) or typed_by_areal_conf(node)
    reason = f"{key}: {shown} has no such key, so Hydra cannot override it"
    prefix = f"{parent}." if parent else ""
    known = section.known(own) if section is not None else []
    if section is not None and leaf in known:
        hint = (
            f"{section.describe()} has it and the YAML leaves it out: add it with ++{key}={value}"
        )
        return unknown_error(reason, hint, key, key)
    close = difflib.get_close_matches(
        leaf, list(dict.fromkeys([*have, *known])), n=1, cutoff=CUTOFF
    )
    if close:
        right = prefix + close[0] + tail
        plus = "" if written_node_at(cfg, right) is not None else "++"
        return unknown_error(
            reason,
            sentence(f"did you mean {right}? e.g. ", fix(f"{plus}{right}={value}")),
            key,
            right,
            not plus,
        )
    if section is not None:
        return unknown_error(
            reason,
            f"no such key in {section.describe()} either: remove the override, or write "
            + keys_said(section, own),
            key,
        )
    return unknown_error(
        reason,
        "check the key's spelling; if AReaL's config class has the key and the YAML only "
        f"leaves it out, add it with ++{key}={value} (AReaL's loader refuses any key its "
        "config classes lack)",
        key,
    )


def _placed(cfg: Any, path: str, version: str | None) -> bool:
    """Whether the YAML writes the section ``path`` or AReaL has a section there."""
    if cfg is None:
        return False
    written = is_written_section(written_node_at(cfg, path))
    return written or (version is not None and section_at(cfg, path, version) is not None)
