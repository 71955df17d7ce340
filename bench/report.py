"""Turn benchmark results into JSON, Markdown tables and a PNG chart."""
from __future__ import annotations

import json
import os


def one_line(r: dict) -> str:
    """A progress line for one (model, engine) result."""
    if r["status"] != "ok":
        return f"{r['status']}: {r.get('reason', '')}"
    return (f"median {r['median_s'] * 1e3:.3f} ms over {r['runs']} run(s), session "
            f"{r['session_s'] * 1e3:.1f} ms, peak +{r['peak_mb']:.1f} MB")


def _fmt_ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def _ratio(r: dict, kind: str) -> str:
    value = (r.get("ratio") or {}).get(kind)
    return f"{value:.2f}x" if value is not None else "n/a"


def _note(notes: list, text: str) -> int:
    """The note's number (1-based), adding it once."""
    if text not in notes:
        notes.append(text)
    return notes.index(text) + 1


def _cell(r: dict | None, field: str, notes: list, model: str, engine_label: str) -> str:
    if r is None:
        return ""
    if r["status"] != "ok":
        n = _note(notes, f"{model}, {engine_label}: {r['status']} ({r.get('reason', '')})")
        return f"{r['status']} [{n}]"
    if field == "latency":
        once = ", 1 run" if r["runs"] == 1 else ""
        return f"{_fmt_ms(r['median_s'])} ({_ratio(r, 'latency')}{once})"
    if field == "session":
        return f"{_fmt_ms(r['session_s'])} / {_fmt_ms(r['first_run_s'])}"
    return f"{r['peak_mb']:.1f}"


def _geomean_row(data: dict, kind: str) -> str:
    cells = []
    for engine in data["engines"]:
        g = data["geomean"].get(engine, {}).get(kind)
        cells.append(f"**{g['value']:.2f}x** (n={g['models']})" if g else "n/a")
    return "| **geometric mean of ratios** | " + " | ".join(cells) + " |"


