"""Where edgerun spends its time in a model, per operator type.

Uses edgerun's own profiler (SessionOptions.enable_profiling, onnxruntime's Chrome-trace
format): every node run is an event with its op type and duration. Events are summed per op
type (self time: If, Loop and Scan exclude their subgraphs' nodes, which are events of their
own) and divided by the number of runs. Nothing in the runtime is changed.

    OPENBLAS_NUM_THREADS=1 python -m bench.op_profile MODEL.onnx FEEDS.npz [--runs N]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile


def profile_ops(path: str, feeds: dict, runs: int = 3, warmup: int = 1) -> dict:
    """{"run_ms": mean run time, "node_ms": time inside nodes, "ops": [{op, ms_per_run,
    calls_per_run, share}] sorted by time, largest first}."""
    import edgerun

    with tempfile.TemporaryDirectory() as tmp:
        so = edgerun.SessionOptions()
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tmp, "profile")
        sess = edgerun.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        for _ in range(warmup + runs):
            sess.run(None, feeds)
        with open(sess.end_profiling()) as f:
            events = json.load(f)
    return summarize(events, runs, skip_runs=warmup)


def summarize(events: list, runs: int, skip_runs: int = 0) -> dict:
    """Sum node events per op type over the runs after the first `skip_runs` (the first
    runs plan and bind kernels: not the steady state)."""
    run_events = sorted((e for e in events if e["name"] == "model_run"), key=lambda e: e["ts"])
    kept = run_events[skip_runs:skip_runs + runs]
    if not kept:
        return {"run_ms": None, "node_ms": None, "ops": []}
    start, end = kept[0]["ts"], kept[-1]["ts"] + kept[-1]["dur"]
    nodes = [e for e in events if e.get("cat") == "Node" and start <= e["ts"] <= end]
    per_op = collections.defaultdict(lambda: [0.0, 0])
    for e, self_us in zip(nodes, self_times(nodes)):
        per_op[e["args"]["op_name"]][0] += self_us
        per_op[e["args"]["op_name"]][1] += 1
    n = len(kept)
    node_us = sum(v[0] for v in per_op.values())
    ops = [{"op": op, "ms_per_run": us / n / 1e3, "calls_per_run": count / n,
            "share": us / node_us if node_us else 0.0}
           for op, (us, count) in sorted(per_op.items(), key=lambda kv: -kv[1][0])]
    return {"run_ms": sum(e["dur"] for e in kept) / n / 1e3, "node_ms": node_us / n / 1e3,
            "ops": ops}


def self_times(nodes: list) -> list:
    """Each event's duration minus the events nested inside it: If, Loop and Scan contain
    the nodes of their subgraphs, which are recorded too and must not be counted twice."""
    order = sorted(range(len(nodes)), key=lambda i: (nodes[i]["ts"], -nodes[i]["dur"]))
    own = [e["dur"] for e in nodes]
    open_events: list = []     # indices of events that contain the current one
    for i in order:
        e = nodes[i]
        while open_events and (nodes[open_events[-1]]["ts"] + nodes[open_events[-1]]["dur"]
                               <= e["ts"]):
            open_events.pop()
        if open_events:
            own[open_events[-1]] -= e["dur"]
        open_events.append(i)
    return [max(0.0, t) for t in own]


def main(argv=None) -> int:
    import numpy as np

    parser = argparse.ArgumentParser(prog="python -m bench.op_profile", description=__doc__)
    parser.add_argument("model")
    parser.add_argument("feeds", help=".npz with one array per model input")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    with np.load(args.feeds) as data:
        feeds = {k: data[k] for k in data.files}
    result = profile_ops(args.model, feeds, args.runs)
    print(f"run {result['run_ms']:.2f} ms, inside nodes {result['node_ms']:.2f} ms")
    for row in result["ops"][:15]:
        print(f"  {row['op']:28s} {row['ms_per_run']:9.3f} ms  {row['share']:6.1%}  "
              f"x{row['calls_per_run']:g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
