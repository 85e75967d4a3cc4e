"""The RL step (``areal_conf.rl_throughput``) against published RL training runs, beside
a textbook baseline. Every row is held out: no constant of areal-conf was set from them.

The rows are ``benchmarks/heldout/rl_throughput.csv`` (sources and caveats in
``rl_throughput.md`` beside it): AReaL's paper, blog and README (H800), verl's
fully-async and one-step-off pages (H20) and NeMo RL's performance summary (H100). Each
row becomes an AReaL 2.0 config with the run's model, GPUs, layout, batch and mode, as
published; what is not published is filled by the rules in :func:`config_of`, and a row
whose layout or model areal-conf cannot express is listed with the reason and left out.

Compared per row: the step's seconds (rows published as tokens a second are turned into
seconds with the predicted tokens of a step, so the comparison is of throughput; rows in
hours over a number of steps, into seconds a step). Per source: the median and worst
ratio of predicted to measured seconds, and the Spearman correlation of the two over
the source's rows, for the model and the baseline.

The textbook baseline (:func:`textbook_seconds`) is a roofline: training 8·N FLOPs a
trained token (6 for the update, 2 for the log-probability pass) at the GPU's sustained
rate on the training GPUs; generation the longer of 2·N FLOPs a generated token at that
rate on the rollout GPUs and one read of an instance's weights from HBM a decode step,
every sequence of the batch decoded at once (a synchronous batch also waits for its
longest response); the weights once over the network to update the servers; the step the
longer of generation and training when asynchronous, their sum otherwise.

    python benchmarks/rl_throughput.py
"""

from __future__ import annotations

import csv
import math
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _perf_tables import active_parameters, spearman

from areal_conf import AllocationError, Settings, rl_throughput
from areal_conf.model.hardware import HARDWARE, Hardware
from areal_conf.model.known_models import known_model
from areal_conf.model.shape import ModelShape, model_shape
from areal_conf.perf.parameters import parameter_count
from areal_conf.spec.allocation import ModelAllocation

ROWS = Path(__file__).resolve().parent / "heldout" / "rl_throughput.csv"

#: The models of the rows as areal-conf's table of known models names them (the
#: DeepSeek-R1 distillations have their Qwen2.5 base's shape).
MODELS = {
    "DeepSeek-R1-Distill-Qwen-1.5B": "Qwen/Qwen2.5-1.5B",
    "DeepSeek-R1-Distill-Qwen-7B": "Qwen/Qwen2.5-7B",
    "DeepSeek-R1-Distill-Qwen-14B": "Qwen/Qwen2.5-14B",
    "DeepSeek-R1-Distill-Qwen-32B": "Qwen/Qwen2.5-32B",
    "Qwen2.5-Math-7B": "Qwen/Qwen2.5-7B",
    "Qwen2.5-7B-Instruct": "Qwen/Qwen2.5-7B-Instruct",
    "Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B-Instruct",
    "Qwen3-32B": "Qwen/Qwen3-32B",
}
#: Steps of the runs published in hours: AReaL's paper lists 250 PPO steps (Table 1);
#: its blog counts the same runs as 1,000 (four minibatches a step).
STEPS_IN_HOURS = 250


@dataclass
class Case:
    row: dict[str, str]
    cfg: dict[str, Any]
    settings: Settings
    measured_s: float | None  # None: published as tokens a second (see measured_from)
    gpu: Hardware
    shape: ModelShape
    rollout_gpus: int
    train_gpus: int
    mode: str


def _gpu(row: dict[str, str]) -> str:
    text = row["gpu_type"].lower()
    for name in ("h800", "h100", "h20"):
        if text.startswith(name):
            return name
    raise ValueError(f"GPU {row['gpu_type']!r} is not one areal-conf knows")


def _model(row: dict[str, str]) -> str:
    for published, known in MODELS.items():
        if row["model"].startswith(published):
            return known
    raise ValueError(f"model {row['model']!r} is not in areal-conf's table")


def _mode(row: dict[str, str]) -> tuple[str, int]:
    """``separated``/``colocated`` and the staleness bound (0: synchronous)."""
    mode = row["mode"].lower()
    if mode.startswith("sync colocated"):
        return "colocated", 0
    staleness = float(row["max_staleness"].split()[0] or 0)
    return "separated", 0 if staleness == 0 else max(1, math.ceil(staleness))


