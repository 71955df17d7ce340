"""edgerun inside Pyodide under Node, with no numpy, through the JavaScript API.

The wheel scripts/build_web.py builds is what web/index.js installs into Pyodide (314.0.7,
no numpy here). Every real model of tests/real_models.py then runs through
`InferenceSession.create(bytes, {executionProviders: ["wasm"]})` / `session.run` in one Node
process (bench/web/run_cases.mjs), its kernels in V8's WebAssembly, and the outputs of its
second run (a replay of the program the first run recorded) must match the native CPU
provider's (rtol 1e-3, atol 1e-4, same dtype and shape).

Also: the wheel carries the kernels' .wasm and its stamp, and an installed package (no
sources beside it) loads them with numpy blocked; micropip installs the wheel; and every
ONNX node case the wasm provider passes natively passes in Pyodide too (tests/numpy_free.py).
"""
import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from conftest import ROOT, need

if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

RTOL, ATOL = 1e-3, 1e-4
WHEEL = os.path.join(ROOT, "web", "dist", "edgerun.whl")
PYODIDE = os.path.join(ROOT, "node_modules", "pyodide", "package.json")
NODE_TIMEOUT_S = 600


def _models() -> list:
    from real_models import REAL_MODELS
    return sorted(REAL_MODELS)


@pytest.fixture(scope="module")
def wheel():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "build_web.py")],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return WHEEL


