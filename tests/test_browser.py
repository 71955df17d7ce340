"""edgerun in a real browser: headless Chromium drives Pyodide + the edgerun wheel, and the
WebGPU provider runs its WGSL kernels through `navigator.gpu` (SwiftShader, Chromium's
software adapter, enabled by --enable-unsafe-webgpu).

Pyodide here has no numpy, so the browser sessions have no CPU provider: the models are ones
the WebGPU provider claims whole. Their outputs are compared with the native CPU provider
(rtol 1e-3, atol 1e-3). SwiftShader is slow; the models are small.

Needs: `apt-get install -y chromium` (Debian's, at /usr/bin/chromium; override with
EDGERUN_CHROMIUM), `pip install playwright` (never `playwright install`: it downloads a
browser), and `npm ci` (node_modules/pyodide). The wheel is built here with `pip wheel`
(EDGERUN_WEB_WHEEL names a prebuilt one instead).
"""
import base64
import glob
import json
import os
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
import pytest

import edgerun
from conftest import ROOT, need

RTOL, ATOL = 1e-3, 1e-3
CHROMIUM = os.environ.get("EDGERUN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--enable-unsafe-webgpu", "--no-sandbox", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-quic"]
PYODIDE = os.path.join(ROOT, "node_modules", "pyodide")
WGSL_IN_WHEEL = "edgerun/providers/webgpu/wgsl/snippets.wgsl"
# models the WebGPU provider claims whole (no CPU provider inside a numpy-less Pyodide)
BROWSER_MODELS = ["light_squeezenet", "light_shufflenet"]

sys.path.insert(0, os.path.join(ROOT, "web", "browser"))


def _build_wheel(dest: str) -> str:
    prebuilt = os.environ.get("EDGERUN_WEB_WHEEL")
    if prebuilt:
        return prebuilt
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "--disable-pip-version-check", "-w", dest, ROOT], check=True)
    (wheel,) = glob.glob(os.path.join(dest, "edgerun-*.whl"))
    return wheel


def _site(tmp) -> str:
    """The served folder: Pyodide, the JavaScript API, the wheel (links, not copies)."""
    site = os.path.join(tmp, "site")
    os.makedirs(os.path.join(site, "node_modules"))
    os.symlink(PYODIDE, os.path.join(site, "node_modules", "pyodide"))
    os.symlink(os.path.join(ROOT, "web"), os.path.join(site, "web"))
    wheel = _build_wheel(os.path.join(tmp, "wheel"))
    with zipfile.ZipFile(wheel) as z:
        assert WGSL_IN_WHEEL in z.namelist(), (
            f"{wheel} lacks the WGSL kernels: pyproject's package-data needs "
            f"'providers/webgpu/wgsl/*.wgsl'")
    os.symlink(os.path.abspath(wheel), os.path.join(site, "edgerun.whl"))
    os.makedirs(os.path.join(site, "data"))
    return site


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need(False, "Playwright", "pip install playwright (no `playwright install`)")
    need(os.path.exists(CHROMIUM), f"Chromium at {CHROMIUM}", "apt-get install -y chromium")
    need(os.path.isdir(PYODIDE), "node_modules/pyodide", "npm ci")
    from serve import serve

    with tempfile.TemporaryDirectory() as tmp:
        site = _site(tmp)
        server, url = serve(site, also=(ROOT, PYODIDE, tmp))     # _site's links lead there
        try:
            with sync_playwright() as p:
                context = p.chromium.launch_persistent_context(
                    os.path.join(tmp, "profile"), executable_path=CHROMIUM, headless=True,
                    args=CHROMIUM_ARGS)
                page = context.new_page()
                page.set_default_timeout(240_000)
                page.goto(f"{url}/web/browser/harness.html")
                page.wait_for_function("window.harnessReady === true")
                started = page.evaluate("harness.start()")
                assert started["gpu"], "navigator.gpu is missing: is --enable-unsafe-webgpu on?"
                print(f"\nPyodide loaded in {started['pyodide_ms']:.0f} ms, edgerun unpacked and "
                      f"imported in {started['edgerun_ms']:.0f} ms")
                yield Browser(page, site)
                context.close()
        finally:
            server.shutdown()


class Browser:
    def __init__(self, page, site: str):
        self.page, self.site = page, site

    def put(self, name: str, data: bytes) -> str:
        """Serve `data` and copy it into Pyodide's file system as /data/name."""
        with open(os.path.join(self.site, "data", name), "wb") as f:
            f.write(data)
        self.page.evaluate("([u, p]) => harness.fetchFile(u, p)", [f"/data/{name}", f"/{name}"])
        return f"/{name}"

    def python(self, code: str, sync: bool = False):
        """Run `code` in Pyodide (its last expression must be a JSON string); the decoded
        result, or AssertionError with Python's traceback."""
        fn = "harness.pythonSync" if sync else "harness.python"
        result = self.page.evaluate(f"(c) => {fn}(c)", code)
        if not result["ok"]:
            raise BrowserError(result["error"])
        return json.loads(result["value"]) if result["value"] else None


class BrowserError(Exception):
    pass


