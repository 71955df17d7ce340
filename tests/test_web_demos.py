"""The in-page demos (examples/web-digits, examples/web-playground) and the Web Worker
option of the JavaScript API, driven in headless Chromium (WebGPU on SwiftShader).

The pages are served from a folder laid out like the repository root (tests/browser_harness.py),
with a wheel built from these sources, so they load exactly as `python -m edgerun.web.serve`
serves them from a checkout.
"""
import io
import json
import os
import tempfile
import urllib.request

import numpy as np
import pytest

import edgerun
from browser_harness import PYODIDE, chromium, console_errors, repo_site, require_browser, served
from conftest import ROOT

DIGITS = os.path.join(ROOT, "examples", "digits", "digits_mlp.onnx")
RTOL, ATOL = 1e-3, 1e-4


@pytest.fixture(scope="module")
def site():
    require_browser()
    with tempfile.TemporaryDirectory() as tmp:
        with served(repo_site(os.path.join(tmp, "site")), also=(ROOT, PYODIDE, tmp)) as url:
            with chromium(os.path.join(tmp, "profile")) as context:
                yield context, url


def _open(site, path: str):
    context, url = site
    page = context.new_page()
    errors = console_errors(page)
    page.goto(f"{url}/{path}")
    return page, errors


def _shipped_snapshots(site) -> dict:
    """The start-up snapshots the served site has (pack.web.write_engine wrote its list)."""
    context, url = site
    with urllib.request.urlopen(f"{url}/web/dist/edgerun-snapshot.json") as response:
        return json.load(response)["variants"]


def _cpu(x: np.ndarray):
    return edgerun.InferenceSession(DIGITS, providers=["cpu"]).run(None, {"input": x})


# ---- the digits demo ----------------------------------------------------------------------

def _strokes(image: np.ndarray, cell: float, threshold: float = 6) -> list:
    """Pen strokes tracing an 8x8 digit scaled up to cells of `cell` pixels: horizontal runs
    of inked cells, vertical runs, and single cells as dots (lists of canvas points)."""
    on = image.reshape(8, 8) >= threshold
    centre = lambda i: (i + 0.5) * cell            # noqa: E731
    strokes = []
    for lines, point in ((on, lambda r, c: (centre(c), centre(r))),
                         (on.T, lambda c, r: (centre(c), centre(r)))):
        for i, line in enumerate(lines):
            j = 0
            while j < 8:
                if not line[j]:
                    j += 1
                    continue
                start = j
                while j < 8 and line[j]:
                    j += 1
                strokes.append([point(i, start), point(i, j - 1)])
    return strokes


def _draw(page, strokes: list) -> None:
    box = page.locator("#pad").bounding_box()
    for stroke in strokes:
        (x0, y0), (x1, y1) = stroke
        page.mouse.move(box["x"] + x0, box["y"] + y0)
        page.mouse.down()
        page.mouse.move(box["x"] + x1, box["y"] + y1)
        page.mouse.up()


def _dark_and_light(png: bytes) -> tuple:
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    return (pixels < 64).mean(), (pixels > 192).mean()


def test_digits_demo_classifies_drawn_digits(site, tmp_path):
    page, errors = _open(site, "examples/web-digits/")
    page.wait_for_function("window.digitsDemo && (digitsDemo.ready || digitsDemo.error)")
    state = page.evaluate("digitsDemo")
    assert state["ready"], (state["error"], errors)
    assert "webgpu" in state["providers"], state["providers"]   # SwiftShader; wasm takes the rest
    # Python started from the start-up snapshot made in Chromium, wherever the site has one
    # (always in CI, whose build makes it: scripts/build_web.py)
    shipped = _shipped_snapshots(site)
    assert "jspi" in shipped or not os.environ.get("CI"), shipped
    assert state["startup"]["snapshot"] == ("jspi" in shipped), state["startup"]

    holdout = np.load(os.path.join(ROOT, "examples", "digits", "digits_holdout.npz"))
    picks = [int(np.flatnonzero(holdout["y"] == d)[0]) for d in range(10)]
    width = page.evaluate("document.getElementById('pad').width")
    right, shown = 0, []
    for i in picks:
        page.click("#clear")
        _draw(page, _strokes(holdout["X"][i], width / 8))
        page.wait_for_function("digitsDemo.classified === digitsDemo.version")
        state = page.evaluate("digitsDemo")
        assert state["error"] is None, state["error"]
        digit = page.text_content("#digit")
        assert digit == str(state["label"])
        # what the page computed equals the CPU provider on the page's own 8x8 input
        x = np.array(state["input"], np.float32).reshape(1, 64)
        label, probabilities = _cpu(x)
        assert state["label"] == label[0]
        np.testing.assert_allclose(state["probabilities"], probabilities[0], rtol=RTOL, atol=ATOL)
        right += int(digit) == holdout["y"][i]
        shown.append(f"{holdout['y'][i]}->{digit}")
    latency = page.text_content("#latency")
    assert latency.endswith(" ms") and float(latency.split()[0]) > 0
    provider = page.text_content("#provider")
    assert all(p in provider for p in state["providers"]), (provider, state["providers"])
    # the whole model runs on webgpu (SwiftShader); the demo's wasm fallback is for devices
    # that fail while running
    assert not state["fallback"], state["fallback"]
    dark, light = _dark_and_light(page.locator("#pad").screenshot())
    page.screenshot(path=str(tmp_path / "digits.png"))
    assert dark > 0.02 and light > 0.3, (dark, light)       # the last digit is on the pad
    print(f"\ndigits demo: {right}/10 drawn digits right ({' '.join(shown)}), "
          f"last run {latency} on {provider}")
    assert right >= 7, shown        # 8 of 10 when written (53 of the first 60 holdout rows)
    assert not errors, errors
    page.close()


