"""The table of well-known models and the offline Hugging Face cache lookup: every entry
is a usable shape whose parameter count matches the published one, every Hub model that
AReaL's example configs (``fixtures/areal2``) name is in the table or listed as left out
with the reason, lookups are exact (up to letter case) and hand out copies, and the cache
is searched the way the hub lays it out, never raising."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml
from _helpers import FIXTURES

from areal_conf.model.hf_cache import cached_config_json, hub_cache_dir
from areal_conf.model.known_models import KNOWN_MODELS, known_model, known_model_ids
from areal_conf.model.shape import HF_KEYS, REQUIRED, ModelShape, model_shape, read_source
from areal_conf.perf.parameters import parameter_count

ALL_IDS = sorted(KNOWN_MODELS)


def shape_of(model_id: str) -> ModelShape:
    entry = known_model(model_id)
    assert entry is not None, model_id
    shape = model_shape(entry)
    assert isinstance(shape, ModelShape), shape
    return shape


# -- the table ---------------------------------------------------------------------------


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_entry_keys_are_model_section_keys_with_valid_values(model_id: str) -> None:
    entry = KNOWN_MODELS[model_id]
    assert set(entry) <= set(HF_KEYS), set(entry) - set(HF_KEYS)
    for key, value in entry.items():
        if key == "tie_word_embeddings":
            assert type(value) is bool, (key, value)
        else:
            assert type(value) is int and value > 0, (key, value)


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_entry_has_what_a_memory_estimate_needs(model_id: str) -> None:
    entry = KNOWN_MODELS[model_id]
    assert all(key in entry for key in REQUIRED), [k for k in REQUIRED if k not in entry]
    assert "tie_word_embeddings" in entry and "max_seq_len" in entry
    heads = entry["num_attention_heads"]
    assert heads % entry.get("num_kv_heads", heads) == 0
    if "num_experts" in entry:
        for key in ("moe_router_topk", "moe_ffn_hidden_size"):
            assert key in entry, key
        assert entry["moe_router_topk"] <= entry["num_experts"]


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_every_entry_gives_a_model_shape(model_id: str) -> None:
    shape = shape_of(model_id)
    assert shape.num_attention_heads % shape.num_kv_heads == 0
    assert shape.is_moe == ("num_experts" in KNOWN_MODELS[model_id])
    assert parameter_count(shape) > 0


class Published(NamedTuple):
    """A model's published total parameter count, and how close parameter_count gets."""

    model_id: str
    params: float
    rel: float = 0.03


# Totals as published: the size tables of the Qwen2.5 and Qwen2.5-Coder blog posts
# (0.49B, 1.54B, 7.61B, 72.7B), the Qwen3 model cards (8.2B, 30.5B, 235B; Qwen3-0.6B is
# 596,049,920 in KerasHub's presets), the sizes Hugging Face shows for Llama 3.1/3.2
# (8.03B, 70.6B, 405B, 1.24B, 3.21B) and Mixtral (46.7B, 141B), and the DeepSeek-V3 card
# (671B, without the 14B multi-token-prediction module). The Qwen2 blog's size table gives
# Qwen2-1.5B 1.54B; the Qwen3.6-35B-A3B card "35B in total", which includes the vision
# tower and the multi-token-prediction layer parameter_count leaves out.
PUBLISHED = [
    Published("Qwen/Qwen2-1.5B-Instruct", 1.54e9),
    Published("Qwen/Qwen2.5-0.5B-Instruct", 0.49e9),
    Published("Qwen/Qwen2.5-1.5B", 1.54e9),
    Published("Qwen/Qwen2.5-7B", 7.61e9),
    Published("Qwen/Qwen2.5-72B-Instruct", 72.7e9),
    Published("Qwen/Qwen3-0.6B", 0.596e9),
    Published("Qwen/Qwen3-8B", 8.2e9),
    Published("Qwen/Qwen3-30B-A3B", 30.5e9),
    Published("Qwen/Qwen3-30B-A3B-Base", 30.5e9),
    # every layer's token mixer counted as gated attention: ~0.5B below the DeltaNet layers
    Published("Qwen/Qwen3.6-35B-A3B", 35e9),
    Published("Qwen/Qwen3-235B-A22B", 235e9),
    Published("meta-llama/Llama-3.1-8B", 8.03e9),
    Published("meta-llama/Llama-3.1-70B-Instruct", 70.6e9),
    Published("meta-llama/Llama-3.1-405B", 405e9),
    Published("meta-llama/Llama-3.2-1B", 1.24e9),
    Published("meta-llama/Llama-3.2-3B-Instruct", 3.21e9),
    Published("mistralai/Mixtral-8x7B-v0.1", 46.7e9),
    Published("mistralai/Mixtral-8x22B-v0.1", 141e9),
    # parameter_count is 705B: it counts all 61 layers as MoE (the first 3 are dense,
    # ~33B fewer) and MLA as plain multi-head attention (~1B more), 5% over in all.
    Published("deepseek-ai/DeepSeek-V3", 671e9, rel=0.06),
]


