"""The rule registry: one row per rule, unique ids, the order validate runs them, and
docs/rules.md showing the same table."""

from __future__ import annotations

from typing import Any

import pytest
from _helpers import ROOT

from areal_conf import AllocationError, validate
from areal_conf.plan.report import plan_table
from areal_conf.rules.registry import LAST_REFUSING, RULES, TOPICS, rules_for, rules_table


def test_each_rule_has_its_own_id() -> None:
    ids = [rule.id for rule in RULES]
    assert len(ids) == len(set(ids))


def test_each_rule_has_a_topic_a_version_and_where_areal_makes_it() -> None:
    for rule in RULES:
        assert rule.topic in TOPICS, rule.id
        assert rule.versions and set(rule.versions) <= {"1.0", "2.0"}, rule.id
        assert rule.checks and rule.source, rule.id
        assert set(rule.schedulers) <= {"any", "null", "local", "slurm", "ray"}, rule.id


def test_each_rule_lives_in_the_module_of_its_topic() -> None:
    """A reader finds a rule's home from its topic: ``areal_conf.rules.<topic>``."""
    for rule in RULES:
        assert rule.run.__module__ == f"areal_conf.rules.{rule.topic}", rule.id


def test_docs_rules_md_is_the_registry_s_table() -> None:
    page = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert rules_table() in page, (
        "docs/rules.md differs from the registry: paste the output of "
        "python -c 'from areal_conf.rules.registry import rules_table; print(rules_table())'"
    )


def test_a_version_s_rules_keep_the_registry_s_order() -> None:
    order = {rule.id: n for n, rule in enumerate(RULES)}
    for version in ("1.0", "2.0"):
        ids = [rule.id for rule in rules_for(version)]
        assert ids == sorted(ids, key=order.__getitem__)
        # the model and memory at start-up, what the first step meets, then speed
        assert ids[-7:] == [
            *("model", "fp8-weights", "memory", "fp8-gpu"),
            *("rollout-queue", "consumer-batch", "speed"),
        ]
        # a fix's check runs every rule that can refuse: none after LAST_REFUSING does
        assert ids[ids.index(LAST_REFUSING) + 1 :] == ["speed"]


#: A config each rule refuses, under the AReaL version given, and the rule's id.
REFUSED: list[tuple[str, str, dict[str, Any]]] = [
    (
        "1.0",
        "teacher-1.0-layout",
        {"actor": {"backend": "fsdp:d4"}, "teacher": {"rollout": {"backend": "sglang:d1"}}},
    ),
    (
        "2.0",
        "scheduler-type",
        {"scheduler": {"type": "kubernetes"}, "actor": {"backend": "fsdp:d8"}},
    ),
    ("2.0", "backend", {"actor": {"backend": "fsdp:d3x"}}),
    ("1.0", "backend-and-kind", {"actor": {"backend": "sglang:d4"}}),
    ("2.0", "backend-kind", {"actor": {"backend": "sglang:d4"}}),
    (
        "2.0",
        "routed-experts",
        {
            "actor": {"backend": "fsdp:d4"},
            "rollout": {"backend": "vllm:d4", "return_routed_experts": True},
        },
    ),
    (
        "2.0",
        "capacity",
        {"actor": {"backend": "fsdp:d16"}, "cluster": {"n_nodes": 1, "n_gpus_per_node": 8}},
    ),
    (
        "1.0",
        "fp8-weights",
        {
            "actor": {
                "backend": "megatron:d4",
                "path": "Qwen/Qwen3-1.7B",
                "megatron": {"fp8_config": {}},
            }
        },
    ),
]


@pytest.mark.parametrize(("version", "rule", "cfg"), REFUSED, ids=[r[1] for r in REFUSED])
def test_an_error_carries_the_id_of_the_rule_that_raised_it(
    version: str, rule: str, cfg: dict[str, Any]
) -> None:
    with pytest.raises(AllocationError) as info:
        validate(cfg, areal_version=version)
    assert info.value.rule == rule


def test_an_error_before_the_rules_has_no_rule() -> None:
    """allocation_mode and the config's keys are refused before any rule runs."""
    for cfg in (
        {"allocation_mode": "sglang:d4+fsdp:d4"},
        {"actor": {"backend": "fsdp:d4", "nope": 1}},
    ):
        with pytest.raises(AllocationError) as info:
            validate(cfg, areal_version="2.0")
        assert info.value.rule is None


def test_each_warning_carries_the_id_of_the_rule_that_gave_it() -> None:
    """Warnings are diagnostics too: the plan (and allocation_plan.json) says which rule
    gave each one."""
    plan = validate(
        {"actor": {"backend": "fsdp:d4"}, "rollout": {"backend": "sglang:d4"}}, areal_version="2.0"
    )
    assert len(plan.warning_rules) == len(plan.warnings) >= 2
    by_rule = dict(zip(plan.warning_rules, plan.warnings, strict=True))
    assert by_rule["scheduler-type"].startswith("scheduler.type is null")
    assert "scheduling_spec" in by_rule["workers"]
    ids = {rule.id for rule in RULES}
    assert all(rule is None or rule in ids for rule in plan.warning_rules)
    assert plan.to_dict()["warning_rules"] == list(plan.warning_rules)
    printed = [line for line in plan_table(plan).splitlines() if line.startswith("warning: ")]
    assert printed[0].endswith("(rule: scheduler-type)")
    rules = plan.warning_rules
    assert all(line.endswith(f"(rule: {r})") for line, r in zip(printed, rules, strict=True))