# ---- the playground -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def playground(site):
    """The playground page, shared: the worker test's page-thread run reuses its Pyodide."""
    page, errors = _open(site, "examples/web-playground/")
    page.wait_for_function("window.playground && playground.ready")
    yield page, errors
    page.close()


def test_playground_loads_a_model_file_and_shows_placement_and_outputs(playground, tmp_path):
    page, errors = playground
    page.uncheck("#p-webgpu")                      # wasm alone: the whole model runs there
    page.set_input_files("#model", DIGITS)
    page.wait_for_function("playground.loaded === 1 || playground.error")
    state = page.evaluate("playground")
    assert state["error"] is None, (state["error"], errors)
    rows = [r.split("\t") for r in page.locator("#placement tbody tr").all_inner_texts()]
    placed = state["info"]["explain"]["nodes"]
    assert [r[0] for r in rows] == [n["node"] for n in placed]
    assert {r[2] for r in rows} == {"wasm"}, rows
    from edgerun.onnx import load_model
    # each shown by its name: the nodes the page's optimizer leaves keep the file's names
    # (its fusions name a fused node after the first node it replaces), and the MLP's
    # MatMul + Add + Relu became fused Gemms there as natively
    names = {n.name for n in load_model(DIGITS).graph.nodes}
    assert {r[0] for r in rows} - {"wasm_program"} <= names, (names, rows)
    assert "com.edgerun::FusedGemm" in {r[1] for r in rows}, rows
    assert page.text_content("#placement-summary").startswith(f"wasm: {len(rows)} nodes")
    assert "[?, 64]" in page.text_content("#inputs")

    # an uploaded .npy input: the outputs shown are the CPU provider's
    x = np.load(os.path.join(ROOT, "examples", "digits", "digits_holdout.npz"))["X"][:5]
    np.save(tmp_path / "five.npy", x.astype(np.float32))
    page.set_input_files("#npy-input", str(tmp_path / "five.npy"))
    page.fill("#repeat", "3")
    page.click("#run")
    page.wait_for_function("playground.runs === 1 || playground.error")
    state = page.evaluate("playground")
    assert state["error"] is None, state["error"]
    label, probabilities = _cpu(x.astype(np.float32))
    assert state["outputs"]["label"]["data"] == label.tolist()
    assert state["outputs"]["probabilities"]["dims"] == [5, 10]
    np.testing.assert_allclose(np.array(state["outputs"]["probabilities"]["data"]).reshape(5, 10),
                               probabilities, rtol=RTOL, atol=ATOL)
    assert len(state["timings"]["runs"]) == 3
    assert "median of the next 2" in page.text_content("#timings")
    assert page.locator("#outputs tbody tr").count() == 2
    print(f"\nplayground: digits on wasm, {page.text_content('#timings')}")
    assert not errors, errors


# ---- the Web Worker option ----------------------------------------------------------------

