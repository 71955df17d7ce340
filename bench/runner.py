"""Run the CPU benchmark: every selected model on every engine, one subprocess per pair.

    python -m bench [--models PATTERNS] [--repeat N] [--rounds R] [--out DIR]
                    [--engines NAMES] [--profile-top K] [--cap-s S]

Each model is timed in R rounds, the engines taking turns within each round; an engine's
latency is its best round's median (the round the machine disturbed least), so every engine
gets the same treatment and a burst of noise on a shared machine lands on one round, not on
the ratio.

Writes DIR/results.json, DIR/results.md (also printed) and DIR/results.png.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

from bench import report
from bench.cases import ROOT, Skip, select
from bench.engines import BASELINE, DEFAULT_ENGINES, ENGINES

DEFAULT_OUT = os.path.join(ROOT, "reports", "bench")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", help="comma-separated names or patterns (light_*); default all")
    p.add_argument("--engines", default=",".join(DEFAULT_ENGINES),
                   help=f"comma-separated, from {', '.join(ENGINES)} (default "
                        f"{','.join(DEFAULT_ENGINES)})")
    p.add_argument("--repeat", type=int, default=20, help="timed runs after the warm-up")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs before (>= 1)")
    p.add_argument("--rounds", type=int, default=2,
                   help="times each engine is timed per model, taking turns; the best "
                        "round's median is kept (>= 1)")
    p.add_argument("--min-time-s", type=float, default=0.6,
                   help="keep timing past --repeat runs until this many seconds have passed "
                        "(fast models: a median over many runs, not over a few ms)")
    p.add_argument("--budget-s", type=float, default=30.0,
                   help="stop timed runs after this many seconds (at least 3 runs)")
    p.add_argument("--cap-s", type=float, default=60.0,
                   help="the ReferenceEvaluator's first run is skipped past this; 3 more runs "
                        "are timed where they fit")
    p.add_argument("--timeout-s", type=float, default=900.0, help="hard limit per subprocess")
    p.add_argument("--profile-top", type=int, default=8, metavar="K",
                   help="profile edgerun per operator on the K models slowest relative to "
                        "onnxruntime (0: none)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    args = p.parse_args(argv)
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = [e for e in args.engines if e not in ENGINES]
    if unknown:
        p.error(f"unknown engine(s) {', '.join(unknown)}; known: {', '.join(ENGINES)}")
    if BASELINE not in args.engines:
        args.engines.insert(0, BASELINE)   # ratios need it
    args.warmup = max(1, args.warmup)
    args.rounds = max(1, args.rounds)
    return args


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def worker_env(engine: str) -> dict:
    """Children import this checkout's bench/ and edgerun (engine/), whatever is installed,
    with the engine's own settings (BLAS threads)."""
    env = dict(os.environ)
    env.update(dict(ENGINES[engine].env))
    paths = [ROOT, os.path.join(ROOT, "engine")]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                        else paths)
    return env


def byte_compile_edgerun() -> None:
    """Compile edgerun's modules to bytecode (__pycache__, git-ignored) before any worker
    starts, as `pip install` does for an installed package. Without it, a checkout run with
    PYTHONDONTWRITEBYTECODE=1 recompiles every module from source inside each worker's first
    session (the kernel registry is imported lazily there): ~80 ms that onnxruntime, whose
    Python files are installed with their bytecode, never pays."""
    import compileall
    compileall.compile_dir(os.path.join(ROOT, "engine", "edgerun"), quiet=1)