@pytest.fixture(scope="module")
def pyodide_results(wheel, tmp_path_factory):
    """name -> result of running every real model in Pyodide (bench/web/run_cases.mjs)."""
    need(shutil.which("node") is not None, "node", "apt-get install nodejs (Node 20)")
    need(os.path.exists(PYODIDE), "the pyodide npm package", "npm ci (package.json pins 314.0.7)")
    from bench.web.cases import read_results, write_cases

    folder = tmp_path_factory.mktemp("pyodide")
    cases = write_cases(_models(), str(folder / "cases"))
    out = folder / "out"
    done = subprocess.run(["node", os.path.join(ROOT, "bench", "web", "run_cases.mjs"), cases,
                           str(out), "--repeat", "2", "--warmup-ms", "0"], cwd=ROOT,
                          capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return read_results(str(out))


def cpu_outputs(name: str) -> list:
    """The native CPU provider's outputs for a real model's fixed feeds."""
    import edgerun
    from real_models import REAL_MODELS

    path, feeds = REAL_MODELS[name]()
    return edgerun.InferenceSession(path, providers=["cpu"]).run(None, feeds)


def assert_matches_cpu(name: str, result: dict) -> None:
    from bench.web.cases import read_output

    assert "error" not in result, f"{name}: {result.get('error')}"
    expected = cpu_outputs(name)
    assert len(result["outputs"]) == len(expected), name
    for entry, e in zip(result["outputs"], expected):
        got = read_output(entry)
        assert got.dtype == e.dtype and got.shape == e.shape, \
            f"{name}: {entry['name']} is {got.dtype}{list(got.shape)}, CPU gives {e.dtype}{list(e.shape)}"
        np.testing.assert_allclose(got, e, rtol=RTOL, atol=ATOL, err_msg=f"{name}: {entry['name']}")


@pytest.mark.parametrize("name", _models())
def test_real_model_in_pyodide_matches_cpu_provider(pyodide_results, name):
    assert name in pyodide_results, f"{name} did not run"
    assert_matches_cpu(name, pyodide_results[name])


# Runs under Node through the JavaScript API: one session on ["wasm"], the job's runs in turn
# (feeds as [name, type, dims, base64]); prints each run's outputs (base64) or error, and how
# many runs entered Python (bridge.WebSession.run, counted inside Pyodide).
PAGE_REPLAY_JS = r"""
import { readFileSync } from "node:fs";
import { InferenceSession, Tensor } from "ROOT/web/index.js";
import { getRuntime } from "ROOT/web/runtime.js";
const job = JSON.parse(readFileSync(process.argv[2], "utf8"));
const TYPED = { float32: Float32Array, int64: BigInt64Array };
const tensor = ([name, type, dims, b64]) => {
  const bytes = new Uint8Array(Buffer.from(b64, "base64"));
  return [name, new Tensor(type, new TYPED[type](bytes.buffer), dims)];
};
const session = await InferenceSession.create(new Uint8Array(readFileSync(job.model)),
                                              { executionProviders: ["wasm"] });
const { pyodide } = await getRuntime();
pyodide.runPython(`
from edgerun.web import bridge
python_runs = [0]
_run = bridge.WebSession.run
def counted(self, *args):
    python_runs[0] += 1
    return _run(self, *args)
bridge.WebSession.run = counted`);
const runs = [];
for (const { feeds, fetches } of job.runs) {
  try {
    const out = await session.run(Object.fromEntries(feeds.map(tensor)), fetches ?? undefined);
    runs.push(Object.fromEntries(Object.entries(out).map(([name, t]) => [name,
      [[...t.dims], Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).toString("base64")]])));
  } catch (e) {
    runs.push(String(e.message));
  }
}
console.log(JSON.stringify({ runs, python_runs: pyodide.runPython("python_runs[0]") }));
"""


def test_page_replays_recorded_programs_without_entering_python(wheel, tmp_path):
    """After a run records its program, the page replays it itself (web/replay.js): runs
    with the same feed signature do not enter Python and give the same outputs; a new
    signature (other dims, other values of a small integer feed the recording read) goes
    through Python and is replayed in the page from its second run; a program that fails
    (a Gather index out of range) goes to Python, which names the node; output subsets and
    every output match numpy."""
    need(shutil.which("node") is not None, "node", "apt-get install nodejs (Node 20)")
    need(os.path.exists(PYODIDE), "the pyodide npm package", "npm ci (package.json pins 314.0.7)")
    import base64

    from onnx import TensorProto as T
    from onnx import helper

    nodes = [helper.make_node("Gather", ["x", "i"], ["y"], name="pick"),
             helper.make_node("Reshape", ["y", "s"], ["z"], name="fold")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [None]),
                                           helper.make_tensor_value_info("i", T.INT64, [80]),
                                           helper.make_tensor_value_info("s", T.INT64, [2])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None),
                               helper.make_tensor_value_info("z", T.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (tmp_path / "m.onnx").write_bytes(model.SerializeToString())

    rng = np.random.default_rng(0)
    good = rng.integers(0, 5, 80).astype(np.int64)
    bad = good.copy()
    bad[70] = 9

    def feeds(x, i, s):
        def item(name, a):
            kind = "float32" if a.dtype == np.float32 else "int64"
            return [name, kind, list(a.shape), base64.b64encode(a.tobytes()).decode()]
        return [item("x", x), item("i", i), item("s", np.array(s, np.int64))]

    x5, x7 = rng.random(5, np.float32), rng.random(7, np.float32)
    runs = [
        (feeds(x5, good, [8, 10]), None),        # records (Python)
        (feeds(x5 * 2, good, [8, 10]), None),    # page replay
        (feeds(x5 * 3, good, [10, 8]), None),    # new values of s: Python records
        (feeds(x5 * 4, good, [10, 8]), ["z"]),   # page replay, one output
        (feeds(x5 * 5, bad, [8, 10]), None),     # page replay fails: Python names the node
        (feeds(x5 * 6, good, [8, 10]), None),    # page replay again
        (feeds(x7, good, [8, 10]), None),        # other dims of x: Python records
        (feeds(x7 * 2, good, [8, 10]), None),    # page replay
    ]
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"model": str(tmp_path / "m.onnx"),
                               "runs": [{"feeds": f, "fetches": n} for f, n in runs]}))
    script = tmp_path / "replay.mjs"
    script.write_text(PAGE_REPLAY_JS.replace("ROOT", ROOT))
    done = subprocess.run(["node", str(script), str(job)], cwd=ROOT, capture_output=True,
                          text=True, timeout=NODE_TIMEOUT_S)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for k, ((fed, names), got) in enumerate(zip(runs, result["runs"])):
        x, i, s = (np.frombuffer(base64.b64decode(f[3]), np.float32 if f[1] == "float32"
                                 else np.int64) for f in fed)
        if k == 4:
            assert isinstance(got, str) and "pick" in got and "(position 70) is out of range" \
                in got, got
            continue
        expected = {"y": x[i], "z": x[i].reshape(s)}
        assert sorted(got) == sorted(names or expected), (k, sorted(got))
        for name, (dims, data) in got.items():
            value = np.frombuffer(base64.b64decode(data), np.float32).reshape(dims)
            np.testing.assert_array_equal(value, expected[name], err_msg=f"run {k}: {name}")
    assert result["python_runs"] == 4, result["python_runs"]   # runs 0, 2, 4 and 6


