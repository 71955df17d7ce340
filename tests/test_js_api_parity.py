"""edgerun's JavaScript API against onnxruntime-web's own: the same script, with only its
import changed, gives the same answers.

EXAMPLES below is onnxruntime-web's documented usage written as its users write it (the
quick start's MatMul; create from a path, bytes, an ArrayBuffer and a slice of one; run with
feeds, fetches as a name list and as an object, a pre-allocated output, run options; the
Tensor constructors of each type through an Identity model; reshape, getData, dispose,
fromPinnedBuffer; inputNames, outputNames, inputMetadata, outputMetadata; release; a string
tensor in and out of StringNormalizer; and the errors of calls that must fail, by class and
message). It runs under Node twice, on edgerun (web/index.js) and on onnxruntime-web 1.30
(bench/web: installed here with `npm ci --prefix bench/web` when missing), and everything it
observed must be equal; its outputs must also match Python onnxruntime's on the same models.

Tensor.fromImage / toImageData / toDataURL are compared with onnxruntime-common's own in
Chromium (they need a canvas there), on the options where onnxruntime-web does what its
documentation says (web/image.js lists where it does not).
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, need

WHEEL = os.path.join(ROOT, "web", "dist", "edgerun.whl")
PYODIDE = os.path.join(ROOT, "node_modules", "pyodide", "package.json")
BENCH_WEB = os.path.join(ROOT, "bench", "web")
ORT_WEB = os.path.join(BENCH_WEB, "node_modules", "onnxruntime-web", "dist", "ort.node.min.mjs")
ORT_COMMON = os.path.join(BENCH_WEB, "node_modules", "onnxruntime-common", "dist", "esm")
ORT_INSTALL = "npm ci --prefix bench/web --ignore-scripts"
TYPES = {"float32": np.float32, "float64": np.float64, "int8": np.int8, "uint8": np.uint8,
         "int16": np.int16, "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32,
         "int64": np.int64, "uint64": np.uint64, "bool": np.bool_, "float16": np.float16,
         "string": object}

# onnxruntime-web's documented usage; argv[2]: the API module, argv[3]: the models' folder.
EXAMPLES = r"""
const ort = await import(process.argv[2]);
const MODELS = process.argv[3];
ort.env.wasm.numThreads = 1;
ort.env.logLevel = "error";
const options = { executionProviders: ["wasm"], logSeverityLevel: 3 };

const { readFile } = await import("node:fs/promises");
const seen = {};

function plain(t) {             // a Tensor as JSON: its fields and data (bigints as strings)
  return {
    type: t.type, dims: [...t.dims], size: t.size, location: t.location,
    array: t.data.constructor.name,
    data: Array.from(t.data, (v) => (typeof v === "bigint" ? v.toString() : v)),
  };
}

async function outcome(fn) {    // an error's class and message, or that the call succeeded
  try {
    await fn();
    return { ok: true };
  } catch (e) {
    return { ok: false, error: e.constructor.name, message: e.message };
  }
}

// 1. The quick start: create from a path, a float32 MatMul, results by output name.
{
  const session = await ort.InferenceSession.create(`${MODELS}/model.onnx`, options);
  const dataA = Float32Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  const dataB = Float32Array.from([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120]);
  const tensorA = new ort.Tensor("float32", dataA, [3, 4]);
  const tensorB = new ort.Tensor("float32", dataB, [4, 3]);
  const feeds = { a: tensorA, b: tensorB };
  const results = await session.run(feeds);
  seen.quickstart = {
    inputNames: session.inputNames, outputNames: session.outputNames,
    inputMetadata: session.inputMetadata, outputMetadata: session.outputMetadata,
    c: plain(results.c),
  };

  // 2. The other ways to create a session: bytes, an ArrayBuffer, a slice of a larger one.
  const bytes = new Uint8Array(await readFile(`${MODELS}/model.onnx`));
  const padded = new Uint8Array(bytes.length + 24);
  padded.set(bytes, 16);
  const created = {};
  for (const [how, make] of Object.entries({
    uint8array: () => ort.InferenceSession.create(bytes, options),
    arraybuffer: () => ort.InferenceSession.create(bytes.slice().buffer, options),
    slice: () => ort.InferenceSession.create(padded.buffer, 16, bytes.length, options),
    slice_to_end: () => {
      const tail = new Uint8Array(bytes.length + 16);
      tail.set(bytes, 16);
      return ort.InferenceSession.create(tail.buffer, 16);
    },
  })) {
    const s = await make();
    created[how] = plain((await s.run(feeds)).c);
    await s.release();
  }
  seen.created = created;
  seen.create_errors = {
    offset_out_of_range: await outcome(() => ort.InferenceSession.create(padded.buffer, padded.length, options)),
    length_out_of_range: await outcome(() => ort.InferenceSession.create(padded.buffer, 16, padded.length, options)),
    options_for_length: await outcome(() => ort.InferenceSession.create(padded.buffer, 16, options)),
  };

  // 3. run's argument checks
  seen.run_errors = {
    missing_input: await outcome(() => session.run({ a: tensorA })),
    empty_fetches: await outcome(() => session.run(feeds, [])),
    unknown_fetch: await outcome(() => session.run(feeds, ["nope"])),
    feeds_not_object: await outcome(() => session.run(tensorA)),
    fetches_tensor: await outcome(() => session.run(feeds, tensorA)),
    options_not_object: await outcome(() => session.run(feeds, ["c"], 3)),
  };

  // 4. release: the session is gone afterwards
  await session.release();
  seen.runs_after_release = (await outcome(() => session.run(feeds))).ok;
}

