"""edgerun in JavaScript against onnxruntime-web: per real model, the median latency of

- edgerun inside Pyodide under Node (the JavaScript API, wasm provider, V8's WebAssembly),
- edgerun's same numpy-free path natively (wasm provider under wasmtime),
- onnxruntime-web 1.30.0's wasm backend under Node, one thread,

with each engine's largest deviation from edgerun's native CPU provider.

    python -m bench.web [--models NAMES] [--repeat N] [--warmup-ms MS] [--rounds R] [--out DIR]

onnxruntime-web is installed apart from the edgerun package: `npm install --prefix bench/web`.
Each engine runs every model in one process (bench/web/run_cases.mjs, run_cases.py); session
creation, the first run and the median of the repeats (after --warmup-ms of untimed runs)
are reported separately; the last line is the geometric mean of Pyodide / ort-web.
The engines take turns for --rounds rounds (order reversed each round) and each model keeps
its fastest round per engine: on a shared machine a slow spell then cannot land on one
engine only.
OUT/results.md holds the table, OUT/results.png the ratios as a chart (matplotlib).
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import subprocess
import sys

import numpy as np

from .cases import ROOT, read_output, read_results, real_models, write_cases
from .chart import ratio_chart

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINES = {   # name -> (label, command prefix)
    "pyodide": ("edgerun in Pyodide (Node, wasm)",
                ["node", os.path.join(HERE, "run_cases.mjs")]),
    "native": ("edgerun native (wasmtime, no numpy)",
               [sys.executable, os.path.join(HERE, "run_cases.py")]),
    "ort_web": ("onnxruntime-web 1.30.0 (wasm, 1 thread)",
                ["node", os.path.join(HERE, "run_cases.mjs"), "--engine", "ort"]),
}


def run_engine(engine: str, cases: str, out: str, repeat: int, warmup_ms: float) -> dict:
    label, command = ENGINES[engine]
    if engine == "ort_web" and not os.path.isdir(os.path.join(HERE, "node_modules",
                                                               "onnxruntime-web")):
        print(f"{label}: skipped (npm install --prefix bench/web)", file=sys.stderr)
        return {}
    print(f"== {label}", file=sys.stderr)
    args = command[:2] + [cases, out] + command[2:] + ["--repeat", str(repeat),
                                                        "--warmup-ms", str(warmup_ms)]
    subprocess.run(args, cwd=ROOT, check=True, stdout=sys.stderr)
    return read_results(out)


def keep_fastest(best: dict, got: dict) -> None:
    """Merge one round's results (name -> result) into `best`, keeping each model's fastest
    run that did not fail."""
    for name, result in got.items():
        held = best.get(name)
        if held is None or ("error" in held and "error" not in result) or \
                ("error" not in result and result["run_ms"] < held["run_ms"]):
            best[name] = result


def max_diff(result: dict, expected: list):
    if not result or "error" in result:
        return None
    diffs = [float(np.max(np.abs(read_output(o).astype(np.float64) - e.astype(np.float64))))
             if e.size else 0.0 for o, e in zip(result["outputs"], expected)]
    return max(diffs, default=0.0)


def cpu_outputs(load) -> list:
    """A case's outputs on edgerun's CPU provider (`load`: () -> (path, feeds))."""
    import edgerun

    path, feeds = load()
    return edgerun.InferenceSession(path, providers=["cpu"]).run(None, feeds)


def markdown(rows: list, engines: list) -> str:
    head = "| model | " + " | ".join(f"{ENGINES[e][0]} run ms (first, create)" for e in engines)
    lines = [head + " | Pyodide / ort-web | max abs diff vs CPU |",
             "|---" * (len(engines) + 3) + "|"]
    ratios = []
    for row in rows:
        cells = []
        for e in engines:
            r = row[e]
            cells.append("-" if not r else ("error" if "error" in r else
                         f"{r['run_ms']:.1f} ({r['first_ms']:.0f}, {r['create_ms']:.0f})"))
        p, o = row.get("pyodide"), row.get("ort_web")
        ratio = "-"
        if p and o and "error" not in p and "error" not in o:
            ratios.append(p["run_ms"] / o["run_ms"])
            ratio = f"{ratios[-1]:.2f}x"
        diffs = ", ".join(f"{e}: {row['diff'][e]:.1e}" for e in engines
                          if row["diff"].get(e) is not None)
        lines.append(f"| {row['name']} | " + " | ".join(cells) + f" | {ratio} | {diffs} |")
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        lines.append(f"| geometric mean ({len(ratios)} models) |" + " |" * len(engines)
                     + f" {geomean:.2f}x | |")
    return "\n".join(lines)


def ensure_current_web_package() -> None:
    """The Pyodide engine runs web/dist's wheel: rebuilt first when it was built from other
    engine sources (else the table would measure old kernels)."""
    build = os.path.join(ROOT, "scripts", "build_web.py")
    if subprocess.run([sys.executable, build, "--check"], capture_output=True).returncode:
        print("web/dist is stale: rebuilding it (python scripts/build_web.py)", file=sys.stderr)
        subprocess.run([sys.executable, build], check=True)


def minilm_models() -> dict:
    """MiniLM-L6 at 16 tokens, float32 and as onnxruntime's tools make it float16 and int8
    (and that int8 model as onnxruntime's optimizer saves it: bench/cases.py's rows), where
    the export is cached or torch can make it."""
    from bench import cases
    from bench.models import export_minilm as ex

    if not ex.is_cached() and ex.missing_tools():
        return {}
    return {name: load for name, load in cases.all_cases().items()
            if name in ("minilm_l6_seq16", "minilm_l6_fp16_seq16", "minilm_l6_int8_seq16",
                        "minilm_l6_int8_ortopt_seq16")}


def quantized_models() -> dict:
    """bench/cases.py's quantized rows: ppocr cls, squeezenet and ResNet-50 through onnxruntime's
    quantize_static (QDQ) and quantize_dynamic, and the QDQ YOLOX detector."""
    from bench import cases

    return dict(cases.QUANTIZED)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="*", help="comma-separated names or globs")
    parser.add_argument("--engines", default=",".join(ENGINES))
    # timed runs per model, within each runner's 3 s budget: fast models get many (a median
    # of 9 sub-millisecond runs on a shared machine moved by 2x between runs)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--warmup-ms", type=float, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(ROOT, "reports", "bench_web"))
    args = parser.parse_args(argv)
    patterns = args.models.split(",")
    if "pyodide" in args.engines.split(","):
        ensure_current_web_package()
    models = {**real_models(), **minilm_models(), **quantized_models()}
    names = [n for n in sorted(models) if any(fnmatch.fnmatch(n, p) for p in patterns)]
    engines = args.engines.split(",")
    cases = write_cases(names, os.path.join(args.out, "cases"), models)
    results = {e: {} for e in engines}
    for r in range(args.rounds):
        for e in (engines if r % 2 == 0 else engines[::-1]):
            got = run_engine(e, cases, os.path.join(args.out, e, f"round{r + 1}"), args.repeat,
                             args.warmup_ms)
            keep_fastest(results[e], got)
    rows = []
    for name in names:
        expected = cpu_outputs(models[name])
        row = {"name": name, "diff": {}}
        for e in engines:
            row[e] = results[e].get(name)
            row["diff"][e] = max_diff(row[e], expected)
        rows.append(row)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump([{k: v for k, v in r.items()} for r in rows], f, indent=1, default=str)
    table = markdown(rows, engines)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(table + "\n")
    print(table)
    ratio_chart([r["name"] for r in rows], [_ratio(r) for r in rows],
                "edgerun in Pyodide / onnxruntime-web wasm (1 thread) run time "
                "(lower: edgerun faster)", os.path.join(args.out, "results.png"), target=0.8)
    return 0


def _ratio(row: dict):
    p, o = row.get("pyodide"), row.get("ort_web")
    if p and o and "error" not in p and "error" not in o:
        return p["run_ms"] / o["run_ms"]
    return None


if __name__ == "__main__":
    sys.exit(main())