def test_wheel_carries_the_kernels(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        stamp = json.loads(z.read("edgerun/providers/wasm/edgerun_kernels.json"))
        wasm = z.read("edgerun/providers/wasm/edgerun_kernels.wasm")
    assert "edgerun/providers/wasm/host_js.py" in names
    assert stamp["bytes"] == len(wasm) and wasm[:4] == b"\0asm"
    assert not any(n.startswith("wasm_kernels/") for n in names)     # sources stay out


def test_installed_wheel_loads_its_kernels_without_numpy(wheel, tmp_path):
    """From an unpacked wheel (no wasm_kernels/ sources beside it) the .wasm is checked
    against its stamp only; a tampered module fails naming the rebuild."""
    import importlib.util
    need(importlib.util.find_spec("wasmtime") is not None, "wasmtime", "pip install wasmtime==50.0.1")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp_path)
    code = ("import sys; sys.modules['numpy'] = None\n"
            "from edgerun.providers.wasm import build_info\n"
            "from edgerun.providers.wasm.provider import WasmProvider\n"
            "assert build_info.__file__.startswith(sys.argv[1]), build_info.__file__\n"
            "print(WasmProvider.available())\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, env=env, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "(True, '')"
    wasm = tmp_path / "edgerun" / "providers" / "wasm" / "edgerun_kernels.wasm"
    wasm.write_bytes(wasm.read_bytes() + b"\0")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, env=env, cwd=str(tmp_path))
    assert "does not match its stamp" in done.stdout + done.stderr


# --- A Python user inside Pyodide: micropip installs the wheel, then `import edgerun` ---------

# Runs under Node: Pyodide from node_modules, micropip and packaging unpacked from wheels (the
# npm package bundles neither), fetch() replaced by a recorder that fails, then micropip installs edgerun's wheel from
# Pyodide's file system WITH dependency resolution: the Requires-Dist markers must leave
# nothing to fetch (numpy, ml_dtypes and threadpoolctl are in Pyodide's lock file: resolving
# any of them would try Pyodide's CDN, and every fetch attempt is recorded and must not happen;
# a failed load is only logged by Pyodide, so the record is what catches it).
MICROPIP_JS = r"""
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
const [pyodideDir, configPath, outPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const bytes = (path) => new Uint8Array(readFileSync(path));       // not a Buffer: Pyodide wants one
process.on("uncaughtException", (e) => { console.error(String(e?.message ?? e)); process.exit(1); });
process.on("unhandledRejection", (e) => { console.error(String(e?.message ?? e)); process.exit(1); });
const { loadPyodide } = await import(pathToFileURL(`${pyodideDir}/pyodide.mjs`).href);
const pyodide = await loadPyodide();
const site = pyodide.runPython("import site; site.getsitepackages()[0]");
for (const wheel of config.tools) pyodide.unpackArchive(bytes(wheel), "wheel", { extractDir: site });
const fetches = [];     // Pyodide logs a failed loadPackage and goes on: record every attempt
globalThis.fetch = async (url) => { fetches.push(String(url)); throw new Error(`network fetch attempted: ${url}`); };
pyodide.FS.mkdirTree("/data");
for (const [name, path] of Object.entries(config.files)) pyodide.FS.writeFile(`/data/${name}`, bytes(path));
pyodide.globals.set("config", pyodide.toPy(config));
const result = JSON.parse(await pyodide.runPythonAsync(config.code));
writeFileSync(outPath, JSON.stringify({ ...result, fetches }));
"""

