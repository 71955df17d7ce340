"""Cold start in a browser: time from navigation to the first correct result, edgerun against
onnxruntime-web, on a first visit (fresh Chromium profile) and a second one (the same profile,
browser restarted), with the bytes each visit fetched and, for edgerun, how many trials
restored a session an earlier visit kept (web/kept.js) instead of starting Python.

    python -m bench.web.cold_start [--models NAMES] [--visits N] [--out DIR]

Both engines run the same model with the same feeds on the wasm provider (onnxruntime-web's
wasm backend, one thread) from one static site served on 127.0.0.1 with a one-hour
Cache-Control, as a CDN would. A page imports its engine, creates a session on the model's
URL, runs it once and reports `performance.now()` (milliseconds since navigation began) when
the outputs arrive; the outputs are compared with edgerun's CPU provider here. Each visit is
a new browser process; visits after the first reuse the profile (HTTP cache, V8's code
cache, Cache Storage). OUT/cold_start.md holds the table, OUT/cold_start.json the numbers.

Needs: `apt-get install -y chromium`, `pip install playwright`, `npm ci` (node_modules/pyodide),
`npm install --prefix bench/web` (onnxruntime-web) and `python scripts/build_web.py`.
"""
from __future__ import annotations

import argparse
import fnmatch
import functools
import http.server
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading

import numpy as np

from edgerun.pack.web import PYODIDE_FILES

from .cases import ROOT, WEB_TYPES, real_models

HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = os.environ.get("EDGERUN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-quic"]
DEFAULT_MODELS = "ppocr_mobile_cls,silero_vad,digits_mlp"
ORT_DIST = os.path.join(HERE, "node_modules", "onnxruntime-web", "dist")
ORT_FILES = ["ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm"]
TOLERANCE = 1e-3        # largest |engine - edgerun CPU| accepted as a correct result

# One page per engine; both read the case (model URL, feed files) from the query string.
PAGE = """<!doctype html><meta charset="utf-8"><title>{engine}</title>
<script type="importmap">{{"imports": {{"pyodide": "./pyodide/pyodide.mjs"}}}}</script>
<script type="module">
{imports}
const params = new URLSearchParams(location.search);
const modelCase = JSON.parse(params.get("case"));
async function feedsOf(c) {{
  const feeds = {{}};
  await Promise.all(c.feeds.map(async (f) => {{
    const bytes = await (await fetch(f.file)).arrayBuffer();
    const Array_ = {{float32: Float32Array, int64: BigInt64Array, int32: Int32Array,
                    uint8: Uint8Array, int8: Int8Array, float64: Float64Array}}[f.type];
    feeds[f.name] = new Tensor(f.type, new Array_(bytes), f.dims);
  }}));
  return feeds;
}}
try {{
  const [session, feeds] = await Promise.all([
    InferenceSession.create(modelCase.model, {{ executionProviders: ["wasm"] }}),
    feedsOf(modelCase)]);
  const outputs = await session.run(feeds);
  const ms = performance.now();
  const marks = performance.getEntriesByType("mark").map((m) => [m.name, m.startTime]);
  window.result = {{ ms, marks, outputs: session.outputNames.map((n) => ({{
    name: n, dims: outputs[n].dims, data: Array.from(outputs[n].data, Number) }})) }};
}} catch (e) {{
  window.result = {{ error: String(e && e.stack || e) }};
}}
</script>
"""
IMPORTS = {
    "edgerun": 'import { InferenceSession, Tensor } from "./edgerun/index.js";',
    "ort_web": 'import { InferenceSession, Tensor, env } from "./ort/ort.wasm.min.mjs";\n'
               'env.wasm.numThreads = 1;\nenv.wasm.wasmPaths = new URL("./ort/", location.href).href;',
}
LABELS = {"edgerun": "edgerun (Pyodide, wasm)", "ort_web": "onnxruntime-web 1.30.0 (wasm, 1 thread)"}


# ---- the site ----------------------------------------------------------------------------

