"""A model's ``config.json`` in the local Hugging Face hub cache, found offline.

``actor.path`` is often a Hub id (``Qwen/Qwen3-8B``) whose files a previous run already
downloaded. The hub cache keeps them as::

    <cache>/models--Qwen--Qwen3-8B/refs/main            the commit ``main`` points at
    <cache>/models--Qwen--Qwen3-8B/snapshots/<commit>/config.json

This module reads that layout directly: it never downloads, never contacts the Hub and
does not import ``huggingface_hub`` or ``transformers``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping


def hub_cache_dir(env: Mapping[str, str] | None = None) -> str:
    """The hub cache directory: ``HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``~/.cache/huggingface/hub`` (``~`` expanded; an empty variable counts as unset)."""
    env = os.environ if env is None else env
    hub_cache = env.get("HF_HUB_CACHE")
    if hub_cache:
        return os.path.expanduser(hub_cache)
    hf_home = env.get("HF_HOME")
    if hf_home:
        return os.path.join(os.path.expanduser(hf_home), "hub")
    return os.path.join(os.path.expanduser("~"), ".cache", "huggingface", "hub")


def cached_config_json(model_id: str, env: Mapping[str, str] | None = None) -> str | None:
    """The path of ``model_id``'s ``config.json`` in the local hub cache, or None.

    ``model_id`` must look like ``org/name``: one ``/``, two non-empty parts, neither
    starting with ``.``. The snapshot ``refs/main`` names is used when it has a
    ``config.json``, else the most recently modified snapshot that has one. A missing or
    unreadable cache gives None; nothing is downloaded and nothing raises.
    """
    folder = _repo_folder(model_id)
    if folder is None:
        return None
    try:
        repo = os.path.join(hub_cache_dir(env), folder)
        snapshots = os.path.join(repo, "snapshots")
        main = _read_ref(os.path.join(repo, "refs", "main"))
        if main is not None:
            config = os.path.join(snapshots, main, "config.json")
            if os.path.isfile(config):
                return config
        return _newest_snapshot_config(snapshots)
    except (OSError, ValueError):  # unreadable cache, or a path the OS rejects
        return None


def _repo_folder(model_id: object) -> str | None:
    """``models--org--name`` for a well-formed ``org/name`` id, else None."""
    if not isinstance(model_id, str) or model_id.count("/") != 1:
        return None
    parts = model_id.split("/")
    for part in parts:
        if not part or part.startswith(".") or part != part.strip():
            return None
        if any(char in part for char in ("\\", "\0")):
            return None
    return "models--" + "--".join(parts)


def _read_ref(path: str) -> str | None:
    """The commit a ref file names, or None when it is missing, unreadable or odd."""
    try:
        with open(path, encoding="utf-8") as handle:
            commit = handle.read().strip()
    except (OSError, ValueError):
        return None
    if not commit or commit.startswith(".") or any(c in commit for c in "/\\\0"):
        return None
    return commit


def _newest_snapshot_config(snapshots: str) -> str | None:
    """The ``config.json`` of the most recently modified snapshot that has one."""
    try:
        entries = list(os.scandir(snapshots))
    except (OSError, ValueError):
        return None
    found: list[tuple[int, str, str]] = []
    for entry in entries:
        config = os.path.join(entry.path, "config.json")
        try:
            if entry.is_dir() and os.path.isfile(config):
                found.append((entry.stat().st_mtime_ns, entry.name, config))
        except OSError:
            continue
    if not found:
        return None
    return max(found)[2]
