"""The version matrix: the whole test suite on each supported Hydra/OmegaConf pair.

    python -m nox                          # every pair, each in a fresh virtualenv
    python -m nox -s "tests(areal_pins)"   # one pair
    python -m nox -s "tests(hydra13)" -- tests/hydra/test_discovery.py   # arguments go to pytest
    python -m nox -s scan                  # plugin-scan benchmark on every pair

Each session installs the repository the way a user does (``pip install -e '.[test]'``)
together with the pair's requirements, in one pip resolution, then runs the whole test
suite and the reference application's commands: a single run and a multirun with
DeprecationWarnings as errors, and a layouts sweep. pip's cache is shared by all sessions.

Two kinds of run are left to one place, so that .ci/run stays inside its time: the tests against
AReaL's loader (``AREAL_LOADER_DIR``) run on AReaL's own pair only, and a pair whose
versions are the ones .ci/run's test command has just run the suite on
(``AREAL_CONF_SUITE_RAN_ON``: today the newest 1.3.x, which that command installs) does the
fresh install and the application runs without the suite.
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["tests"]
nox.options.error_on_missing_interpreters = True

#: Requirements added to ``-e .[test]`` for each pair.
PAIRS: dict[str, list[str]] = {
    # (a) the newest hydra-core 1.3.x with the newest omegaconf 2.3.x
    "hydra13": ["hydra-core>=1.3.2,<1.4", "omegaconf>=2.3,<2.4"],
    # (b) AReaL's pins
    "areal_pins": ["hydra-core==1.4.0.dev1", "omegaconf==2.4.0.dev2"],
    # (c) the newest hydra-core 1.4 pre-release (a pre-release in a specifier lets pip
    # pick pre-releases for that package only) with the omegaconf it requires (1.4.0rc3
    # requires omegaconf>=2.4.1rc1), and the plugins released with it: without them pip
    # keeps hydra-ray-launcher 1.2.2, whose scan warns on every start under omegaconf 2.4.1rc1
    "hydra14_pre": [
        "hydra-core>=1.4.0.dev0,<1.5",
        "hydra-joblib-launcher>=1.4.0.dev0,<1.5",
        "hydra-submitit-launcher>=1.4.0.dev0,<1.5",
        "hydra-ray-launcher>=1.4.0.dev0,<1.5",
        "hydra-optuna-sweeper>=1.4.0.dev0,<1.5",
    ],
}

SHOW_VERSIONS = (
    "import hydra, omegaconf; "
    "print('hydra-core', hydra.__version__, '| omegaconf', omegaconf.__version__)"
)


def show_hydra_log(output: object) -> None:
    """Hydra's log lines of a multirun (which launcher, which jobs), not every job's plan."""
    print("\n".join(line for line in str(output).splitlines() if "[HYDRA]" in line))


#: Set by .ci/run to the versions its test command ran the suite on (as SHOW_VERSIONS
#: prints them): a pair that installs the same versions does not run it again.
SUITE_RAN_ON = "AREAL_CONF_SUITE_RAN_ON"
#: The pair AReaL itself pins: the tests against AReaL's loader run there.
AREAL_PAIR = "areal_pins"


def install(session: nox.Session, pair: str) -> str:
    """The repository and the pair installed; the versions, as SHOW_VERSIONS prints them."""
    session.install("-e", ".[test]", *PAIRS[pair])
    versions = session.run("python", "-c", SHOW_VERSIONS, silent=True)
    session.log(str(versions).strip())
    return str(versions).strip()


@nox.session
@nox.parametrize("pair", list(PAIRS), ids=list(PAIRS))
def tests(session: nox.Session, pair: str) -> None:
    """The whole test suite and train.py's single run, multirun and layouts sweep."""
    versions = install(session, pair)
    # The cluster tests (Slurm, Ray) need a cluster and take minutes: .ci/run runs them
    # once, in its own environment, before the matrix; so it does the tests that run in
    # virtualenvs of their own, whatever this session's pair.
    only_once = "not cluster and not own_environment"
    # AReaL's loader runs AReaL under its own pins: areal-conf is compared with it where it
    # runs beside AReaL, on AReaL's pair (and in .ci/run's own suite).
    env = {} if pair == AREAL_PAIR else {"AREAL_LOADER_DIR": ""}
    if session.posargs or os.environ.get(SUITE_RAN_ON) != versions:
        session.run(
            "python", "-m", "pytest", "-n", "auto", "-m", only_once, *session.posargs, env=env
        )
    else:
        session.log(f"the suite already ran on {versions} in this run: not again")
    if session.posargs:  # a selection of tests: skip the application runs
        return
    out = session.create_tmp()
    strict = ("python", "-W", "error::DeprecationWarning", "train.py")
    session.run(*strict, f"hydra.run.dir={out}/run")
    multirun = session.run(
        *strict,
        "-m",
        "actor.backend=fsdp:d8,fsdp:d4t2",
        f"hydra.sweep.dir={out}/multirun",
        silent=True,
    )
    show_hydra_log(multirun)
    if "areal launcher: 2 jobs valid" not in str(multirun):
        session.error("the multirun did not go through the areal launcher")
    sweep = session.run(
        *strict,
        "-m",
        "hydra/sweeper=areal_layouts",
        "hydra.sweeper.engine=actor",
        "hydra.sweeper.backend=fsdp",
        f"hydra.sweep.dir={out}/layouts",
        silent=True,
    )
    show_hydra_log(sweep)
    if str(sweep).count("plan written to") < 2:
        session.error("the layouts sweep did not run its jobs")


@nox.session
@nox.parametrize("pair", list(PAIRS), ids=list(PAIRS))
def scan(session: nox.Session, pair: str) -> None:
    """benchmarks/plugin_scan.py (what discovery costs every Hydra app) on each pair."""
    install(session, pair)
    session.run("python", "benchmarks/plugin_scan.py", *session.posargs)
