"""Per-node cost of `run()` on a deep graph of tiny operators: the interpreter's overhead,
with almost no arithmetic behind it.

    python -m bench.overhead [--depth 1000] [--min-time-s 1] [--out DIR]

A chain of `depth` elementwise nodes (Add, Mul, Relu, Sigmoid, Sub with constants, in turn)
over a (1, 16) float32 tensor runs on edgerun's CPU provider, onnxruntime with one thread and
onnx's ReferenceEvaluator, each timed for at least --min-time-s after a warm-up. Reported:
median run time, microseconds per node and the ratio to onnxruntime. Results:
DIR/results.json and DIR/results.md (default reports/bench_overhead/).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "reports", "bench_overhead")
WIDTH = 16
CYCLE = ("Add", "Mul", "Relu", "Sigmoid", "Sub")


def chain_model(depth: int) -> bytes:
    """`depth` tiny nodes in a chain, as a serialized ONNX model (input x, output y)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []
    current = "x"
    for i in range(depth):
        op = CYCLE[i % len(CYCLE)]
        out = "y" if i == depth - 1 else f"v{i}"
        inputs = [current]
        if op in ("Add", "Mul", "Sub"):
            const = f"c{i}"
            value = 1.0001 if op == "Mul" else 0.01
            inits.append(numpy_helper.from_array(np.full((WIDTH,), value, np.float32), const))
            inputs.append(const)
        nodes.append(helper.make_node(op, inputs, [out], name=f"n{i}"))
        current = out
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def _engines():
    def edgerun_run(model):
        import edgerun
        sess = edgerun.InferenceSession(model, providers=["CPUExecutionProvider"])
        return lambda feeds: sess.run(None, feeds)

    def ort_run(model):
        import onnxruntime
        so = onnxruntime.SessionOptions()
        so.intra_op_num_threads = 1
        sess = onnxruntime.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        return lambda feeds: sess.run(None, feeds)

    def reference_run(model):
        from onnx.reference import ReferenceEvaluator
        ref = ReferenceEvaluator(model)
        return lambda feeds: ref.run(None, feeds)

    return {"edgerun": ("edgerun CPU", edgerun_run),
            "ort_1thread": ("onnxruntime 1 thread", ort_run),
            "reference": ("onnx ReferenceEvaluator", reference_run)}


def time_runs(run, feeds, min_time_s: float, min_runs: int = 5) -> list:
    run(feeds)                                     # warm-up (edgerun plans on its first run)
    times, started = [], time.perf_counter()
    while len(times) < min_runs or time.perf_counter() - started < min_time_s:
        t0 = time.perf_counter()
        run(feeds)
        times.append(time.perf_counter() - t0)
    return times


def measure(depth: int, min_time_s: float, progress=print) -> dict:
    import numpy as np

    model = chain_model(depth)
    feeds = {"x": np.linspace(-1, 1, WIDTH, dtype=np.float32).reshape(1, WIDTH)}
    results, outputs = {}, {}
    for name, (label, opener) in _engines().items():
        progress(f"{label}: {depth} nodes ...")
        run = opener(model)
        times = time_runs(run, feeds, min_time_s)
        median = statistics.median(times)
        outputs[name] = run(feeds)[0]
        results[name] = {"label": label, "median_s": median, "runs": len(times),
                         "us_per_node": median / depth * 1e6}
    base = results["ort_1thread"]["median_s"]
    for name, r in results.items():
        r["ratio"] = r["median_s"] / base
        r["max_abs_diff"] = float(np.max(np.abs(outputs[name] - outputs["ort_1thread"])))
    return {"depth": depth, "width": WIDTH, "ops": list(CYCLE), "min_time_s": min_time_s,
            "engines": results}


def markdown(data: dict) -> str:
    lines = [f"# Per-node overhead: a chain of {data['depth']} tiny nodes "
             f"({', '.join(data['ops'])} on a 1x{data['width']} float32 tensor)", "",
             "| engine | median run ms | us per node | ratio to onnxruntime |",
             "|---|---|---|---|"]
    for r in data["engines"].values():
        lines.append(f"| {r['label']} | {r['median_s'] * 1e3:.3f} | {r['us_per_node']:.2f} | "
                     f"{r['ratio']:.2f}x |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.overhead", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depth", type=int, default=1000, help="nodes in the chain")
    parser.add_argument("--min-time-s", type=float, default=1.0,
                        help="time each engine for at least this long")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"output folder ({DEFAULT_OUT})")
    args = parser.parse_args(argv)
    data = measure(args.depth, args.min_time_s,
                   progress=lambda text: print(text, file=sys.stderr, flush=True))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(data, f, indent=1)
    text = markdown(data)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
