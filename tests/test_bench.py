"""The CPU benchmark (bench/): a quick smoke run on one tiny model, and its small pieces.

No timing assertions: only that the runner produces the JSON fields, the Markdown and a PNG.
"""
import importlib.util
import json
import subprocess
import sys

import pytest

from conftest import ROOT, need

if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

ENGINES = ["edgerun", "ort_1thread", "ort_default", "reference"]


def test_smoke_run_writes_json_markdown_and_png(tmp_path):
    need(importlib.util.find_spec("matplotlib") is not None, "matplotlib",
         "pip install matplotlib")
    done = subprocess.run([sys.executable, "-m", "bench", "--models", "digits_mlp",
                           "--repeat", "2", "--min-time-s", "0", "--profile-top", "1",
                           "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[1/1] digits_mlp: edgerun CPU" in done.stderr        # progress
    data = json.loads((tmp_path / "results.json").read_text())
    assert list(data["engines"]) == ENGINES
    (row,) = data["models"]
    assert row["name"] == "digits_mlp" and row["status"] == "ok"
    for engine in ENGINES:
        r = row["results"][engine]
        assert r["status"] == "ok", (engine, r)
        for field in ("session_s", "first_run_s", "median_s", "min_s", "peak_mb", "runs"):
            assert r[field] >= 0, (engine, field)
        assert r["ratio"]["latency"] > 0, engine
    assert row["results"]["reference"]["runs"] == 3  # a first run, then three timed
    assert row["results"]["edgerun"]["runs"] == 2
    for engine in ENGINES:                # two rounds by default: the better median is kept
        r = row["results"][engine]
        assert len(r["round_medians_s"]) == 2 and r["median_s"] == min(r["round_medians_s"])
    assert ": edgerun CPU (1 thread) (round 2): median" in done.stderr
    # the engines computed the same thing as onnxruntime (labels and probabilities)
    assert row["results"]["edgerun"]["max_abs_diff"] < 1e-4
    assert data["geomean"]["ort_1thread"]["latency"]["value"] == pytest.approx(1.0)
    assert data["geomean"]["edgerun"]["latency"]["models"] == 1
    assert data["memory_method"] and data["environment"]["onnxruntime"]
    (profile,) = data["profiles"]
    assert profile["model"] == "digits_mlp" and profile["ops"], profile
    md = (tmp_path / "results.md").read_text()
    assert "| digits_mlp |" in md and "geometric mean of ratios" in md
    assert md.strip() in done.stdout
    assert (tmp_path / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_timed_runs_stop_after_enough_runs_and_time_or_the_budget():
    from types import SimpleNamespace

    from bench.worker import timed_runs
    clock = {"now": 0.0}

    def run(feeds, cost=0.25):                 # a fake engine: each run advances the clock
        clock["now"] += cost
    args = SimpleNamespace(min_time_s=1.0, budget_s=30.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("bench.worker.time.perf_counter", lambda: clock["now"])
        assert len(timed_runs(run, {}, 3, args)) == 4          # 3 runs, then until 1 s
        assert len(timed_runs(run, {}, 20, args)) == 20        # 20 runs (past 1 s)
        args.budget_s = 2.0
        assert len(timed_runs(run, {}, 20, args)) == 9         # the budget ends it


def test_nested_profile_events_are_not_counted_twice():
    from bench.op_profile import summarize

    def node(op, ts, dur):
        return {"cat": "Node", "name": op, "ts": ts, "dur": dur, "args": {"op_name": op}}
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 100},
              node("If", 10, 50), node("Conv", 15, 30), node("Relu", 50, 5), node("Add", 70, 20)]
    ops = {o["op"]: o["ms_per_run"] * 1e3 for o in summarize(events, runs=1)["ops"]}
    assert ops == {"Conv": 30, "Add": 20, "If": 15, "Relu": 5}


def test_minilm_without_torch_is_skipped_with_the_install_command(monkeypatch):
    from bench import cases
    from bench.models import export_minilm

    monkeypatch.setattr(export_minilm, "is_cached", lambda: False)
    monkeypatch.setattr(export_minilm, "missing_tools", lambda: ["torch"])
    with pytest.raises(cases.Skip, match="pip install torch==2.13.0 transformers tokenizers"):
        cases.all_cases()["minilm_l6_seq16"]()


def test_unknown_model_pattern_names_the_choices():
    from bench import cases

    with pytest.raises(SystemExit, match="no model matches 'nope'.*digits_mlp"):
        cases.select("nope")


def test_overhead_bench_times_a_deep_chain_on_every_engine(tmp_path):
    from bench import overhead
    assert overhead.main(["--depth", "40", "--min-time-s", "0.02", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["depth"] == 40 and set(data["engines"]) == {"edgerun", "ort_1thread",
                                                              "reference"}
    for r in data["engines"].values():
        assert r["runs"] >= 5 and r["us_per_node"] > 0
        assert r["max_abs_diff"] < 1e-5          # the same chain computed everywhere
    assert "us per node" in (tmp_path / "results.md").read_text()


def test_cold_start_bench_times_edgerun_visits_in_chromium(tmp_path):
    """bench.web.cold_start on the digits model, edgerun only (onnxruntime-web is a bench
    dependency, not a test one): two visits give correct outputs (checked by the bench against
    the CPU provider), and the second fetches next to nothing (HTTP cache, Cache Storage) and
    restores the session the first kept (web/kept.js: no Python started)."""
    import json

    from browser_harness import require_browser

    require_browser()
    from bench.web.cold_start import main

    assert main(["--models", "digits_mlp", "--engines", "edgerun", "--visits", "2",
                 "--out", str(tmp_path)]) == 0
    with open(tmp_path / "cold_start.json") as f:
        first, second = json.load(f)["digits_mlp"]["edgerun"]
    assert first["ms"] > 0 and second["ms"] > 0
    assert first["bytes"] > 10e6, first            # Pyodide, the snapshot, the wheel, the model
    assert second["bytes"] < first["bytes"] / 100, (first, second)
    assert (first["restored"], second["restored"]) == (0, 1)     # trials that restored
    assert (tmp_path / "cold_start.md").read_text().count("| digits_mlp |") == 2


def test_a_second_visit_reads_the_inflated_snapshot_the_first_kept(tmp_path):
    """The first visit inflates the start-up snapshot and, once it has its first result,
    keeps the inflated image in Cache Storage (web/runtime.js afterFirstResult: writing it
    earlier competed with the session's creation); a later visit that starts Python (another
    model, so no kept session answers it) reads the image instead of inflating it. Both
    visits' outputs match the CPU provider."""
    import urllib.parse

    from browser_harness import require_browser

    require_browser()
    from bench.web import cold_start
    from edgerun import InferenceSession

    site = tmp_path / "site"
    cases = cold_start.build_site(str(site), ["digits_mlp", "silero_vad"], engines=("edgerun",))
    server, base = cold_start.serve(str(site), {"bytes": 0})
    try:
        marks = {}
        for name in ("digits_mlp", "silero_vad"):
            url = f"{base}/edgerun.html?case=" + urllib.parse.quote(json.dumps(cases[name]))
            result = cold_start.visit(url, str(tmp_path / "profile"), linger_ms=1500)
            assert "error" not in result, result.get("error")
            path, feeds = cold_start.real_models()[name]()
            expected = InferenceSession(path, providers=["cpu"]).run(None, feeds)
            assert cold_start.max_diff(result, expected) <= cold_start.TOLERANCE, name
            marks[name] = {m.removeprefix("edgerun:") for m, _ in result["marks"]}
    finally:
        server.shutdown()
    assert "snapshot-inflated" in marks["digits_mlp"], marks
    assert "snapshot-read" in marks["silero_vad"], marks
    assert "snapshot-inflated" not in marks["silero_vad"], marks


def test_web_package_staleness_follows_the_engine_sources(tmp_path):
    """python -m bench.web measures web/dist's wheel: build_web.py stamps the engine sources
    it was built from, and --check (which bench.web runs first) tells a stale build."""
    import os
    import shutil

    spec = importlib.util.spec_from_file_location(
        "build_web", os.path.join(ROOT, "scripts", "build_web.py"))
    build_web = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_web)
    engine = tmp_path / "edgerun"
    (engine / "ops").mkdir(parents=True)
    (engine / "ops" / "kernel.py").write_text("x = 1\n")
    before = build_web.engine_sources_hash(str(engine))
    (engine / "__pycache__").mkdir()
    (engine / "__pycache__" / "kernel.cpython-311.pyc").write_bytes(b"\0")
    assert build_web.engine_sources_hash(str(engine)) == before      # caches do not count
    (engine / "ops" / "kernel.py").write_text("x = 2\n")
    assert build_web.engine_sources_hash(str(engine)) != before
    dist = tmp_path / "dist"
    dist.mkdir()
    assert not build_web.is_current(str(dist))                        # never built
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), dist / "edgerun.whl")
    (dist / build_web.SOURCES_STAMP).write_text(build_web.engine_sources_hash() + "\n")
    assert build_web.is_current(str(dist))
    (dist / build_web.SOURCES_STAMP).write_text("0" * 64 + "\n")
    assert not build_web.is_current(str(dist))


def test_bench_web_keeps_each_models_fastest_round_and_ignores_failed_ones():
    """bench.web alternates the engines for --rounds rounds: per engine and model the fastest
    run that worked is reported, whatever round it came from."""
    from bench.web.__main__ import keep_fastest

    best: dict = {}
    keep_fastest(best, {"a": {"run_ms": 5.0}, "b": {"error": "x"}, "c": {"run_ms": 1.0}})
    keep_fastest(best, {"a": {"run_ms": 3.0}, "b": {"run_ms": 9.0}, "c": {"error": "y"}})
    keep_fastest(best, {"a": {"run_ms": 4.0}, "b": {"run_ms": 10.0}})
    assert best == {"a": {"run_ms": 3.0}, "b": {"run_ms": 9.0}, "c": {"run_ms": 1.0}}