# Runs inside Pyodide: a session on the WebGPU provider alone, fed HostTensors (no numpy).
RUN_MODEL = """
import base64, json, time
import edgerun
from edgerun.providers.webgpu.provider import shared_context
from edgerun.ir.host_tensor import HostTensor

sess = edgerun.InferenceSession({model!r}, providers=["webgpu"])
feeds = {{name: HostTensor(1, shape, open(path, "rb").read())
          for name, (shape, path) in {feeds!r}.items()}}
gpu = shared_context()
times = []
for _ in range({runs}):
    before = dict(gpu.stats)
    start = time.perf_counter()
    outputs = sess.run(None, feeds)
    times.append((time.perf_counter() - start) * 1000)
json.dumps({{"outputs": [[o.elem_type, list(o.shape), base64.b64encode(bytes(o.data)).decode()]
                        for o in outputs],
            "placed": sorted({{n["provider"] for n in sess.explain()["nodes"]}}),
            "ms": times, "adapter": gpu.device.description,
            "adapter_type": gpu.device.adapter_type,
            "last_run": {{k: v - before[k] for k, v in gpu.stats.items()}}}})
"""


@pytest.mark.parametrize("name", BROWSER_MODELS)
def test_model_on_browser_webgpu_matches_the_cpu_provider(browser, name):
    from real_models import REAL_MODELS

    path, feeds = REAL_MODELS[name]()
    with open(path, "rb") as f:
        model = browser.put(f"{name}.onnx", f.read())
    placed = {}
    for i, (input_name, value) in enumerate(feeds.items()):
        assert value.dtype == np.float32
        placed[input_name] = (list(value.shape), browser.put(f"{name}_in{i}.bin", value.tobytes()))
    result = browser.python(RUN_MODEL.format(model=model, feeds=placed, runs=2))

    expected = edgerun.InferenceSession(path, providers=["cpu"]).run(None, feeds)
    assert result["placed"] == ["webgpu"], result["placed"]
    assert result["adapter_type"] == "CPU", result["adapter"]        # SwiftShader
    assert len(result["outputs"]) == len(expected)
    for (code, shape, data), e in zip(result["outputs"], expected):
        got = np.frombuffer(base64.b64decode(data), np.float32).reshape(shape)
        assert code == 1 and got.shape == e.shape, (code, got.shape, e.shape)
        np.testing.assert_allclose(got, e, rtol=RTOL, atol=ATOL, err_msg=name)
    assert result["last_run"]["flushes"] == 1, result["last_run"]      # one command encoder
    print(f"\n{name} on {result['adapter']}: runs {[round(t) for t in result['ms']]} ms, "
          f"last run {result['last_run']}")


def test_wgsl_compile_errors_name_the_kernel_and_node(browser):
    code = """
import json, os
from edgerun.providers.webgpu.device import GpuError
from edgerun.providers.webgpu.gpu import GpuContext
from edgerun.providers.webgpu.provider import shared_context
from edgerun.providers.webgpu.shaders import ShaderLibrary, kernel_dir

os.makedirs("/broken", exist_ok=True)
for shared in ("snippets.wgsl", "lanes.wgsl"):
    open("/broken/" + shared, "w").write(open(kernel_dir() + "/" + shared).read())
open("/broken/broken.wgsl", "w").write("//! kernel bad\\nfn main() { let x: u32 = 1.5; }\\n")
ctx = GpuContext(shared_context().device, ShaderLibrary("/broken"))
ctx.label = "node 'n1' (Relu)"
try:
    ctx.dispatch("broken", "bad", ctx.empty((4,)), [], [], 4)
    message = None
except GpuError as e:
    message = str(e)
json.dumps(message)
"""
    message = browser.python(code)
    assert message and "n1" in message and "broken/bad" in message, message


def test_a_synchronous_entry_says_how_to_wait_for_the_gpu(browser):
    browser.put("mlp.onnx", _small_mlp())
    session = """
import edgerun
edgerun.InferenceSession("/mlp.onnx", providers=["webgpu"])
"""
    with pytest.raises(BrowserError, match=r"webgpu: waiting for the GPU needs .*callPromising"):
        browser.python(session, sync=True)
    code = """
import json
from edgerun.providers.webgpu.provider import shared_context
gpu = shared_context()
t = gpu.upload(__import__("edgerun.ir.host_tensor", fromlist=["HostTensor"]).HostTensor(
    1, (2,), bytes(8)))
gpu.download(t)
"""
    with pytest.raises(BrowserError, match=r"callPromising"):
        browser.python(code, sync=True)


def _small_mlp() -> bytes:
    """MatMul + Add + Relu + Softmax: operators both the wasm and WebGPU providers claim."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(3)
    w = helper.make_tensor("w", TensorProto.FLOAT, [16, 8],
                           rng.standard_normal(128).astype(np.float32).tolist())
    b = helper.make_tensor("b", TensorProto.FLOAT, [8],
                           rng.standard_normal(8).astype(np.float32).tolist())
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Softmax", ["r"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["batch", 16])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]
                             ).SerializeToString()


# The JavaScript API (web/index.js) as a page uses it.
JS_API_RUN = """async ([model, providers, data, dims]) => {
  const { InferenceSession, Tensor, env } = await import("/web/index.js");
  env.pyodide.indexURL = "/node_modules/pyodide/";
  env.wheelURL = "/edgerun.whl";
  const session = await InferenceSession.create(model, { executionProviders: providers });
  const placed = session.explain().nodes.map((n) => n.provider);
  const out = await session.run({ x: new Tensor("float32", new Float32Array(data), dims) });
  await session.release();
  return { y: Array.from(out.y.data), dims: out.y.dims, placed };
}"""


def _js_api_matches_the_cpu_provider(browser, provider: str):
    model = _small_mlp()
    browser.put("mlp.onnx", model)
    x = np.random.default_rng(4).standard_normal((3, 16)).astype(np.float32)
    got = browser.page.evaluate(JS_API_RUN, ["/data/mlp.onnx", [provider], x.ravel().tolist(),
                                             list(x.shape)])
    (expected,) = edgerun.InferenceSession(model, providers=["cpu"]).run(None, {"x": x})
    assert set(got["placed"]) == {provider}, got["placed"]
    assert got["dims"] == list(expected.shape)
    np.testing.assert_allclose(np.array(got["y"], np.float32).reshape(expected.shape), expected,
                               rtol=RTOL, atol=ATOL)


def test_js_api_in_chromium_on_wasm(browser):
    _js_api_matches_the_cpu_provider(browser, "wasm")


def test_js_api_in_chromium_on_webgpu(browser):
    _js_api_matches_the_cpu_provider(browser, "webgpu")


# Runs inside Pyodide: every case, on the WebGPU provider alone, compared in plain Python.
RUN_CASES = """
import json, math, pickle, warnings
from array import array
import edgerun
from edgerun.providers.webgpu.host_values import FORMATS
from edgerun.ir.host_tensor import HostTensor