MICROPIP_PY = r"""
import importlib.metadata, json, struct, sys
import micropip
await micropip.install("emfs:/data/" + config["wheel_name"], deps=True)
import edgerun
from edgerun.ir.host_tensor import HostTensor, have_numpy

rows = config["rows"]
session = edgerun.InferenceSession(open("/data/digits_mlp.onnx", "rb").read(), providers=["wasm"])
x = HostTensor(1, (rows, 64), open("/data/x.bin", "rb").read())       # 1: float32
label, probabilities = session.run(None, {"input": x})
json.dumps({
    "platform": sys.platform,
    "file": edgerun.__file__,
    "version": getattr(edgerun, "__version__", None),
    "dist_version": importlib.metadata.version("edgerun"),
    "installed": sorted(p.lower() for p in micropip.list()),
    "have_numpy": have_numpy(),
    "available": edgerun.get_available_providers(),
    "session_providers": session.get_providers(),
    "label": [type(label).__name__, list(label.shape), list(struct.unpack(f"<{rows}q", label.data))],
    "probabilities": [type(probabilities).__name__, list(probabilities.shape),
                      list(struct.unpack(f"<{rows * 10}f", probabilities.data))],
})
"""


def _pyodide_lock() -> dict:
    with open(os.path.join(ROOT, "node_modules", "pyodide", "pyodide-lock.json")) as f:
        return json.load(f)


def _pyodide_tool_wheels(lock: dict) -> list:
    """micropip and packaging, the versions this Pyodide's lock file names, from PyPI (pure
    Python wheels; Pyodide's CDN, where they normally come from, is not reachable in CI),
    cached in tests/real_models.py's wheel folder."""
    from real_models import WHEELS

    python = ".".join(lock["info"]["python"].split(".")[:2])
    paths = []
    for package in ("micropip", "packaging"):
        version = lock["packages"][package]["version"]
        path = os.path.join(WHEELS, f"{package}-{version}-py3-none-any.whl")
        if not os.path.exists(path):
            os.makedirs(WHEELS, exist_ok=True)
            done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                                   "--disable-pip-version-check", "--only-binary=:all:",
                                   "--python-version", python, "-d", WHEELS,
                                   f"{package}=={version}"], capture_output=True, text=True)
            need(done.returncode == 0 and os.path.exists(path), f"{package}=={version} from PyPI",
                 f"network access to PyPI once (pip download --no-deps --python-version {python} "
                 f"-d {WHEELS} {package}=={version}): {done.stderr[-500:]}")
        paths.append(path)
    return paths


def _wheel_name(wheel: str) -> str:
    """The wheel's proper file name (micropip parses it): web/dist/edgerun.whl has none."""
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        version = next(line.split(":", 1)[1].strip() for line in z.read(meta).decode().splitlines()
                       if line.startswith("Version:"))
    return f"edgerun-{version}-py3-none-any.whl"