def run_worker(engine: str, model: str, feeds: str, tmp: str, args, outputs=None,
               profile: int = 0) -> dict:
    result_path = os.path.join(tmp, f"result_{engine}.json")
    if os.path.exists(result_path):
        os.remove(result_path)
    cmd = [sys.executable, "-m", "bench.worker", engine, model, feeds, result_path,
           "--warmup", str(args.warmup), "--repeat", str(args.repeat),
           "--min-time-s", str(args.min_time_s), "--budget-s", str(args.budget_s),
           "--cap-s", str(args.cap_s)]
    if outputs:
        cmd += ["--outputs", outputs]
    if profile:
        cmd += ["--profile", str(profile)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=worker_env(engine),
                              timeout=args.timeout_s)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": f"no result within {args.timeout_s:g} s"}
    if not os.path.exists(result_path):
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"status": "failed",
                "reason": f"worker exited with {done.returncode}: " + " | ".join(tail)}
    with open(result_path) as f:
        return json.load(f)


def max_abs_diff(got_path: str, want_path: str):
    """Largest |engine - onnxruntime 1 thread| over the outputs; None when not comparable."""
    import numpy as np
    if not (os.path.exists(got_path) and os.path.exists(want_path)):
        return None
    with np.load(got_path) as got, np.load(want_path) as want:
        if sorted(got.files) != sorted(want.files):
            return None
        worst = 0.0
        for k in want.files:
            g, w = got[k], want[k]
            if g.shape != w.shape or g.dtype.kind not in "biuf" or w.dtype.kind not in "biuf":
                return None
            if g.size:
                d = np.abs(g.astype(np.float64) - w.astype(np.float64))
                worst = max(worst, float(np.nan_to_num(d, nan=np.inf).max()))
        return worst


def bench_model(index: int, total: int, name: str, load, args, tmp: str) -> dict:
    import numpy as np

    head = f"[{index}/{total}] {name}"
    log(f"{head}: preparing model and feeds")
    try:
        path, feeds = load()
    except Skip as e:
        log(f"{head}: skipped ({e})")
        return {"name": name, "status": "skipped", "reason": str(e), "results": {}}
    except Exception as e:
        log(f"{head}: failed to prepare ({type(e).__name__}: {e})")
        return {"name": name, "status": "failed", "reason": f"{type(e).__name__}: {e}",
                "results": {}}
    feeds_path = os.path.join(tmp, f"{name}.feeds.npz")
    np.savez(feeds_path, **feeds)
    row = {"name": name, "status": "ok", "path": path,
           "model_mb": os.path.getsize(path) / 1e6,
           "feeds": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in feeds.items()},
           "results": {}}
    expected = os.path.join(tmp, f"{name}.{BASELINE}.out.npz")
    engines = [BASELINE] + [e for e in args.engines if e != BASELINE]
    for round_index in range(args.rounds):
        for engine in engines:
            kept = row["results"].get(engine)
            if kept is not None and kept["status"] != "ok":
                continue                       # failed in an earlier round: once is enough
            label = ENGINES[engine].label + (f" (round {round_index + 1})" if round_index else "")
            log(f"{head}: {label} ...")
            outputs = os.path.join(tmp, f"{name}.{engine}.out.npz") if kept is None else None
            r = run_worker(engine, path, feeds_path, tmp, args, outputs=outputs)
            if outputs and r["status"] == "ok" and engine != BASELINE:
                r["max_abs_diff"] = max_abs_diff(outputs, expected)
            row["results"][engine] = better_round(kept, r)
            log(f"{head}: {label}: {report.one_line(r)}")
    return row


def better_round(kept, new: dict) -> dict:
    """The round with the lower median (the first round's accuracy check travels with it);
    every round's median is listed in `round_medians_s`."""
    if kept is None:
        return {**new, "round_medians_s": [new.get("median_s")]}
    medians = kept["round_medians_s"] + [new.get("median_s")]
    if new["status"] == "ok" and new["median_s"] < kept["median_s"]:
        return {**new, "max_abs_diff": kept.get("max_abs_diff"), "round_medians_s": medians}
    return {**kept, "round_medians_s": medians}