// 5. fetches: a name list, an object of nulls, a pre-allocated output; run options
{
  const session = await ort.InferenceSession.create(`${MODELS}/two_outputs.onnx`, options);
  const x = new ort.Tensor("float32", [1, 2, 3, 4, 5, 6], [2, 3]);
  const y = new ort.Tensor("float32", [6, 5, 4, 3, 2, 1], [2, 3]);
  const all = await session.run({ x, y });
  const onlyProduct = await session.run({ x, y }, ["product"]);
  const asObject = await session.run({ x, y }, { sum: null });
  const target = new ort.Tensor("float32", new Float32Array(6), [2, 3]);
  const into = await session.run({ x, y }, { product: target });
  const withOptions = await session.run({ x, y }, { logSeverityLevel: 3 });
  const listAndOptions = await session.run({ x, y }, ["sum"], { logSeverityLevel: 3 });
  seen.fetches = {
    outputNames: session.outputNames,
    metadata: session.outputMetadata,
    all: Object.fromEntries(Object.entries(all).map(([k, v]) => [k, plain(v)])),
    only_product: Object.keys(onlyProduct),
    as_object: Object.keys(asObject),
    into_same_object: into.product === target,
    into_data: Array.from(target.data),
    with_options: Object.keys(withOptions).sort(),
    list_and_options: Object.keys(listAndOptions),
  };
  await session.release();
}

