"""The work of the ``areal_layouts`` sweeper (imported only when a sweep runs).

Hydra's basic sweeper runs the sweep; the ``areal_layouts`` sweeper replaces only its
expansion of the sweep overrides into batches of jobs, with :func:`layout_batches`:

1. The sweep overrides (``hydra.sweeper.params`` first, then the command line) are
   expanded exactly as Hydra's basic sweeper expands them, into the cartesian product
   of their values: the *combinations*.
2. Each combination is composed (as its jobs will be) and
   :func:`areal_conf.advise.sweeps.engine_layouts` lists the layouts of the engine for that
   config; defaults (backend, world size, tp cap, model) come from it. With ``fits``
   only the layouts that fit memory are kept; ``rank=step_time`` orders them by
   predicted step time, fastest first, and ``top_k`` keeps the first ones.
3. Jobs: each combination followed by ``<engine>.backend=<layout>`` for each of its
   layouts (layouts vary fastest). A fixed ``<engine>.backend=...`` override only sets
   the defaults and is replaced by the layout; sweeping it as well is an error.
4. The jobs are counted against ``max_jobs``, announced to a launcher that validates a
   whole sweep first (``hydra/launcher=areal``), and split into batches of
   ``max_batch_size``, which the basic sweeper launches batch after batch.

Problems are raised as ``ConfigCompositionException`` so Hydra prints one message
without a traceback.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.errors import ConfigCompositionException

from areal_conf import AllocationError
from areal_conf.hydra.plugin_api import (
    EngineSweep,
    check_ranking,
    check_sweep_sizes,
    engine_layouts,
    hydra_value,
    swept_keys,
)

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override
    from hydra.plugins.launcher import Launcher
    from hydra.types import HydraContext
    from omegaconf import DictConfig

log = logging.getLogger(__name__)

NAME = "hydra/sweeper=areal_layouts"


class LayoutsSweeper(Protocol):
    """What this module reads of the ``areal_layouts`` sweeper: its settings and what
    Hydra gave it in ``setup`` (described here rather than imported: the plugin module
    imports this one)."""

    engine: str
    backend: str | None
    gpus: int | None
    max_tp: int | None
    max_jobs: int | None
    fits: bool
    rank: str | None
    top_k: int | None
    config: DictConfig | None
    hydra_context: HydraContext | None
    launcher: Launcher | None


def layout_batches(
    sweeper: LayoutsSweeper, overrides: list[Override], max_batch_size: int | None
) -> list[list[list[str]]]:
    """The sweep's jobs in batches of ``max_batch_size`` (None: one batch), once they are
    all known to be within ``max_jobs`` and announced to the launcher."""
    try:
        check_sweep_sizes(sweeper.max_jobs, max_batch_size)
    except AllocationError as err:
        raise _compact(err) from err
    jobs = job_overrides(sweeper, overrides)
    check_job_count(len(jobs), sweeper.max_jobs)
    expect_sweep = getattr(sweeper.launcher, "expect_sweep", None)
    if callable(expect_sweep):
        expect_sweep(jobs)  # the validating launcher checks the whole sweep first
    return list(BasicSweeper.split_overrides_to_chunks(jobs, max_batch_size))


def check_job_count(n_jobs: int, max_jobs: int | None) -> None:
    """Refuse a sweep of more than ``max_jobs`` jobs (None: no limit), saying how many
    there are and how to narrow them."""
    if max_jobs is None or n_jobs <= max_jobs:
        return
    reason = f"{NAME}: the sweep has {n_jobs:,} jobs, more than hydra.sweeper.max_jobs"
    raise ConfigCompositionException(
        f"{NAME}: the sweep has {n_jobs:,} jobs, more than hydra.sweeper.max_jobs="
        f"{max_jobs:,}\nhint: narrow the layouts: cap tensor parallelism "
        "(a smaller hydra.sweeper.max_tp), sweep another GPU count (hydra.sweeper.gpus), set the "
        "model shape (model.num_layers, model.num_attention_heads, model.num_experts) so "
        "that only layouts that fit it are listed, run only the fastest "
        "(hydra.sweeper.rank=step_time hydra.sweeper.top_k=10), sweep fewer other "
        "values; or raise "
        f"hydra.sweeper.max_jobs={n_jobs} to run them all"
    ) from AllocationError(reason)


def job_overrides(sweeper: LayoutsSweeper, parsed: list[Override]) -> list[list[str]]:
    """Every job's overrides: the combinations of the other sweeps × the layouts."""
    assert sweeper.config is not None
    assert sweeper.hydra_context is not None
    loader = sweeper.hydra_context.config_loader
    try:
        engine, keys = swept_keys(sweeper.engine, sweeper.config)
    except AllocationError as err:
        raise _compact(err.with_context("hydra.sweeper.engine")) from err
    try:
        check_ranking(sweeper.rank, sweeper.top_k)
    except AllocationError as err:
        raise _compact(err) from err
    fixed, prefix = _engine_backend_overrides(parsed, keys)
    combinations = BasicSweeper.split_arguments(parsed, None)[0]

    jobs: list[list[str]] = []
    summaries: list[str] = []
    for combination in combinations:
        cfg = loader.load_sweep_config(master_config=sweeper.config, sweep_overrides=combination)
        try:
            found = engine_layouts(
                cfg,
                engine,
                backend=sweeper.backend,
                gpus=sweeper.gpus,
                max_tp=sweeper.max_tp,
                fits=sweeper.fits,
                rank=sweeper.rank,
                top_k=sweeper.top_k,
            )
        except AllocationError as err:
            where = f" with overrides {' '.join(combination)}" if combination else ""
            raise _compact(err, NAME + where) from err
        others = [item for item in combination if item not in fixed]
        jobs.extend(
            [*others, f"{prefix}{found.key}={hydra_value(layout)}"] for layout in found.layouts
        )
        summaries.append(_summary(found, others))
        if found.speed_note:
            summaries.append(f"{NAME}: {found.speed_note}")
    for line in dict.fromkeys(summaries):
        log.info(line)
    return jobs


