"""``layouts --rank --plot FILE.png``: predicted step time against memory per GPU.

Needs matplotlib (the ``plot`` extra: ``pip install 'areal-conf[plot]'``), imported only
here and only when a plot is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from areal_conf.errors import AllocationError, ConfigError

if TYPE_CHECKING:
    from areal_conf.perf.ranking import RankedLayout

#: How many of the fastest layouts get their name beside their point.
LABELLED = 5


def plot_layouts(
    path: str, ranked: Sequence[RankedLayout], gpu_memory_gb: float, title: str
) -> None:
    """Draw one point per layout (x: GB per GPU, y: predicted seconds a step) into the
    PNG ``path``; the layouts that fit below the GPU's memory line, the fastest named."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError(
            "--plot needs matplotlib, which is not installed",
            hint="pip install 'areal-conf[plot]' (or pip install matplotlib)",
        ) from None
    if not str(path).lower().endswith(".png"):
        raise AllocationError(
            f"--plot writes a PNG file, got {path!r}",
            str(path),
            hint="give a file name ending in .png, e.g. --plot layouts.png",
        )
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    for fits, colour, label in ((True, "tab:blue", "fits"), (False, "tab:red", "does not fit")):
        points = [r for r in ranked if r.fits is fits]
        if points:
            ax.scatter(
                [r.memory.total / 1e9 for r in points],
                [r.seconds for r in points],
                c=colour,
                s=18,
                label=label,
            )
    # The fastest that fit: numbered beside their points, named in a box.
    best = [r for r in ranked if r.fits][:LABELLED]
    for i, r in enumerate(best, 1):
        ax.scatter([r.memory.total / 1e9], [r.seconds], facecolors="none", edgecolors="black", s=60)
        ax.annotate(
            str(i),
            (r.memory.total / 1e9, r.seconds),
            fontsize=8,
            xytext=(5, 5 * i - 10),
            textcoords="offset points",
        )
    if best:
        names = "\n".join(
            f"{i}  {r.spec.split(':', 1)[1]}  {r.seconds:.3g} s" for i, r in enumerate(best, 1)
        )
        ax.text(
            0.7,
            0.6,
            "fastest that fit:\n" + names,
            transform=ax.transAxes,
            ha="left",
            va="top",
            fontsize=7,
            family="monospace",
            bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "grey"},
        )
    ax.set_yscale("log")
    from matplotlib.ticker import FormatStrFormatter

    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.axvline(gpu_memory_gb, color="grey", linestyle="--", linewidth=1)
    ax.text(gpu_memory_gb, ax.get_ylim()[1], f" {gpu_memory_gb:g} GB", va="top", fontsize=8)
    ax.set_xlabel("memory per GPU (GB)")
    ax.set_ylabel("predicted seconds per training step")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as err:
        raise AllocationError(
            f"--plot cannot write {path!r}: {err.strerror or err}",
            str(path),
            hint="give a path in a directory that exists and you may write to",
        ) from None
    finally:
        plt.close(fig)