def _deep_mlp(width: int = 1024, layers: int = 24) -> bytes:
    """Enough matrix products (~0.4 s on wasm at 256 rows) that a run on the page's thread
    stops its frames: one shared weight, MatMul + Relu repeated, then a 10-wide head."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    w = numpy_helper.from_array((rng.standard_normal((width, width)) * np.sqrt(2 / width))
                                .astype(np.float32), "w")
    head = numpy_helper.from_array(rng.standard_normal((width, 10)).astype(np.float32), "head")
    nodes, last = [], "x"
    for i in range(layers):
        nodes += [helper.make_node("MatMul", [last, "w"], [f"m{i}"]),
                  helper.make_node("Relu", [f"m{i}"], [f"r{i}"])]
        last = f"r{i}"
    nodes.append(helper.make_node("MatMul", [last, "head"], ["y"]))
    graph = helper.make_graph(nodes, "deep", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["batch", width])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, ["batch", 10])], [w, head])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]
                             ).SerializeToString()


# Runs the model once to warm up, then once more while requestAnimationFrame counts frames.
FRAMES_DURING_RUN = """async ([model, rows, width, worker]) => {
  const { InferenceSession, Tensor } = await import("/web/index.js");
  const session = await InferenceSession.create(model, { executionProviders: ["wasm"], worker });
  const data = Float32Array.from({ length: rows * width }, (_, i) => Math.sin(i));
  const x = new Tensor("float32", data, [rows, width]);
  await session.run({ x });
  const frames = [];
  let counting = true;
  const tick = () => { frames.push(performance.now()); if (counting) requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const start = performance.now();
  const { y } = await session.run({ x });
  const end = performance.now();
  counting = false;
  const marks = [start, ...frames.filter((t) => t > start && t < end), end];
  const gaps = marks.slice(1).map((t, i) => t - marks[i]);
  const placed = [...new Set(session.explain().nodes.map((n) => n.provider))];
  await session.release();
  return { ms: end - start, frames: marks.length - 2, maxGap: Math.max(...gaps),
           y: Array.from(y.data), dims: y.dims, placed };
}"""

# A worker session's errors: Python's message, traceback and all; released sessions refuse.
WORKER_ERRORS = """async (model) => {
  const { InferenceSession, Tensor } = await import("/web/index.js");
  const message = (e) => [e.message, typeof e.pythonTraceback];
  const out = {};
  try { await InferenceSession.create(new Uint8Array([8, 1, 2]), { worker: true }); }
  catch (e) { out.corrupt = message(e); }
  const session = await InferenceSession.create(model, { executionProviders: ["wasm"], worker: true });
  try { await session.run({ x: new Tensor("int32", new Int32Array(4), [1, 4]) }); }
  catch (e) { out.feed = message(e); }
  await session.release();
  try { await session.run({}); } catch (e) { out.released = message(e); }
  return out;
}"""


def test_worker_option_keeps_the_page_responsive(site, playground):
    url = site[1]
    page, errors = playground
    model = _deep_mlp()
    page.route("**/deep.onnx", lambda route: route.fulfill(body=model,
                                                           content_type="application/octet-stream"))
    rows, width = 256, 1024
    worker = page.evaluate(FRAMES_DURING_RUN, [f"{url}/deep.onnx", rows, width, True])
    local = page.evaluate(FRAMES_DURING_RUN, [f"{url}/deep.onnx", rows, width, False])

    x = np.sin(np.arange(rows * width, dtype=np.float64)).astype(np.float32).reshape(rows, width)
    (expected,) = edgerun.InferenceSession(model, providers=["cpu"]).run(None, {"x": x})
    for got in (worker, local):
        assert got["dims"] == [rows, 10] and got["placed"] == ["wasm"]
        np.testing.assert_allclose(np.array(got["y"], np.float32).reshape(rows, 10), expected,
                                   rtol=RTOL, atol=ATOL * np.abs(expected).max())
    print(f"\nworker: run {worker['ms']:.0f} ms, {worker['frames']} frames, longest gap "
          f"{worker['maxGap']:.0f} ms; page thread: run {local['ms']:.0f} ms, "
          f"{local['frames']} frames, longest gap {local['maxGap']:.0f} ms")
    assert local["maxGap"] > 0.8 * local["ms"], local           # the control: frames stop
    assert worker["ms"] > 200, worker                            # long enough to tell
    assert worker["frames"] >= 5 and worker["maxGap"] < 0.5 * worker["ms"], worker

    errors_seen = page.evaluate(WORKER_ERRORS, f"{url}/deep.onnx")
    assert "InvalidProtobuf: model bytes (3 bytes) is not a valid ONNX model" in \
        errors_seen["corrupt"][0], errors_seen
    assert errors_seen["corrupt"][1] == "string"                  # the traceback came along
    assert "input 'x': expected tensor(float), got tensor(int32)" in errors_seen["feed"][0]
    assert errors_seen["released"][0] == "InferenceSession.run: this session was released"
    assert not errors, errors
