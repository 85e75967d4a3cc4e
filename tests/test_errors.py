"""AllocationError and its classes as data: what each holds, and that a copy, a changed
hint or key, or a trip through pickle (a launcher's results cross processes) keeps the
class, every field and the message."""

from __future__ import annotations

import copy
import pickle

import pytest
from _helpers import FIXTURES

from areal_conf import AllocationError, check_command, parse_backend, validate
from areal_conf.config.known_keys import UnknownKey
from areal_conf.errors import BackendSyntaxError, ConfigError

#: AReaL's command on the error catalogue's YAML, a whole AReaL config.
GSM8K = ["python", "examples/math/gsm8k_rl.py", "--config", "examples/math/gsm8k_grpo.yaml"]
COMMANDS = FIXTURES / "commands"


def _raised(call: object) -> AllocationError:
    with pytest.raises(AllocationError) as info:
        call()  # type: ignore[operator]
    return info.value


ERRORS = {
    "backend syntax": lambda: _raised(lambda: parse_backend("fsdp:d4x")),
    "config rule": lambda: _raised(
        lambda: validate({"scheduler": {"type": "k"}, "actor": {"backend": "fsdp:d8"}})
    ),
    "config as a whole": lambda: ConfigError("cluster: too small", hint="add nodes"),
    "unknown key": lambda: _raised(
        lambda: validate({"actor": {"backend": "fsdp:d8", "nope": 1}}, areal_version="2.0")
    ),
    "in a config key": lambda: _raised(
        lambda: validate({"actor": {"backend": "fsdp:d4x"}}, areal_version="2.0")
    ),
    "a required value missing": lambda: _raised(
        lambda: check_command([*GSM8K, "~saver"], cwd=COMMANDS)
    ),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_an_error_survives_a_copy_a_change_and_pickle(name: str) -> None:
    err = ERRORS[name]()
    for other in (
        copy.copy(err),
        pickle.loads(pickle.dumps(err)),
        err.with_hint(err.hint + " (changed)").with_hint(err.advice or err.hint),
    ):
        assert type(other) is type(err)
        assert str(other) == str(err)
        assert other.__dict__ == err.__dict__


def test_the_classes_say_what_is_at_fault() -> None:
    assert isinstance(ERRORS["backend syntax"](), BackendSyntaxError)
    assert isinstance(ERRORS["in a config key"](), BackendSyntaxError)
    assert isinstance(ERRORS["unknown key"](), UnknownKey)
    assert ERRORS["config rule"]().rule == "scheduler-type"
    assert ERRORS["unknown key"]().rule is None  # found before any rule runs


def test_a_key_given_later_keeps_the_class_and_the_span() -> None:
    err = ERRORS["backend syntax"]()
    named = err.with_context("actor.backend")
    assert isinstance(named, BackendSyntaxError) and named.span == err.span == (7, 8)
    assert str(named).startswith("actor.backend: unknown dimension 'x'")


def test_each_fix_of_an_error_is_data_and_passes_when_applied() -> None:
    """``err.fixes``: the hint's fixes that pass the whole check, as overrides to apply."""
    from _helpers import with_overrides

    cfg = {
        "actor": {"backend": "fsdp:d8"},
        "rollout": {
            "backend": "sglang:d8",
            "scheduling_strategy": {"type": "colocation", "target": "actor"},
        },
        "scheduler": {"type": "local"},
    }
    with pytest.raises(AllocationError) as info:
        validate(cfg, areal_version="2.0")
    err = info.value
    assert err.rule == "enable-offload" and len(err.fixes) == 2
    for fix in err.fixes:
        assert " ".join(fix) in err.hint
        validate(with_overrides(cfg, fix), areal_version="2.0")  # passes


def test_an_error_whose_fixes_were_not_checked_has_none() -> None:
    assert ERRORS["backend syntax"]().fixes == ()
