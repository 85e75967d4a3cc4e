"""Every key of AReaL's backend configs has a row in ``BACKEND_KEYS``: priced, named in the
plan when set to what the step time does not price, or without effect on a step's time.

The keys and their defaults are AReaL's own (``areal_conf/data/areal_keys_<version>.json``,
read from ``areal/api/cli_args.py``: 1.0 at 4aef98d8, 2.0 at cbff54d64).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from areal_conf.config.backend_knobs import BACKEND_KEYS, backend_knobs
from areal_conf.config.known_keys import areal_keys
from areal_conf.config.known_values import NO_DEFAULT

#: The backend sections of a training engine and the class AReaL reads each into.
SECTIONS = {
    "fsdp": "FSDPEngineConfig",
    "archon": "ArchonEngineConfig",
    "megatron": "MegatronEngineConfig",
}
VERSIONS = ("1.0", "2.0")


def areal_backend_keys(version: str) -> Iterator[tuple[str, str, str]]:
    """(path under the engine, owning class, field) of every backend key of ``version``,
    the fields of a nested config class included (``megatron.ddp.bucket_size``)."""
    classes = areal_keys(version).classes

    def walk(prefix: str, owner: str) -> Iterator[tuple[str, str, str]]:
        for name, nested in classes[owner].items():
            yield f"{prefix}.{name}", owner, name
            if nested is not None:
                yield from walk(f"{prefix}.{name}", nested)

    for section, owner in SECTIONS.items():
        yield from walk(section, owner)


def sections_only(version: str) -> set[str]:
    """Paths that are only sections holding keys (``megatron.ddp``): their keys have rows."""
    classes = areal_keys(version).classes
    return {
        path
        for path, owner, name in areal_backend_keys(version)
        if classes[owner][name] is not None and path != "megatron.fp8_config"
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_every_backend_key_of_areal_has_a_row(version: str) -> None:
    paths = {path for path, _, _ in areal_backend_keys(version)} - sections_only(version)
    assert sorted(paths - set(BACKEND_KEYS)) == []


def test_every_row_is_a_key_of_some_areal_version() -> None:
    known = {path for v in VERSIONS for path, _, _ in areal_backend_keys(v)}
    assert sorted(set(BACKEND_KEYS) - known) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_areal_s_defaults_are_never_named(version: str) -> None:
    """A config that leaves a key at AReaL's default is never told it is not modelled."""
    values = areal_keys(version).values
    for path, owner, name in areal_backend_keys(version):
        row = BACKEND_KEYS.get(path)
        field = values.get(owner, {}).get(name)
        if row is None or field is None or field.default in (None, NO_DEFAULT):
            continue
        if row.effect == "named" or row.usual:
            assert field.default in row.usual, (path, field.default, row.usual)


def test_every_row_says_why() -> None:
    for path, row in BACKEND_KEYS.items():
        assert row.why and row.effect in ("priced", "named", "no_effect"), path
        assert not (row.effect == "no_effect" and row.usual), path


@pytest.mark.parametrize(
    "archon, expected",
    [
        ({}, "op"),  # AReaL's default: ac_mode selective, selective_ac_option op
        ({"ac_mode": "none"}, "none"),
        ({"ac_mode": "full"}, "full"),
        ({"selective_ac_option": "2"}, "full"),  # every second layer: named
        ({"pp_schedule": "ZBVZeroBubble"}, "full"),  # zero-bubble falls back to full
        ({"ac_mode": "memory_budget"}, "op"),
    ],
)
def test_what_archon_recomputes(archon: dict[str, str], expected: str) -> None:
    knobs = backend_knobs({"archon": archon}, "actor", "archon:d8", "bfloat16")
    assert knobs["archon_recompute"] == expected


