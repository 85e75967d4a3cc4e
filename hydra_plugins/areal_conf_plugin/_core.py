"""The work behind ``hydra/launcher=areal`` (imported when the launcher is set up).

Every job of the sweep is composed once (``_compose.SweepLoader``, which the sweeper's
own check of each batch reads too) and validated once with
``areal_conf.validation.validate``; when the whole sweep is known up front (Hydra's basic
sweeper, ``areal_layouts``), all of it is checked at the first job, with progress.
Then, for a batch of jobs, either

* raise one ``ConfigCompositionException`` that lists every failing job (number,
  overrides as the user would type them, reason) before anything ran,
* print one line per job and return ``[]`` when ``dry_run`` is set, or
* instantiate the inner launcher through Hydra's plugin registry and return its result.

The configs composed for validation are handed to an in-process inner launcher (Hydra's
basic launcher) instead of being composed again; a launcher that ships the Hydra
context to other processes (joblib, submitit) gets the plain config loader.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, setup_globals
from hydra.errors import ConfigCompositionException, HydraException
from hydra.types import HydraContext
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from areal_conf import AllocationError
from areal_conf.hydra.plugin_api import check_sweep_sizes, job_overrides_line, user_override
from hydra_plugins.areal_conf_plugin._compose import SweepLoader
from hydra_plugins.areal_conf_plugin._configs import LAYOUTS_SWEEPER_TARGET
from hydra_plugins.areal_conf_plugin._handover import (
    PrecomposedLoader,
    SweepRecord,
    inner_launcher_config,
    with_launcher,
)
from hydra_plugins.areal_conf_plugin._sweep_state import CheckedJob
from hydra_plugins.areal_conf_plugin.areal_launcher import AReaLLauncher

if TYPE_CHECKING:
    from areal_conf import Plan

log = logging.getLogger(__name__)


def install_loader(launcher: AReaLLauncher, hydra_context: HydraContext) -> None:
    """Put a :class:`SweepLoader` in the Hydra context the launcher shares with its
    sweeper: the sweeper's check of each batch (``validate_batch_is_legal``) then reads
    the configs this launcher composes and validates once, and the first job it asks for
    starts the check of the whole sweep, with progress, when the whole sweep is known."""
    assert launcher.config is not None
    loader = hydra_context.config_loader
    if not isinstance(loader, SweepLoader) or loader.master is not launcher.config:
        inner = loader.inner if isinstance(loader, SweepLoader) else loader
        loader = SweepLoader(inner, launcher.config)
        hydra_context.config_loader = loader
    loader.before_job = functools.partial(_before_job, launcher)
    launcher.sweep.loader = loader


def _before_job(launcher: AReaLLauncher, overrides: list[str]) -> None:
    """The sweeper asks for a job's config: at the first job of a sweep known in full,
    check the whole sweep now (an invalid job of any batch stops it before any runs)."""
    if launcher.sweep.checked or launcher.sweep.checking:
        return
    whole = launcher_sweep_jobs(launcher)
    if whole and overrides == whole[0]:
        check_sweep(launcher, whole)


def launcher_sweep_jobs(launcher: AReaLLauncher) -> list[list[str]] | None:
    """Every job of the sweep when the sweeper tells them (``expect_sweep``) or is
    Hydra's basic sweeper, expanded once; None otherwise."""
    sweep = launcher.sweep
    if sweep.jobs is None and not sweep.expanded:
        assert launcher.config is not None and launcher.hydra_context is not None
        sweep.expanded = True
        sweep.jobs = basic_sweep_jobs(launcher.config, launcher.hydra_context)
    return sweep.jobs


def check_sweep(launcher: AReaLLauncher, whole: Sequence[Sequence[str]]) -> None:
    """Compose and validate every job of the sweep, keep the results (and the configs,
    within the loader's budget) for launch; with on_invalid=stop, raise the failures."""
    config = launcher.config
    assert config is not None
    mode = invalid_job_mode(config, launcher.on_invalid)
    launcher.sweep.checking = True
    try:
        jobs = _compose_and_validate(
            launcher,
            whole,
            0,
            stop=mode == STOP,
            whole_sweep=_in_batches(config, len(whole)),
            keep=True,
            for_later_batches=True,
        )
    finally:
        launcher.sweep.checking = False
    launcher.sweep.checked = True
    launcher.sweep.results = {job.num: job for job in jobs}
    _tell_unvalidated(launcher, jobs, len(whole))


