"""The `edgerun` command line: the main job (demo), run and info."""
import os
import re
import subprocess
import sys

import numpy as np

from conftest import ROOT

DIGITS = os.path.join(ROOT, "examples", "digits", "digits_mlp.onnx")


def _edgerun(*args):
    return subprocess.run([sys.executable, "-m", "edgerun", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


def test_demo_classifies_the_held_out_digits():
    out = _edgerun("demo")
    assert out.returncode == 0, out.stderr
    accuracy = float(re.search(r"accuracy: ([0-9.]+)", out.stdout).group(1))
    assert accuracy > 0.9, out.stdout
    assert "latency:" in out.stdout and "CPUExecutionProvider" in out.stdout
    from edgerun.providers.cpu.native import library
    want = "loaded" if library.platform_tag() == "x86_64-linux" else library.status()
    assert f"native CPU kernels: {want}" in out.stdout, out.stdout


def test_info_lists_inputs_outputs_and_ops():
    out = _edgerun("info", DIGITS)
    assert out.returncode == 0, out.stderr
    assert "input: tensor(float) [None, 64]" in out.stdout
    assert "ai.onnx.ml::Scaler" in out.stdout and "MatMul" in out.stdout


def test_explain_lists_placements_refusals_and_copies():
    out = _edgerun("explain", DIGITS, "--providers", "wasm,cpu")
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line for line in out.stdout.splitlines() if line.strip()}
    assert lines["ArrayFeatureExtractor"].split()[2:4] == ["wasm", "cpu"]   # cpu if refused
    assert "if refused" in out.stdout and "MatMul" in out.stdout
    assert "nodes not on wasm: 0" in out.stdout
    assert re.search(r"copies per run: [1-9]\d* \(main graph\)", out.stdout), out.stdout


def test_explain_plan_prints_the_generated_source():
    out = _edgerun("explain", DIGITS, "--providers", "cpu", "--plan")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("def run_program(env):"), out.stdout
    assert re.search(r"# FusedGemm '\w+' on cpu", out.stdout), out.stdout
    compile(out.stdout, "<plan>", "exec")       # the whole function, as Python


def test_explain_json_says_why_a_provider_refused(tmp_path):
    import json

    import onnx
    from onnx import TensorProto, helper

    # no wasm kernel: the CPU provider runs it
    node = helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.5)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                          [3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])])
    path = tmp_path / "binarizer.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                      helper.make_opsetid("ai.onnx.ml", 1)]),
              path)
    out = _edgerun("explain", str(path), "--providers", "wasm,cpu", "--json")
    assert out.returncode == 0, out.stderr
    (node_report,) = json.loads(out.stdout)["nodes"]
    assert node_report["provider"] == "cpu"
    assert node_report["refused_by"] and node_report["refused_by"][0].startswith("wasm: ")


def test_run_with_an_input_file(tmp_path):
    x = np.load(os.path.join(ROOT, "examples", "digits", "digits_holdout.npz"))["X"][:5]
    np.save(tmp_path / "x.npy", x)
    out = _edgerun("run", DIGITS, "--input", f"input={tmp_path / 'x.npy'}", "--repeat", "3")
    assert out.returncode == 0, out.stderr
    assert "label: int64 [5]" in out.stdout and "probabilities: float32 [5, 10]" in out.stdout
    assert "median of 3" in out.stdout


def test_run_reports_bad_input_clearly(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((2, 64), np.float64))
    out = _edgerun("run", DIGITS, "--input", f"input={tmp_path / 'x.npy'}")
    assert out.returncode == 2
    assert "input 'input': expected tensor(float), got tensor(double)" in out.stderr
    assert "Traceback" not in out.stderr


def test_run_on_a_corrupt_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(open(DIGITS, "rb").read()[:500])
    out = _edgerun("run", str(bad))
    assert out.returncode == 2 and "InvalidProtobuf" in out.stderr
    assert "Traceback" not in out.stderr


def test_serve_gives_files_only_inside_its_folder(tmp_path):
    """No directory listings, nothing a symlink reaches outside the served folder."""
    import urllib.error
    import urllib.request

    from edgerun.web.serve import serve

    site = tmp_path / "site"
    (site / "sub").mkdir(parents=True)
    (site / "index.html").write_text("<p>hi</p>")
    (site / "sub" / "a.js").write_text("1")
    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    (site / "leak.txt").symlink_to(secret)
    (site / "inside.js").symlink_to(site / "sub" / "a.js")
    server, url = serve(str(site))
    try:
        def get(path):
            try:
                with urllib.request.urlopen(url + path) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, ""
        assert get("/index.html") == (200, "<p>hi</p>")
        assert get("/") == (200, "<p>hi</p>")               # a folder's index.html
        assert get("/inside.js") == (200, "1")              # a link within the folder
        assert get("/leak.txt")[0] == 404
        assert get("/sub/")[0] == 404                        # no listing
        assert get("/../secret.txt")[0] == 404
    finally:
        server.shutdown()
