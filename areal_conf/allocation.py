"""Immutable, hashable results of parsing a backend string.

Both types are tuples underneath: a parse builds a few thousand of them per
millisecond, which frozen dataclasses (about 2 µs each) would not allow.
"""

from __future__ import annotations

from typing import NamedTuple

from areal_conf.backends import BACKENDS


class ParallelStrategy(NamedTuple):
    """Sizes of one engine's parallel dimensions; ``world_size = dp × tp × pp × cp``."""

    dp_size: int = 1
    tp_size: int = 1
    pp_size: int = 1
    cp_size: int = 1
    ep_size: int = 1
    etp_size: int = 1
    edp_size: int = 1

    @property
    def world_size(self) -> int:
        return self.dp_size * self.tp_size * self.pp_size * self.cp_size

    # AReaL's long names.
    @property
    def data_parallel_size(self) -> int:
        return self.dp_size

    @property
    def tensor_parallel_size(self) -> int:
        return self.tp_size

    @property
    def pipeline_parallel_size(self) -> int:
        return self.pp_size

    @property
    def context_parallel_size(self) -> int:
        return self.cp_size

    @property
    def expert_parallel_size(self) -> int:
        return self.ep_size

    @property
    def expert_tensor_parallel_size(self) -> int:
        return self.etp_size

    @property
    def expert_data_parallel_size(self) -> int:
        return self.edp_size

    @property
    def is_hybrid(self) -> bool:
        """True when only the hybrid (attn|ffn) form can express this layout."""
        return self.etp_size > 1

    def body(self) -> str:
        """The canonical text after ``backend:``."""
        if self.etp_size > 1:
            attn = _sizes("dptc", (self.dp_size, self.pp_size, self.tp_size, self.cp_size))
            ffn = _sizes("dpte", (self.edp_size, self.pp_size, self.etp_size, self.ep_size))
            return f"(attn:{attn}|ffn:{ffn})"
        return _sizes(
            "dptce", (self.dp_size, self.pp_size, self.tp_size, self.cp_size, self.ep_size)
        )

    def __eq__(self, other: object) -> bool:
        return type(other) is ParallelStrategy and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return tuple.__hash__(self)


def _sizes(letters: str, sizes: tuple[int, ...]) -> str:
    text = "".join(
        f"{letter}{size}" for letter, size in zip(letters, sizes, strict=False) if size != 1
    )
    return text or "d1"


class ModelAllocation(NamedTuple):
    """One engine's backend and parallel layout, parsed from e.g. ``fsdp:d4t2``."""

    backend: str
    parallel: ParallelStrategy

    @classmethod
    def from_str(cls, spec: object) -> ModelAllocation:
        from areal_conf.parser import parse_backend

        return parse_backend(spec)

    @property
    def world_size(self) -> int:
        return self.parallel.world_size

    @property
    def is_inference(self) -> bool:
        return BACKENDS[self.backend].kind == "inference"

    @property
    def num_instances(self) -> int:
        """Inference server instances (= dp)."""
        return self.parallel.dp_size

    @property
    def instance_size(self) -> int:
        """GPUs per inference server instance (= tp × pp)."""
        return self.parallel.tp_size * self.parallel.pp_size

    def to_dict(self) -> dict[str, str | int]:
        """The expansion that an engine's ``allocation`` node resolves to."""
        p = self.parallel
        return {
            "spec": str(self),
            "backend": self.backend,
            "dp": p.dp_size,
            "tp": p.tp_size,
            "pp": p.pp_size,
            "cp": p.cp_size,
            "ep": p.ep_size,
            "etp": p.etp_size,
            "edp": p.edp_size,
            "world_size": p.world_size,
        }

    def __str__(self) -> str:
        return f"{self.backend}:{self.parallel.body()}"

    def __repr__(self) -> str:
        return f"ModelAllocation.from_str({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is ModelAllocation and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return tuple.__hash__(self)