def _in_batches(config: DictConfig, jobs: int) -> bool:
    """True when the sweeper launches the sweep's jobs in more than one batch."""
    size = OmegaConf.select(config, "hydra.sweeper.max_batch_size", default=None)
    return isinstance(size, int) and 0 < size < jobs


def launch(
    launcher: AReaLLauncher,
    job_overrides: Sequence[Sequence[str]],
    initial_job_idx: int,
) -> Sequence[JobReturn]:
    """Validate the batch, then launch it (see the module's docstring). A ``SIGINT``
    or ``SIGTERM`` meanwhile (``KeyboardInterrupt``) becomes ``areal_conf.hydra.app``'s
    ``Interrupted``, saying how many jobs may have started."""
    SweepRecord.disarm()  # the sweeper saved its record before launching, if ever
    try:
        return _launch(launcher, job_overrides, initial_job_idx)
    except KeyboardInterrupt as exc:
        raise interrupted_sweep(exc, launcher.sweep.launched) from None


def interrupted_sweep(exc: KeyboardInterrupt, launched: int) -> KeyboardInterrupt:
    """What an interrupt of a sweep that had launched ``launched`` jobs says: a job's own
    account (its driver got the signal) as it is, else whether any job was started."""
    import signal

    from areal_conf.hydra.plugin_api import NOTHING_STARTED, Interrupted

    if isinstance(exc, Interrupted) and exc.what != NOTHING_STARTED:
        return exc
    signo = exc.signo if isinstance(exc, Interrupted) else signal.SIGINT
    if not launched:
        return Interrupted(signo, "no job of the sweep was started")
    return Interrupted(signo, f"the sweep stopped with at most {launched} of its jobs started")


def _launch(
    launcher: AReaLLauncher,
    job_overrides: Sequence[Sequence[str]],
    initial_job_idx: int,
) -> Sequence[JobReturn]:
    setup_globals()
    config = launcher.config
    hydra_context = launcher.hydra_context
    task_function = launcher.task_function
    assert config is not None
    assert hydra_context is not None
    assert task_function is not None
    if launcher.sweep.loader is None:
        install_loader(launcher, hydra_context)
    loader = launcher.sweep.loader
    assert loader is not None

    inner_launcher = inner_launcher_config(config, launcher.launcher_config)
    mode = invalid_job_mode(config, launcher.on_invalid)
    batch = [list(o) for o in job_overrides]
    if batch and not launcher.sweep.checked:
        _before_job(launcher, batch[0])  # a sweeper that did not check the batch itself
    jobs = _checked_jobs(launcher, batch, initial_job_idx)
    if jobs is None:
        jobs = _compose_and_validate(
            launcher,
            batch,
            initial_job_idx,
            stop=mode == STOP,
            launched=launcher.sweep.launched,
            keep=not launcher.dry_run,
        )
        _tell_unvalidated(launcher, jobs, len(batch))
    bad = {job.num: job.failure for job in jobs if job.failure is not None}

    if launcher.dry_run:
        for overrides in batch:
            loader.release(overrides)
        loader.release_unclaimed()
        # A task function may say what its job would do (areal-conf's sweep of an AReaL
        # command: the command and the plan).
        detail = getattr(task_function, "dry_run_detail", None)
        for job in jobs:
            print(dry_run_line(job.num, job.overrides, job.plan), flush=True)
            if callable(detail) and job.plan is not None:
                print(detail(job.overrides, job.plan), flush=True)
        return []

    inner_master = with_launcher(config, inner_launcher)
    summary = launch_summary(jobs, bad)
    inner = Plugins.instance().instantiate_launcher(
        hydra_context=HydraContext(
            config_loader=PrecomposedLoader(loader.inner, inner_master, loader.master, loader),
            callbacks=hydra_context.callbacks,
        ),
        task_function=task_function,
        config=inner_master,
    )
    log.info("areal launcher: %s, launching with %s", summary, type(inner).__name__)
    try:
        if not bad:
            launcher.sweep.launched += len(batch)
            return inner.launch(batch, initial_job_idx=initial_job_idx)
        # fail_job: invalid jobs come back failed, in place; valid runs of consecutive
        # jobs keep their numbers (and so their output directories).
        returns: list[JobReturn] = []
        start = 0
        for i in range(len(batch) + 1):
            num = initial_job_idx + i
            if i < len(batch) and num not in bad:
                continue
            if start < i:
                launcher.sweep.launched += i - start
                returns += inner.launch(batch[start:i], initial_job_idx=initial_job_idx + start)
            if i < len(batch):
                returns.append(failed_job(num, batch[i], bad[num]))
            start = i + 1
        return returns
    finally:
        for overrides in batch:  # what the inner launcher did not ask for (joblib, ...)
            loader.release(overrides)
        loader.release_unclaimed()