// 6. The Tensor constructors, each type, through an Identity model.
{
  const made = {
    float32: new ort.Tensor("float32", Float32Array.from([1.5, -2.25, 3e10, 0]), [2, 2]),
    float64: new ort.Tensor("float64", [1 / 3, -2.5, 1e300, 0], [2, 2]),
    int8: new ort.Tensor("int8", Int8Array.from([-128, -1, 0, 127]), [2, 2]),
    uint8: new ort.Tensor("uint8", new Uint8ClampedArray([0, 1, 254, 255]), [2, 2]),
    int16: new ort.Tensor("int16", [-32768, -1, 1, 32767], [2, 2]),
    uint16: new ort.Tensor(Uint16Array.from([0, 1, 65534, 65535]), [2, 2]),
    int32: new ort.Tensor(Int32Array.from([-(2 ** 31), -1, 1, 2 ** 31 - 1]), [2, 2]),
    uint32: new ort.Tensor("uint32", [0, 1, 2 ** 32 - 2, 2 ** 32 - 1], [2, 2]),
    int64: new ort.Tensor("int64", BigInt64Array.from([-(2n ** 63n), -1n, 1n, 2n ** 63n - 1n]), [2, 2]),
    uint64: new ort.Tensor("uint64", [0, 1, 2, 3], [2, 2]),
    bool: new ort.Tensor([true, false, false, true], [2, 2]),
    float16: new ort.Tensor("float16", Uint16Array.from([0x3c00, 0xc000, 0x7bff, 0x0001]), [2, 2]),
    string: new ort.Tensor("string", ["", "a", "naïve ünïcode", "日本語"], [2, 2]),
    inferred_string: new ort.Tensor(["x", "yz"]),
    float32_1d: new ort.Tensor(Float32Array.from([1, 2, 3])),
    int4: new ort.Tensor("int4", Uint8Array.from([0x21, 0x0f]), [3]),
  };
  seen.tensors = Object.fromEntries(Object.entries(made).map(([k, t]) => [k, plain(t)]));
  const session = await ort.InferenceSession.create(`${MODELS}/identity.onnx`, options);
  seen.identity = {
    inputNames: session.inputNames, outputNames: session.outputNames,
    inputMetadata: session.inputMetadata, outputMetadata: session.outputMetadata,
  };
  const feeds = {};
  for (const name of session.inputNames) feeds[name] = made[name.slice(2)];
  const out = await session.run(feeds);
  seen.identity.outputs = Object.fromEntries(Object.entries(out).map(([k, v]) => [k, plain(v)]));
  await session.release();

  // reshape, getData, dispose, a pinned buffer
  const t = new ort.Tensor("float32", [1, 2, 3, 4, 5, 6], [2, 3]);
  const r = t.reshape([3, 2]);
  seen.reshape = { dims: [...r.dims], same_data: r.data === t.data };
  seen.get_data = Array.from(await t.getData());
  t.dispose();
  seen.disposed = { location: t.location, data_readable: (await outcome(() => t.data)).ok };
  seen.pinned = plain(ort.Tensor.fromPinnedBuffer("int32", Int32Array.from([1, 2, 3])));

  seen.tensor_errors = Object.fromEntries(Object.entries({
    size_mismatch: () => new ort.Tensor("float32", [1, 2, 3], [2, 2]),
    unknown_type: () => new ort.Tensor("complex64", [1]),
    wrong_array: () => new ort.Tensor("int32", Float32Array.from([1])),
    empty_inferred: () => new ort.Tensor([]),
    negative_dim: () => new ort.Tensor("float32", [], [-1, 0]),
    string_not_array: () => new ort.Tensor("string", "abc"),
    clamped_not_uint8: () => new ort.Tensor("int8", new Uint8ClampedArray(2)),
  }).map(([k, fn]) => {
    try {
      fn();
      return [k, "no error"];
    } catch (e) {
      return [k, e.constructor.name];
    }
  }));
}

// 7. String operators: a string tensor in, a string tensor out.
{
  const session = await ort.InferenceSession.create(`${MODELS}/strings.onnx`, options);
  const words = new ort.Tensor("string", ["The", "Quick", "the", "Café", "naïve"], [5]);
  const { upper } = await session.run({ words });
  seen.strings = { upper: plain(upper), inputMetadata: session.inputMetadata,
                   outputMetadata: session.outputMetadata };
  await session.release();
}