def build_site(folder: str, names: list, engines=tuple(IMPORTS)) -> dict:
    """The static site the engines load from; returns name -> case (URLs relative to it)."""
    os.makedirs(folder, exist_ok=True)
    _copy_files(os.path.join(ROOT, "node_modules", "pyodide"), PYODIDE_FILES,
                os.path.join(folder, "pyodide"))
    edgerun_web = os.path.join(folder, "edgerun")
    _copy_files(os.path.join(ROOT, "web"),
                [n for n in os.listdir(os.path.join(ROOT, "web")) if n.endswith(".js")],
                edgerun_web)
    _copy_files(os.path.join(ROOT, "web", "dist"), _built_files(), os.path.join(edgerun_web, "dist"))
    if "ort_web" in engines:
        _copy_files(ORT_DIST, ORT_FILES, os.path.join(folder, "ort"))
    for engine, imports in IMPORTS.items():
        with open(os.path.join(folder, f"{engine}.html"), "w") as f:
            f.write(PAGE.format(engine=engine, imports=imports))
    cases = {}
    for name in names:
        path, feeds = real_models()[name]()
        os.makedirs(os.path.join(folder, "models"), exist_ok=True)
        shutil.copyfile(path, os.path.join(folder, "models", f"{name}.onnx"))
        items = []
        for i, (feed_name, value) in enumerate(feeds.items()):
            value = np.asarray(value)      # (ascontiguousarray would make a scalar 1-d)
            file = f"models/{name}.{i}.bin"
            with open(os.path.join(folder, file), "wb") as f:
                f.write(value.tobytes())
            items.append({"name": feed_name, "type": WEB_TYPES[value.dtype.name],
                          "dims": list(value.shape), "file": file})
        cases[name] = {"model": f"models/{name}.onnx", "feeds": items}
    return cases


def _built_files() -> list:
    """web/dist as `npm run build` leaves it: the wheel and the start-up snapshots."""
    description = os.path.join(ROOT, "web", "dist", "edgerun-snapshot.json")
    if not os.path.isfile(description):
        sys.exit(f"missing {description}: run `python scripts/build_web.py`")
    with open(description) as f:
        variants = json.load(f)["variants"]
    return ["edgerun.whl", "edgerun-snapshot.json"] + [v["data"] for v in variants.values()]


def _copy_files(source: str, names: list, target: str) -> None:
    os.makedirs(target, exist_ok=True)
    for name in names:
        path = os.path.join(source, name)
        if not os.path.exists(path):
            sys.exit(f"missing {path}: run `npm ci`, `npm install --prefix bench/web` and "
                     "`python scripts/build_web.py`")
        shutil.copyfile(path, os.path.join(target, name))


class _CountingHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with a CDN's caching (one hour) and a count of the body bytes sent."""
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".mjs": "text/javascript", ".js": "text/javascript",
                      ".wasm": "application/wasm", ".whl": "application/zip"}

    def __init__(self, *args, counter=None, **kwargs):
        self.counter = counter
        super().__init__(*args, **kwargs)

    def end_headers(self):
        self.send_header("Cache-Control", "public, max-age=3600")
        super().end_headers()

    def copyfile(self, source, outputfile):
        data = source.read()
        self.counter["bytes"] += len(data)
        outputfile.write(data)

    def log_message(self, *args):
        pass


def serve(folder: str, counter: dict):
    handler = functools.partial(_CountingHandler, directory=folder, counter=counter)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


# ---- the visits --------------------------------------------------------------------------

