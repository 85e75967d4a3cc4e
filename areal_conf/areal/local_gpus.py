"""How many GPUs a node has for the plan, and where that number comes from.

Slurm's and Ray's schedulers take ``cluster.n_gpus_per_node`` from the config. AReaL's
local scheduler does not read it: it counts the GPUs of the machine it runs on. AReaL
2.0 (commit cbff54d64) builds ``LocalScheduler(exp_config=...)``
(areal/trainer/rl_trainer.py:1052-1054), whose ``gpu_devices`` are ``_detect_gpus()``
(areal/infra/scheduler/local.py:116, 188-201):

1. the platform's device variable, ``CUDA_VISIBLE_DEVICES`` on NVIDIA GPUs
   (areal/infra/platforms/cuda.py:20), when it is set and not empty: its comma-separated
   entries, each read by ``int()``. When one is not an integer (a GPU UUID, the empty
   entry after a trailing comma) AReaL logs a warning and takes ``[0]``, one GPU;
2. else ``_get_device_count_safely()`` (local.py:73-90): how many entries of ``/dev``
   are named ``nvidia`` and digits (else ``davinci`` and digits); with none, ``[0]``.

The scheduler's ``n_gpus_per_node`` is ``len(gpu_devices)`` (local.py:184-186); it hands
the GPUs out round robin and refuses a worker asking for more than it has
(local.py:203-218); controller v2 sizes its servers by it
(areal/v2/inference_service/controller/controller.py:104-124).

areal-conf counts the same way, with the environment it runs in: ``check`` and ``run``
start the AReaL command with that same environment, and train.py validates the run it
starts. Where nothing is visible (a laptop, CI) AReaL would take one GPU, but areal-conf
is then not on the machine that will run the command: it takes
``cluster.n_gpus_per_node`` in the machine's place, and the plan says so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

#: The variable AReaL's CUDA platform reads (areal/infra/platforms/cuda.py:20).
CUDA_ENV: Final = "CUDA_VISIBLE_DEVICES"
#: Where AReaL counts the machine's devices (areal/infra/scheduler/local.py:79-85).
DEVICE_DIR: Final = Path("/dev")
#: The device names it counts, in its order: NVIDIA GPUs, then Ascend NPUs.
DEVICE_PREFIXES: Final = ("nvidia", "davinci")
#: The config key that gives the GPUs per node to Slurm, Ray and the plan's other rules.
DECLARED: Final = "cluster.n_gpus_per_node"


@dataclass(frozen=True)
class GpuCount:
    """GPUs per node: ``count``; ``source``, where it came from as the plan says it
    (``CUDA_VISIBLE_DEVICES=0,1,2,3``); ``key``, what a message about it names first
    (the variable, the scheduler for the machine's devices, or the config key)."""

    count: int
    source: str
    key: str

    @property
    def from_config(self) -> bool:
        """The count is ``cluster.n_gpus_per_node``'s."""
        return self.key == DECLARED


def machine_gpus(
    environ: Mapping[str, str] | None = None, device_dir: Path = DEVICE_DIR
) -> GpuCount | None:
    """The GPUs AReaL's local scheduler would have here, counted as it counts them;
    None when none is visible (no ``CUDA_VISIBLE_DEVICES``, no device in ``device_dir``)."""
    env = os.environ if environ is None else environ
    value = env.get(CUDA_ENV, "")
    if value:  # AReaL: "if device_control_env_var and cuda_visible" (local.py:189-190)
        try:
            devices = [int(entry) for entry in value.split(",")]
        except ValueError:  # local.py:193-197: "using default [0]"
            said = f"{CUDA_ENV}={value!r}, which AReaL does not read as GPU indices: it takes GPU 0"
            return GpuCount(1, said, CUDA_ENV)
        return GpuCount(len(devices), f"{CUDA_ENV}={value}", CUDA_ENV)
    found = device_count(device_dir)
    if found is None:
        return None
    prefix, count = found
    return GpuCount(count, f"{device_dir / prefix}* devices", "scheduler.type")


def device_count(device_dir: Path = DEVICE_DIR) -> tuple[str, int] | None:
    """``_get_device_count_safely``: the device name and how many entries of
    ``device_dir`` are that name and digits, NVIDIA's first; None when there are none
    (or the directory cannot be read)."""
    try:
        names = os.listdir(device_dir)
    except OSError:
        return None
    for prefix in DEVICE_PREFIXES:
        devices = [n for n in names if n.startswith(prefix) and n[len(prefix) :].isdigit()]
        if devices:
            return prefix, len(devices)
    return None


def gpus_per_node(declared: int, scheduler: str, machine: GpuCount | None) -> GpuCount:
    """The GPUs per node a plan uses: on the local scheduler the machine's (``machine``,
    else ``declared`` in its place when none is visible here); on Slurm, Ray and
    without a scheduler ``declared`` (``cluster.n_gpus_per_node``), which they read. A
    CPU run (``declared`` 0) has none, whatever the machine has."""
    if scheduler != "local" or declared == 0:
        return GpuCount(declared, DECLARED, DECLARED)
    if machine is None:
        return GpuCount(declared, f"{DECLARED}, no GPU visible here", DECLARED)
    return machine
