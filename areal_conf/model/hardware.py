"""The GPUs areal-conf knows by name, with the numbers of their data sheets.

``HARDWARE`` maps a name (``a100``, ``h100``, ``h800``, ``h20``, ``h200``, ``b200``) to a frozen
:class:`Hardware`; change a number with ``dataclasses.replace(HARDWARE["h100"],
inter_node_gb_per_s=25.0)``. ``--gpu NAME`` (``AREAL_CONF_GPU``) gives areal-conf the
memory of one GPU from here.

Sources (NVIDIA's data sheets; the SXM parts as in DGX/HGX servers):

- A100 SXM4 80 GB: 312 TFLOPS dense BF16, 80 GB HBM2e at 2.039 TB/s, NVLink 3 600 GB/s
  (both directions together, so 300 one way); DGX A100 has one 200 Gb/s HDR InfiniBand
  port per GPU (25 GB/s).
- H100 SXM5: 989 TFLOPS dense BF16, 80 GB HBM3 at 3.35 TB/s, NVLink 4 900 GB/s (450 one
  way); DGX H100 has one 400 Gb/s NDR port per GPU (50 GB/s).
- H800 SXM5: H100's die, compute and memory, its NVLink cut to 400 GB/s (both directions
  together: 200 one way); HGX H800 servers have one 400 Gb/s port per GPU (50 GB/s), as
  DeepSeek-V3's report describes its H800 cluster (NVLink 160 GB/s and InfiniBand 50 GB/s
  a GPU, achieved).
- H20: Hopper cut for export, 148 TFLOPS dense BF16, 96 GB HBM3 at 4.0 TB/s, NVLink 900 GB/s
  (450 one way), 78 streaming multiprocessors; one 400 Gb/s port per GPU as in HGX servers
  (50 GB/s). Its GEMM efficiency is taken as Hopper's.
- H200 SXM: H100's compute and links, 141 GB HBM3e at 4.8 TB/s.
- B200 (HGX B200): 2,250 TFLOPS dense BF16 (4.5 PFLOPS with sparsity), 180 GB HBM3e per
  GPU at 8 TB/s (1.44 TB and 64 TB/s for eight), NVLink 5 1.8 TB/s (900 GB/s one way);
  one 400 Gb/s port per GPU (50 GB/s).
- Dense FP8 tensor throughput (the data sheets, without sparsity): H100, H800 and H200
  1,979 TFLOPS, H20 296, B200 4,500 (its MXFP8 the same); A100 has no FP8 tensor cores.
  A large FP8 GEMM sustains the same share of it as a bf16 one here (a cuBLASLt
  M = N = K = 8192 FP8 GEMM reaches 1,600-1,630 TFLOPS on H100, 81-82%, so this errs
  slow rather than fast).
- Compute capability (NVIDIA's CUDA GPUs table): A100 8.0, H100, H800, H20 and H200 9.0,
  B200 10.0. Transformer Engine runs an FP8 recipe only from a capability on
  (:data:`FP8_RECIPE_CAPABILITY`).
- Host link (PCIe x16, one direction): A100 Gen4, 32 GB/s (its data sheet's 64 GB/s is
  both directions); H100, H800, H200 and B200 Gen5, 64 GB/s (128 both ways).
- Streaming multiprocessors: A100 108, H100 and H200 SXM 132, B200 148 (the
  architecture white papers).
- Peak against sustained: the data sheets' TFLOPS are at the boost clock; a large bf16
  GEMM (cuBLAS, M = N = K = 8192) sustains about 85% of it on A100 (265 of 312 TFLOPS)
  and 75% on Hopper and Blackwell, which do not hold their boost clock under full
  tensor-core load (public GEMM benchmarks, e.g. NVIDIA's cuBLAS and Transformer Engine
  performance pages). ``Hardware.sustained_tflops`` is that rate, the one the step-time
  model computes at; ``peak_tflops`` stays the data sheet's, the one MFU is measured
  against.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Final

from areal_conf.arguments import positive, shown, text, whole
from areal_conf.errors import AllocationError, ConfigError


@dataclass(frozen=True)
class Hardware:
    """One GPU, from its data sheet. ``sm_count`` and ``gemm_efficiency`` serve the
    step-time model of :mod:`areal_conf.perf.step_time`; ``host_gb_per_s`` prices
    offloads."""

    name: str
    #: Dense BF16 tensor throughput, TFLOPS.
    peak_tflops: float
    #: The GPU's memory, GB (10^9 bytes), and its bandwidth, TB/s.
    hbm_gb: float
    hbm_tb_per_s: float
    #: Bandwidth per GPU, one direction, to a GPU of its node (NVLink) and to a GPU of
    #: another node (the network), GB/s.
    intra_node_gb_per_s: float
    inter_node_gb_per_s: float
    #: Streaming multiprocessors.
    sm_count: int = 132
    #: The share of ``peak_tflops`` that cuBLAS reaches on a large bf16 GEMM.
    gemm_efficiency: float = 0.75
    #: Bandwidth to host memory (PCIe), one direction, GB/s.
    host_gb_per_s: float = 64.0
    #: Dense FP8 tensor throughput, TFLOPS (0: no FP8 tensor cores).
    fp8_peak_tflops: float = 0.0
    #: CUDA compute capability (9.0 for Hopper); None: not known, FP8 recipes unchecked.
    compute_capability: float | None = None

    def __post_init__(self) -> None:
        """Every number a finite positive one (the step-time model divides by them),
        ``sm_count`` a whole number and ``gemm_efficiency`` a share of the peak."""
        text("Hardware.name", self.name, example='e.g. "H100 SXM5"')
        for f in fields(self):
            if f.name == "name":
                continue
            value = getattr(self, f.name)
            where = f"Hardware.{f.name}"
            if f.name == "sm_count":
                whole(where, value, example="e.g. 132 (H100 SXM)", maximum=2**20)
            elif f.name == "fp8_peak_tflops":
                if value != 0 or isinstance(value, bool):  # 0: no FP8 tensor cores
                    positive(where, value, example="e.g. 1979.0 (an H100's), or 0 for none")
            elif f.name == "compute_capability":
                if value is not None:
                    positive(where, value, example="e.g. 9.0 (an H100's), or None")
            elif f.name == "gemm_efficiency":
                if positive(where, value, example="e.g. 0.75") > 1:
                    raise ConfigError(
                        f"{where} must be at most 1 (a share of peak_tflops), got {shown(value)}",
                        hint="give the share of peak_tflops cuBLAS reaches, e.g. 0.75",
                    )
            else:
                positive(where, value, example=f"e.g. {_H100_SHEET[f.name]} (an H100's)")

    @property
    def sustained_tflops(self) -> float:
        """Dense BF16 TFLOPS a large GEMM sustains: the data sheet's (boost-clock) peak
        times ``gemm_efficiency``."""
        return self.peak_tflops * self.gemm_efficiency

    @property
    def fp8_sustained_tflops(self) -> float:
        """Dense FP8 TFLOPS a large GEMM sustains (0 without FP8 tensor cores)."""
        return self.fp8_peak_tflops * self.gemm_efficiency


#: Transformer Engine's FP8 scaling recipes, as AReaL's ``FP8EngineConfig.recipe`` names
#: them (``areal/api/cli_args.py:815-820``), and the compute capabilities each runs on,
#: from and below (``transformer_engine/pytorch/quantization.py`` at d0067d0, L146-238:
#: ``check_recipe_support`` raises otherwise at the first FP8 forward).
FP8_RECIPE_CAPABILITY: Final[Mapping[str, tuple[float, float | None]]] = {
    "delayed": (8.9, None),
    "tensorwise": (8.9, None),
    "blockwise": (9.0, None),  # and CUDA 12.9
    "mxfp8": (10.0, 12.0),
}
FP8_RECIPES: Final = tuple(FP8_RECIPE_CAPABILITY)


def fp8_refused(gpu: Hardware, recipe: str) -> str:
    """Why Transformer Engine would not run FP8 ``recipe`` on ``gpu`` ("" when it would,
    or when the GPU's compute capability is not known)."""
    if not gpu.fp8_peak_tflops:
        return f"the {gpu.name} has no FP8 tensor cores"
    capability = gpu.compute_capability
    low, high = FP8_RECIPE_CAPABILITY[recipe]
    if capability is None or (low <= capability and (high is None or capability < high)):
        return ""
    needed = f"{low:.1f}" + (f" to below {high:.1f}" if high is not None else " or higher")
    have = f"the {gpu.name} has {capability:.1f}"
    return f"the {recipe} recipe needs compute capability {needed}, {have}"


def fp8_gpus(recipe: str) -> str:
    """The GPUs of ``HARDWARE`` that run FP8 ``recipe``, by name (``h100, h200, b200``)."""
    return ", ".join(name for name, gpu in HARDWARE.items() if not fp8_refused(gpu, recipe))


# Examples for a message about a number of a Hardware (H100's, as in HARDWARE below).
_H100_SHEET = {
    "peak_tflops": 989.0,
    "hbm_gb": 80.0,
    "hbm_tb_per_s": 3.35,
    "intra_node_gb_per_s": 450.0,
    "inter_node_gb_per_s": 50.0,
    "host_gb_per_s": 64.0,
}


class _Table(dict[str, Hardware]):
    """``HARDWARE``: a dict whose lookup of a GPU it does not know is an
    AllocationError (also a KeyError, as a dict's missing key is)."""

    def __getitem__(self, key: str) -> Hardware:
        try:
            return super().__getitem__(key)
        except TypeError:  # an unhashable key: no GPU either
            raise UnknownGpu(key, self) from None

    def __missing__(self, key: object) -> Hardware:
        raise UnknownGpu(key, self)


class UnknownGpu(AllocationError, KeyError):
    """A GPU name ``HARDWARE`` does not hold."""

    def __init__(
        self, key: object, table: dict[str, Hardware] | None = None, where: str = "gpu"
    ) -> None:
        self.gpu, self.where = key, where
        names = ", ".join(HARDWARE if table is None else table)
        super().__init__(
            f"{where}: {shown(key)} is not a GPU areal-conf knows (it knows {names})",
            key if isinstance(key, str) else None,
            None,
            hint="give one of those names, or the memory of one GPU instead, e.g. "
            "--gpu-memory-gb 141 (AREAL_CONF_GPU_MEMORY_GB=141)",
        )

    __str__ = AllocationError.__str__  # the message, not KeyError's repr of it

    def __reduce__(self) -> tuple[type[UnknownGpu], tuple[object, None, str]]:
        return (type(self), (self.gpu, None, self.where))


HARDWARE: dict[str, Hardware] = _Table(
    {
        "a100": Hardware(
            "A100 SXM4 80GB", 312.0, 80.0, 2.039, 300.0, 25.0, 108, 0.85, 32.0, 0.0, 8.0
        ),
        "h100": Hardware("H100 SXM5", 989.0, 80.0, 3.35, 450.0, 50.0, 132, 0.75, 64.0, 1979.0, 9.0),
        "h800": Hardware("H800 SXM5", 989.0, 80.0, 3.35, 200.0, 50.0, 132, 0.75, 64.0, 1979.0, 9.0),
        "h20": Hardware("H20", 148.0, 96.0, 4.0, 450.0, 50.0, 78, 0.75, 64.0, 296.0, 9.0),
        "h200": Hardware("H200 SXM", 989.0, 141.0, 4.8, 450.0, 50.0, 132, 0.75, 64.0, 1979.0, 9.0),
        "b200": Hardware("B200", 2250.0, 180.0, 8.0, 900.0, 50.0, 148, 0.75, 64.0, 4500.0, 10.0),
    }
)


def hardware(gpu: str | Hardware, where: str = "gpu") -> Hardware:
    """``gpu`` as a :class:`Hardware`: one given, or the entry of ``HARDWARE`` it names
    (any case); an AllocationError naming ``where`` for a name areal-conf does not know."""
    if isinstance(gpu, Hardware):
        return gpu
    found = HARDWARE.get(gpu.strip().lower()) if isinstance(gpu, str) else None
    if found is None:
        raise UnknownGpu(gpu, HARDWARE, where)
    return found