def visit(url: str, profile: str, linger_ms: int, timeout_ms: int = 240_000) -> dict:
    """One visit in a new browser process on `profile`: the page's result. The page stays
    open `linger_ms` after it, as a reader's would: browsers write some caches (V8's
    compiled wasm) only after the code has run a while."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = context.new_page()
            page.goto(url)
            page.wait_for_function("window.result !== undefined", timeout=timeout_ms)
            result = page.evaluate("window.result")
            page.wait_for_timeout(linger_ms)
            return result
        finally:
            context.close()


def max_diff(result: dict, expected: list) -> float:
    diffs = [float(np.max(np.abs(np.asarray(o["data"], np.float64)
                                 - np.asarray(e, np.float64).ravel()), initial=0.0))
             for o, e in zip(result["outputs"], expected)]
    return max(diffs, default=0.0)


def measure(engine: str, base: str, case: dict, expected: list, visits: int,
            counter: dict, linger_ms: int = 0) -> list:
    """[{ms, bytes, diff}] for visit 1..visits of `engine` on one fresh profile."""
    query = json.dumps(case, separators=(",", ":"))
    url = f"{base}/{engine}.html?case={query}"
    rows = []
    with tempfile.TemporaryDirectory(prefix=f"cold-{engine}-") as profile:
        for number in range(1, visits + 1):
            counter["bytes"] = 0
            result = visit(url, profile, linger_ms)
            if "error" in result:
                raise RuntimeError(f"{engine}, visit {number}: {result['error']}")
            diff = max_diff(result, expected)
            if diff > TOLERANCE:
                raise RuntimeError(f"{engine}, visit {number}: outputs differ from edgerun's "
                                   f"CPU provider by {diff:.2e} (> {TOLERANCE})")
            restored = any(name == "edgerun:session-restored" for name, _ in result["marks"])
            rows.append({"ms": result["ms"], "bytes": counter["bytes"], "diff": diff,
                         "restored": restored})
            print(f"  {engine} visit {number}: {result['ms']:.0f} ms, "
                  f"{counter['bytes'] / 1e6:.1f} MB{phases(result['marks'])}", file=sys.stderr)
    return rows


def phases(marks: list) -> str:
    """edgerun's start-up marks (web/runtime.js `mark`) as '; name ms, ...' or ''."""
    ours = [(name.removeprefix("edgerun:"), ms) for name, ms in marks if name.startswith("edgerun:")]
    return "; " + ", ".join(f"{name} {ms:.0f}" for name, ms in ours) if ours else ""


def markdown(table: dict, engines: list) -> str:
    lines = ["| model | visit | " + " | ".join(f"{LABELS[e]} ms (MB fetched)" for e in engines)
             + " | edgerun / ort-web |", "|---" * (len(engines) + 3) + "|"]
    for name, per_engine in table.items():
        visits = len(next(iter(per_engine.values())))
        for v in range(visits):
            cells = [f"{per_engine[e][v]['ms']:.0f} ({per_engine[e][v]['bytes'] / 1e6:.1f})"
                     for e in engines]
            ratio = ("-" if len(engines) < 2 else
                     f"{per_engine['edgerun'][v]['ms'] / per_engine['ort_web'][v]['ms']:.2f}x")
            lines.append(f"| {name} | {v + 1} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated names or globs")
    parser.add_argument("--engines", default="edgerun,ort_web")
    parser.add_argument("--visits", type=int, default=2)
    parser.add_argument("--trials", type=int, default=1,
                        help="fresh profiles per engine; each visit's median is reported")
    parser.add_argument("--linger", type=float, default=5.0,
                        help="seconds each page stays open after its result (caches written late)")
    parser.add_argument("--out", default=os.path.join(ROOT, "reports", "bench_web"))
    args = parser.parse_args(argv)
    patterns = args.models.split(",")
    names = [n for n in sorted(real_models()) if any(fnmatch.fnmatch(n, p) for p in patterns)]
    engines = args.engines.split(",")
    site = os.path.join(args.out, "cold_site")
    shutil.rmtree(site, ignore_errors=True)
    cases = build_site(site, names, engines)
    counter = {"bytes": 0}
    server, base = serve(site, counter)
    import edgerun

    table = {}
    try:
        for name in names:
            path, feeds = real_models()[name]()
            expected = edgerun.InferenceSession(path, providers=["cpu"]).run(None, feeds)
            print(f"== {name}", file=sys.stderr)
            table[name] = {}
            for engine in engines:
                trials = [measure(engine, base, cases[name], expected, args.visits, counter,
                                   int(args.linger * 1000))
                          for _ in range(args.trials)]
                table[name][engine] = [
                    {"ms": statistics.median(t[v]["ms"] for t in trials),
                     "bytes": statistics.median(t[v]["bytes"] for t in trials),
                     "diff": max(t[v]["diff"] for t in trials),
                     "restored": sum(t[v]["restored"] for t in trials)} for v in range(args.visits)]
    finally:
        server.shutdown()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "cold_start.json"), "w") as f:
        json.dump(table, f, indent=1)
    text = markdown(table, engines)
    with open(os.path.join(args.out, "cold_start.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