def _layouts(row: dict[str, str], rollout_gpus: int, train_gpus: int, big: bool) -> tuple[str, str]:
    """The rollout's and the trainer's backend strings: as published (AReaL v0.3's
    ``sglang.d24p1m1``/``d4m1p2``, m being tensor parallel; verl's ``vLLM TP4`` and
    ``FSDP2 ... SP 4``, SP being Ulysses sequence parallel, AReaL's FSDP context parallel;
    NeMo RL's ``[TP,CP,EP,PP,...]``). Without one: tensor parallel 1 (8 from 14B on) for
    the rollout, FSDP over every training GPU."""
    r, t = row["rollout_layout"], row["train_layout"]
    engine = "vllm" if "vllm" in (row["rollout_engine"] + r).lower() else "sglang"
    rollout = train = ""
    if m := re.fullmatch(r"sglang\.(.*)", r):
        dims = dict(re.findall(r"([dpm])(\d+)", m.group(1)))
        tp = int(dims.get("m", 1))
        rollout = f"sglang:d{rollout_gpus // tp}" + (f"t{tp}" if tp > 1 else "")
    elif m := re.search(r"TP(\d+)", r) or re.search(r"\[TP,PP\]=\[(\d+),1\]", r):
        tp = int(m.group(1))
        rollout = f"{engine}:d{rollout_gpus // tp}" + (f"t{tp}" if tp > 1 else "")
    elif not r:
        tp = 8 if big else 1
        rollout = f"{engine}:d{rollout_gpus // tp}" + (f"t{tp}" if tp > 1 else "")
    if m := re.fullmatch(r"(d\d+)?(m\d+|p\d+)+", t.replace("d", "d", 1)) if t else None:
        dims = {k: int(v) for k, v in re.findall(r"([dpm])(\d+)", t)}
        tp, pp = dims.get("m", 1), dims.get("p", 1)
        train = f"megatron:d{train_gpus // (tp * pp)}" + (f"p{pp}" if pp > 1 else "")
        train += f"t{tp}" if tp > 1 else ""
    elif m := re.search(r"fsdp_size (\d+).*SP (\d+)", t):
        sp = int(m.group(2))
        train = f"fsdp:d{train_gpus // sp}c{sp}"
    elif m := re.search(r"Megatron TP(\d+) PP(\d+)$", t):
        tp, pp = int(m.group(1)), int(m.group(2))
        train = f"megatron:d{train_gpus // (tp * pp)}p{pp}t{tp}"
    elif m := re.search(r"\[TP,CP,EP,PP,VPP\]=\[(\d+),(\d+),(\d+),(\d+)", t):
        tp, cp, ep, pp = (int(x) for x in m.groups())
        if ep > 1:
            raise ValueError("an expert-parallel layout (not translated)")
        train = f"megatron:d{train_gpus // (tp * cp * pp)}p{pp}t{tp}c{cp}"
    elif not t:
        train = f"fsdp:d{train_gpus}"
    if not rollout or not train:
        raise ValueError(f"layout {r!r} / {t!r} not translated")
    return rollout, train


def config_of(row: dict[str, str]) -> Case:
    """The AReaL 2.0 config of a published run (see the module docstring)."""
    gpu_name = _gpu(row)
    model = _model(row)
    shape = model_shape(known_model(model) or {})
    assert isinstance(shape, ModelShape), model
    total = int(row["num_gpus"])
    placement, staleness = _mode(row)
    if placement == "colocated":
        rollout_gpus = train_gpus = total
    elif row["rollout_gpus"]:
        rollout_gpus, train_gpus = int(row["rollout_gpus"]), int(row["train_gpus"])
    else:  # AReaL's benchmarks give 3/4 of the GPUs to SGLang
        rollout_gpus, train_gpus = total * 3 // 4, total // 4
    big = parameter_count(shape) > 12e9
    rollout, train = _layouts(row, rollout_gpus, train_gpus, big)
    if not row["batch_prompts"] or not row["samples_per_prompt"]:
        raise ValueError("batch not published")
    max_new = int(re.match(r"[<=\s]*(\d+)", row["max_new_tokens"]).group(1))  # type: ignore[union-attr]
    per_node = 8
    nodes = max(
        1, math.ceil((total if placement == "colocated" else rollout_gpus + train_gpus) / per_node)
    )
    batch = int(row["batch_prompts"])
    aligned = placement == "colocated" or (rollout_gpus % per_node == train_gpus % per_node == 0)
    scheduler = "local" if nodes == 1 else "slurm" if aligned else "ray"
    cfg: dict[str, Any] = {
        "cluster": {"n_nodes": nodes, "n_gpus_per_node": per_node},
        # AReaL's Slurm scheduler takes whole nodes; one node is the local scheduler's,
        # and a split inside a node (4 + 12 GPUs) Ray's
        "scheduler": {"type": scheduler},
        "rollout": {
            "backend": rollout,
            "max_head_offpolicyness": staleness,
            "consumer_batch_size": batch,
            "max_concurrent_rollouts": batch * max(1, staleness),
        },
        "actor": {
            "backend": train,
            "gradient_checkpointing": True,
            "recompute_logprob": True,
            "use_decoupled_loss": True,
            "ppo_n_minibatches": 4,
        },
        "train_dataset": {"batch_size": batch},
        "gconfig": {"n_samples": int(row["samples_per_prompt"]), "max_new_tokens": max_new},
    }
    if row["max_prompt_len"]:
        cfg["train_dataset"]["max_length"] = int(row["max_prompt_len"])
    if placement == "colocated":
        cfg["rollout"]["scheduling_strategy"] = {"type": "colocation", "target": "actor"}
        cfg["actor"]["weight_update_mode"] = "disk"
        cfg["enable_offload"] = True
    mean = row["mean_len_tokens"]
    settings = Settings(
        areal_version="2.0",
        gpu=gpu_name,
        model={"hf_config": model},
        mean_response_tokens=int(mean) if mean else None,
        # The runs happened, so they fit: what is scored here is time, not areal-conf's
        # memory estimate (a model of its own, with its own tests)
        gpu_memory_gb=10_000.0,
    )
    value = float(row["value"])
    unit = row["unit"].lower()
    measured_s: float | None
    if unit.startswith("token"):
        measured_s = None
    elif unit.startswith("hour"):
        measured_s = value * 3600 / STEPS_IN_HOURS
    else:
        measured_s = value
    mode = (
        "colocated" if placement == "colocated" else "asynchronous" if staleness else "synchronous"
    )
    return Case(
        row, cfg, settings, measured_s, HARDWARE[gpu_name], shape, rollout_gpus, train_gpus, mode
    )


