"""edgerun inside Pyodide under Node, with no numpy, through the JavaScript API.

The wheel scripts/build_web.py builds is what web/index.js installs into Pyodide (314.0.7,
no numpy here). Every real model of tests/real_models.py then runs through
`InferenceSession.create(bytes, {executionProviders: ["wasm"]})` / `session.run` in one Node
process (bench/web/run_cases.mjs), its kernels in V8's WebAssembly, and the outputs of its
second run (a replay of the program the first run recorded) must match the native CPU
provider's (rtol 1e-3, atol 1e-4, same dtype and shape).

Also: the wheel carries the kernels' .wasm and its stamp, and an installed package (no
sources beside it) loads them with numpy blocked.
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
