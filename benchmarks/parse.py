"""Parse speed: µs per parse of 10,000+ distinct valid specs, each parsed once (no cache).

Also shows that rejection stays linear: a megabyte of input costs about ten times a
100 KB one. With the ``bench`` extra (lark) installed, it measures side by side a lark
Earley parser of the same grammar, the way AReaL parses: a new parser per call, and a
cached one. Run: python benchmarks/parse.py
"""

from __future__ import annotations

import contextlib
import itertools
import statistics
import time

from areal_conf import AllocationError, parse_backend

TARGET_US = 5.0


def distinct_specs() -> list[str]:
    specs: list[str] = []
    for backend, d, t in itertools.product(["fsdp", "sglang", "vllm"], range(1, 769), [1, 2, 4, 8]):
        specs.append(f"{backend}:d{d}t{t}" if t > 1 else f"{backend}:d{d}")
    for d, p, t, e in itertools.product(range(1, 65), [1, 2, 4], [1, 2, 4, 8], [1, 2]):
        if (d * t) % e == 0:
            specs.append(f"megatron:d{d}p{p}t{t}e{e}")
    for d, p, c in itertools.product(range(1, 129), [1, 2, 4, 8], [1, 2, 4]):
        specs.append(f"megatron:(attn:d{d}p{p}t2c{c}|ffn:t2e{c})")
    return list(dict.fromkeys(specs))


def per_parse_us(specs: list[str]) -> list[float]:
    clock = time.perf_counter_ns
    times = []
    for spec in specs:
        start = clock()
        parse_backend(spec)
        times.append((clock() - start) / 1000)
    return times


# The backend-string grammar (docs/backend-strings.md) written for lark, as AReaL writes
# its own.
LARK_GRAMMAR = r"""
    start: BACKEND ":" body
    body: dims | hybrid
    hybrid: "(" "attn" ":" dims "|" "ffn" ":" dims ")" | "attn" ":" dims "|" "ffn" ":" dims
    dims: dim+
    dim: DIM SIZE
    DIM: "d" | "t" | "p" | "c" | "e"
    SIZE: /[1-9][0-9]*/
    BACKEND: "sglang" | "vllm" | "fsdp" | "megatron" | "archon"
    %ignore /[ \t]+/
"""


def lark_us(specs: list[str], *, fresh: bool) -> float | None:
    """Median µs per parse with lark's Earley parser (None when lark is not installed)."""
    try:
        import lark
    except ImportError:
        return None
    cached = lark.Lark(LARK_GRAMMAR, parser="earley")
    clock = time.perf_counter_ns
    times = []
    for spec in specs:
        start = clock()
        parser = lark.Lark(LARK_GRAMMAR, parser="earley") if fresh else cached
        parser.parse(spec)
        times.append((clock() - start) / 1000)
    return statistics.median(times)


def reject_ms(text: str) -> float:
    start = time.perf_counter()
    with contextlib.suppress(AllocationError):
        parse_backend(text)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    specs = distinct_specs()
    assert len(specs) >= 10_000, len(specs)
    times = per_parse_us(specs)
    hybrid = [t for s, t in zip(specs, times, strict=False) if "(" in s]
    flat = [t for s, t in zip(specs, times, strict=False) if "(" not in s]
    median = statistics.median(times)
    print(f"{len(specs)} distinct specs, each parsed once")
    print(
        f"  median {median:.2f} µs/parse (target ≤ {TARGET_US} µs: {median / TARGET_US:.2f}× of it)"
    )
    print(
        f"  flat median {statistics.median(flat):.2f} µs, hybrid median "
        f"{statistics.median(hybrid):.2f} µs, p90 {statistics.quantiles(times, n=10)[-1]:.2f} µs"
    )
    sample = specs[:: max(1, len(specs) // 300)]
    for label, fresh in (
        ("new lark Earley parser per call (as AReaL)", True),
        ("cached lark Earley parser", False),
    ):
        theirs = lark_us(sample, fresh=fresh)
        if theirs is None:
            print("  (install the bench extra, pip install -e '.[bench]', to compare with lark)")
            break
        print(
            f"  {label}: median {theirs:,.0f} µs/parse on {len(sample)} of the specs, "
            f"{theirs / median:,.0f}× slower"
        )
    print("rejection time of long inputs (100 KB vs 1 MB, ratio ≈ 10 means linear):")
    for name, unit in [("'('", "("), ("blanks", " "), ("digits", "9"), ("d1", "d1")]:
        prefix = "fsdp:" if unit in ("d1", "9") else ""
        body = unit * (100_000 // len(unit))
        small = reject_ms(
            prefix + ("d" if unit == "9" else "") + body + ("" if unit != " " else "x")
        )
        big = reject_ms(
            prefix + ("d" if unit == "9" else "") + body * 10 + ("" if unit != " " else "x")
        )
        print(f"  {name:7} 100 KB {small:7.2f} ms   1 MB {big:7.2f} ms   ratio {big / small:5.1f}")


if __name__ == "__main__":
    main()