def _table(data: dict, field: str, notes: list) -> list:
    labels = list(data["engines"].values())
    lines = ["| model | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for row in data["models"]:
        if row["status"] != "ok":
            n = _note(notes, f"{row['name']}: {row['status']} ({row.get('reason', '')})")
            lines.append(f"| {row['name']} | " + " | ".join(
                [f"{row['status']} [{n}]"] + [""] * (len(labels) - 1)) + " |")
            continue
        cells = [_cell(row["results"].get(e), field, notes, row["name"], label)
                 for e, label in data["engines"].items()]
        lines.append(f"| {row['name']} | " + " | ".join(cells) + " |")
    return lines


def markdown(data: dict) -> str:
    env = data["environment"]
    out = [f"# edgerun CPU benchmark ({data['created']})", "",
           f"Python {env['python']}, {env['platform']}, {env['cpu_count']} CPUs; numpy "
           f"{env['numpy']}, onnxruntime {env['onnxruntime']}, onnx {env['onnx']}, edgerun "
           f"{env['edgerun']}. At least {data['settings']['repeat']} runs and "
           f"{data['settings'].get('min_time_s', 0):g} s after "
           f"{data['settings']['warmup']} warm-up run(s); the ReferenceEvaluator: the median "
           f"of the runs after a first one (at least 3 and "
           f"{data['settings'].get('min_time_s', 0):g} s) where 3 fit in "
           f"{data['settings']['reference_cap_s']:g} s, else the first run alone (skipped "
           f"past {data['settings']['reference_cap_s']:g} s). Each engine's latency is its "
           f"best median of {data['settings'].get('rounds', 1)} round(s), the engines "
           f"taking turns. Ratios are to "
           f"onnxruntime with 1 thread (lower is faster). numpy-based engines run with "
           f"OPENBLAS_NUM_THREADS=1 unless their label says otherwise.", ""]
    notes: list = []
    sections = [("latency", "Latency: median ms (ratio to onnxruntime 1 thread)"),
                ("session", "Session creation ms / first run ms"),
                ("peak", "Peak memory: MB above the post-import baseline")]
    for field, title in sections:
        out += [f"## {title}", ""] + _table(data, field, notes)
        out += [_geomean_row(data, field), ""]
    out.append("Peak memory method: " + "; ".join(data["memory_method"]) + ".")
    out.append("")
    if notes:
        out += ["Notes:", ""] + [f"{i}. {n}" for i, n in enumerate(notes, 1)] + [""]
    out += _profiles(data)
    return "\n".join(out)


def _profiles(data: dict) -> list:
    if not data.get("profiles"):
        return []
    out = ["## Where edgerun spends its time (models slowest relative to onnxruntime)", ""]
    for p in data["profiles"]:
        if p["status"] != "ok":
            out.append(f"- {p['model']}: profile {p['status']} ({p.get('reason', '')})")
            continue
        top = ", ".join(f"{o['op']} {o['ms_per_run']:.2f} ms ({o['share']:.0%}, "
                        f"x{o['calls_per_run']:g})" for o in p["ops"][:6])
        out.append(f"- **{p['model']}** ({p['latency_ratio']:.1f}x onnxruntime; run "
                   f"{p['run_ms']:.2f} ms, inside nodes {p['node_ms']:.2f} ms): {top}")
    return out + [""]


def chart(data: dict, path: str) -> str | None:
    """Two panels: latency ratio to onnxruntime 1 thread, and peak memory. Returns a message
    when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "chart skipped: matplotlib is not installed (pip install matplotlib)"
    rows = [r for r in data["models"] if r["status"] == "ok"]
    engines = list(data["engines"])
    height = max(3.0, 0.32 * len(rows) * max(1, len(engines)) / 2 + 1.5)
    fig, axes = plt.subplots(1, 2, figsize=(13, height), sharey=True)
    bar = 0.8 / len(engines)
    for j, engine in enumerate(engines):
        ys, ratios, peaks = [], [], []
        for i, row in enumerate(rows):
            r = row["results"].get(engine, {})
            if r.get("status") == "ok":
                ys.append(i + (j - (len(engines) - 1) / 2) * bar)
                ratios.append((r.get("ratio") or {}).get("latency") or float("nan"))
                peaks.append(max(r["peak_mb"], 0.1))
        label = data["engines"][engine]
        axes[0].barh(ys, ratios, height=bar, label=label)
        axes[1].barh(ys, peaks, height=bar, label=label)
    axes[0].set_xscale("log")
    axes[0].axvline(1.0, color="black", linewidth=0.8)
    axes[0].set_xlabel("median latency / onnxruntime 1 thread (log; lower is faster)")
    axes[1].set_xscale("log")
    axes[1].set_xlabel("peak memory above baseline, MB (log)")
    axes[0].set_yticks(range(len(rows)), [r["name"] for r in rows])
    axes[0].invert_yaxis()
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(engines), fontsize=9)
    fig.suptitle(f"edgerun CPU benchmark, {data['created']}")
    fig.tight_layout(rect=(0, 0.45 / height, 1, 1))   # room for the legend below
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def write_all(data: dict, out_dir: str) -> dict:
    paths = {"json": os.path.join(out_dir, "results.json"),
             "markdown": os.path.join(out_dir, "results.md")}
    text = markdown(data)
    png = os.path.join(out_dir, "results.png")
    skipped = chart(data, png)
    data["chart"] = None if skipped else os.path.basename(png)
    if skipped:
        data["chart_skipped"] = skipped
        paths["png_skipped"] = skipped
    else:
        paths["png"] = png
    with open(paths["json"], "w") as f:
        json.dump(data, f, indent=1)
    with open(paths["markdown"], "w") as f:
        f.write(text + "\n")
    paths["markdown_text"] = text
    return paths