def _engine_backend_overrides(
    parsed: list[Override], keys: tuple[str, ...]
) -> tuple[set[str], str]:
    """The fixed overrides of the engine's backend (any of ``keys``), as the basic sweeper
    writes them, and the prefix they add the key with (``+``, ``++``; each job's layout
    takes it in their place: the key may be one the config lacks)."""
    fixed: set[str] = set()
    prefix = ""
    for override in parsed:
        key = override.key_or_group
        if key not in keys or override.package is not None:
            continue
        if override.is_sweep_override():
            reason = (
                f"{NAME} sweeps {key} itself, so it cannot also be swept by '{override.input_line}'"
            )
            raise ConfigCompositionException(
                f"{reason}\nhint: remove that override (hydra.sweeper.backend chooses the "
                "backend), or sweep another engine with hydra.sweeper.engine"
            ) from AllocationError(reason)
        written = override.get_key_element()
        fixed.add(f"{written}={override.get_value_element_as_str()}")
        prefix = written[: len(written) - len(key)]
    return fixed, prefix


def _summary(found: EngineSweep, others: list[str]) -> str:
    items = list(found.layouts)
    if found.seconds:
        from areal_conf.hydra.plugin_api import seconds_text

        items = [
            f"{spec} ({seconds_text(s)} s{'' if fit else ', does not fit'})"
            for spec, s, fit in zip(found.layouts, found.seconds, found.fitting, strict=True)
        ]
    shown = ", ".join(items[:6]) + (", ..." if len(items) > 6 else "")
    suffix = f" with {' '.join(others)}" if others else ""
    return f"{NAME}: {found.describe()}{suffix}: {shown}"


def _compact(err: AllocationError, context: str | None = None) -> Any:
    """A ConfigCompositionException (printed by Hydra without a traceback); raise it from
    ``err``, so that the exit status is an invalid config's (2)."""
    message = str(err) if context is None else f"{context}:\n{err}"
    return ConfigCompositionException(message)
