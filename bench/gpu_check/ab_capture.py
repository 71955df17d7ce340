"""WebGPU graph capture off vs on, in one process, per benchmark row: median run time and
the largest difference between the two runs' outputs (a replay is the same computation).

    python bench/gpu_check/ab_capture.py minilm_l6_seq16 ppocr_mobile_cls_batch1 ...
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import edgerun  # noqa: E402
from bench.cases import all_cases  # noqa: E402
from edgerun.providers.webgpu.provider import shared_context  # noqa: E402


def median_ms(sess, feeds, seconds: float = 2.0) -> tuple:
    for _ in range(2):
        out = sess.run(None, feeds)
    times: list = []
    end = time.perf_counter() + seconds
    while len(times) < 5 or (time.perf_counter() < end and len(times) < 50):
        start = time.perf_counter()
        out = sess.run(None, feeds)
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times)), out


def largest_difference(a, b) -> float:
    return max((float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
                for x, y in zip(a, b) if np.asarray(x).size), default=0.0)


def main(names) -> None:
    cases = all_cases()
    gpu = shared_context()
    print(f"{'model':34s} {'off ms':>8s} {'on ms':>8s} {'speedup':>8s} {'max|diff|':>10s}  "
          f"replays (captured by)")
    for name in names:
        path, feeds = cases[name]()
        results = {}
        for capture in (False, True):
            sess = edgerun.InferenceSession(path, providers=[
                ("webgpu", {"graph_capture": capture}), "cpu"])
            before = gpu.stats["replays"]
            ms, out = median_ms(sess, feeds)
            results[capture] = (ms, out, gpu.stats["replays"] - before,
                                sess.explain()["graph_capture"])
        (off, off_out, _, _), (on, on_out, replays, by) = results[False], results[True]
        print(f"{name:34s} {off:8.2f} {on:8.2f} {off / on:7.2f}x "
              f"{largest_difference(off_out, on_out):10.2e}  {replays} ({by})", flush=True)
    print("recorded runs not replayable:", gpu.programs_refused)


if __name__ == "__main__":
    main(sys.argv[1:])
