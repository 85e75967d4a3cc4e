"""The work behind ``hydra/launcher=areal`` (imported on the first ``launch`` only).

For a batch of jobs: compose every job config the way Hydra does
(``config_loader.load_sweep_config``), validate each with
``areal_conf.validation.validate``, and either

* raise one ``ConfigCompositionException`` that lists every failing job (number,
  overrides as the user would type them, reason) before anything ran,
* print one line per job and return ``[]`` when ``dry_run`` is set, or
* instantiate the inner launcher through Hydra's plugin registry and return its result.

The configs composed for validation are handed to an in-process inner launcher (Hydra's
basic launcher) instead of being composed a third time; a launcher that ships the
Hydra context to other processes (joblib, submitit) gets the plain config loader.
"""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hydra.core.config_loader import ConfigLoader
from hydra.core.object_type import ObjectType
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, setup_globals
from hydra.errors import ConfigCompositionException
from hydra.types import HydraContext
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from hydra_plugins.areal_conf_plugin._configs import LAYOUTS_SWEEPER_TARGET
from hydra_plugins.areal_conf_plugin.areal_launcher import TARGET, AReaLLauncher

if TYPE_CHECKING:
    from hydra.types import RunMode

    from areal_conf.plan import Plan

log = logging.getLogger(__name__)

#: At most this many composed configs are kept for the inner launcher; later jobs of a
#: bigger batch are composed again by it, so memory stays bounded.
CACHE_LIMIT = 1024

BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


@dataclass
class _Job:
    num: int
    overrides: list[str]
    config: DictConfig | None  # kept for the inner launcher, up to CACHE_LIMIT jobs
    plan: Plan | None
    unvalidated: bool = False  # composed, but no engine sections where they were looked for