@pytest.mark.parametrize(
    "backend, section, expected",
    [
        ("archon:d4p2", {}, 2),  # Interleaved1F1B: two stages a rank
        ("archon:d4p2", {"archon": {"pp_schedule": "1F1B"}}, 1),
        ("megatron:d4p2", {}, 1),
        ("megatron:d4p2", {"megatron": {"virtual_pipeline_parallel_size": 3}}, 3),
        ("megatron:d4p2", {"archon": {"pp_schedule": "Interleaved1F1B"}}, 1),
    ],
)
def test_pipeline_stages_a_rank_runs(backend: str, section: dict, expected: int) -> None:
    assert backend_knobs(section, "actor", backend, "bfloat16")["virtual_stages"] == expected


@pytest.mark.parametrize(
    "backend, section, expected",
    [
        ("fsdp:d8", {"grad_reduce_dtype": "bfloat16"}, "bfloat16"),
        ("fsdp:d8", {}, "float32"),
        # Megatron reduces in fp32 unless its DDP says not; the engine key is FSDP's
        ("megatron:d8", {"grad_reduce_dtype": "bfloat16"}, "float32"),
        ("megatron:d8", {"megatron": {"ddp": {"grad_reduce_in_fp32": False}}}, "bfloat16"),
        ("archon:d8", {"grad_reduce_dtype": "bfloat16"}, "float32"),
    ],
)
def test_the_dtype_gradients_are_reduced_in(backend: str, section: dict, expected: str) -> None:
    knobs = backend_knobs(section, "actor", backend, "bfloat16")
    assert knobs["grad_reduce_dtype"] == expected


@pytest.mark.parametrize(
    "section, named",
    [
        ({"megatron": {"moe_enable_deepep": True}}, []),  # priced, with flex
        ({"megatron": {"moe_token_dispatcher_type": "flex"}}, []),
        (
            {"megatron": {"moe_token_dispatcher_type": "allgather"}},
            ["actor.megatron.moe_token_dispatcher_type"],
        ),
        ({"megatron": {"moe_token_dispatcher_type": "alltoall"}}, []),
        ({"megatron": {"enable_fp32_lm_head": "true"}}, ["actor.megatron.enable_fp32_lm_head"]),
        ({"megatron": {"enable_fp32_lm_head": "false"}}, []),
        ({"megatron": {"recompute_num_layers": 1}}, []),
        ({"megatron": {"async_save": True}}, []),  # saving, not the step
        ({"megatron": {"ddp": {"overlap_grad_reduce": True}}}, []),  # priced
        ({"megatron": {"ddp": {"bucket_size": 40000000}}}, ["actor.megatron.ddp.bucket_size"]),
        ({"megatron": {"fp8_config": {"recipe": "blockwise"}}}, []),  # priced
        ({"megatron": {"fp8_config": {"param": True}, "ddp": {"fp8_param_gather": True}}}, []),
        ({"megatron": {"fp8_config": {"wgrad": False}}}, ["actor.megatron.fp8_config.wgrad"]),
        ({"megatron": {"fp8_config": {"recipe": "x"}}}, ["actor.megatron.fp8_config.recipe"]),
        ({"megatron": {"fp8_config": {"margin": 1}}}, []),  # a detail
        ({"fsdp": {"per_layer_optim_step": True}}, []),  # FSDP's key, a Megatron engine
    ],
)
def test_what_is_named(section: dict, named: list[str]) -> None:
    assert list(backend_knobs(section, "actor", "megatron:d8", "bfloat16")["unpriced"]) == named


@pytest.mark.parametrize(
    "backend, megatron, expected",
    [
        ("megatron:d8", {"moe_token_dispatcher_type": "flex"}, True),
        ("megatron:d8", {}, False),
        # megatron-bridge runs all-to-all whatever is set (areal/models/mcore/registry.py)
        (
            "megatron:d8",
            {"moe_token_dispatcher_type": "flex", "bridge_type": "megatron-bridge"},
            False,
        ),
        ("archon:d8", {"moe_token_dispatcher_type": "flex"}, False),
    ],
)
def test_which_dispatch_crosses_to_a_node_once(
    backend: str, megatron: dict, expected: bool
) -> None:
    knobs = backend_knobs({"megatron": megatron}, "actor", backend, "bfloat16")
    assert knobs["dedup_dispatch"] is expected
