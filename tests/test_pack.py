"""`edgerun pack`: the Android and iOS folders hold what a build needs, the packed model loads
with edgerun and gives the original model's outputs, the wheel imports on its own, and the
app's Python entry point runs under CPython and prints the outputs. The web target's static
site runs in headless Chromium, offline, and prints the CPU provider's outputs."""
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import edgerun
from conftest import ROOT, need
from edgerun.cli import main as cli
from edgerun.pack import PackError, pack
from real_models import REAL_MODELS

DIGITS = os.path.join(ROOT, "examples", "digits", "digits_mlp.onnx")
LAYOUT = {   # target -> (Python sources folder, wheel folder, files every pack has)
    "android": ("app/src/main/python", "app/wheels",
                ["settings.gradle.kts", "build.gradle.kts", "app/build.gradle.kts",
                 "app/src/main/AndroidManifest.xml", "README.md",
                 "app/src/main/java/dev/edgerun/app/MainActivity.kt"]),
    "ios": ("src", "wheels", ["pyproject.toml", "README.md", "src/edgerun_app/app.py",
                              "src/edgerun_app/__main__.py"]),
}
WHEEL = f"edgerun-{edgerun.__version__}-py3-none-any.whl"


def _quiet(_):
    pass


def _manifest(out, target):
    path = os.path.join(out, LAYOUT[target][0], "edgerun_app", "model", "edgerun-pack.json")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _entry_point(out, target):
    """Run the template's entry point with only the pack on the path (plus numpy)."""
    python_dir, wheel_dir, _ = LAYOUT[target]
    import numpy
    numpy_site = os.path.dirname(os.path.dirname(numpy.__file__))
    path = os.pathsep.join([os.path.join(out, python_dir), os.path.join(out, wheel_dir, WHEEL),
                            numpy_site])
    code = ("import edgerun, runpy; print('edgerun from', edgerun.__file__); "
            "runpy.run_module('edgerun_app.entry', run_name='__main__')")
    result = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path[:0] = "
                             f"{path.split(os.pathsep)!r}; " + code],
                            capture_output=True, text=True, timeout=120, cwd=out)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def android_pack(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("pack") / "android")
    assert cli(["pack", DIGITS, "--target", "android", "--out", out]) == 0
    return out


def test_android_pack_has_the_project_model_and_wheel(android_pack):
    python_dir, wheel_dir, files = LAYOUT["android"]
    for rel in files + [f"{wheel_dir}/{WHEEL}", f"{python_dir}/edgerun_app/entry.py",
                        f"{python_dir}/edgerun_app/model/model.onnx"]:
        assert os.path.isfile(os.path.join(android_pack, rel)), rel
    gradle = open(os.path.join(android_pack, "app", "build.gradle.kts")).read()
    assert 'id("com.chaquo.python")' in gradle and f'install("wheels/{WHEEL}")' in gradle
    activity = open(os.path.join(android_pack, LAYOUT["android"][2][-1])).read()
    assert 'getModule("edgerun_app.entry")' in activity and "run_packed_model" in activity
    for folder, _, names in os.walk(android_pack):
        for name in names:
            if name.endswith((".kts", ".kt", ".xml", ".md", ".py", ".json")):
                text = open(os.path.join(folder, name), encoding="utf-8").read()
                assert "{{" not in text, f"unfilled placeholder in {name}"
    manifest = _manifest(android_pack, "android")
    assert manifest["target"] == "android" and manifest["providers"] == ["nnapi", "cpu"]
    assert manifest["inputs"] == [{"name": "input", "dtype": "float32", "shape": [1, 64]}]


def test_packed_model_loads_and_matches_the_original(android_pack):
    packed = os.path.join(android_pack, LAYOUT["android"][0], "edgerun_app", "model",
                          "model.onnx")
    x = np.load(os.path.join(ROOT, "examples", "digits", "digits_holdout.npz"))["X"][:50]
    got = edgerun.InferenceSession(packed).run(None, {"input": x})
    expected = edgerun.InferenceSession(DIGITS).run(None, {"input": x})
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-5, atol=1e-6)


def test_wheel_is_complete_and_needs_only_numpy(android_pack):
    wheel = os.path.join(android_pack, LAYOUT["android"][1], WHEEL)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read(f"edgerun-{edgerun.__version__}.dist-info/METADATA").decode()
    assert "edgerun/__init__.py" in names and "edgerun/providers/cpu/ops/conv.py" in names
    assert not any("__pycache__" in n for n in names)
    assert [line for line in meta.splitlines() if line.startswith("Requires-Dist")] == \
        ["Requires-Dist: numpy>=1.24"]