def launch(
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

    inner_launcher = inner_launcher_config(config, launcher.launcher_config)
    mode = invalid_job_mode(config, launcher.on_invalid)
    batch = [list(o) for o in job_overrides]
    if mode == STOP and not launcher.sweep_checked and not launcher.dry_run:
        whole = launcher.sweep_jobs or basic_sweep_jobs(config, hydra_context)
        if whole is not None and len(whole) > len(batch) and whole[: len(batch)] == batch:
            # The sweeper knows every job up front: validate the whole sweep now, so that
            # an invalid job of a later batch stops the sweep before any job runs.
            checked_jobs, _ = _compose_and_validate(
                hydra_context,
                config,
                whole,
                0,
                keep=0,
                launched=0,
                whole_sweep=True,
                root=launcher.config_root,
            )
            _tell_unvalidated(launcher, checked_jobs, len(whole))
            launcher.sweep_checked = True
    jobs, failures = _compose_and_validate(
        hydra_context,
        config,
        batch,
        initial_job_idx,
        keep=CACHE_LIMIT,
        launched=launcher.launched,
        stop=mode == STOP,
        checked=launcher.sweep_checked,
        root=launcher.config_root,
    )
    _tell_unvalidated(launcher, jobs, len(batch))

    if launcher.dry_run:
        for job in jobs:
            print(dry_run_line(job.num, job.overrides, job.plan), flush=True)
        return []

    inner_master = _with_launcher(config, inner_launcher)
    loader = _PrecomposedLoader(hydra_context.config_loader, inner_master, jobs, config)
    bad = {num: reason for num, _, reason in failures}
    summary = launch_summary(jobs, bad)
    del jobs  # the loader holds the configs now and lets go of each as it is used
    inner = Plugins.instance().instantiate_launcher(
        hydra_context=HydraContext(config_loader=loader, callbacks=hydra_context.callbacks),
        task_function=task_function,
        config=inner_master,
    )
    log.info("areal launcher: %s, launching with %s", summary, type(inner).__name__)
    if not bad:
        launcher.launched += len(batch)
        return inner.launch(batch, initial_job_idx=initial_job_idx)
    # fail_job: invalid jobs come back failed, in place; valid runs of consecutive jobs
    # keep their numbers (and so their output directories).
    returns: list[JobReturn] = []
    start = 0
    for i in range(len(batch) + 1):
        num = initial_job_idx + i
        if i < len(batch) and num not in bad:
            continue
        if start < i:
            launcher.launched += i - start
            returns += inner.launch(batch[start:i], initial_job_idx=initial_job_idx + start)
        if i < len(batch):
            returns.append(failed_job(num, batch[i], bad[num]))
        start = i + 1
    return returns


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
        raise ConfigCompositionException(
            f"areal launcher: hydra.launcher.on_invalid={on_invalid!r} is not one of "
            f"{AUTO}, {STOP}, {FAIL_JOB}\nhint: {STOP} stops the sweep at an invalid job, "
            f"{FAIL_JOB} returns it to the sweeper as failed, {AUTO} chooses by sweeper"
        )
    sweeper = OmegaConf.select(config, "hydra.sweeper._target_", default=None)
    return STOP if sweeper in UPFRONT_SWEEPERS else FAIL_JOB


def basic_sweep_jobs(config: DictConfig, hydra_context: HydraContext) -> list[list[str]] | None:
    """Every job of the sweep, as Hydra's basic sweeper expands it (its ``params`` first,
    then the command line), or None when the sweeper is not the basic one."""
    if OmegaConf.select(config, "hydra.sweeper._target_", default=None) != UPFRONT_SWEEPERS[0]:
        return None
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    arguments = [f"{k}={v}" for k, v in params.items()]
    arguments += list(OmegaConf.select(config, "hydra.overrides.task", default=[]) or [])
    parser = OverridesParser.create(config_loader=hydra_context.config_loader)
    expanded = BasicSweeper.split_arguments(parser.parse_overrides(arguments), None)
    return [list(job) for job in expanded[0]] if expanded else [[]]


def failed_job(num: int, overrides: Sequence[str], reason: str) -> JobReturn:
    """A JobReturn for a job that was not run because it is invalid: reading its
    ``return_value`` raises the message (as for a job whose task raised)."""
    from hydra.core.utils import JobStatus

    from areal_conf.errors import AllocationError

    error = ConfigCompositionException(
        f"areal launcher: job #{num} {format_overrides(overrides)} failed validation and "
        f"was not run:\n{_indent(reason.rstrip(), '    ')}"
    )
    error.__cause__ = AllocationError(reason.split("\n")[0])
    log.warning(
        "areal launcher: job #%d %s is invalid, not run, returned to the sweeper as failed",
        num,
        format_overrides(overrides),
    )
    ret = JobReturn(overrides=list(overrides), status=JobStatus.FAILED)
    ret.return_value = error
    return ret


# ------------------------------------------------------------------ validation


def _compose_and_validate(
    hydra_context: HydraContext,
    config: DictConfig,
    job_overrides: Sequence[Sequence[str]],
    initial_job_idx: int,
    *,
    keep: int,
    launched: int,
    stop: bool = True,
    checked: bool = False,
    whole_sweep: bool = False,
    root: str = "",
) -> tuple[list[_Job], list[tuple[int, list[str], str]]]:
    """Compose and validate each job (the first ``keep`` configs are kept for the inner
    launcher). With ``stop``, any failure raises the list of failing jobs; otherwise the
    failures are returned. ``checked``: the jobs were validated already (whole sweep),
    compose them only for the inner launcher. ``whole_sweep``: the jobs are every job of
    the sweep (the message says so). ``root``: the dotted key of the AReaL section in
    each job's config ("" for the top level)."""
    from areal_conf.errors import AllocationError
    from areal_conf.progress import Progress

    jobs: list[_Job] = []
    failures: list[tuple[int, list[str], str]] = []
    total = len(job_overrides)
    with Progress(total, "areal launcher: validating jobs", log=log.info) as progress:
        for i, overrides in enumerate(job_overrides):
            num = initial_job_idx + i
            ovr = list(overrides)
            if checked and i >= keep:
                jobs.append(_Job(num, ovr, None, None))
                continue
            job_cfg = hydra_context.config_loader.load_sweep_config(config, ovr)
            plan: Plan | None = None
            unvalidated = False
            if not checked:
                try:
                    section = areal_section(job_cfg, root)
                    if is_areal_config(section):
                        plan = _validate(section)
                    else:
                        unvalidated = True
                except AllocationError as err:
                    failures.append((num, ovr, str(err)))
                except OmegaConfBaseException as err:
                    failures.append((num, ovr, f"{type(err).__name__}: {err}"))
            jobs.append(_Job(num, ovr, job_cfg if i < keep else None, plan, unvalidated))
            progress.advance()
    if failures and stop:
        raise ConfigCompositionException(
            failure_message(failures, total, whole_sweep=whole_sweep, launched=launched)
        ) from AllocationError(f"{len(failures)} of {total} jobs failed validation")
    return jobs, failures


def areal_section(job_cfg: DictConfig, root: str) -> Any:
    """The part of a job's config that holds its AReaL config: ``root`` is a dotted key
    (``hydra.launcher.config_root``), "" for the whole config."""
    if not root:
        return job_cfg
    from areal_conf.errors import AllocationError

    section = OmegaConf.select(job_cfg, root, default=None)
    if not isinstance(section, DictConfig):
        found = "is not in the job's config" if section is None else "is not a mapping"
        raise AllocationError(
            f"hydra.launcher.config_root: {root!r} {found}",
            hint="set hydra.launcher.config_root to the key the AReaL config is mounted "
            "under (for example areal for '- areal_schema@areal'), or to '' for the top level",
        )
    return section


def launch_summary(jobs: Sequence[_Job], bad: dict[int, str]) -> str:
    """``3 jobs valid``, or with jobs that were not validated ``1 job valid, 2 not validated``."""
    unvalidated = sum(job.unvalidated for job in jobs)
    valid = len(jobs) - len(bad) - unvalidated
    text = f"{valid} {'job' if valid == 1 else 'jobs'} valid"
    return text + (f", {unvalidated} not validated" if unvalidated else "")


def _tell_unvalidated(launcher: AReaLLauncher, jobs: Sequence[_Job], total: int) -> None:
    nums = [job.num for job in jobs if job.unvalidated]
    if nums and not launcher.told_unvalidated:
        log.warning(unvalidated_notice(nums, total, launcher.config_root))
        launcher.told_unvalidated = True


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
    from areal_conf.validation import validate

    return validate(job_cfg)


def is_areal_config(cfg: Any) -> bool:
    """True when ``cfg`` has an engine (a role section, or any top-level section with a
    ``backend``) or ``allocation_mode``; another application's sweep through this
    launcher is not validated."""
    from areal_conf.reading import has_engines

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
        parts.append(f"\n#{num} {format_overrides(overrides)}")
        parts.append(_indent(reason.rstrip("\n"), "    "))
    parts.append(
        "\nFix or drop these values and run the sweep again; "
        "hydra.launcher.dry_run=true checks a sweep without running it."
    )
    return "\n".join(parts)


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.split("\n"))