def mismatch(expected, got):
    for (code, shape, data), g in zip(expected, got):
        if g.elem_type != code or list(g.shape) != shape:
            return f"got {{g}}, expected type {{code}} shape {{shape}}"
        if code == 8:                          # strings cross as lists of str
            if list(g.data) != data:
                return "different strings"
            continue
        if code not in (1, 11):
            if bytes(g.data) != data:
                return "different values"
            continue
        for e, v in zip(array(FORMATS[code], data), array(FORMATS[code], bytes(g.data))):
            if math.isnan(e) or math.isinf(e):
                if not ((math.isnan(e) and math.isnan(v)) or e == v):
                    return f"{{v}} where {{e}} was expected"
            elif abs(e - v) > {atol} + {rtol} * abs(e):
                return f"{{v}} where {{e}} was expected"
    return ""

passed, refused, wrong = [], {{}}, []
for name, model, feeds, expected in pickle.load(open({path!r}, "rb")):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sess = edgerun.InferenceSession(model, providers=["webgpu"])
            got = sess.run(None, {{n: HostTensor(c, s, b) for n, c, s, b in feeds}})
    except Exception as e:
        refused[name] = f"{{type(e).__name__}}: {{str(e)[:300]}}"
        continue
    problem = mismatch(expected, got)
    if problem:
        wrong.append(f"{{name}}: {{problem}}")
    else:
        passed.append(name)
