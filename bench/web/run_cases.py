"""Runs model cases through edgerun's web bridge natively, with numpy blocked: the same
numpy-free path the JavaScript API takes inside Pyodide, on the wasm provider under wasmtime.

    python bench/web/run_cases.py CASES.json OUT_DIR [--repeat N] [--budget-ms MS] [--warmup-ms MS]

The Python twin of run_cases.mjs: same cases, same results.json fields and output files
(the last run's outputs, so replayed programs are what gets checked), plus the wasm
provider's program counts ("programs": recorded, replayed, refused with reasons).
"""
from __future__ import annotations

import sys

sys.modules["numpy"] = None     # noqa: E402 - before edgerun is imported: prove it needs none

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402


def run_case(case: dict, out_dir: str, repeat: int, budget_ms: float, warmup_ms: float) -> dict:
    from edgerun.web.bridge import WebSession

    feeds = []
    for f in case["feeds"]:
        with open(f["file"], "rb") as fh:
            feeds.append((f["name"], f["type"], f["dims"], fh.read()))
    with open(case["model"], "rb") as fh:
        model = fh.read()
    t = time.perf_counter()
    session = WebSession(model, ["wasm"])
    create = time.perf_counter() - t
    t = time.perf_counter()
    outputs = session.run(feeds)
    first = time.perf_counter() - t
    warm = time.perf_counter()
    while repeat > 1 and (time.perf_counter() - warm) * 1e3 < warmup_ms:
        outputs = session.run(feeds)
    times, started = [], time.perf_counter()
    while len(times) < repeat - 1 and (len(times) < 2 or
                                       (time.perf_counter() - started) * 1e3 < budget_ms):
        t = time.perf_counter()
        outputs = session.run(feeds)
        times.append(time.perf_counter() - t)
    entries = []
    for i, (name, type_name, dims, data) in enumerate(outputs):
        file = os.path.join(out_dir, f"{case['name']}.{i}.out")
        with open(file, "wb") as fh:
            fh.write(data)
        entries.append({"name": name, "type": type_name, "dims": list(dims), "file": file})
    times.sort()
    programs = {p.name: p.stats["programs"] for p in session.session._providers
                if p.name == "wasm"}
    return {"name": case["name"], "engine": "edgerun-native", "create_ms": create * 1e3,
            "first_ms": first * 1e3,
            "run_ms": (times[len(times) // 2] if times else first) * 1e3,
            "runs": len(times) + 1, "outputs": entries, "programs": programs}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases")
    parser.add_argument("out_dir")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--budget-ms", type=float, default=3000)
    parser.add_argument("--warmup-ms", type=float, default=0)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    os.makedirs(args.out_dir, exist_ok=True)
    with open(args.cases) as f:
        cases = json.load(f)
    results = []
    for case in cases:
        try:
            result = run_case(case, args.out_dir, args.repeat, args.budget_ms, args.warmup_ms)
        except Exception as e:  # noqa: BLE001 - one failing model must not hide the others
            result = {"name": case["name"], "engine": "edgerun-native",
                      "error": f"{type(e).__name__}: {e}"}
        results.append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "outputs"}), flush=True)
    with open(os.path.join(args.out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