# ------------------------------------------------------------------ display


def shell_token(override: str) -> str:
    """An override (already in Hydra's grammar) quoted for a POSIX shell command line."""
    from areal_conf.overrides import shell_quote

    return shell_quote(override)


def format_overrides(overrides: Sequence[str]) -> str:
    """Job overrides as the user would type them on a POSIX shell command line."""
    if not overrides:
        return "(no overrides)"
    return " ".join(shell_token(user_override(o)) for o in overrides)


def user_override(override: str) -> str:
    """Undo the escaping Hydra's sweeper adds to plain string values where it is not
    needed (``actor.backend=fsdp\\:d8`` -> ``actor.backend=fsdp:d8``).  Anything else is
    returned as it is: it is already valid override syntax.
    """
    if "\\" not in override or "=" not in override:
        return override
    parser = _override_parser()
    try:
        value = parser.parse_override(override)._value
        if not isinstance(value, str):
            return override
        candidate = override[: override.index("=") + 1] + value
        if parser.parse_override(candidate)._value == value:
            return candidate
    except Exception:  # display only: keep Hydra's own form
        pass
    return override


@functools.cache
def _override_parser() -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def dry_run_line(num: int, overrides: Sequence[str], plan: Plan | None) -> str:
    """``#0 actor.backend=fsdp:d8 : rollout 8, actor 8, ... | 16 of 16 GPUs``."""
    head = f"#{num} {format_overrides(overrides)} : "
    if plan is None:
        return head + "not an AReaL config (no engine keys), not validated"
    engines = []
    for name, gpus in plan.gpus_by_engine().items():
        target = plan.engines[name].colocated_with
        engines.append(f"{name} {gpus}" + (f" (colocated with {target})" if target else ""))
    return head + ", ".join(engines) + f" | {plan.used_gpus} of {plan.available_gpus} GPUs"


# ------------------------------------------------------------------ delegation