def test_android_entry_point_runs_on_the_packed_model(android_pack):
    out = _entry_point(android_pack, "android")
    assert f"{WHEEL}{os.sep}edgerun{os.sep}__init__.py" in out     # edgerun came from the wheel
    assert "providers: CPUExecutionProvider" in out
    assert "label: int64 [1]" in out and "probabilities: float32 [1, 10]" in out


def test_refuses_to_overwrite_without_force(android_pack, capsys):
    assert cli(["pack", DIGITS, "--target", "android", "--out", android_pack]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--force" in err
    with pytest.raises(PackError, match="already exists and is not empty; pass --force"):
        pack(DIGITS, "android", android_pack, log=_quiet)
    pack(DIGITS, "android", android_pack, force=True, log=_quiet)
    assert os.path.isfile(os.path.join(android_pack, LAYOUT["android"][1], WHEEL))


def test_unknown_target_and_bad_arguments_are_clear_errors(tmp_path, capsys):
    assert cli(["pack", DIGITS, "--target", "tvos", "--out", str(tmp_path / "w")]) == 2
    assert "unknown target 'tvos'; expected android, ios or web" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "w")
    with pytest.raises(PackError, match="not model inputs"):
        pack(DIGITS, "android", str(tmp_path / "a"), input_shapes={"nope": [1]}, log=_quiet)
    with pytest.raises(PackError, match="does not exist"):
        pack(str(tmp_path / "missing.onnx"), "ios", str(tmp_path / "b"), log=_quiet)


def test_never_deletes_what_it_did_not_write(tmp_path, monkeypatch):
    """`--out` holding the model, or the current folder, is refused even with --force (the
    pack used to delete the model and everything beside it, then fail); --force replaces
    only an earlier pack; a failed pack leaves nothing."""
    import shutil

    folder = tmp_path / "work"
    folder.mkdir()
    model = folder / "digits.onnx"
    shutil.copy(DIGITS, model)
    (folder / "notes.txt").write_text("mine")
    monkeypatch.chdir(folder)
    with pytest.raises(PackError, match="holds the model"):
        pack(str(model), "web", ".", force=True, log=_quiet)
    with pytest.raises(PackError, match="holds the model"):
        pack("digits.onnx", "android", str(folder), force=True, log=_quiet)
    other = tmp_path / "data"
    other.mkdir()
    (other / "keep.bin").write_bytes(b"1")
    with pytest.raises(PackError, match="replaces only a folder edgerun pack wrote"):
        pack(str(model), "android", str(other), force=True, log=_quiet)
    monkeypatch.chdir(other)
    with pytest.raises(PackError, match="current folder"):
        pack(DIGITS, "android", ".", force=True, log=_quiet)
    assert sorted(os.listdir(folder)) == ["digits.onnx", "notes.txt"]
    assert os.listdir(other) == ["keep.bin"]
    with pytest.raises(PackError, match="not model inputs"):     # fails after it started
        pack(str(model), "android", str(tmp_path / "new"), input_shapes={"nope": [1]},
             log=_quiet)
    assert sorted(os.listdir(tmp_path)) == ["data", "work"]       # no partial folder left


def test_model_names_are_escaped_where_they_are_written(tmp_path):
    """A model named like markup or code is text in every file of the pack."""
    import shutil

    name = '<img src=x onerror=alert(1)>"$x\\.onnx'
    model = tmp_path / name
    shutil.copy(DIGITS, model)
    out = tmp_path / "app"
    pack(str(model), "android", str(out), log=_quiet)
    activity = (out / "app/src/main/java/dev/edgerun/app/MainActivity.kt").read_text()
    assert 'Running <img src=x onerror=alert(1)>\\"\\$x\\\\.onnx with' in activity
    readme = (out / "README.md").read_text()
    assert "&lt;img src=x onerror=alert(1)&gt;&quot;$x" in readme and "<img" not in readme
    from edgerun.pack import _fill_placeholders
    page = tmp_path / "page"
    page.mkdir()
    (page / "index.html").write_text("<h1>{{MODEL_NAME}}</h1>{{OTHER}}")
    _fill_placeholders(str(page), {"MODEL_NAME": name, "OTHER": "{{MODEL_NAME}}"})
    assert (page / "index.html").read_text() == (
        "<h1>&lt;img src=x onerror=alert(1)&gt;&quot;$x\\.onnx</h1>{{MODEL_NAME}}")