def add_ratios(rows: list, engines: list) -> dict:
    """Per model: each engine's ratios to onnxruntime 1 thread; overall: geometric means."""
    keys = {"latency": "median_s", "session": "session_s", "peak": "peak_mb"}
    logs = {e: {k: [] for k in keys} for e in engines}
    for row in rows:
        base = row["results"].get(BASELINE)
        if not base or base["status"] != "ok":
            continue
        for engine, r in row["results"].items():
            if r["status"] != "ok":
                continue
            r["ratio"] = {}
            for kind, field in keys.items():
                floor = 1.0 if kind == "peak" else 0.0   # under 1 MB the peak ratio is noise
                b, v = base.get(field), r.get(field)
                if b is None or v is None or b <= floor or v <= 0:
                    r["ratio"][kind] = None
                    continue
                r["ratio"][kind] = v / b
                logs[engine][kind].append(math.log(v / b))
    return {e: {kind: ({"value": math.exp(sum(v) / len(v)), "models": len(v)} if v else None)
                for kind, v in per.items()} for e, per in logs.items()}


def slowest(rows: list, k: int) -> list:
    ranked = [(r["results"]["edgerun"]["ratio"]["latency"], r) for r in rows
              if r["results"].get("edgerun", {}).get("ratio", {}).get("latency")]
    ranked.sort(key=lambda t: -t[0])
    return ranked[:k]


def profile_slowest(rows: list, args, tmp: str) -> list:
    picked = slowest(rows, args.profile_top) if "edgerun" in args.engines else []
    found = []
    for i, (ratio, row) in enumerate(picked, 1):
        log(f"[profile {i}/{len(picked)}] {row['name']}: edgerun per operator ...")
        r = run_worker("edgerun", row["path"], os.path.join(tmp, f"{row['name']}.feeds.npz"),
                       tmp, args, profile=3)
        found.append({"model": row["name"], "latency_ratio": ratio, **r})
    return found


def environment() -> dict:
    import numpy as np
    info = {"python": platform.python_version(), "platform": platform.platform(),
            "machine": platform.machine(), "cpu_count": os.cpu_count(), "numpy": np.__version__}
    for module in ("onnxruntime", "onnx", "edgerun"):
        try:
            info[module] = __import__(module).__version__
        except Exception:
            info[module] = None
    try:
        from threadpoolctl import threadpool_info
        info["numpy_blas"] = [{"api": p.get("internal_api"), "threads": p.get("num_threads")}
                              for p in threadpool_info()]
    except ImportError:
        pass
    return info


def main(argv=None) -> int:
    args = parse_args(argv)
    cases = select(args.models)
    os.makedirs(args.out, exist_ok=True)
    byte_compile_edgerun()
    started = time.time()
    rows = []
    with tempfile.TemporaryDirectory(prefix="edgerun-bench-") as tmp:
        for i, (name, load) in enumerate(cases.items(), 1):
            rows.append(bench_model(i, len(cases), name, load, args, tmp))
        geomean = add_ratios(rows, args.engines)
        profiles = profile_slowest(rows, args, tmp) if args.profile_top > 0 else []
    methods = {r.get("memory_method") for row in rows for r in row["results"].values()} - {None}
    data = {
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        "seconds": round(time.time() - started, 1),
        "settings": {"repeat": args.repeat, "warmup": args.warmup, "rounds": args.rounds,
                     "min_time_s": args.min_time_s, "budget_s": args.budget_s,
                     "reference_cap_s": args.cap_s, "baseline": BASELINE},
        "environment": environment(),
        "memory_method": sorted(methods),
        "latency": "median of the timed runs after the warm-up (perf_counter around run()), "
                   "the lowest of the engine's rounds",
        "engines": {e: ENGINES[e].label for e in args.engines},
        "engine_env": {e: dict(ENGINES[e].env) for e in args.engines},
        "models": rows,
        "geomean": geomean,
        "profiles": profiles,
    }
    paths = report.write_all(data, args.out)
    print(paths["markdown_text"])
    for kind in ("json", "markdown", "png"):
        if paths.get(kind):
            log(f"wrote {paths[kind]}")
    if paths.get("png_skipped"):
        log(paths["png_skipped"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