console.log(JSON.stringify(seen));
"""

# Where onnxruntime-web 1.30 gives something else, and why; each is checked against Python
# onnxruntime instead.
KNOWN_DIFFERENCES = {
    ("fetches", "into_data"): "onnxruntime-web leaves a pre-allocated CPU output unfilled (it "
                              "returns the tensor but copies the result only into GPU outputs); "
                              "edgerun fills it",
}


def _models(folder: str) -> None:
    from onnx import TensorProto as T
    from onnx import checker, helper

    def save(nodes, inputs, outputs, name, opset=17):
        vi = helper.make_tensor_value_info
        graph = helper.make_graph(nodes, name, [vi(*i) for i in inputs], [vi(*o) for o in outputs])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 10                  # onnxruntime-web 1.30 reads up to 13
        checker.check_model(model)
        with open(os.path.join(folder, name), "wb") as f:
            f.write(model.SerializeToString())

    save([helper.make_node("MatMul", ["a", "b"], ["c"])],
         [("a", T.FLOAT, [3, 4]), ("b", T.FLOAT, [4, 3])], [("c", T.FLOAT, [3, 3])], "model.onnx")
    save([helper.make_node("Add", ["x", "y"], ["sum"]), helper.make_node("Mul", ["x", "y"], ["product"])],
         [("x", T.FLOAT, ["rows", 3]), ("y", T.FLOAT, ["rows", 3])],
         [("sum", T.FLOAT, ["rows", 3]), ("product", T.FLOAT, ["rows", 3])], "two_outputs.onnx")
    codes = {name: helper.np_dtype_to_tensor_dtype(np.dtype(dt)) for name, dt in TYPES.items()
             if name != "string"}
    codes["string"] = T.STRING
    save([helper.make_node("Identity", [f"i_{k}"], [f"o_{k}"]) for k in codes],
         [(f"i_{k}", c, [2, "n"]) for k, c in codes.items()],
         [(f"o_{k}", c, [2, "n"]) for k, c in codes.items()], "identity.onnx")
    # locale C.UTF-8: onnxruntime's default (en_US.UTF-8) is missing from most containers
    save([helper.make_node("StringNormalizer", ["words"], ["upper"], case_change_action="UPPER",
                           stopwords=["the"], locale="C.UTF-8")],
         [("words", T.STRING, ["n"])], [("upper", T.STRING, ["m"])], "strings.onnx")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    pytest.importorskip("onnx")
    folder = str(tmp_path_factory.mktemp("parity_models"))
    _models(folder)
    return folder


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    need(shutil.which("node") is not None, "node", "apt-get install nodejs (Node 20)")
    path = tmp_path_factory.mktemp("parity") / "examples.mjs"
    path.write_text(EXAMPLES)
    return str(path)


@pytest.fixture(scope="module")
def wheel():
    need(os.path.exists(PYODIDE), "the pyodide npm package", "npm ci (package.json pins 314.0.7)")
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "build_web.py")],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return WHEEL


@pytest.fixture(scope="module")
def onnxruntime_web():
    """onnxruntime-web 1.30 (and its onnxruntime-common) under bench/web/node_modules,
    installed from bench/web's lockfile when missing."""
    if not os.path.exists(ORT_WEB) and shutil.which("npm"):
        subprocess.run(["npm", "ci", "--silent", "--no-audit", "--no-fund", "--ignore-scripts",
                        "--prefix", BENCH_WEB], cwd=ROOT, capture_output=True, timeout=600)
    need(os.path.exists(ORT_WEB) and os.path.isdir(ORT_COMMON), "onnxruntime-web in bench/web",
         ORT_INSTALL)
    return ORT_WEB