def _run_micropip_js(tmp_path, config: dict, timeout: float) -> tuple:
    """Run MICROPIP_JS under Node with `config`: (its JSON result, the finished process)."""
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "run.mjs").write_text(MICROPIP_JS)
    out = tmp_path / "out.json"
    done = subprocess.run(["node", str(tmp_path / "run.mjs"),
                           os.path.join(ROOT, "node_modules", "pyodide"),
                           str(tmp_path / "config.json"), str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return json.loads(out.read_text()), done


def test_micropip_installs_the_wheel_and_import_edgerun_runs_on_wasm(wheel, tmp_path):
    """What a Python user in JupyterLite, PyScript, marimo or plain Pyodide does:
    `await micropip.install(wheel URL)`, `import edgerun`, the same InferenceSession API.
    The dependency markers (sys_platform != "emscripten") leave nothing to resolve, numpy
    stays absent, and the digits model on the wasm provider gives the CPU provider's labels."""
    need(shutil.which("node") is not None, "node", "apt-get install nodejs (Node 20)")
    need(os.path.exists(PYODIDE), "the pyodide npm package", "npm ci (package.json pins 314.0.7)")
    import edgerun

    lock = _pyodide_lock()
    tools = _pyodide_tool_wheels(lock)
    rows = 12
    digits = os.path.join(ROOT, "examples", "digits")
    x = np.ascontiguousarray(np.load(os.path.join(digits, "digits_holdout.npz"))["X"][:rows],
                             dtype=np.float32)
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    name = _wheel_name(wheel)
    config = {"tools": tools, "wheel_name": name, "rows": rows, "code": MICROPIP_PY,
              "files": {name: wheel, "digits_mlp.onnx": os.path.join(digits, "digits_mlp.onnx"),
                        "x.bin": str(tmp_path / "x.bin")}}
    got, done = _run_micropip_js(tmp_path, config, timeout=120)

    assert got["fetches"] == [], done.stdout[-2000:]     # the markers left nothing to load
    assert got["platform"] == "emscripten"
    assert "site-packages/edgerun/" in got["file"], got["file"]       # micropip's install
    assert got["version"] == edgerun.__version__ == got["dist_version"]
    assert "edgerun" in got["installed"]
    assert not {"numpy", "ml_dtypes", "ml-dtypes", "threadpoolctl"} & set(got["installed"])
    assert got["have_numpy"] is False
    assert "WasmExecutionProvider" in got["available"]
    assert "CPUExecutionProvider" not in got["available"]            # no numpy in this Pyodide
    assert got["session_providers"] == ["WasmExecutionProvider"]

    label, probabilities = edgerun.InferenceSession(
        os.path.join(digits, "digits_mlp.onnx"), providers=["cpu"]).run(None, {"input": x})
    assert got["label"] == ["HostTensor", [rows], label.tolist()]
    assert got["probabilities"][:2] == ["HostTensor", [rows, 10]]
    np.testing.assert_allclose(np.array(got["probabilities"][2], np.float32).reshape(rows, 10),
                               probabilities, rtol=RTOL, atol=ATOL)


# --- The conformance cases inside Pyodide ---------------------------------------------------

CONFORMANCE_PY = r"""
import json, micropip
await micropip.install("emfs:/data/" + config["wheel_name"], deps=True)
""" + "{runner}" + r"""
json.dumps({"results": run_job(json.loads(open("/data/job.json").read()))})
"""


def test_conformance_cases_in_pyodide_match_as_natively(wheel, tmp_path):
    """Every ONNX node case the wasm provider passes natively (with numpy's help nowhere: see
    conformance.py) runs in Pyodide under Node, numpy absent, kernels in V8's WebAssembly,
    and gives the expected outputs on its first run (recording a program) and its second (the
    replay). The cases it does not pass are listed, with reasons, in
    conformance_expected_failures_wasm.json."""
    need(shutil.which("node") is not None, "node", "apt-get install nodejs (Node 20)")
    need(os.path.exists(PYODIDE), "the pyodide npm package", "npm ci (package.json pins 314.0.7)")
    import numpy_free
    from edgerun.providers.wasm.provider import WasmProvider

    cases = numpy_free.passing_cases(WasmProvider())
    (tmp_path / "job.json").write_text(json.dumps(numpy_free.job(cases, {}, repeat=2)))
    name = _wheel_name(wheel)
    config = {"tools": _pyodide_tool_wheels(_pyodide_lock()), "wheel_name": name,
              "code": CONFORMANCE_PY.replace("{runner}", numpy_free.RUNNER),
              "files": {name: wheel, "job.json": str(tmp_path / "job.json")}}
    got, _ = _run_micropip_js(tmp_path, config, timeout=NODE_TIMEOUT_S)
    assert got["fetches"] == []
    errors, problems, replayed = numpy_free.check(cases, got["results"])
    assert not errors, "\n".join(f"{k}: {v}" for k, v in sorted(errors.items()))
    assert not problems, "\n".join(problems)
    assert replayed > len(cases) // 2, f"only {replayed} cases replayed a recorded program"
    print(f"\nwasm in Pyodide: {len(cases)} conformance cases match ({replayed} replayed)")
