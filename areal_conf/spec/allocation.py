"""The result of parsing a backend string: a backend and its ParallelStrategy.

Both types are tuples underneath: a parse builds a few thousand of them per
millisecond, which frozen dataclasses (about 2 µs each) would not allow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from areal_conf.spec.backends import BACKENDS
from areal_conf.spec.strategy import ParallelStrategy

__all__ = ["ModelAllocation", "ParallelStrategy"]

# The parser, bound on the first from_str: the parser builds ModelAllocations, so it
# cannot be imported at the top (the one import cycle of the core, by design).
_parse: Callable[[object], ModelAllocation] | None = None


class ModelAllocation(NamedTuple):
    """One engine's backend and parallel layout, parsed from e.g. ``fsdp:d4t2``."""

    backend: str
    parallel: ParallelStrategy

    @classmethod
    def from_str(cls, spec: object) -> ModelAllocation:
        return (_parse or _bind_parser())(spec)

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
    def replicas(self) -> int:
        """What AReaL's scheduler counts: server instances for inference, ranks for training."""
        return self.parallel.dp_size if self.is_inference else self.parallel.world_size

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
        if not isinstance(self.parallel, ParallelStrategy):  # built by hand, wrongly
            return f"ModelAllocation(backend={self.backend!r}, parallel={self.parallel!r})"
        return f"{self.backend}:{self.parallel.body()}"

    def __repr__(self) -> str:
        if not isinstance(self.parallel, ParallelStrategy):
            return str(self)
        return f"ModelAllocation.from_str({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is ModelAllocation and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return tuple.__hash__(self)


def _bind_parser() -> Callable[[object], ModelAllocation]:
    global _parse
    from areal_conf.spec.parser import parse_backend

    _parse = parse_backend
    return parse_backend