def textbook_seconds(case: Case, tokens: float, generated: float, sequences: int) -> float:
    """The roofline of the module docstring, on the predicted tokens of a step."""
    gpu, shape = case.gpu, case.shape
    n = parameter_count(shape)
    active = active_parameters(shape)
    rate = gpu.sustained_tflops * 1e12
    train = 8 * active * tokens / (case.train_gpus * rate)
    tp = ModelAllocation.from_str(case.cfg["rollout"]["backend"]).parallel.tp_size
    weight_read = 2 * n / tp / (gpu.hbm_tb_per_s * 1e12)
    steps = generated / sequences  # every sequence at once: mean response's steps
    if case.mode != "asynchronous":
        steps = float(case.cfg["gconfig"]["max_new_tokens"])  # the batch waits for its longest
    generate = max(2 * active * generated / (case.rollout_gpus * rate), steps * weight_read)
    update = 2 * n / (gpu.inter_node_gb_per_s * 1e9)
    if case.mode == "asynchronous":
        return max(generate, train) + update
    return generate + train + update


def main() -> None:
    rows = list(csv.DictReader(ROWS.open(encoding="utf-8")))
    by_source: dict[str, list[tuple[str, float, float, float]]] = defaultdict(list)
    skipped: dict[str, list[str]] = defaultdict(list)
    print(
        f"{'row':>4} {'src':>3} {'mode':<12} {'rollout':<16} {'actor':<20} "
        f"{'measured s':>10} {'model s':>9} {'base s':>9}  bound"
    )
    for row in rows:
        try:
            case = config_of(row)
            step = rl_throughput(case.cfg, settings=case.settings)
        except (ValueError, AllocationError) as err:
            reason = str(err).splitlines()[0]
            skipped[row["source_id"]].append(f"row {row['row_id']}: {reason[:110]}")
            continue
        sequences = int(row["batch_prompts"]) * int(row["samples_per_prompt"])
        base = textbook_seconds(case, step.tokens_per_step, step.generated_tokens, sequences)
        measured = case.measured_s
        if measured is None:  # tokens a second: the predicted step's tokens at that rate
            measured = step.tokens_per_step / float(row["value"])
        by_source[row["source_id"]].append((row["row_id"], measured, step.step_seconds, base))
        print(
            f"{row['row_id']:>4} {row['source_id']:>3} {case.mode:<12} "
            f"{case.cfg['rollout']['backend']:<16} {case.cfg['actor']['backend']:<20} "
            f"{measured:>10.1f} {step.step_seconds:>9.1f} {base:>9.1f}  {step.bound}"
        )
    print()
    print(
        "per source: predicted / measured seconds a step (1 is exact), median and worst "
        "by |log|; Spearman of predicted against measured over the source's rows"
    )
    print(
        f"{'source':<7}{'rows':>5}  {'model median':>12} {'worst':>7} {'rho':>6}   "
        f"{'base median':>11} {'worst':>7} {'rho':>6}"
    )
    for source in sorted(by_source):
        found = by_source[source]
        model_ratios = [p / m for _, m, p, _ in found]
        base_ratios = [b / m for _, m, _, b in found]

        def worst(ratios: list[float]) -> float:
            return max(ratios, key=lambda r: abs(math.log(r)))

        def median(ratios: list[float]) -> float:
            return math.exp(statistics.median(math.log(r) for r in ratios))

        rho_model = (
            spearman([p for _, _, p, _ in found], [m for _, m, _, _ in found])
            if len(found) > 2
            else float("nan")
        )
        rho_base = (
            spearman([b for _, _, _, b in found], [m for _, m, _, _ in found])
            if len(found) > 2
            else float("nan")
        )
        print(
            f"{source:<7}{len(found):>5}  {median(model_ratios):>12.2f} "
            f"{worst(model_ratios):>7.2f} {rho_model:>6.2f}   "
            f"{median(base_ratios):>11.2f} {worst(base_ratios):>7.2f} {rho_base:>6.2f}"
        )
    print()
    for source in sorted(skipped):
        print(f"{source}: {len(skipped[source])} rows left out")
        for line in skipped[source][:4]:
            print(f"  {line}")
        if len(skipped[source]) > 4:
            print(f"  ... ({len(skipped[source]) - 4} more)")


if __name__ == "__main__":
    main()