json.dumps({{"passed": passed, "refused": refused, "wrong": wrong}})
"""


def _claimed_cases() -> list:
    """Conformance cases the WebGPU provider claims whole natively, with the CPU provider's
    outputs, as plain (type, shape, bytes) triples a numpy-less Pyodide can read."""
    import warnings

    from edgerun.ir.tensor_numpy import numpy_to_tensor
    from edgerun.tools.conformance import _shape_only, load_cases

    def plain(value, name):
        t = numpy_to_tensor(np.asarray(value), name)
        if t.elem_type == 8:                   # strings: a list of str (HostTensor's form)
            return t.elem_type, list(t.dims), [s.decode("utf-8") for s in t.strings]
        return t.elem_type, list(t.dims), t.raw

    cases = []
    for case in load_cases():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sess = edgerun.InferenceSession(case["model"], providers=["webgpu", "cpu"])
            if _shape_only(case) or any(n["provider"] != "webgpu"
                                        for n in sess.explain()["nodes"]):
                continue
            inputs, _ = case["data_sets"][0]
            if not all(isinstance(v, np.ndarray) for v in inputs):
                continue            # sequences and optionals: the harness sends tensors only
            feeds = dict(zip([i.name for i in sess.get_inputs()], inputs))
            expected = edgerun.InferenceSession(case["model"], providers=["cpu"]).run(None, feeds)
            cases.append((case["name"], case["model"],
                          [(n, *plain(v, n)) for n, v in feeds.items()],
                          [plain(e, "out") for e in expected]))
        except Exception:   # noqa: BLE001 - cases edgerun cannot run natively are not ours
            continue
    return cases


def test_conformance_cases_on_browser_webgpu_without_numpy(browser):
    """Every case the provider claims natively, run in the browser: what runs is right, and
    what cannot run without numpy's CPU kernels (integer operands, 3-D pooling, empty
    reductions) is refused with the node named, never computed wrong."""
    import pickle

    pytest.importorskip("onnx")
    cases = _claimed_cases()
    path = browser.put("cases.pkl", pickle.dumps(cases))
    result = browser.python(RUN_CASES.format(path=path, rtol=RTOL, atol=ATOL))
    assert not result["wrong"], "\n".join(result["wrong"])
    refused = result["refused"]
    unnamed = [f"{k}: {r}" for k, r in refused.items() if "NotImplementedOp" not in r
               and "without numpy" not in r]
    assert not unnamed, "\n".join(unnamed)
    if os.environ.get("EDGERUN_UPDATE_EXPECTED"):
        with open(BROWSER_REFUSED_PATH, "w") as f:
            json.dump({k: _refusal_reason(r) for k, r in refused.items()}, f, indent=1,
                      sort_keys=True)
            f.write("\n")
    expected = json.load(open(BROWSER_REFUSED_PATH))
    newly_refused = sorted(set(refused) - set(expected))
    now_passing = sorted(set(result["passed"]) & set(expected))
    assert not newly_refused, "refused in the browser, not listed in " \
        f"{os.path.basename(BROWSER_REFUSED_PATH)}:\n" + "\n".join(
            f"{k}: {refused[k]}" for k in newly_refused)
    assert not now_passing, (f"now pass in the browser: take them off "
                             f"{os.path.basename(BROWSER_REFUSED_PATH)}: {now_passing}")
    print(f"\nbrowser WebGPU conformance: {len(result['passed'])} of {len(cases)} pass, "
          f"{len(refused)} refused (each listed with its reason)")


# Cases the WebGPU provider claims natively but refuses in a page without numpy, with the
# reason (regenerate with EDGERUN_UPDATE_EXPECTED=1 after checking the difference)
BROWSER_REFUSED_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "browser_webgpu_refused.json")


def _refusal_reason(message: str) -> str:
    """The part of a refusal that names the operator and why (no values, no node names)."""
    return message.split(" at <")[0][:200]


# The JavaScript API on a real model: feeds and outputs cross as base64 bytes.
JS_API_MODEL = """async ([url, providers, feeds]) => {
  const { InferenceSession, Tensor, env } = await import("/web/index.js");
  env.pyodide.indexURL = "/node_modules/pyodide/";
  env.wheelURL = "/edgerun.whl";
  const arrays = { float32: Float32Array, int32: Int32Array, int64: BigInt64Array, bool: Uint8Array };
  const inputs = {};
  for (const [name, [type, dims, b64]] of Object.entries(feeds)) {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    inputs[name] = new Tensor(type, new arrays[type](bytes.buffer), dims);
  }
  const session = await InferenceSession.create(url, { executionProviders: providers });
  const placed = [...new Set(session.explain().nodes.map((n) => n.provider))];
  const started = performance.now();
  const out = await session.run(inputs);
  const ms = performance.now() - started;
  await session.release();
  const outputs = session.outputNames.map((name) => {
    const t = out[name];
    const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    let text = "";
    for (let i = 0; i < bytes.length; i += 8192) {
      text += String.fromCharCode(...bytes.subarray(i, i + 8192));
    }
    return [t.type, t.dims, btoa(text)];
  });
  return { placed, outputs, ms };
}"""
JS_TYPES = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.bool_}


def _model_and_feeds(name: str):
    """(path, feeds) of a real model, or of MiniLM-L6 at 16 tokens (exported once by
    bench/models/export_minilm.py, which needs torch the first time)."""
    if name == "minilm_l6":
        sys.path.insert(0, ROOT)
        from bench.models import export_minilm as ex
        need(ex.is_cached() or not ex.missing_tools(), "torch, transformers and tokenizers "
             "(to export MiniLM once)", ex.INSTALL)
        return ex.ensure_minilm(), dict(np.load(ex.feeds_path(16)))
    from real_models import REAL_MODELS
    return REAL_MODELS[name]()


JS_API_CASES = [(name, provider) for name in sorted(__import__("real_models").REAL_MODELS)
                + ["minilm_l6"] for provider in ("wasm", "webgpu")]


@pytest.mark.parametrize("name, provider", JS_API_CASES)
def test_js_api_runs_the_real_model_set_in_chromium(browser, name, provider):
    """Every model of the real-model set, and the MiniLM transformer, through
    InferenceSession.create / session.run in the page, on one provider alone (Pyodide has no
    numpy, so no CPU provider behind it)."""
    path, feeds = _model_and_feeds(name)
    with open(path, "rb") as f:
        browser.put(os.path.basename(path), f.read())
    js_feeds = {k: [str(v.dtype), list(v.shape), base64.b64encode(v.tobytes()).decode()]
                for k, v in feeds.items()}
    got = browser.page.evaluate(JS_API_MODEL, [f"/data/{os.path.basename(path)}", [provider],
                                               js_feeds])
    expected = edgerun.InferenceSession(path, providers=["cpu"]).run(None, feeds)
    assert got["placed"] == [provider], got["placed"]
    assert len(got["outputs"]) == len(expected)
    for (type_name, dims, data), e in zip(got["outputs"], expected):
        value = np.frombuffer(base64.b64decode(data), JS_TYPES[type_name]).reshape(dims)
        assert value.dtype == e.dtype and value.shape == e.shape, (type_name, dims, e.dtype)
        np.testing.assert_allclose(value, e, rtol=RTOL, atol=ATOL, err_msg=f"{name} {provider}")
    print(f"\n{name} on {provider} through the JS API: {got['ms']:.0f} ms")


# Tensor.fromImage / toImageData / toDataURL in a page (web/image.js), from every kind of
# source, against what numpy (and onnxruntime's Resize, for resizedWidth/Height) gives.
JS_FROM_IMAGE = """async ([pngURL, rgbaList, alphaList, W, H, options]) => {
  const { Tensor } = await import("/web/index.js");
  const opaque = Uint8ClampedArray.from(rgbaList);
  const drawnOn = (canvas) => {
    canvas.width = W;
    canvas.height = H;
    canvas.getContext("2d").putImageData(new ImageData(opaque, W, H), 0, 0);
    return canvas;
  };
  const image = new Image();
  image.src = pngURL;
  await image.decode();
  const loading = new Image();           // fromImage waits for an <img> still loading
  loading.src = pngURL;
  const sources = {
    imagedata: new ImageData(opaque, W, H),
    imagedata_alpha: new ImageData(Uint8ClampedArray.from(alphaList), W, H),
    plain_object: { data: Uint8Array.from(alphaList), width: W, height: H },
    image, loading,
    bitmap: await createImageBitmap(image),
    offscreen: drawnOn(new OffscreenCanvas(W, H)),
    canvas: drawnOn(document.createElement("canvas")),
    url: pngURL,
    url_object: new URL(pngURL),
    data_url: drawnOn(document.createElement("canvas")).toDataURL(),
  };
  const out = {};
  for (const [source, value] of Object.entries(sources)) {
    for (const [name, option] of Object.entries(options)) {
      const t = await Tensor.fromImage(value, option ?? undefined);
      out[`${source}/${name}`] = { type: t.type, dims: t.dims, data: Array.from(t.data) };
    }
  }
  const t = await Tensor.fromImage(sources.imagedata_alpha, { tensorFormat: "RGBA", dataType: "uint8" });
  const imageData = t.toImageData();
  out.to_image_data = { isImageData: imageData instanceof ImageData, width: imageData.width,
                        height: imageData.height, data: Array.from(imageData.data) };
  out.data_url = t.toDataURL();
  const opaqueTensor = await Tensor.fromImage(sources.imagedata, { tensorLayout: "NHWC" });
  const back = new Image();
  back.src = opaqueTensor.toDataURL({ tensorLayout: "NHWC" });
  await back.decode();
  const context = new OffscreenCanvas(W, H).getContext("2d");
  context.drawImage(back, 0, 0);
  out.decoded_by_the_browser = Array.from(context.getImageData(0, 0, W, H).data);
  out.errors = {};
  for (const [name, bad] of Object.entries({ missing: "/data/no-such-picture.png",
                                             broken: "data:image/png;base64,AAAA" })) {
    try {
      await Tensor.fromImage(bad);
      out.errors[name] = "no error";
    } catch (e) {
      out.errors[name] = e.message;
    }
  }
  return out;
}"""

FROM_IMAGE_OPTIONS = {
    "defaults": None,
    "bgr_nhwc_uint8": {"tensorFormat": "BGR", "tensorLayout": "NHWC", "dataType": "uint8"},
    "rbg_norm": {"tensorFormat": "RBG", "norm": {"mean": [58.4, 57.1, 57.4],
                                                   "bias": [-123.7, -116.3, -103.5]}},
    "rgba_scalar_norm": {"tensorFormat": "RGBA", "norm": {"mean": 127.5, "bias": -127.5}},
    "resized": {"resizedWidth": 11, "resizedHeight": 3},
    "resized_nhwc_uint8": {"resizedWidth": 4, "resizedHeight": 8, "tensorLayout": "NHWC",
                           "dataType": "uint8"},
}


def _onnxruntime_resize(rgba: np.ndarray, height: int, width: int) -> np.ndarray:
    """(H, W, 4) pixels resized by onnxruntime's Resize (linear, half_pixel), as float32."""
    import onnxruntime
    from onnx import TensorProto, helper

    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear",
                            coordinate_transformation_mode="half_pixel")
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4, *rgba.shape[:2]])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], [helper.make_tensor("sizes", TensorProto.INT64, [4],
                                                                [1, 4, height, width])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 10
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    x = rgba.astype(np.float32).transpose(2, 0, 1)[None]
    return session.run(None, {"x": x})[0][0].transpose(1, 2, 0)


def _from_image_expected(rgba: np.ndarray, option) -> np.ndarray:
    """The tensor fromImage gives for (H, W, 4) pixels, by onnxruntime-web's documented options."""
    option = option or {}
    pixels = rgba.astype(np.float64)
    if "resizedWidth" in option:
        pixels = _onnxruntime_resize(rgba, option["resizedHeight"], option["resizedWidth"])
    order = {"RGB": [0, 1, 2], "BGR": [2, 1, 0], "RBG": [0, 2, 1], "RGBA": [0, 1, 2, 3]}[
        option.get("tensorFormat", "RGB")]
    uint8 = option.get("dataType") == "uint8"
    norm = option.get("norm", {})

    def rgba(value, alpha):            # one number, or 3 or 4 in R, G, B, A order
        return np.array([value] * 4 if np.ndim(value) == 0 else [*value, alpha][:4], np.float64)

    mean = rgba(norm.get("mean", 1 if uint8 else 255), 1 if uint8 else 255)
    bias = rgba(norm.get("bias", 0), 0)
    values = (pixels[..., order] + bias[order]) / mean[order]
    values = np.clip(np.rint(values), 0, 255).astype(np.uint8) if uint8 else values.astype(np.float32)
    if option.get("tensorLayout", "NCHW") == "NCHW":
        values = values.transpose(2, 0, 1)
    return values[None]


def test_js_api_from_image_in_chromium_from_every_source(browser):
    """ImageData, a plain {data, width, height}, <img> (loaded and still loading), ImageBitmap,
    OffscreenCanvas, <canvas>, URL strings and objects, data: URLs; each with the default
    options, BGR/NHWC/uint8, norm as arrays and as numbers, RGBA, and resizing (up and down,
    compared with onnxruntime's Resize). toImageData gives an ImageData, toDataURL a PNG that
    Pillow and the browser both decode to the pixels."""
    import io

    from PIL import Image

    height, width = 5, 7
    rng = np.random.default_rng(11)
    opaque = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
    opaque[..., 3] = 255              # a canvas premultiplies alpha: drawn sources are opaque
    alpha = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
    png = io.BytesIO()
    Image.fromarray(opaque, "RGBA").save(png, format="PNG")
    browser.put("picture.png", png.getvalue())
    origin = browser.page.evaluate("location.origin")
    got = browser.page.evaluate(JS_FROM_IMAGE, [
        f"{origin}/data/picture.png", opaque.ravel().tolist(), alpha.ravel().tolist(), width,
        height, FROM_IMAGE_OPTIONS])

    sources = ["imagedata", "imagedata_alpha", "plain_object", "image", "loading", "bitmap",
               "offscreen", "canvas", "url", "url_object", "data_url"]
    for source in sources:
        pixels = alpha if source in ("imagedata_alpha", "plain_object") else opaque
        for name, option in FROM_IMAGE_OPTIONS.items():
            t = got[f"{source}/{name}"]
            want = _from_image_expected(pixels, option)
            assert t["type"] == str(want.dtype), (source, name, t["type"])
            assert t["dims"] == list(want.shape), (source, name, t["dims"], want.shape)
            tol = 1e-5 if "resized" in name and want.dtype == np.float32 else 1e-6
            atol = 1 if want.dtype == np.uint8 and "resized" in name else tol   # rounding at .5
            np.testing.assert_allclose(np.array(t["data"], np.float64).reshape(want.shape), want,
                                       rtol=tol, atol=atol, err_msg=f"{source} {name}")

    image = got["to_image_data"]
    assert image["isImageData"] and (image["width"], image["height"]) == (width, height)
    assert image["data"] == alpha.ravel().tolist()
    prefix = "data:image/png;base64,"
    assert got["data_url"].startswith(prefix)
    decoded = Image.open(io.BytesIO(base64.b64decode(got["data_url"][len(prefix):])))
    decoded.load()                    # checks the PNG's CRCs and its zlib stream
    assert decoded.mode == "RGBA" and decoded.size == (width, height)
    np.testing.assert_array_equal(np.asarray(decoded), alpha)
    assert got["decoded_by_the_browser"] == opaque.ravel().tolist()
    assert "cannot load an image from /data/no-such-picture.png" in got["errors"]["missing"]
    assert "cannot load an image from data:image/png;base64,AAAA" in got["errors"]["broken"]


# fromImage inside a module Web Worker: no document there, so a URL is fetched and decoded
# with createImageBitmap and read through an OffscreenCanvas; toDataURL needs no canvas.
JS_FROM_IMAGE_IN_WORKER = """async ([pngURL]) => {
  const source = `
    import { Tensor } from "${location.origin}/web/index.js";
    onmessage = async ({ data: url }) => {
      try {
        const fromURL = await Tensor.fromImage(url, { tensorFormat: "RGBA", dataType: "uint8" });
        const bitmap = await createImageBitmap(await (await fetch(url)).blob());
        const fromBitmap = await Tensor.fromImage(bitmap, { tensorLayout: "NHWC" });
        postMessage({ url: Array.from(fromURL.data), dims: fromURL.dims,
                      bitmap: Array.from(fromBitmap.data), bitmapDims: fromBitmap.dims,
                      dataURL: fromURL.toDataURL(), hasDocument: typeof document !== "undefined" });
      } catch (e) {
        postMessage({ error: String(e) });
      }
    };`;
  const worker = new Worker(URL.createObjectURL(new Blob([source], { type: "text/javascript" })),
                            { type: "module" });
  const result = await new Promise((resolve, reject) => {
    worker.onmessage = ({ data }) => resolve(data);
    worker.onerror = (e) => reject(new Error(e.message));
    worker.postMessage(pngURL);
  });
  worker.terminate();
  return result;
}"""


def test_js_api_from_image_in_a_web_worker(browser):
    import io

    from PIL import Image

    pixels = np.random.default_rng(12).integers(0, 256, (3, 4, 4), dtype=np.uint8)
    pixels[..., 3] = 255
    png = io.BytesIO()
    Image.fromarray(pixels, "RGBA").save(png, format="PNG")
    browser.put("worker_picture.png", png.getvalue())
    origin = browser.page.evaluate("location.origin")
    got = browser.page.evaluate(JS_FROM_IMAGE_IN_WORKER, [f"{origin}/data/worker_picture.png"])
    assert "error" not in got, got["error"]
    assert got["hasDocument"] is False
    assert got["dims"] == [1, 4, 3, 4]
    assert got["url"] == pixels.transpose(2, 0, 1).ravel().tolist()
    assert got["bitmapDims"] == [1, 3, 4, 3]
    np.testing.assert_allclose(got["bitmap"], (pixels[..., :3] / 255).ravel(), rtol=1e-6)
    decoded = Image.open(io.BytesIO(base64.b64decode(got["dataURL"].split(",", 1)[1])))
    np.testing.assert_array_equal(np.asarray(decoded.convert("RGBA")), pixels)


# String tensors through the JavaScript API in a page: in the page's thread and in a Web
# Worker (strings cross postMessage as arrays, bytes as transferred buffers).
JS_API_STRINGS = """async ([url, words, worker]) => {
  const { InferenceSession, Tensor, env } = await import("/web/index.js");
  env.pyodide.indexURL = "/node_modules/pyodide/";
  env.wheelURL = "/edgerun.whl";
  const session = await InferenceSession.create(url, { executionProviders: ["wasm"], worker });
  const out = await session.run({ words: new Tensor("string", words, [words.length]) });
  const result = { metadata: [session.inputMetadata, session.outputMetadata],
                   upper: { type: out.upper.type, dims: out.upper.dims, data: out.upper.data,
                            isArray: Array.isArray(out.upper.data) },
                   is_email: Array.from(out.is_email.data) };
  await session.release();
  return result;
}"""


@pytest.mark.parametrize("worker", [False, True], ids=["page", "worker"])
def test_js_api_string_tensors_in_chromium(browser, worker):
    """web/test/text_ops.onnx (StringNormalizer and RegexFullMatch) on the wasm provider,
    against onnxruntime (the same model with locale C.UTF-8, which onnxruntime needs here)."""
    import onnx
    import onnxruntime

    path = os.path.join(ROOT, "web", "test", "text_ops.onnx")
    with open(path, "rb") as f:
        browser.put("text_ops.onnx", f.read())
    words = ["The", "quick", "bob@example.com", "the", "Café", "naïve ünïcode", "日本語", "x@y"]
    got = browser.page.evaluate(JS_API_STRINGS, ["/data/text_ops.onnx", words, worker])
    model = onnx.load(path)
    model.graph.node[0].attribute.append(onnx.helper.make_attribute("locale", "C.UTF-8"))
    upper, is_email = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"words": np.array(words, dtype=object)})
    assert got["metadata"][0] == [{"name": "words", "isTensor": True, "type": "string",
                                   "shape": ["n"]}]
    assert got["upper"] == {"type": "string", "dims": list(upper.shape), "data": upper.tolist(),
                            "isArray": True}
    assert got["is_email"] == is_email.astype(int).tolist()