@pytest.mark.parametrize("row", [pytest.param(r, id=r.model_id) for r in PUBLISHED])
def test_parameter_count_matches_the_published_total(row: Published) -> None:
    count = parameter_count(shape_of(row.model_id))
    assert count == pytest.approx(row.params, rel=row.rel)


class Shape(NamedTuple):
    """Values that are easy to get wrong, as ModelShape holds them."""

    model_id: str
    head_dim: int
    tie_word_embeddings: bool
    max_seq_len: int
    vocab_size: int


SHAPES = [
    # the small Qwen2.5 models tie their embeddings; the Instruct models state 32K
    Shape("Qwen/Qwen2.5-0.5B", 64, True, 32768, 151936),
    Shape("Qwen/Qwen2.5-1.5B", 128, True, 131072, 151936),
    Shape("Qwen/Qwen2.5-1.5B-Instruct", 128, True, 32768, 151936),
    Shape("Qwen/Qwen2.5-3B", 128, True, 32768, 151936),
    Shape("Qwen/Qwen2.5-7B", 128, False, 131072, 152064),
    Shape("Qwen/Qwen2.5-7B-Instruct", 128, False, 32768, 152064),
    # Qwen2 and the 1.5B derivatives: Math states 4K positions, the R1 distill unties
    Shape("Qwen/Qwen2-1.5B-Instruct", 128, True, 32768, 151936),
    Shape("Qwen/Qwen2.5-Math-1.5B", 128, True, 4096, 151936),
    Shape("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 128, False, 131072, 151936),
    # a vision-language model: its language model, with the VL release's 128000 positions
    Shape("Qwen/Qwen2.5-VL-3B-Instruct", 128, True, 128000, 151936),
    # Qwen3 states head_dim 128 (0.6B: hidden_size / heads would be 64)
    Shape("Qwen/Qwen3-0.6B", 128, True, 40960, 151936),
    Shape("Qwen/Qwen3-0.6B-Base", 128, True, 32768, 151936),
    Shape("Qwen/Qwen3-4B", 128, True, 40960, 151936),
    Shape("Qwen/Qwen3-8B", 128, False, 40960, 151936),
    Shape("Qwen/Qwen3-8B-Base", 128, False, 32768, 151936),
    Shape("Qwen/Qwen3-1.7B-FP8", 128, True, 40960, 151936),
    Shape("Qwen/Qwen3-30B-A3B-Base", 128, False, 32768, 151936),
    # Qwen3.5/3.6 state head_dim 256 (2048 / 16 heads would be 128) and a new vocabulary
    Shape("Qwen/Qwen3.5-35B-A3B", 256, False, 262144, 248320),
    Shape("Qwen/Qwen3.6-35B-A3B", 256, False, 262144, 248320),
    Shape("Qwen/Qwen3-Coder-30B-A3B-Instruct", 128, False, 262144, 151936),
    # Llama 3 has 8K positions, 3.1 128K; 3.2 ties and states head_dim 64 for 1B
    Shape("meta-llama/Meta-Llama-3-8B", 128, False, 8192, 128256),
    Shape("meta-llama/Llama-3.1-8B", 128, False, 131072, 128256),
    Shape("meta-llama/Llama-3.2-1B", 64, True, 131072, 128256),
    Shape("meta-llama/Llama-3.2-3B", 128, True, 131072, 128256),
    Shape("mistralai/Mixtral-8x22B-Instruct-v0.1", 128, False, 65536, 32768),
    Shape("deepseek-ai/DeepSeek-R1", 56, False, 163840, 129280),
]


@pytest.mark.parametrize("row", [pytest.param(r, id=r.model_id) for r in SHAPES])
def test_values_that_are_easy_to_get_wrong(row: Shape) -> None:
    shape = shape_of(row.model_id)
    got = (shape.head_dim, shape.tie_word_embeddings, shape.max_seq_len, shape.vocab_size)
    assert got == (row.head_dim, row.tie_word_embeddings, row.max_seq_len, row.vocab_size)


def test_moe_shapes() -> None:
    deepseek = shape_of("deepseek-ai/DeepSeek-V3")
    assert (deepseek.num_experts, deepseek.moe_router_topk) == (256, 8)
    # n_shared_experts (1) * moe_intermediate_size (2048)
    assert deepseek.moe_shared_expert_ffn_hidden_size == 2048
    mixtral = shape_of("mistralai/Mixtral-8x7B-Instruct-v0.1")
    assert (mixtral.num_experts, mixtral.moe_router_topk) == (8, 2)
    assert mixtral.moe_ffn_hidden_size == mixtral.ffn_hidden_size == 14336
    qwen = shape_of("Qwen/Qwen3-30B-A3B")
    assert (qwen.num_experts, qwen.moe_router_topk, qwen.moe_ffn_hidden_size) == (128, 8, 768)
    assert qwen.moe_shared_expert_ffn_hidden_size == 0
    hybrid = shape_of("Qwen/Qwen3.5-35B-A3B")
    assert (hybrid.num_experts, hybrid.moe_router_topk, hybrid.moe_ffn_hidden_size) == (256, 8, 512)
    assert hybrid.moe_shared_expert_ffn_hidden_size == 512
    assert (hybrid.num_layers, hybrid.num_kv_heads) == (40, 2)


class SameNetwork(NamedTuple):
    """An entry that is another entry's network, and the keys in which the two differ."""

    model_id: str
    sibling: str
    differ: frozenset[str] = frozenset()


SAME_NETWORK = [
    SameNetwork("Qwen/Qwen2-1.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct"),
    SameNetwork("Qwen/Qwen2.5-Math-1.5B", "Qwen/Qwen2.5-1.5B", frozenset({"max_seq_len"})),
    SameNetwork(
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
        "Qwen/Qwen2.5-Math-1.5B",
        frozenset({"max_seq_len", "tie_word_embeddings"}),
    ),
    # the language model of Qwen2.5-VL-3B is Qwen2.5-3B's network
    SameNetwork("Qwen/Qwen2.5-VL-3B-Instruct", "Qwen/Qwen2.5-3B", frozenset({"max_seq_len"})),
    # an FP8 release keeps the bf16 model's config.json
    SameNetwork("Qwen/Qwen3-1.7B-FP8", "Qwen/Qwen3-1.7B"),
    SameNetwork("Qwen/Qwen3-30B-A3B-Base", "Qwen/Qwen3-30B-A3B", frozenset({"max_seq_len"})),
    SameNetwork("Qwen/Qwen3.6-35B-A3B", "Qwen/Qwen3.5-35B-A3B"),
]


@pytest.mark.parametrize("row", [pytest.param(r, id=r.model_id) for r in SAME_NETWORK])
def test_a_variant_has_its_siblings_network(row: SameNetwork) -> None:
    entry, sibling = KNOWN_MODELS[row.model_id], KNOWN_MODELS[row.sibling]
    differ = {key for key in {*entry, *sibling} if entry.get(key) != sibling.get(key)}
    assert differ == row.differ


def test_instruct_variants_share_the_base_shape() -> None:
    """Apart from the context length they state, a base model and its Instruct model
    are the same network."""
    pairs = 0
    for model_id in ALL_IDS:
        base = model_id.removesuffix("-Instruct")
        if base == model_id or base not in KNOWN_MODELS:
            continue
        pairs += 1
        drop = {"max_seq_len", "vocab_size"}  # Mixtral-8x22B-Instruct has a new vocabulary
        instruct = {k: v for k, v in KNOWN_MODELS[model_id].items() if k not in drop}
        assert instruct == {k: v for k, v in KNOWN_MODELS[base].items() if k not in drop}
    assert pairs >= 15


def test_the_required_families_are_present() -> None:
    for model_id in (
        *(
            f"Qwen/Qwen2.5-{s}{k}"
            for s in ("0.5B", "1.5B", "3B", "7B", "14B", "32B", "72B")
            for k in ("", "-Instruct")
        ),
        *(f"Qwen/Qwen3-{s}" for s in ("0.6B", "1.7B", "4B", "8B", "14B", "32B")),
        "Qwen/Qwen3-30B-A3B",
        "Qwen/Qwen3-235B-A22B",
        *(f"meta-llama/Llama-3.1-{s}{k}" for s in ("8B", "70B", "405B") for k in ("", "-Instruct")),
        *(f"meta-llama/Llama-3.2-{s}{k}" for s in ("1B", "3B") for k in ("", "-Instruct")),
        "meta-llama/Llama-3.3-70B-Instruct",
        *(f"meta-llama/Meta-Llama-3-{s}{k}" for s in ("8B", "70B") for k in ("", "-Instruct")),
        "deepseek-ai/DeepSeek-V3",
        "deepseek-ai/DeepSeek-V3-Base",
        "deepseek-ai/DeepSeek-R1",
        "mistralai/Mixtral-8x7B-v0.1",
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "mistralai/Mixtral-8x22B-v0.1",
        "mistralai/Mixtral-8x22B-Instruct-v0.1",
    ):
        assert model_id in KNOWN_MODELS, model_id


# -- the models AReaL's example configs name ----------------------------------------------

FIXTURES = FIXTURES / "areal2"
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")

#: Hub models that AReaL's example configs name in a model path and the table leaves out.
NOT_KNOWN = {
    "Qwen/Qwen3.6-27B": "a dense hybrid: its Gated DeltaNet projections, a tenth of the "
    "model, are not expressible, so parameter_count is 24.4B against 27B",
    "Qwen/Qwen3.5-2B": "no source states whether it ties its embeddings (a quarter of "
    "its parameters), and a dense hybrid like Qwen3.6-27B",
    "Qwen/Qwen2-VL-7B": "no copy of the base model's own config.json was found (only of "
    "Qwen2-VL-7B-Instruct's)",
    "Qwen/Qwen3-VL-2B-Instruct": "one copy of its config.json was found, no second source",
}


def model_paths(node: Any, in_dataset: bool = False) -> Iterator[str]:
    """The ``path`` values of a parsed config outside its dataset sections."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "path" and isinstance(value, str):
                if not in_dataset:
                    yield value
            else:
                yield from model_paths(value, in_dataset or str(key).endswith("dataset"))
    elif isinstance(node, list):
        for item in node:
            yield from model_paths(item, in_dataset)


FIXTURE_MODEL_IDS = sorted(
    {
        path
        for file in FIXTURES.rglob("*.yaml")
        for path in model_paths(yaml.safe_load(file.read_text()))
        if HUB_ID.fullmatch(path)
    }
)


def test_the_fixture_model_ids_are_the_model_paths() -> None:
    """actor, teacher and teacher.train paths are found; interpolations, local paths and
    datasets are not."""
    assert {
        "Qwen/Qwen3.5-35B-A3B",  # actor.path
        "Qwen/Qwen3-1.7B-FP8",
        "Qwen/Qwen2.5-14B-Instruct",  # teacher.path, teacher.train.path
    } <= set(FIXTURE_MODEL_IDS)
    assert not {"openai/gsm8k", "hiyouga/geometry3k", "tau2/train"} & set(FIXTURE_MODEL_IDS)
    assert not [i for i in FIXTURE_MODEL_IDS if i.startswith(("/", "$"))]


@pytest.mark.parametrize("model_id", FIXTURE_MODEL_IDS)
def test_every_model_of_areals_examples_is_known_or_listed(model_id: str) -> None:
    assert model_id in KNOWN_MODELS or model_id in NOT_KNOWN, model_id


@pytest.mark.parametrize("model_id", sorted(NOT_KNOWN))
def test_models_left_out_are_not_in_the_table(model_id: str) -> None:
    assert known_model(model_id) is None


# -- lookup ------------------------------------------------------------------------------


def test_lookup_is_exact_then_case_insensitive() -> None:
    assert known_model("Qwen/Qwen3-8B") == dict(KNOWN_MODELS["Qwen/Qwen3-8B"])
    assert known_model("qwen/qwen3-8b") == dict(KNOWN_MODELS["Qwen/Qwen3-8B"])
    assert known_model("QWEN/QWEN2.5-7B-INSTRUCT") == dict(KNOWN_MODELS["Qwen/Qwen2.5-7B-Instruct"])
    assert known_model("meta-llama/llama-3.1-8b") == dict(KNOWN_MODELS["meta-llama/Llama-3.1-8B"])


@pytest.mark.parametrize(
    "model_id",
    [
        "Qwen3-8B",  # no organization
        "Qwen/Qwen3-8B-Instruct",  # no such model
        "Qwen/Qwen3-8",
        " Qwen/Qwen3-8B",
        "Qwen/Qwen3-8B ",
        "Qwen/Qwen3_8B",
        "Qwen/Qwen3-8B/",
        "unsloth/Qwen3-8B",  # a re-upload is not the original
        "",
    ],
)
def test_lookup_does_not_guess(model_id: str) -> None:
    assert known_model(model_id) is None


def test_lookup_returns_copies() -> None:
    first = known_model("Qwen/Qwen3-8B")
    assert first is not None
    first["num_layers"] = 1
    first["made_up"] = 2
    del first["hidden_size"]
    again = known_model("qwen/QWEN3-8B")
    assert again is not None and again is not first
    assert again["num_layers"] == 36 and again["hidden_size"] == 4096 and "made_up" not in again
    assert KNOWN_MODELS["Qwen/Qwen3-8B"]["num_layers"] == 36


def test_table_entries_are_read_only() -> None:
    entry = KNOWN_MODELS["Qwen/Qwen3-8B"]
    with pytest.raises(TypeError):
        entry["num_layers"] = 1  # type: ignore[index]


def test_known_model_ids_are_sorted_and_complete() -> None:
    ids = known_model_ids()
    assert ids == sorted(ids) == sorted(KNOWN_MODELS)
    ids.clear()
    assert known_model_ids()  # a fresh list each time


# -- the Hugging Face cache --------------------------------------------------------------


def snapshot(
    root: Path,
    model_id: str,
    commit: str,
    *,
    config: bool = True,
    mtime: float | None = None,
) -> Path:
    """A snapshot directory of ``model_id`` in the hub cache ``root``; its config.json
    path (which exists only when ``config``)."""
    directory = root / ("models--" + model_id.replace("/", "--")) / "snapshots" / commit
    directory.mkdir(parents=True)
    path = directory / "config.json"
    if config:
        path.write_text(json.dumps({"num_hidden_layers": 2}))
    if mtime is not None:
        os.utime(directory, (mtime, mtime))
    return path


def point_main(root: Path, model_id: str, commit: str) -> None:
    refs = root / ("models--" + model_id.replace("/", "--")) / "refs"
    refs.mkdir(parents=True, exist_ok=True)
    (refs / "main").write_text(commit + "\n")


def test_refs_main_names_the_snapshot(tmp_path: Path) -> None:
    main = snapshot(tmp_path, "Qwen/Qwen3-8B", "a" * 40, mtime=1_000)
    snapshot(tmp_path, "Qwen/Qwen3-8B", "b" * 40, mtime=2_000)  # newer, but not main
    point_main(tmp_path, "Qwen/Qwen3-8B", "a" * 40)
    assert cached_config_json("Qwen/Qwen3-8B", {"HF_HUB_CACHE": str(tmp_path)}) == str(main)


def test_main_without_a_config_falls_back_to_the_newest_snapshot(tmp_path: Path) -> None:
    snapshot(tmp_path, "Qwen/Qwen3-8B", "a" * 40, config=False, mtime=3_000)
    newest = snapshot(tmp_path, "Qwen/Qwen3-8B", "b" * 40, mtime=2_000)
    snapshot(tmp_path, "Qwen/Qwen3-8B", "c" * 40, mtime=1_000)
    point_main(tmp_path, "Qwen/Qwen3-8B", "a" * 40)
    assert cached_config_json("Qwen/Qwen3-8B", {"HF_HUB_CACHE": str(tmp_path)}) == str(newest)


@pytest.mark.parametrize(("older", "newer"), [("a", "b"), ("b", "a")])
def test_without_refs_the_most_recently_modified_snapshot_wins(
    tmp_path: Path, older: str, newer: str
) -> None:
    snapshot(tmp_path, "org/model", older * 40, mtime=1_000)
    wanted = snapshot(tmp_path, "org/model", newer * 40, mtime=2_000)
    assert cached_config_json("org/model", {"HF_HUB_CACHE": str(tmp_path)}) == str(wanted)


def test_refs_main_naming_a_missing_snapshot_falls_back(tmp_path: Path) -> None:
    only = snapshot(tmp_path, "org/model", "b" * 40)
    point_main(tmp_path, "org/model", "f" * 40)
    assert cached_config_json("org/model", {"HF_HUB_CACHE": str(tmp_path)}) == str(only)


def test_refs_main_cannot_leave_the_snapshots(tmp_path: Path) -> None:
    (tmp_path / "models--org--model" / "elsewhere").mkdir(parents=True)
    (tmp_path / "models--org--model" / "elsewhere" / "config.json").write_text("{}")
    (tmp_path / "models--org--model" / "snapshots").mkdir()
    point_main(tmp_path, "org/model", "../elsewhere")
    assert cached_config_json("org/model", {"HF_HUB_CACHE": str(tmp_path)}) is None


def test_snapshots_without_a_config_give_none(tmp_path: Path) -> None:
    snapshot(tmp_path, "org/model", "a" * 40, config=False)
    point_main(tmp_path, "org/model", "a" * 40)
    (tmp_path / "models--org--model" / "snapshots" / "stray-file").write_text("")
    assert cached_config_json("org/model", {"HF_HUB_CACHE": str(tmp_path)}) is None


def test_a_dangling_config_symlink_is_skipped(tmp_path: Path) -> None:
    """The hub stores config.json as a symlink into blobs/; a deleted blob leaves it
    dangling."""
    good = snapshot(tmp_path, "org/model", "a" * 40, mtime=1_000)
    broken = snapshot(tmp_path, "org/model", "b" * 40, config=False, mtime=2_000)
    broken.symlink_to(tmp_path / "blobs" / "gone")
    assert cached_config_json("org/model", {"HF_HUB_CACHE": str(tmp_path)}) == str(good)


def test_the_id_is_matched_exactly(tmp_path: Path) -> None:
    snapshot(tmp_path, "Qwen/Qwen3-8B", "a" * 40)
    env = {"HF_HUB_CACHE": str(tmp_path)}
    assert cached_config_json("Qwen/Qwen3-14B", env) is None
    assert cached_config_json("Qwen/Qwen3-8B-Base", env) is None


def test_hf_hub_cache_wins_over_hf_home(tmp_path: Path) -> None:
    in_hub_cache = snapshot(tmp_path / "hub-cache", "org/model", "a" * 40)
    in_home = snapshot(tmp_path / "home" / "hub", "org/model", "b" * 40)
    both = {"HF_HUB_CACHE": str(tmp_path / "hub-cache"), "HF_HOME": str(tmp_path / "home")}
    assert cached_config_json("org/model", both) == str(in_hub_cache)
    assert cached_config_json("org/model", {"HF_HOME": str(tmp_path / "home")}) == str(in_home)
    # an empty variable counts as unset
    only_home = {"HF_HUB_CACHE": "", "HF_HOME": str(tmp_path / "home")}
    assert cached_config_json("org/model", only_home) == str(in_home)


def test_the_default_cache_is_under_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    wanted = snapshot(tmp_path / ".cache" / "huggingface" / "hub", "org/model", "a" * 40)
    assert hub_cache_dir({}) == str(tmp_path / ".cache" / "huggingface" / "hub")
    assert cached_config_json("org/model", {}) == str(wanted)


def test_tilde_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    in_cache = snapshot(tmp_path / "hubcache", "org/model", "a" * 40)
    in_home = snapshot(tmp_path / "hfhome" / "hub", "org/model", "b" * 40)
    assert cached_config_json("org/model", {"HF_HUB_CACHE": "~/hubcache"}) == str(in_cache)
    assert cached_config_json("org/model", {"HF_HOME": "~/hfhome"}) == str(in_home)


def test_the_environment_defaults_to_os_environ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wanted = snapshot(tmp_path, "org/model", "a" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert cached_config_json("org/model") == str(wanted)


@pytest.mark.parametrize(
    "model_id",
    [
        "model",
        "org/name/extra",
        "/org/model",
        "org/model/",
        "org/",
        "/model",
        "//",
        "",
        "./model",
        "../model",
        ".org/model",
        "org/.model",
        "org/..",
        "org\\x/model",
        " org/model",
    ],
)
def test_an_id_that_is_not_org_slash_name_gives_none(tmp_path: Path, model_id: str) -> None:
    snapshot(tmp_path, "org/model", "a" * 40)
    assert cached_config_json(model_id, {"HF_HUB_CACHE": str(tmp_path)}) is None


def test_a_missing_or_unusable_cache_gives_none(tmp_path: Path) -> None:
    assert cached_config_json("org/model", {"HF_HUB_CACHE": str(tmp_path / "nowhere")}) is None
    (tmp_path / "a-file").write_text("")
    assert cached_config_json("org/model", {"HF_HUB_CACHE": str(tmp_path / "a-file")}) is None
    (tmp_path / "models--org--model").mkdir()  # a repo folder with no snapshots
    assert cached_config_json("org/model", {"HF_HUB_CACHE": str(tmp_path)}) is None
    assert cached_config_json("org/model", {"HF_HUB_CACHE": "\0bad"}) is None


def test_an_unreadable_refs_main_falls_back(tmp_path: Path) -> None:
    only = snapshot(tmp_path, "org/model", "a" * 40)
    (tmp_path / "models--org--model" / "refs" / "main").mkdir(parents=True)  # not a file
    assert cached_config_json("org/model", {"HF_HUB_CACHE": str(tmp_path)}) == str(only)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads unreadable directories")
def test_an_unreadable_snapshots_directory_gives_none(tmp_path: Path) -> None:
    snapshot(tmp_path, "org/model", "a" * 40)
    snapshots = tmp_path / "models--org--model" / "snapshots"
    snapshots.chmod(0)
    try:
        assert cached_config_json("org/model", {"HF_HUB_CACHE": str(tmp_path)}) is None
    finally:
        snapshots.chmod(0o755)


# -- both, as actor.path reads them -------------------------------------------------------


def test_actor_path_prefers_the_cache_then_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    from_table = read_source("Qwen/Qwen3-8B", "actor.path")
    assert dict(from_table.keys) == known_model("Qwen/Qwen3-8B")
    assert "known models" in from_table.described

    config = snapshot(tmp_path, "Qwen/Qwen3-8B", "a" * 40)
    config.write_text(json.dumps({"num_hidden_layers": 7, "hidden_size": 64}))
    from_cache = read_source("Qwen/Qwen3-8B", "actor.path")
    assert dict(from_cache.keys) == {"num_layers": 7, "hidden_size": 64}
    assert "Hugging Face cache" in from_cache.described

    unknown = read_source("org/unknown-model", "actor.path")
    assert not unknown.keys and unknown.missing
