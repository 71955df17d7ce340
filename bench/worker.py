"""Measure one engine on one model in this (fresh) process; the runner starts one per pair.

    python -m bench.worker ENGINE MODEL.onnx FEEDS.npz RESULT.json [--outputs OUT.npz] ...

Order: import the engine and load the feeds, take the memory baseline, create the session
(timed), run warm-ups (the first one timed apart: edgerun plans on its first run), then timed
runs until `--repeat` runs and `--min-time-s` have passed, or `--budget-s` (at least 3 runs).
Engines marked `runs_once` (the ReferenceEvaluator) run once, stopped after `--cap-s`; where
three more runs fit in `--cap-s`, the runs after it (at least 3, and `--min-time-s`) give the
median instead of that first run. With `--profile N` it instead profiles
edgerun per operator type (bench/op_profile.py). The result is written as JSON.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import signal
import statistics
import time

from bench.engines import ENGINES
from bench.memory import PeakMemory


class CapExceeded(Exception):
    pass


@contextlib.contextmanager
def time_cap(seconds: float):
    """Raise CapExceeded after `seconds` (Unix; elsewhere the runner's timeout stops it)."""
    if not seconds or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum, frame):
        raise CapExceeded()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# timed runs after the first of an engine that runs_once, when they fit in --cap-s
SLOW_ENGINE_RUNS = 3


def timed(run, feeds):
    t0 = time.perf_counter()
    outputs = run(feeds)
    return time.perf_counter() - t0, outputs


def timed_runs(run, feeds, at_least: int, args) -> list:
    """Run times until `at_least` runs and --min-time-s have passed, or --budget-s (at least
    3 runs)."""
    times = []
    started = time.perf_counter()
    while True:
        times.append(timed(run, feeds)[0])
        elapsed = time.perf_counter() - started
        if elapsed > args.budget_s and len(times) >= 3:
            return times
        if len(times) >= at_least and elapsed >= args.min_time_s:
            return times


def measure(engine, model: str, feeds: dict, args) -> tuple:
    memory = PeakMemory()
    memory.start()
    t0 = time.perf_counter()
    run = engine.open(model)
    session_s = time.perf_counter() - t0
    if engine.runs_once:
        try:
            with time_cap(args.cap_s):
                first_s, outputs = timed(run, feeds)
        except CapExceeded:
            return {"status": "skipped", "reason": f"one run takes > {args.cap_s:g} s",
                    "session_s": session_s}, None
        times = [first_s]
        if first_s * (SLOW_ENGINE_RUNS + 1) <= args.cap_s:
            # the first run also pays one-time costs (page faults, numpy's first calls):
            # time more and report their median, as for the other engines
            times = timed_runs(run, feeds, SLOW_ENGINE_RUNS, args)
    else:
        first_s, outputs = timed(run, feeds)
        for _ in range(args.warmup - 1):
            run(feeds)
        times = timed_runs(run, feeds, args.repeat, args)
    result = {"status": "ok", "session_s": session_s, "first_run_s": first_s,
              "median_s": statistics.median(times), "min_s": min(times),
              "runs": len(times), "peak_mb": memory.peak_mb(),
              "memory_method": memory.method}
    return result, outputs


def save_outputs(path: str, outputs) -> None:
    import numpy as np
    arrays = {f"out{i}": o for i, o in enumerate(outputs) if isinstance(o, np.ndarray)}
    np.savez(path, **arrays)


def main(argv=None) -> int:
    import numpy as np

    parser = argparse.ArgumentParser(prog="python -m bench.worker")
    parser.add_argument("engine", choices=sorted(ENGINES))
    parser.add_argument("model")
    parser.add_argument("feeds")
    parser.add_argument("result")
    parser.add_argument("--outputs", help="save the outputs (.npz) for the accuracy check")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--min-time-s", type=float, default=1.0)
    parser.add_argument("--budget-s", type=float, default=30.0)
    parser.add_argument("--cap-s", type=float, default=60.0)
    parser.add_argument("--profile", type=int, default=0, metavar="RUNS")
    args = parser.parse_args(argv)
    engine = ENGINES[args.engine]
    engine.prepare()
    with np.load(args.feeds) as data:
        feeds = {k: data[k] for k in data.files}
    try:
        if args.profile:
            from bench.op_profile import profile_ops
            result, outputs = {"status": "ok", **profile_ops(args.model, feeds, args.profile)}, None
        else:
            result, outputs = measure(engine, args.model, feeds, args)
    except Exception as e:   # the runner reports it in the table and goes on
        result, outputs = {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:500]}, None
    if outputs is not None and args.outputs:
        save_outputs(args.outputs, outputs)
    with open(args.result, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