def _sigmoid_head() -> bytes:
    """z = Sigmoid(y * 2) and s = Shape(z): y [N, 8] float -> z [N, 8], s int64 [2]."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Mul", ["y", "two"], ["y2"]),
             helper.make_node("Sigmoid", ["y2"], ["z"]),
             helper.make_node("Shape", ["z"], ["s"])]
    graph = helper.make_graph(nodes, "head", [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, ["N", 8])], [helper.make_tensor_value_info(
            "z", TensorProto.FLOAT, ["N", 8]), helper.make_tensor_value_info(
            "s", TensorProto.INT64, [2])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]
                             ).SerializeToString()


JS_GPU_BUFFER = """async ([x, dims]) => {
  const { InferenceSession, Tensor, env } = await import("/web/index.js");
  env.pyodide.indexURL = "/node_modules/pyodide/";
  env.wheelURL = "/edgerun.whl";
  const errors = [];
  const expectError = async (promise) => {
    try { await promise; errors.push("no error"); } catch (e) { errors.push(e.message); }
  };
  const mlp = await InferenceSession.create("/data/mlp.onnx", { executionProviders: ["webgpu"],
                                                                preferredOutputLocation: "gpu-buffer" });
  const head = await InferenceSession.create("/data/head.onnx", { executionProviders: ["webgpu"],
                                                                  preferredOutputLocation: { z: "gpu-buffer" } });
  const { y } = await mlp.run({ x: new Tensor("float32", new Float32Array(x), dims) });
  const device = env.webgpu.device;
  const first = { location: y.location, isGpuBuffer: y.gpuBuffer instanceof GPUBuffer,
                  isDevice: device instanceof GPUDevice, dims: y.dims };
  try { y.data; } catch (e) { errors.push(e.message); }
  // y feeds the second session in place; z stays on the GPU, s (int64) comes to the CPU
  const { z, s } = await head.run({ y });
  const chained = { zLocation: z.location, sLocation: s.location, s: Array.from(s.data, Number),
                    z: Array.from(await z.getData(true)), zAfter: z.location };
  const yData = await y.getData();
  // the caller's own buffer on env.webgpu.device, through Tensor.fromGpuBuffer
  const own = device.createBuffer({ size: yData.byteLength,
                                    usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(own, 0, yData);
  const fromOwn = await head.run({ y: Tensor.fromGpuBuffer(own, { dataType: "float32", dims: y.dims }) });
  const ownZ = Array.from(await fromOwn.z.getData());
  // a wasm session reads a GPU tensor back first
  const wasmHead = await InferenceSession.create("/data/head.onnx", { executionProviders: ["wasm"] });
  const wasmZ = Array.from((await wasmHead.run({ y: Tensor.fromGpuBuffer(own, {
    dataType: "float32", dims: y.dims, download: async () => yData }) })).z.data);
  // a pre-allocated GPU-buffer output is filled on the GPU
  const target = Tensor.fromGpuBuffer(device.createBuffer({ size: yData.byteLength,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST }),
    { dataType: "float32", dims: y.dims, download: async () => new Float32Array(0) });
  const filled = await head.run({ y }, { z: target });
  const filledSame = filled.z === target;
  const disposed = (() => { const t = fromOwn.z; t.dispose(); return t.location; })();
  await expectError(InferenceSession.create("/data/head.onnx", { executionProviders: ["wasm"],
                                                                 preferredOutputLocation: "gpu-buffer" }));
  await expectError(InferenceSession.create("/data/head.onnx", { executionProviders: ["webgpu"],
                                                                 preferredOutputLocation: "gpu-buffer", worker: true }));
  await expectError(InferenceSession.create("/data/head.onnx", { executionProviders: ["webgpu"],
                                                                 preferredOutputLocation: "texture" }));
  for (const s of [mlp, head, wasmHead]) await s.release();
  own.destroy();
  return { first, chained, y: Array.from(yData), ownZ, wasmZ, filledSame, disposed, errors };
}"""


def test_js_api_gpu_buffer_outputs_and_feeds_in_chromium(browser):
    """onnxruntime-web's preferredOutputLocation "gpu-buffer" and Tensor.fromGpuBuffer: an
    output stays in a GPUBuffer of env.webgpu.device, feeds the next session in place, and
    is read with getData(); results match the CPU provider (RTOL/ATOL)."""
    browser.put("mlp.onnx", _small_mlp())
    browser.put("head.onnx", _sigmoid_head())
    x = np.random.default_rng(9).standard_normal((3, 16)).astype(np.float32)
    got = browser.page.evaluate(JS_GPU_BUFFER, [x.ravel().tolist(), list(x.shape)])
    (y,) = edgerun.InferenceSession(_small_mlp(), providers=["cpu"]).run(None, {"x": x})
    z, s = edgerun.InferenceSession(_sigmoid_head(), providers=["cpu"]).run(None, {"y": y})
    assert got["first"] == {"location": "gpu-buffer", "isGpuBuffer": True, "isDevice": True,
                            "dims": [3, 8]}
    assert got["chained"]["zLocation"] == "gpu-buffer" and got["chained"]["sLocation"] == "cpu"
    assert got["chained"]["zAfter"] == "cpu" and got["chained"]["s"] == s.tolist()
    np.testing.assert_allclose(np.array(got["y"]).reshape(y.shape), y, rtol=RTOL, atol=ATOL)
    for key in ("z",):
        np.testing.assert_allclose(np.array(got["chained"][key]).reshape(z.shape), z,
                                   rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(np.array(got["ownZ"]).reshape(z.shape), z, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(np.array(got["wasmZ"]).reshape(z.shape), z, rtol=RTOL, atol=ATOL)
    assert got["filledSame"] is True and got["disposed"] == "none"
    errors = got["errors"]
    assert errors[0].startswith("The data is not on CPU")
    assert "needs the webgpu execution provider" in errors[1]
    assert "does not work with worker: true" in errors[2]
    assert "'texture' is not supported by edgerun" in errors[3]
    assert len(errors) == 4


JS_CUSTOM_OPS = """async ([source, worker]) => {
  const { InferenceSession, Tensor, env, registerCustomOps } = await import("/web/index.js");
  env.pyodide.indexURL = "/node_modules/pyodide/";
  env.wheelURL = "/edgerun.whl";
  registerCustomOps(source);
  const session = await InferenceSession.create("/data/custom_op.onnx", { executionProviders: ["wasm"], worker });
  const placed = [...new Set(session.explain().nodes.map((n) => n.provider))];
  const { y, label } = await session.run({ x: new Tensor("float32", [-1, 0, 2], [3]) });
  await session.release();
  return { placed, y: Array.from(y.data), label: label.data };
}"""


@pytest.mark.parametrize("worker", [False, True], ids=["page", "worker"])
def test_js_api_python_custom_operators_on_wasm_in_chromium(browser, worker):
    """registerCustomOps: a Python custom operator (no numpy in the page: HostTensors) runs on
    the wasm provider in the page's Pyodide and in a worker's."""
    import re

    with open(os.path.join(ROOT, "web", "test", "custom_op.onnx"), "rb") as f:
        browser.put("custom_op.onnx", f.read())
    with open(os.path.join(ROOT, "web", "test", "api.test.mjs"), encoding="utf-8") as f:
        source = re.search(r"AFFINE_LABEL = `(.*?)`;", f.read(), re.S).group(1)
    got = browser.page.evaluate(JS_CUSTOM_OPS, [source, worker])
    assert got == {"placed": ["wasm"], "y": [1, 1, 5], "label": ["zero", "zero", "positive"]}


JS_DEVICE_LOST = """async ([x, dims]) => {
  const { InferenceSession, Tensor, env } = await import("/web/index.js");
  env.pyodide.indexURL = "/node_modules/pyodide/";
  env.wheelURL = "/edgerun.whl";
  const feeds = { x: new Tensor("float32", new Float32Array(x), dims) };
  const session = await InferenceSession.create("/data/mlp.onnx", { executionProviders: ["webgpu"] });
  const before = Array.from((await session.run(feeds)).y.data);
  const lost = env.webgpu.device;
  lost.destroy();                                   // as a driver reset would
  let error = "no error";
  try { await session.run(feeds); } catch (e) { error = e.message; }
  await session.release();
  const again = await InferenceSession.create("/data/mlp.onnx", { executionProviders: ["webgpu"] });
  const after = Array.from((await again.run(feeds)).y.data);
  const newDevice = env.webgpu.device instanceof GPUDevice && env.webgpu.device !== lost;
  await again.release();
  return { before, after, error, newDevice };
}"""


def test_a_lost_gpu_device_raises_and_the_next_session_opens_a_new_one(browser):
    """A run on a lost device (destroyed here, as a driver reset or a GPU process crash
    would lose it) rejects with an error that says so rather than returning stale buffers;
    a session created after it computes on a new device (env.webgpu.device follows), right."""
    browser.put("mlp.onnx", _small_mlp())
    x = np.random.default_rng(3).standard_normal((2, 16)).astype(np.float32)
    got = browser.page.evaluate(JS_DEVICE_LOST, [x.ravel().tolist(), list(x.shape)])
    assert "WebGPU device was lost (destroyed" in got["error"], got["error"]
    assert "create the session again" in got["error"]
    (y,) = edgerun.InferenceSession(_small_mlp(), providers=["cpu"]).run(None, {"x": x})
    for key in ("before", "after"):
        np.testing.assert_allclose(np.array(got[key]).reshape(y.shape), y, rtol=RTOL, atol=ATOL)
    assert got["newDevice"] is True
