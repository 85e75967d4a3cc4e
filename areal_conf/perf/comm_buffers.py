"""The buffers of the NCCL communicators of one GPU of a layout: :func:`comm_buffer_bytes`.

Per communicator ``channels × (LL + LL128 + SIMPLE buffer)`` with NCCL's defaults (NCCL
2.27, ``src/init.cc:618-631``): LL ``8 lines × 512 threads × 8 steps × 16 B`` = 512 KiB,
LL128 ``120 × 640 threads × 8 steps × 8 B`` = 4.69 MiB, SIMPLE ``NCCL_BUFFSIZE`` = 4 MiB,
so 9.63 MB per channel (a ring connection: a rank receives from one peer per channel),
and :data:`NCCL_CHANNELS` = 16 channels (NCCL's choice on an 8-GPU H800 node,
NVIDIA/nccl#892: "16 coll channels"). A communicator is a process group of more than one
rank that the layout's collectives use (:func:`communicators`).
"""

from __future__ import annotations

from typing import Final

from areal_conf.spec.allocation import ModelAllocation

#: NCCL's buffers per channel of one communicator with its default sizes (NCCL 2.27,
#: src/init.cc:618-631, src/include/device.h): LL, LL128 and SIMPLE (NCCL_BUFFSIZE).
NCCL_BUFFERS_PER_CHANNEL: Final = (8 * 512 * 8 * 16) + (120 * 640 * 8 * 8) + (1 << 22)
#: Channels per communicator (NCCL on an 8-GPU H800 node, NVIDIA/nccl#892).
NCCL_CHANNELS: Final = 16


def communicators(allocation: ModelAllocation, moe: bool = False) -> int:
    """The NCCL communicators one rank of ``allocation`` belongs to: one per process group
    of more than one rank that its collectives use, a group with the same ranks as
    another counted once.

    Training: tensor (t), context (c) and pipeline (p) parallel groups, the data-parallel
    group of gradient reduction (d×c), the world (the default group); a MoE model
    (``moe``) adds the expert all-to-all group (ep > 1) and the expert data-parallel group
    when it is not the d×c group (ep > 1 or etp ≠ tp). Inference, per server instance:
    its t and p groups and the instance's world.
    """
    p = allocation.parallel
    sizes = {"d": p.dp_size, "c": p.cp_size, "t": p.tp_size, "p": p.pp_size}
    if allocation.is_inference:
        groups: tuple[str, ...] = ("t", "p", "tp")
    else:
        groups = ("t", "c", "p", "dc", "dctp")
    distinct = {frozenset(d for d in group if sizes[d] > 1) for group in groups} - {frozenset()}
    count = len(distinct)
    if moe and not allocation.is_inference:
        count += p.ep_size > 1
        count += p.edp_size > 1 and (p.ep_size > 1 or p.etp_size != p.tp_size)
    return count


def comm_buffer_bytes(allocation: ModelAllocation, moe: bool = False) -> float:
    """NCCL's buffers on one GPU of ``allocation``: :func:`communicators` ×
    :data:`NCCL_CHANNELS` × :data:`NCCL_BUFFERS_PER_CHANNEL`."""
    return float(communicators(allocation, moe) * NCCL_CHANNELS * NCCL_BUFFERS_PER_CHANNEL)
