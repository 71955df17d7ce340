"""Profiling as onnxruntime does it: `SessionOptions.enable_profiling = True`, run, then
`session.end_profiling()` writes a Chrome-trace JSON (open it in chrome://tracing or
https://ui.perfetto.dev) and returns its path. A small HTML page with time per operator type
is written next to it for a quick look."""
from __future__ import annotations

import collections
import datetime
import html
import json
import os
import threading
import time


class Profiler:
    def __init__(self, prefix: str):
        self.prefix = prefix
        self.origin = time.perf_counter()
        self.events: list = []
        self._lock = threading.Lock()

    def record_session(self, name: str, started: float, seconds: float) -> None:
        self._add({"cat": "Session", "name": name, **self._times(started, seconds), "args": {}})

    def record_run(self, steps: list, started: float, seconds: float) -> None:
        events = [{"cat": "Session", "name": "model_run", **self._times(started, seconds),
                   "args": {}}]
        for name, op_type, provider, t0, dt in steps:
            events.append({"cat": "Node", "name": name or op_type, **self._times(t0, dt),
                           "args": {"op_name": op_type, "provider": provider}})
        with self._lock:
            self.events += events

    def _add(self, event: dict) -> None:
        with self._lock:
            self.events.append(event)

    def _times(self, started: float, seconds: float) -> dict:
        return {"ph": "X", "pid": os.getpid(), "tid": threading.get_ident() % 100000,
                "ts": round((started - self.origin) * 1e6, 3), "dur": round(seconds * 1e6, 3)}

    def write(self) -> str:
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        path = os.path.abspath(f"{self.prefix}_{stamp}.json")
        with self._lock:
            events = list(self.events)
        with open(path, "w") as f:
            json.dump(events, f)
        with open(path[:-5] + ".html", "w") as f:
            f.write(_summary_html(events, os.path.basename(path)))
        return path


def _summary_html(events: list, trace_name: str) -> str:
    per_op: dict = collections.defaultdict(lambda: [0.0, 0])
    runs = [e["dur"] for e in events if e["name"] == "model_run"]
    for e in events:
        if e["cat"] == "Node":
            key = (e["args"]["op_name"], e["args"]["provider"])
            per_op[key][0] += e["dur"]
            per_op[key][1] += 1
    total = sum(v[0] for v in per_op.values()) or 1.0
    rows = []
    for (op, provider), (dur, count) in sorted(per_op.items(), key=lambda kv: -kv[1][0]):
        width = 100.0 * dur / total
        rows.append(f"<tr><td>{html.escape(op)}</td><td>{html.escape(provider)}</td>"
                    f"<td>{count}</td><td>{dur / 1e3:.3f}</td><td>{width:.1f}%</td>"
                    f"<td><div style='background:#4a7;height:12px;width:{width:.1f}%'></div>"
                    f"</td></tr>")
    mean_run = f"{sum(runs) / len(runs) / 1e3:.3f} ms" if runs else "n/a"
    return (f"<!doctype html><meta charset=utf-8><title>edgerun profile</title>"
            f"<style>body{{font-family:sans-serif}}td,th{{padding:2px 8px}}"
            f"td:last-child{{width:40%}}</style>"
            f"<h1>edgerun profile</h1><p>{len(runs)} runs, mean {mean_run}. Full trace: "
            f"{html.escape(trace_name)} (open in chrome://tracing or ui.perfetto.dev)</p>"
            f"<table><tr><th>operator</th><th>provider</th><th>calls</th><th>total ms</th>"
            f"<th>share</th><th></th></tr>{''.join(rows)}</table>")