def _checked_jobs(
    launcher: AReaLLauncher, batch: Sequence[Sequence[str]], initial_job_idx: int
) -> list[CheckedJob] | None:
    """The batch's jobs as the check of the whole sweep found them, or None when that
    check did not run or saw other jobs under these numbers."""
    if not launcher.sweep.checked:
        return None
    jobs = [launcher.sweep.results.get(initial_job_idx + i) for i in range(len(batch))]
    if any(job is None or job.overrides != list(o) for job, o in zip(jobs, batch, strict=True)):
        return None
    return [job for job in jobs if job is not None]


# ------------------------------------------------------------------ invalid jobs

STOP = "stop"
FAIL_JOB = "fail_job"
AUTO = "auto"

#: Sweepers that know every job before the first batch: a sweep through them is
#: validated as a whole and stops at an invalid job (``on_invalid=auto``).
UPFRONT_SWEEPERS = (
    "hydra._internal.core_plugins.basic_sweeper.BasicSweeper",
    LAYOUTS_SWEEPER_TARGET,
)


def invalid_job_mode(config: DictConfig, on_invalid: Any) -> str:
    """``stop`` or ``fail_job`` for ``hydra.launcher.on_invalid`` (``auto``: by sweeper)."""
    if on_invalid in (STOP, FAIL_JOB):
        return str(on_invalid)
    if on_invalid != AUTO:
        # raised from an AllocationError: an invalid setting of areal-conf's launcher (2)
        error = AllocationError(
            f"areal launcher: hydra.launcher.on_invalid={on_invalid!r} is not one of "
            f"{AUTO}, {STOP}, {FAIL_JOB}",
            hint=f"hydra.launcher.on_invalid={STOP} stops the sweep at an invalid job, "
            f"hydra.launcher.on_invalid={FAIL_JOB} returns it to the sweeper as failed, "
            f"hydra.launcher.on_invalid={AUTO} chooses by sweeper",
        )
        raise ConfigCompositionException(str(error)) from error
    sweeper = OmegaConf.select(config, "hydra.sweeper._target_", default=None)
    return STOP if sweeper in UPFRONT_SWEEPERS else FAIL_JOB


def check_sweeper_sizes(config: DictConfig) -> None:
    """The job counts an upfront sweeper takes (``max_jobs``, ``max_batch_size``) are ones
    it can use; else one message, exit 2 (before it, Hydra's basic sweeper fails an
    ``assert`` on ``max_batch_size=0``)."""
    if OmegaConf.select(config, "hydra.sweeper._target_", default=None) not in UPFRONT_SWEEPERS:
        return
    try:
        check_sweep_sizes(
            OmegaConf.select(config, "hydra.sweeper.max_jobs", default=None),
            OmegaConf.select(config, "hydra.sweeper.max_batch_size", default=None),
        )
    except AllocationError as error:
        raise ConfigCompositionException(str(error)) from error


def basic_sweep_jobs(config: DictConfig, hydra_context: HydraContext) -> list[list[str]] | None:
    """Every job of the sweep, as Hydra's basic sweeper expands it (its ``params`` first,
    then the command line), or None when the sweeper is not the basic one."""
    if OmegaConf.select(config, "hydra.sweeper._target_", default=None) != UPFRONT_SWEEPERS[0]:
        return None
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    # As written: an override's value may be an interpolation (a=${b}), which is the
    # job's to resolve, in its own config.
    params = _as_written(OmegaConf.select(config, "hydra.sweeper.params", default=None)) or {}
    arguments = [f"{k}={v}" for k, v in params.items()]
    arguments += _as_written(OmegaConf.select(config, "hydra.overrides.task", default=None)) or []
    parser = OverridesParser.create(config_loader=hydra_context.config_loader)
    expanded = BasicSweeper.split_arguments(parser.parse_overrides(arguments), None)
    return [list(job) for job in expanded[0]] if expanded else [[]]


def _as_written(node: Any) -> Any:
    return None if node is None else OmegaConf.to_container(node, resolve=False)