def inner_launcher_config(config: DictConfig, launcher_config: Any) -> Any:
    """The inner launcher's config (``hydra.launcher.launcher``), checked."""
    inner = launcher_config
    if inner is None:
        inner = OmegaConf.select(config, "hydra.launcher.launcher", default=None)
    if inner is None:
        return OmegaConf.create({"_target_": BASIC_LAUNCHER})
    target = inner.get("_target_") if hasattr(inner, "get") else None
    if not isinstance(target, str) or not target:
        raise ConfigCompositionException(
            "areal launcher: hydra.launcher.launcher has no _target_; choose the inner "
            "launcher with e.g. hydra/launcher@hydra.launcher.launcher=basic"
        )
    if target == TARGET or _is_areal_launcher(target):
        raise ConfigCompositionException(
            "areal launcher: the inner launcher (hydra.launcher.launcher) cannot be the "
            "areal launcher itself; choose e.g. hydra/launcher@hydra.launcher.launcher=basic"
        )
    return inner


def _with_launcher(config: DictConfig, inner: Any) -> DictConfig:
    """A copy of the master config whose ``hydra.launcher`` is the inner launcher's, so
    that the inner launcher sees its own config where Hydra puts it."""
    inner_master = copy.deepcopy(config)
    with read_write(inner_master.hydra), open_dict(inner_master.hydra):
        inner_master.hydra.launcher = inner
    return inner_master


def _is_areal_launcher(target: str) -> bool:
    # By name: Hydra's plugin scan re-executes the module, so class objects may differ.
    clazz = Plugins.instance().class_name_to_class.get(target)
    return isinstance(clazz, type) and any(
        f"{c.__module__}.{c.__qualname__}" == TARGET for c in clazz.__mro__
    )


class _PrecomposedLoader(ConfigLoader):
    """Hydra's config loader, except that it hands out the job configs composed for
    validation once each (same master config, same overrides) instead of composing them
    again.  Pickled (joblib, submitit), it leaves the job configs behind.

    A job the inner launcher asks for is composed against ``areal_master`` (the master
    config with ``hydra/launcher=areal``), not against the master it passes (which carries
    its own launcher config): the job composes with ``hydra/launcher=areal`` too, and
    Hydra 1.4 rejects a job whose launcher config differs from its master's.
    """

    def __init__(
        self,
        inner: ConfigLoader,
        master: DictConfig,
        jobs: Sequence[_Job],
        areal_master: DictConfig,
    ) -> None:
        self._inner = inner
        self._master = master
        self._areal_master = areal_master
        self._cache: dict[tuple[str, ...], list[DictConfig]] = {}
        for job in jobs:
            if job.config is not None:
                self._cache.setdefault(tuple(job.overrides), []).append(job.config)

    def __reduce__(self) -> tuple[Callable[..., ConfigLoader], Any]:
        return _PrecomposedLoader, (self._inner, self._master, (), self._areal_master)

    def load_sweep_config(
        self, master_config: DictConfig, sweep_overrides: list[str]
    ) -> DictConfig:
        if master_config is self._master:
            cached = self._cache.get(tuple(sweep_overrides))
            if cached:
                return cached.pop(0)
            master_config = self._areal_master
        return self._inner.load_sweep_config(master_config, sweep_overrides)

    def load_configuration(
        self,
        config_name: str | None,
        overrides: list[str],
        run_mode: RunMode,
        from_shell: bool = True,
        validate_sweep_overrides: bool = True,
    ) -> DictConfig:
        return self._inner.load_configuration(
            config_name=config_name,
            overrides=overrides,
            run_mode=run_mode,
            from_shell=from_shell,
            validate_sweep_overrides=validate_sweep_overrides,
        )

    def get_search_path(self) -> Any:
        return self._inner.get_search_path()

    def get_sources(self) -> Any:
        return self._inner.get_sources()

    def list_groups(self, parent_name: str) -> list[str]:
        return self._inner.list_groups(parent_name)

    def get_group_options(
        self,
        group_name: str,
        results_filter: ObjectType | None = ObjectType.CONFIG,
        config_name: str | None = None,
        overrides: list[str] | None = None,
    ) -> list[str]:
        return self._inner.get_group_options(
            group_name,
            results_filter=results_filter,
            config_name=config_name,
            overrides=overrides,
        )

    def compute_defaults_list(
        self, config_name: str | None, overrides: list[str], run_mode: RunMode
    ) -> Any:
        return self._inner.compute_defaults_list(config_name, overrides, run_mode)

    def __getattr__(self, name: str) -> Any:
        # Anything else ConfigLoaderImpl offers (helpers used by some plugins).
        if name.startswith("__") or name in ("_inner", "_master", "_cache"):
            raise AttributeError(name)
        return getattr(self._inner, name)