def _run(examples: str, module: str, models: str) -> dict:
    done = subprocess.run(["node", examples, module, models], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def on_edgerun(wheel, examples, models):
    return _run(examples, os.path.join(ROOT, "web", "index.js"), models)


def _array(t: dict) -> np.ndarray:
    """A tensor the examples printed, as numpy (float16 arrives as its bits without
    Float16Array)."""
    if t["type"] == "float16" and t["array"] == "Uint16Array":
        return np.array(t["data"], np.uint16).view(np.float16).reshape(t["dims"])
    if t["type"] == "string":
        return np.array(t["data"], dtype=object).reshape(t["dims"])
    return np.array([int(v) if t["type"] in ("int64", "uint64") else v for v in t["data"]],
                    TYPES[t["type"]]).reshape(t["dims"])


def test_usage_examples_on_edgerun_match_python_onnxruntime(on_edgerun, models):
    import onnxruntime as ort

    def session(name):
        return ort.InferenceSession(os.path.join(models, name), providers=["CPUExecutionProvider"])

    seen = on_edgerun
    a = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    b = (np.arange(1, 13, dtype=np.float32) * 10).reshape(4, 3)
    (c,) = session("model.onnx").run(None, {"a": a, "b": b})
    quick = seen["quickstart"]
    assert quick["inputNames"] == ["a", "b"] and quick["outputNames"] == ["c"]
    assert quick["inputMetadata"] == [{"name": "a", "isTensor": True, "type": "float32", "shape": [3, 4]},
                                      {"name": "b", "isTensor": True, "type": "float32", "shape": [4, 3]}]
    assert quick["c"]["array"] == "Float32Array" and quick["c"]["location"] == "cpu"
    np.testing.assert_array_equal(_array(quick["c"]), c)
    for how, got in seen["created"].items():
        np.testing.assert_array_equal(_array(got), c, err_msg=how)
    assert not seen["runs_after_release"]

    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    y = np.arange(6, 0, -1, dtype=np.float32).reshape(2, 3)
    total, product = session("two_outputs.onnx").run(None, {"x": x, "y": y})
    fetches = seen["fetches"]
    np.testing.assert_array_equal(_array(fetches["all"]["sum"]), total)
    np.testing.assert_array_equal(_array(fetches["all"]["product"]), product)
    assert fetches["only_product"] == ["product"] and fetches["as_object"] == ["sum"]
    assert fetches["into_same_object"]
    np.testing.assert_array_equal(np.array(fetches["into_data"], np.float32), product.reshape(-1))

    tensors = seen["tensors"]
    identity = session("identity.onnx")
    feeds = {f"i_{k}": _array(tensors[k]) for k in TYPES}
    expected = dict(zip([o.name for o in identity.get_outputs()], identity.run(None, feeds)))
    for name, got in seen["identity"]["outputs"].items():
        assert got["type"] == name[2:] and got["array"] == tensors[name[2:]]["array"], got
        np.testing.assert_array_equal(_array(got), expected[name], err_msg=name)

    (upper,) = session("strings.onnx").run(None, {"words": np.array(
        ["The", "Quick", "the", "Café", "naïve"], dtype=object)})
    assert seen["strings"]["upper"]["type"] == "string"
    assert seen["strings"]["upper"]["data"] == upper.tolist() == ["QUICK", "CAFÉ", "NAÏVE"]


def _differences(ours, theirs, path=()) -> list:
    if path in KNOWN_DIFFERENCES:
        return []
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = [f"{'/'.join(path + (k,))}: only in {'edgerun' if k in ours else 'onnxruntime-web'}"
               for k in sorted(set(ours) ^ set(theirs))]
        for k in sorted(set(ours) & set(theirs)):
            out += _differences(ours[k], theirs[k], path + (k,))
        return out
    if ours != theirs:
        return [f"{'/'.join(path)}: edgerun {json.dumps(ours)[:300]}, onnxruntime-web "
                f"{json.dumps(theirs)[:300]}"]
    return []


def test_usage_examples_give_what_onnxruntime_web_gives(on_edgerun, onnxruntime_web, examples,
                                                        models):
    theirs = _run(examples, onnxruntime_web, models)
    differences = _differences(on_edgerun, theirs)
    assert not differences, "\n".join(differences)


# In Chromium: edgerun's image conversions next to onnxruntime-common's, on one page.
IMAGES_PAGE = """async ([pngURL]) => {
  const edgerun = await import("/web/index.js");
  const ort = await import("/ort-common/index.js");
  const out = {};
  const both = async (name, make) => {
    try {
      const [ours, theirs] = await make();
      out[name] = { ours: Array.from(ours.data ?? ours), theirs: Array.from(theirs.data ?? theirs),
                    dims: [ours.dims, theirs.dims] };
    } catch (e) {
      out[name] = { error: String(e) };
    }
  };
  const W = 5, H = 3;
  const rgba = new Uint8ClampedArray(W * H * 4).map((_, i) => (i % 4 === 3 ? 255 : (i * 53 + 7) % 256));
  const imageData = new ImageData(rgba, W, H);
  const norm = { mean: [58.4, 57.1, 57.4], bias: [-123.7, -116.3, -103.5] };
  const image = new Image();
  image.src = pngURL;
  await image.decode();
  const bitmap = await createImageBitmap(image);

  await both("imagedata_defaults", async () => [await edgerun.Tensor.fromImage(imageData),
                                                await ort.Tensor.fromImage(imageData)]);
  for (const tensorFormat of ["RGB", "BGR", "RBG", "RGBA"]) {
    await both(`imagedata_${tensorFormat}_norm`, async () => [
      await edgerun.Tensor.fromImage(imageData, { tensorFormat, norm }),
      await ort.Tensor.fromImage(imageData, { tensorFormat, norm })]);
  }
  await both("imagedata_scalar_norm", async () => [
    await edgerun.Tensor.fromImage(imageData, { norm: { mean: 127.5, bias: -127.5 } }),
    await ort.Tensor.fromImage(imageData, { norm: { mean: 127.5, bias: -127.5 } })]);
  // onnxruntime-web gives an <img> 4 channels and takes no tensorFormat for it
  await both("image_element", async () => [
    await edgerun.Tensor.fromImage(image, { tensorFormat: "RGBA", norm: { mean: 255, bias: 0 } }),
    await ort.Tensor.fromImage(image, { norm: { mean: 255, bias: 0 } })]);
  await both("url", async () => [await edgerun.Tensor.fromImage(pngURL),
                                 await ort.Tensor.fromImage(pngURL)]);
  await both("image_bitmap_BGR", async () => [
    await edgerun.Tensor.fromImage(bitmap, { tensorFormat: "BGR" }),
    await ort.Tensor.fromImage(bitmap, { tensorFormat: "BGR" })]);

  const values = Float32Array.from({ length: 4 * W * H }, (_, i) => ((i * 7919) % 256) / 255);
  for (const format of ["RGB", "RGBA"]) {
    const c = format.length;
    const data = values.subarray(0, c * W * H);
    const mine = new edgerun.Tensor("float32", data, [1, c, H, W]);
    const theirs = new ort.Tensor("float32", data, [1, c, H, W]);
    await both(`to_image_data_${format}`, async () => [mine.toImageData({ format }), theirs.toImageData({ format })]);
    await both(`to_image_data_${format}_norm`, async () => [
      mine.toImageData({ format, norm: { mean: 200, bias: 0.1 } }),
      theirs.toImageData({ format, norm: { mean: 200, bias: 0.1 } })]);
    // toDataURL: both PNGs decoded by the browser. Opaque: onnxruntime-web draws each pixel
    // with a CSS rgba() whose alpha (0..255 there) saturates at 1; edgerun keeps the alpha.
    const opaque = Float32Array.from(data, (v, i) => (i >= 3 * W * H ? 1 : v));
    const mineOpaque = new edgerun.Tensor("float32", opaque, [1, c, H, W]);
    const theirsOpaque = new ort.Tensor("float32", opaque, [1, c, H, W]);
    const decode = async (url) => {
      const img = new Image();
      img.src = url;
      await img.decode();
      const canvas = new OffscreenCanvas(img.naturalWidth, img.naturalHeight);
      const context = canvas.getContext("2d");
      context.drawImage(img, 0, 0);
      return context.getImageData(0, 0, img.naturalWidth, img.naturalHeight).data;
    };
    await both(`to_data_url_${format}`, async () => [await decode(mineOpaque.toDataURL()),
                                                     await decode(theirsOpaque.toDataURL())]);
  }
  return out;
}"""


def test_image_conversions_in_chromium_give_what_onnxruntime_web_gives(onnxruntime_web, tmp_path):
    from PIL import Image

    from browser_harness import chromium, console_errors, require_browser, served

    require_browser()
    site = tmp_path / "site"
    site.mkdir()
    os.symlink(os.path.join(ROOT, "web"), site / "web")
    os.symlink(ORT_COMMON, site / "ort-common")
    (site / "index.html").write_text("<!doctype html><title>parity</title>")
    pixels = (np.arange(7 * 4 * 4).reshape(4, 7, 4) * 29 % 256).astype(np.uint8)
    pixels[..., 3] = 255              # opaque: a canvas premultiplies alpha
    Image.fromarray(pixels, "RGBA").save(site / "picture.png")
    with served(str(site), also=(ROOT, os.path.realpath(ORT_COMMON))) as url, \
            chromium(str(tmp_path / "profile")) as context:
        page = context.new_page()
        errors = console_errors(page)
        page.goto(f"{url}/index.html")
        result = page.evaluate(IMAGES_PAGE, [f"{url}/picture.png"])
    failed = {k: v["error"] for k, v in result.items() if "error" in v}
    assert not failed, (failed, errors[-5:])
    assert len(result) == 15
    for name, r in result.items():
        if r["dims"][0] is not None:
            assert r["dims"][0] == r["dims"][1], (name, r["dims"])
        np.testing.assert_allclose(np.array(r["ours"], np.float64), np.array(r["theirs"], np.float64),
                                   rtol=1e-6, atol=1e-6, err_msg=name)


def test_the_bridge_carries_string_tensors_where_numpy_is_there_too(models):
    """engine/edgerun/web/bridge.py natively (numpy present, the CPU provider): strings go in as
    a list of str and come back as one; a non-string element is named."""
    from edgerun.web.bridge import WebSession

    with open(os.path.join(models, "strings.onnx"), "rb") as f:
        session = WebSession(f.read(), ["cpu"])
    assert session.describe()["inputMetadata"] == [
        {"name": "words", "isTensor": True, "type": "string", "shape": ["n"]}]
    (out,) = session.run([("words", "string", [3], ["the", "Café", "ok"])])
    assert out == ("upper", "string", [2], ["CAFÉ", "OK"])
    with pytest.raises(TypeError, match=r"input 'words': a string tensor holds strings; "
                                        r"element 1 is int"):
        session.run([("words", "string", [2], ["a", 3])])