def test_input_shape_fixes_symbolic_dims(tmp_path):
    path, _ = REAL_MODELS["ppocr_mobile_cls"]()
    out = str(tmp_path / "ocr")
    lines = []
    pack(path, "android", out, input_shapes={"x": [1, 3, 48, 192]}, log=lines.append)
    assert lines[0].startswith("[1/5]") and lines[-1].startswith("packed")
    manifest = _manifest(out, "android")
    assert manifest["inputs"] == [{"name": "x", "dtype": "float32", "shape": [1, 3, 48, 192]}]
    assert manifest["outputs"][0]["shape"] == [1, 2]
    assert "float32 [1, 2]" in _entry_point(out, "android")


def test_ios_pack_has_briefcase_project_coreml_packages_and_runs(tmp_path):
    out = str(tmp_path / "ios")
    lines = []
    pack(DIGITS, "ios", out, log=lines.append)
    python_dir, wheel_dir, files = LAYOUT["ios"]
    for rel in files + [f"{wheel_dir}/{WHEEL}", f"{python_dir}/edgerun_app/model/model.onnx"]:
        assert os.path.isfile(os.path.join(out, rel)), rel
    project = open(os.path.join(out, "pyproject.toml")).read()
    assert "[tool.briefcase.app.edgerun_app]" in project and f"./wheels/{WHEEL}" in project
    out_text = _entry_point(out, "ios")
    assert "label: int64 [1]" in out_text and "probabilities: float32 [1, 10]" in out_text
    try:
        import coremltools as ct
    except ImportError:
        ct = None
    need(ct is not None, "coremltools", "pip install coremltools==9.0")
    manifest = _manifest(out, "ios")
    assert [a["nodes"] for a in manifest["coreml"]] == [5, 2]    # MLP, then the Reshape
    for artifact in manifest["coreml"]:
        path = os.path.join(out, python_dir, "edgerun_app", "model", artifact["mlpackage"])
        spec = ct.models.MLModel(path, skip_model_load=True).get_spec()
        assert spec.WhichOneof("Type") == "mlProgram"
        assert artifact["specification_version"] >= 6


def test_web_pack_runs_offline_in_chromium_like_the_cpu_provider(tmp_path, capsys):
    from browser_harness import chromium, console_errors, require_browser, served

    require_browser()
    out = str(tmp_path / "site")
    assert cli(["pack", DIGITS, "--target", "web", "--out", out]) == 0
    err = capsys.readouterr().err
    assert err.startswith("[1/7] loading") and "[7/7] writing edgerun-pack.json" in err, err
    assert "python -m edgerun.web.serve" in err
    for rel in ["index.html", "app.js", "README.md", "model.onnx", "edgerun-pack.json",
                "edgerun/index.js", "edgerun/worker.js", "edgerun/dist/edgerun.whl",
                "edgerun/dist/edgerun-snapshot.json",
                "pyodide/pyodide.mjs", "pyodide/pyodide.asm.wasm", "pyodide/python_stdlib.zip"]:
        assert os.path.isfile(os.path.join(out, rel)), rel
    with open(os.path.join(out, "edgerun", "dist", "edgerun-snapshot.json")) as f:
        snapshots = json.load(f)["variants"]      # none when web/dist is not this engine's build
    for variant in snapshots.values():
        assert os.path.isfile(os.path.join(out, "edgerun", "dist", variant["data"])), variant
    with open(os.path.join(out, "edgerun-pack.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    assert manifest["providers"] == ["wasm"] and set(manifest["placement"]) == {"wasm"}
    with pytest.raises(PackError, match="already exists and is not empty; pass --force"):
        pack(DIGITS, "web", out, log=_quiet)

    with served(out) as url, chromium(str(tmp_path / "profile")) as context:
        context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(url)
                      else route.abort())                       # offline: only the site
        page = context.new_page()
        errors = console_errors(page)
        page.goto(f"{url}/")
        page.wait_for_function("window.edgerunPack && edgerunPack.done")
        result = page.evaluate("edgerunPack")
        text = page.text_content("#out")
    assert result["error"] is None, (result["error"], errors)
    assert set(result["placement"]) == {"wasm"}, result["placement"]     # all of it, as natively
    x = np.array(result["inputs"]["input"]["data"], np.float32).reshape(1, 64)
    label, probabilities = edgerun.InferenceSession(DIGITS, providers=["cpu"]).run(
        None, {"input": x})
    assert result["outputs"]["label"]["data"] == label.tolist()
    np.testing.assert_allclose(np.array(result["outputs"]["probabilities"]["data"]).reshape(1, 10),
                               probabilities, rtol=1e-3, atol=1e-4)
    assert f"label: int64 [1] {label[0]}" in text and "probabilities: float32 [1, 10]" in text
    assert not errors, errors
    print(f"\nweb pack in Chromium: session {result['createMs']:.0f} ms with Pyodide, "
          f"run {result['runMs']:.1f} ms")
