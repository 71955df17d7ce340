"""Session creation on very large graphs: does loading scale linearly in the number of nodes?

    python -m bench.load [--nodes 10000,100000] [--out DIR]

Graphs of N tiny nodes in three shapes (a fan-out of Identity nodes from one input of which
only one is an output, so nearly all are dead; a chain of Identity nodes; a fan-out of
N Add nodes that are all outputs) are created by edgerun and by onnxruntime (one thread),
each timed once after a warm-up on a small graph. Reported: seconds, the ratio to
onnxruntime, and edgerun's seconds per 1,000 nodes at each size (flat when linear).
Results: DIR/results.json and DIR/results.md (default reports/bench_load/).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "reports", "bench_load")
SHAPES = ("identity_fanout_dead", "identity_chain", "add_fanout_outputs")


def graph(shape: str, n: int) -> bytes:
    from onnx import TensorProto, helper

    if shape == "identity_chain":
        nodes = [helper.make_node("Identity", [f"y{i - 1}" if i else "x"], [f"y{i}"])
                 for i in range(n)]
        outputs = [f"y{n - 1}"]
    elif shape == "identity_fanout_dead":
        nodes = [helper.make_node("Identity", ["x"], [f"y{i}"]) for i in range(n)]
        outputs = ["y0"]
    else:
        nodes = [helper.make_node("Add", ["x", "x"], [f"y{i}"]) for i in range(n)]
        outputs = [f"y{i}" for i in range(n)]
    g = helper.make_graph(nodes, shape, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                       [1])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1])
                           for o in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def timed(create) -> float:
    started = time.perf_counter()
    create()
    return time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="10000,100000")
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    import onnxruntime

    import edgerun

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    warm = graph("identity_chain", 10)
    edgerun.InferenceSession(warm)
    onnxruntime.InferenceSession(warm, options)
    rows = []
    for shape in SHAPES:
        for n in [int(v) for v in args.nodes.split(",")]:
            model = graph(shape, n)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours = timed(lambda: edgerun.InferenceSession(model))
            theirs = timed(lambda: onnxruntime.InferenceSession(model, options))
            rows.append({"graph": shape, "nodes": n, "edgerun_s": round(ours, 3),
                         "onnxruntime_s": round(theirs, 3), "ratio": round(ours / theirs, 2),
                         "edgerun_s_per_1000_nodes": round(ours / n * 1000, 4)})
            print(f"{shape:22} {n:>7} nodes: edgerun {ours:7.2f} s, onnxruntime "
                  f"{theirs:7.2f} s ({ours / theirs:.2f}x)", file=sys.stderr, flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    lines = ["| graph | nodes | edgerun s | onnxruntime s | ratio | edgerun s / 1000 nodes |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['graph']} | {r['nodes']} | {r['edgerun_s']} | {r['onnxruntime_s']} | "
              f"{r['ratio']}x | {r['edgerun_s_per_1000_nodes']} |" for r in rows]
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
