"""One table of what each backend accepts; every rule about backends reads it."""

from __future__ import annotations

from typing import Final, NamedTuple

DIM_NAMES: Final = {
    "d": "data",
    "t": "tensor",
    "p": "pipeline",
    "c": "context",
    "e": "expert",
}
DIM_LETTERS: Final = "".join(DIM_NAMES)
# The sections of the hybrid form: context parallelism only in attn, expert only in ffn
# (whose t is the expert tensor size and d the expert data size).
ATTN_DIMS: Final = "dtpc"
FFN_DIMS: Final = "dtpe"
MAX_SIZE: Final = 2**20


class BackendRule(NamedTuple):
    kind: str  # "inference" or "training"
    dims: str  # dimensions with sizes > 1 allowed
    hybrid: bool


BACKENDS: Final[dict[str, BackendRule]] = {
    "sglang": BackendRule("inference", "dtp", False),
    "vllm": BackendRule("inference", "dtp", False),
    "fsdp": BackendRule("training", "dtc", False),
    "megatron": BackendRule("training", "dtpce", True),
    "archon": BackendRule("training", "dtpce", True),
}
INFERENCE_BACKENDS: Final = tuple(b for b, r in BACKENDS.items() if r.kind == "inference")
TRAINING_BACKENDS: Final = tuple(b for b, r in BACKENDS.items() if r.kind == "training")


def written_backend_name(written: object) -> str:
    """The backend a ``backend`` value names as written, the text before its colon, for a
    rule that must know it before the value is parsed ("" when nothing is written)."""
    return written.partition(":")[0] if isinstance(written, str) else ""


def backends_supporting(letter: str) -> list[str]:
    return [name for name, rule in BACKENDS.items() if letter in rule.dims]


def join_or(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1]