def failed_job(num: int, overrides: Sequence[str], reason: str) -> JobReturn:
    """A JobReturn for a job that was not run because it is invalid: reading its
    ``return_value`` raises the message (as for a job whose task raised)."""
    from hydra.core.utils import JobStatus

    error = ConfigCompositionException(
        f"areal launcher: job #{num} {job_overrides_line(overrides)} failed validation and "
        f"was not run:\n{_indent(reason.rstrip(), '    ')}"
    )
    error.__cause__ = AllocationError(reason.split("\n")[0])
    log.warning(
        "areal launcher: job #%d %s is invalid, not run, returned to the sweeper as failed",
        num,
        job_overrides_line(overrides),
    )
    ret = JobReturn(overrides=list(overrides), status=JobStatus.FAILED)
    ret.return_value = error
    return ret


# ------------------------------------------------------------------ validation


def _compose_and_validate(
    launcher: AReaLLauncher,
    job_overrides: Sequence[Sequence[str]],
    initial_job_idx: int,
    *,
    stop: bool,
    keep: bool,
    launched: int = 0,
    whole_sweep: bool = False,
    for_later_batches: bool = False,
) -> list[CheckedJob]:
    """Compose and validate each job, each once: a config the sweeper's check already
    composed is read back, and with ``keep`` each config stays with the loader for the
    inner launcher. With ``stop``, any failure raises the list of failing jobs; otherwise
    each failure stays with its job. ``whole_sweep``: the jobs are every job of a sweep
    launched in several batches (the message says so); ``for_later_batches``: what is
    kept stays kept past the end of the current batch."""
    from areal_conf import AllocationError
    from areal_conf.hydra.plugin_api import ErrorAtKey, Progress

    loader = launcher.sweep.loader
    assert loader is not None
    jobs: list[CheckedJob] = []
    total = len(job_overrides)
    with Progress(total, "areal launcher: validating jobs", log=log.info) as progress:
        for i, overrides in enumerate(job_overrides):
            num = initial_job_idx + i
            ovr = list(overrides)
            job = CheckedJob(num, ovr, None)
            try:
                job_cfg = loader.peek(ovr)
                if job_cfg is None:
                    job_cfg = loader.compose(ovr)
                    if keep:
                        loader.keep(ovr, job_cfg, sweep=for_later_batches)
            except (HydraException, OmegaConfBaseException, ValueError) as err:
                job.failure = composition_failure(err, ovr, loader)
            else:
                try:
                    section = areal_section(job_cfg, launcher.config_root)
                    if is_areal_config(section):
                        job.plan = _validate(section)
                    else:
                        job.unvalidated = True
                except ErrorAtKey as err:  # the fix rewrites the job's override that wrote it
                    override = err.given_by(ovr)
                    shown = err.for_override(user_override(override)) if override else err
                    job.failure = str(shown)
                except AllocationError as err:
                    job.failure = str(err)
                except OmegaConfBaseException as err:
                    job.failure = f"{type(err).__name__}: {err}"
            jobs.append(job)
            progress.advance()
    failures = [(job.num, job.overrides, job.failure) for job in jobs if job.failure is not None]
    if failures and stop:
        raise ConfigCompositionException(
            failure_message(failures, total, whole_sweep=whole_sweep, launched=launched)
        ) from AllocationError(f"{len(failures)} of {total} jobs failed validation")
    return jobs


def composition_failure(
    err: Exception, overrides: Sequence[str] = (), loader: SweepLoader | None = None
) -> str:
    """Why Hydra could not compose a job, in Hydra's words (its message, or that of the
    OmegaConf error it wraps without one); an override of a key the config lacks, with
    the key it may mean (``loader`` composes the job without it to find it)."""
    from areal_conf.hydra.plugin_api import missing_key, refused_override

    override = refused_override(str(err), overrides)
    if override is not None and loader is not None:
        cfg = _without(loader, overrides, override)
        return str(missing_key(cfg, user_override(override), "the config", _version()))
    text = str(err).strip()
    cause = err.__cause__
    if not text and cause is not None:
        text = f"{type(cause).__name__}: {str(cause).strip()}"
    return f"Hydra could not compose this job: {text or type(err).__name__}"


def _without(loader: SweepLoader, overrides: Sequence[str], override: str) -> DictConfig | None:
    """The job's config without ``override`` (None: it does not compose either)."""
    try:
        return loader.compose([o for o in overrides if o != override])
    except (HydraException, OmegaConfBaseException, ValueError):
        return None


def _version() -> str | None:
    """The AReaL version whose rules validate the jobs (None: the choice is invalid, as
    validation will say)."""
    from areal_conf import AllocationError
    from areal_conf.hydra.plugin_api import choose_rules, default_settings

    try:
        return choose_rules(default_settings().areal_version).version
    except AllocationError:
        return None


