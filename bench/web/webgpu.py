"""edgerun's WebGPU provider against onnxruntime-web's WebGPU backend, in one headless
Chromium (WebGPU on its SwiftShader adapter), on the same models and feeds.

    python -m bench.web.webgpu [--models NAMES] [--repeat N] [--out DIR]

Per model: session creation, the first run and the median run (outputs read back to the
page, for both engines), the ratio edgerun / onnxruntime-web, and each engine's largest
deviation from edgerun's native CPU provider. Writes DIR/results.json, results.md,
results.html and results.png (reports/bench_web_webgpu by default).

Needs: Chromium (/usr/bin/chromium, EDGERUN_CHROMIUM), `pip install playwright` (no
`playwright install`), `npm ci` (Pyodide) and `npm install --prefix bench/web`
(onnxruntime-web 1.30.0). SwiftShader runs WGSL on the CPU: the numbers compare the two
engines' scheduling and kernels on the same software GPU, not GPU speed.
"""
from __future__ import annotations

import argparse
import base64
import fnmatch
import json
import os
import shutil
import sys
import tempfile

import numpy as np

from .cases import NUMPY_TYPES, ROOT, real_models, write_cases
from .chart import ratio_chart

HERE = os.path.dirname(os.path.abspath(__file__))
ORT_DIST = os.path.join(HERE, "node_modules", "onnxruntime-web", "dist")
PYODIDE = os.path.join(ROOT, "node_modules", "pyodide")
CHROMIUM = os.environ.get("EDGERUN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--enable-unsafe-webgpu", "--no-sandbox", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-quic"]
# models small enough for a software GPU (vgg19 and friends take minutes a run there)
DEFAULT_MODELS = ["digits_mlp", "light_squeezenet", "light_shufflenet", "magika",
                  "ppocr_mobile_cls", "silero_vad_op18_ifless", "silero_vad_16k_sequence",
                  "minilm_l6"]
ENGINES = {"edgerun": "edgerun (Pyodide, WebGPU)", "ort": "onnxruntime-web 1.30.0 (WebGPU)"}


def missing() -> list:
    """What this benchmark needs and this machine lacks, with how to get it."""
    found = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        found.append("pip install playwright")
    if not os.path.exists(CHROMIUM):
        found.append("apt-get install -y chromium")
    if not os.path.isdir(PYODIDE):
        found.append("npm ci")
    if not os.path.isdir(ORT_DIST):
        found.append("npm install --prefix bench/web")
    return found


def models() -> dict:
    """The real-model set, plus MiniLM-L6 at 16 tokens (bench/models/export_minilm.py)."""
    found = dict(real_models())

    def minilm():
        from bench.models import export_minilm as ex

        return ex.ensure_minilm(), dict(np.load(ex.feeds_path(16)))
    found["minilm_l6"] = minilm
    return found


def build_site(folder: str, names: list) -> list:
    """The served folder (links, not copies) and the page's case list."""
    from edgerun import __version__
    from edgerun.pack.wheel import build_wheel

    os.makedirs(os.path.join(folder, "node_modules"))
    os.symlink(PYODIDE, os.path.join(folder, "node_modules", "pyodide"))
    os.symlink(ORT_DIST, os.path.join(folder, "ort"))
    shutil.copy(os.path.join(HERE, "webgpu_page.html"), os.path.join(folder, "index.html"))
    os.makedirs(os.path.join(folder, "wheel"))
    wheel = build_wheel(os.path.join(ROOT, "engine", "edgerun"), os.path.join(folder, "wheel"),
                        "edgerun", __version__)
    os.symlink(wheel, os.path.join(folder, "edgerun.whl"))
    cases_dir = os.path.join(folder, "cases")
    with open(write_cases(names, cases_dir, models())) as f:
        cases = json.load(f)
    for c in cases:
        os.symlink(c["model"], os.path.join(cases_dir, f"{c['name']}.onnx"))
        c["model_url"] = f"/cases/{c['name']}.onnx"
        for f in c["feeds"]:
            f["url"] = "/cases/" + os.path.basename(f["file"])
    return cases


def run_page(cases: list, site: str, repeat: int, budget_ms: int) -> dict:
    """(engine, model) -> result, from one Chromium page."""
    from playwright.sync_api import sync_playwright

    from edgerun.web.serve import serve

    server, url = serve(site)
    results = {}
    try:
        with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
            context = p.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            context.set_default_timeout(600_000)
            page = context.new_page()
            page.goto(f"{url}/index.html")
            page.wait_for_function("window.benchReady === true")
            page.evaluate("bench.startEdgerun()")
            page.evaluate("bench.startOrt()")
            for c in cases:
                for engine in ENGINES:
                    r = page.evaluate(f"([c, n, b]) => bench.{engine}(c, n, b)",
                                      [c, repeat, budget_ms])
                    results[(engine, c["name"])] = r
                    print(f"{c['name']:28s} {engine:8s} " + (
                        f"error: {r['error'][:300]}" if "error" in r else
                        f"run {r['run_ms']:.1f} ms (first {r['first_ms']:.0f}, create "
                        f"{r['create_ms']:.0f}, {r['runs']} runs)"), file=sys.stderr)
            context.close()
    finally:
        server.shutdown()
    return results


def max_diff(result: dict, expected: list):
    if not result or "error" in result:
        return None
    worst = 0.0
    for o, e in zip(result["outputs"], expected):
        got = np.frombuffer(base64.b64decode(o["b64"]), NUMPY_TYPES[o["type"]])
        e = np.asarray(e)
        if got.size != e.size:
            return float("inf")
        if e.size:
            worst = max(worst, float(np.max(np.abs(got.astype(np.float64).reshape(e.shape)
                                                   - e.astype(np.float64)))))
    return worst


def summarize(cases: list, results: dict) -> list:
    import edgerun

    table = models()
    rows = []
    for c in cases:
        path, feeds = table[c["name"]]()
        expected = edgerun.InferenceSession(path, providers=["cpu"]).run(None, feeds)
        row = {"model": c["name"]}
        for engine in ENGINES:
            r = results.get((engine, c["name"])) or {"error": "not run"}
            row[engine] = {k: v for k, v in r.items() if k not in ("outputs", "name", "engine")}
            row[engine]["max_abs_diff_vs_cpu"] = max_diff(r, expected)
        e, o = row["edgerun"], row["ort"]
        row["ratio_edgerun_over_ort"] = (e["run_ms"] / o["run_ms"]
                                         if "run_ms" in e and "run_ms" in o else None)
        rows.append(row)
    return rows


def geomean(values: list):
    values = [v for v in values if v]
    return float(np.exp(np.mean(np.log(values)))) if values else None


def _cell(r: dict) -> str:
    if "error" in r:
        return "error"
    return f"{r['run_ms']:.1f} ({r['first_ms']:.0f}, {r['create_ms']:.0f})"


def _ratio(row: dict) -> str:
    ratio = row["ratio_edgerun_over_ort"]
    return "-" if ratio is None else f"{ratio:.2f}x"


def markdown(rows: list) -> str:
    lines = ["| model | " + " | ".join(f"{label}: run ms (first, create)"
                                        for label in ENGINES.values())
             + " | edgerun / ort-web | max abs diff vs CPU (edgerun, ort-web) |",
             "|---|---|---|---|---|"]
    for row in rows:
        diffs = ", ".join("-" if row[e]["max_abs_diff_vs_cpu"] is None
                          else f"{row[e]['max_abs_diff_vs_cpu']:.1e}" for e in ENGINES)
        lines.append(f"| {row['model']} | {_cell(row['edgerun'])} | {_cell(row['ort'])} | "
                     f"{_ratio(row)} | {diffs} |")
    g = geomean([r["ratio_edgerun_over_ort"] for r in rows])
    lines.append(f"| geometric mean | | | {'-' if g is None else f'{g:.2f}x'} | |")
    errors = [f"- {row['model']}, {e}: {row[e]['error'][:400]}" for row in rows for e in ENGINES
              if "error" in row[e]]
    return "\n".join(lines + ([""] + errors if errors else []))


def html(rows: list, adapter: str) -> str:
    import html as h

    body = [f"<tr><td>{h.escape(r['model'])}</td><td>{_cell(r['edgerun'])}</td>"
            f"<td>{_cell(r['ort'])}</td><td>{_ratio(r)}</td></tr>" for r in rows]
    return ("<!doctype html><meta charset='utf-8'><title>edgerun vs onnxruntime-web, WebGPU"
            "</title><style>body{font-family:sans-serif}td,th{padding:2px 8px;"
            "border-bottom:1px solid #ccc}</style>"
            f"<h1>edgerun vs onnxruntime-web on WebGPU</h1><p>Adapter: {h.escape(adapter)}. "
            "Run ms (first, create); a run includes reading outputs back. "
            "Ratio below 1: edgerun faster.</p><table><tr><th>model</th>"
            + "".join(f"<th>{h.escape(label)}</th>" for label in ENGINES.values())
            + "<th>edgerun / ort-web</th></tr>" + "".join(body)
            + "</table><p><img src='results.png'></p>")


def chart(rows: list, path: str) -> str | None:
    return ratio_chart([r["model"] for r in rows], [r["ratio_edgerun_over_ort"] for r in rows],
                       "edgerun / onnxruntime-web run time, WebGPU in Chromium "
                       "(lower: edgerun faster)", path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help="comma-separated names or globs (default: the light ones)")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--budget-ms", type=int, default=5000, help="per model and engine")
    parser.add_argument("--out", default=os.path.join(ROOT, "reports", "bench_web_webgpu"))
    args = parser.parse_args(argv)
    lacking = missing()
    if lacking:
        raise SystemExit("bench.web.webgpu needs: " + "; ".join(lacking))
    table = models()
    patterns = args.models.split(",")
    names = [n for n in sorted(table) if any(fnmatch.fnmatch(n, p) for p in patterns)]
    if not names:
        raise SystemExit(f"no model matches {args.models!r}; choose from "
                         f"{', '.join(sorted(table))}")
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as site:
        cases = build_site(os.path.join(site, "site"), names)
        results = run_page(cases, os.path.join(site, "site"), args.repeat, args.budget_ms)
    rows = summarize(cases, results)
    adapter = next((r.get("adapter") for r in results.values() if r.get("adapter")), "unknown")
    report = {"adapter": adapter, "engines": ENGINES, "rows": rows,
              "geomean_ratio_edgerun_over_ort": geomean([r["ratio_edgerun_over_ort"]
                                                         for r in rows])}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(report, f, indent=1)
    table_md = markdown(rows)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(table_md + "\n")
    with open(os.path.join(args.out, "results.html"), "w") as f:
        f.write(html(rows, adapter))
    chart(rows, os.path.join(args.out, "results.png"))
    print(f"adapter: {adapter}\n{table_md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
