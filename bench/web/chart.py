"""One bar per model: a run-time ratio to onnxruntime-web on a log scale, green where edgerun
is faster, with the 1.0 line (and a target line where given). matplotlib is optional."""
from __future__ import annotations


def ratio_chart(names: list, ratios: list, xlabel: str, path: str, target: float = None):
    """Write the chart to `path`; returns the path, or None without matplotlib or data."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [(n, r) for n, r in zip(names, ratios) if r]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.2))
    ax.barh([n for n, _ in rows], [r for _, r in rows],
            color=["#2a7" if r <= 1 else "#c54" for _, r in rows])
    ax.axvline(1.0, color="black", linewidth=0.8)
    if target is not None:
        ax.axvline(target, color="#27c", linewidth=0.8, linestyle="--", label=f"target {target}x")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