def areal_section(job_cfg: DictConfig, root: str) -> Any:
    """The part of a job's config that holds its AReaL config: ``root`` is a dotted key
    (``hydra.launcher.config_root``), "" for the whole config."""
    if not root:
        return job_cfg
    from areal_conf import AllocationError

    section = OmegaConf.select(job_cfg, root, default=None)
    if not isinstance(section, DictConfig):
        found = "is not in the job's config" if section is None else "is not a mapping"
        raise AllocationError(
            f"hydra.launcher.config_root: {root!r} {found}",
            hint="set hydra.launcher.config_root to the key the AReaL config is mounted "
            "under (for example areal for '- areal_schema@areal'), or to '' for the top level",
        )
    return section


def launch_summary(jobs: Sequence[CheckedJob], bad: dict[int, str]) -> str:
    """``3 jobs valid``, or with jobs that were not validated ``1 job valid, 2 not validated``."""
    unvalidated = sum(job.unvalidated for job in jobs)
    valid = len(jobs) - len(bad) - unvalidated
    text = f"{valid} {'job' if valid == 1 else 'jobs'} valid"
    return text + (f", {unvalidated} not validated" if unvalidated else "")


def _tell_unvalidated(launcher: AReaLLauncher, jobs: Sequence[CheckedJob], total: int) -> None:
    nums = [job.num for job in jobs if job.unvalidated]
    if nums and not launcher.sweep.told_unvalidated:
        log.warning(unvalidated_notice(nums, total, launcher.config_root))
        launcher.sweep.told_unvalidated = True


def unvalidated_notice(nums: Sequence[int], total: int, root: str) -> str:
    """Said once per sweep: the jobs that run without validation, and why."""
    where = f"under {root!r}" if root else "at the top level of the config"
    if len(nums) == total:
        which = "no job has any" if total > 1 else "the job has no"
    else:
        which = "jobs " + ", ".join(f"#{n}" for n in nums) + " have no"
    return (
        f"areal launcher: {which} engine sections (rollout, actor, ...) {where}, so "
        f"{'they run' if len(nums) > 1 else 'it runs'} without validation; if the AReaL "
        "config is mounted under a key, set hydra.launcher.config_root to that key"
    )


def _validate(job_cfg: DictConfig) -> Plan:
    from areal_conf import validate

    return validate(job_cfg).plan_only()  # kept for every job until the sweep starts


def is_areal_config(cfg: Any) -> bool:
    """True when ``cfg`` has an engine (a role section, or any top-level section with a
    ``backend``) or ``allocation_mode``; another application's sweep through this
    launcher is not validated."""
    from areal_conf.hydra.plugin_api import has_engines

    return has_engines(cfg)


def failure_message(
    failures: Sequence[tuple[int, Sequence[str], str]],
    total: int,
    *,
    whole_sweep: bool = False,
    launched: int = 0,
) -> str:
    """The compact error: every failing job (its global number, overrides and reason),
    and exactly what was and was not launched."""
    n = len(failures)
    jobs = "job" if total == 1 else "jobs"
    if launched:
        head = (
            f"areal launcher: {n} of {total} {jobs} in this batch failed validation; no job "
            f"of this batch was launched ({launched} {'job' if launched == 1 else 'jobs'} "
            "of earlier batches were)."
        )
    else:
        whole = " of the sweep" if whole_sweep else ""
        head = (
            f"areal launcher: {n} of {total} {jobs}{whole} failed validation; no job was launched."
        )
    parts = [head]
    for num, overrides, reason in failures:
        parts.append(f"\n#{num} {job_overrides_line(overrides)}")
        parts.append(_indent(reason.rstrip("\n"), "    "))
    parts.append(
        "\nFix or drop these values and run the sweep again; "
        "hydra.launcher.dry_run=true checks a sweep without running it."
    )
    return "\n".join(parts)


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.split("\n"))


# ------------------------------------------------------------------ display


def dry_run_line(num: int, overrides: Sequence[str], plan: Plan | None) -> str:
    """``#0 actor.backend=fsdp:d8 : rollout 8, actor 8, ... | 16 of 16 GPUs``."""
    head = f"#{num} {job_overrides_line(overrides)} : "
    if plan is None:
        return head + "not an AReaL config (no engine keys), not validated"
    engines = []
    for name, gpus in plan.gpus_by_engine().items():
        target = plan.engines[name].colocated_with
        engines.append(f"{name} {gpus}" + (f" (colocated with {target})" if target else ""))
    return head + ", ".join(engines) + f" | {plan.used_gpus} of {plan.available_gpus} GPUs"
