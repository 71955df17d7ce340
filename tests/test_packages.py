"""The packages as users install them, in fresh projects outside the checkout:

- the npm tarball (`npm pack`, after `python scripts/build_web.py`) installed in a fresh Node
  project, whose script (tests/packages/digits.mjs) imports "edgerun" and runs the digits model;
- the same tarball in a fresh Vite app (tests/packages/vite-app, vite pinned there), set up by
  the README's bundler steps, built with `vite build`, served statically and opened in
  Chromium, where it runs the model in the page and in a Web Worker;
- the Python wheel (`pip wheel`, not editable) in a fresh venv, through the `edgerun` command;
- the README's table of sizes, which must stay within 10% of what is measured here.

Every run's labels are compared with edgerun's CPU provider in this process. npm reaches the
registry (or its cache) for pyodide and vite, pip for numpy, ml_dtypes and threadpoolctl.

Needs: Node 20.19+ with npm, `apt-get install -y chromium`, `pip install playwright` (never
`playwright install`). In CI a missing one fails (conftest.need).
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import numpy as np
import pytest

import edgerun
from browser_harness import CHROMIUM, chromium, console_errors, served
from conftest import ROOT, need

DIGITS = os.path.join(ROOT, "examples", "digits", "digits_mlp.onnx")
HOLDOUT = os.path.join(ROOT, "examples", "digits", "digits_holdout.npz")
FIXTURES = os.path.join(ROOT, "tests", "packages")
README = os.path.join(ROOT, "README.md")
ROWS = 6                  # `edgerun run` prints the first 6 values of an output
TOLERANCE = 0.10          # the README's sizes against the measured ones
# What a page fetches from Pyodide (the files the README tells bundler users to copy).
PYODIDE_FILES = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
                 "pyodide-lock.json"]
# The line the README tells bundler users to add; the Vite app has it too.
INDEX_URL_LINE = 'env.pyodide.indexURL = import.meta.env.BASE_URL + "pyodide/";'
NPM = ["--no-audit", "--no-fund", "--loglevel=error"]
NODE_INSTALL = "Node 20.19+ with npm (apt-get install -y nodejs npm, or nodejs.org)"


def _run(cmd, cwd, timeout=300, env=None) -> str:
    """Run `cmd`; its stdout, or AssertionError with the command's output."""
    # a fresh project sees none of this checkout: no PYTHONPATH pointing into it
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
           "npm_config_update_notifier": "false", **(env or {})}
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                            check=False, env=env)
    if result.returncode:
        raise AssertionError(f"{' '.join(map(str, cmd))} (in {cwd}) exited {result.returncode}:\n"
                             f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result.stdout


def _readme_block(needle: str) -> str:
    """The README's fenced code block that contains `needle`."""
    with open(README, encoding="utf-8") as f:
        blocks = re.findall(r"```\w*\n(.*?)```", f.read(), re.DOTALL)
    found = [b for b in blocks if needle in b]
    assert found, f"README.md has no code block with {needle!r}"
    return found[0]


# ---- shared inputs and the packages -------------------------------------------------------

@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("packages")


@pytest.fixture(scope="module")
def digits(work):
    """A few held-out rows as raw float32 (for JavaScript) and .npy (for the command), and the
    labels edgerun's CPU provider gives them."""
    x = np.ascontiguousarray(np.load(HOLDOUT)["X"][:ROWS], dtype="<f4")
    x.tofile(work / "pixels.f32")
    np.save(work / "pixels.npy", x)
    labels, _ = edgerun.InferenceSession(DIGITS, providers=["cpu"]).run(None, {"input": x})
    return {"f32": work / "pixels.f32", "npy": work / "pixels.npy",
            "labels": [int(v) for v in labels]}


def _node_version() -> tuple:
    if not (shutil.which("node") and shutil.which("npm")):
        return (0,)
    out = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout
    return tuple(int(p) for p in re.findall(r"\d+", out)[:3])


@pytest.fixture(scope="module")
def tarball(work):
    """`npm pack` of the repository (after building web/dist/edgerun.whl when it is missing):
    the tarball's path and npm's report on it (size, unpackedSize, files)."""
    version = _node_version()
    need(version >= (20, 19), f"Node 20.19+ and npm (found {version})", NODE_INSTALL)
    if not os.path.exists(os.path.join(ROOT, "web", "dist", "edgerun.whl")):
        _run([sys.executable, os.path.join(ROOT, "scripts", "build_web.py")], ROOT)
    out = work / "npm-pack"
    out.mkdir()
    (info,) = json.loads(_run(["npm", "pack", "--json", "--pack-destination", str(out), *NPM],
                              ROOT))
    path = out / info["filename"]
    files = {f["path"]: f["size"] for f in info["files"]}
    assert "web/dist/edgerun.whl" in files, (
        f"the npm tarball lacks web/dist/edgerun.whl (run `npm run build` before `npm pack`): "
        f"{sorted(files)}")
    from edgerun.pack.web import WHEEL_REQUIRED

    with tarfile.open(path) as tar:
        inner = tar.extractfile("package/web/dist/edgerun.whl")
        with zipfile.ZipFile(inner) as z:
            missing = [n for n in WHEEL_REQUIRED if n not in z.namelist()]
    assert not missing, f"the npm tarball's wheel lacks {missing}"
    return {"path": path, "info": info, "files": files}


def _fresh_npm_project(folder, tarball, template=None):
    """A fresh npm project in `folder` (a copy of `template`, or an empty package.json) with
    the tarball installed as `npm install edgerun` would."""
    if template:
        shutil.copytree(template, folder)
    else:
        folder.mkdir()
        (folder / "package.json").write_text('{"name": "app", "private": true, "type": "module"}\n')
    _run(["npm", "install", *NPM, str(tarball["path"])], folder)
    return folder


@pytest.fixture(scope="module")
def node_project(work, tarball):
    return _fresh_npm_project(work / "node-app", tarball)


@pytest.fixture(scope="module")
def python_wheel(work):
    """`pip wheel` (not editable) of a copy of the sources: the copy, as scripts/build_web.py
    makes it, follows the wgsl/ link and leaves out the checkout's setuptools build/ folder,
    where modules deleted from the sources would linger (a fresh clone has none)."""
    src = work / "src"
    shutil.copytree(os.path.join(ROOT, "engine"), src / "engine",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), src)
    dest = work / "wheel"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--disable-pip-version-check",
          "-w", str(dest), str(src)], work)
    (wheel,) = glob.glob(str(dest / "edgerun-*.whl"))
    return wheel


# ---- the npm package in Node --------------------------------------------------------------

def test_npm_package_in_a_fresh_node_project(node_project, digits):
    shutil.copy(os.path.join(FIXTURES, "digits.mjs"), node_project)
    out = _run(["node", "digits.mjs", DIGITS, str(digits["f32"]), str(ROWS)], node_project)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["providers"] == ["wasm"]
    assert result["labels"] == digits["labels"]


# ---- the npm package in a bundled web app -------------------------------------------------

def test_npm_package_in_a_vite_app(work, tarball, digits):
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        need(False, "Playwright", "pip install playwright (no `playwright install`)")
    need(os.path.exists(CHROMIUM), f"Chromium at {CHROMIUM}", "apt-get install -y chromium")
    app = _fresh_npm_project(work / "vite-app", tarball, os.path.join(FIXTURES, "vite-app"))
    # the README's bundler steps, as written there
    _run(["bash", "-euo", "pipefail", "-c", _readme_block("public/pyodide")], app)
    assert INDEX_URL_LINE in _readme_block("env.pyodide.indexURL ="), "README's line changed"
    with open(app / "main.js") as f:
        assert INDEX_URL_LINE in f.read()
    shutil.copy(DIGITS, app / "public")
    shutil.copy(digits["f32"], app / "public" / "pixels.f32")
    _run(["npm", "run", "build", "--silent"], app)

    dist = app / "dist"
    emitted = [os.path.basename(p) for p in glob.glob(str(dist / "assets" / "*.whl"))]
    assert len(emitted) == 1, f"vite did not emit edgerun's wheel into dist/assets: {emitted}"
    for name in PYODIDE_FILES:
        assert (dist / "pyodide" / name).is_file(), f"dist/pyodide/{name} is missing"

    with served(str(dist)) as url, chromium(str(work / "profile")) as context:
        page = context.new_page()
        errors = console_errors(page)
        requests = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(f"{url}/")
        page.wait_for_function("document.getElementById('out').textContent !== 'loading'")
        text = page.text_content("#out")
    assert not text.startswith("error"), f"{text}\nconsole: {errors}"
    result = json.loads(text)
    assert result == {"page": digits["labels"], "worker": digits["labels"]}, text
    fetched = [u[len(url):] for u in requests]
    assert f"/assets/{emitted[0]}" in fetched and "/pyodide/pyodide.asm.wasm" in fetched, fetched
    assert not [u for u in fetched if "node_modules" in u], fetched


# ---- the Python wheel ---------------------------------------------------------------------

def test_python_wheel_in_a_fresh_venv(work, python_wheel, digits):
    from edgerun.pack.web import WHEEL_REQUIRED

    with zipfile.ZipFile(python_wheel) as z:
        names = z.namelist()
    missing = [n for n in WHEEL_REQUIRED if n not in names]
    assert not missing, f"the wheel lacks {missing}: check package-data in pyproject.toml"
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], work)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    # the wheel with its runtime dependencies (from the index or pip's cache)
    _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
          python_wheel], work)
    # run from outside the checkout: the installed package, not the sources, is imported
    where = _run([str(bin_dir / "python"), "-c", "import edgerun; print(edgerun.__file__)"], work)
    assert where.strip().startswith(str(venv)), where
    out = _run([str(bin_dir / "edgerun"), "run", DIGITS, "--input", f"input={digits['npy']}",
                "--providers", "cpu"], work)
    assert "providers: CPUExecutionProvider" in out, out
    match = re.search(rf"^label: int64 \[{ROWS}\] .* first (\[[\d, ]*\])$", out, re.MULTILINE)
    assert match, out
    assert json.loads(match.group(1)) == digits["labels"], out


# ---- the README's sizes -------------------------------------------------------------------

UNITS = {"B": 1, "KB": 1e3, "MB": 1e6}


def _readme_sizes() -> dict:
    """The README's table of packages: {first cell: bytes in the last cell}."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    section = text.split("## The packages", 1)[1].split("\n## ", 1)[0]
    sizes = {}
    for row in re.findall(r"^\|(.*)\|\s*$", section, re.MULTILINE):
        cells = [c.strip() for c in row.split("|")]
        m = re.fullmatch(r"([\d.,]+) (B|KB|MB)", cells[-1])
        if m:
            sizes[cells[0]] = float(m.group(1).replace(",", "")) * UNITS[m.group(2)]
    return sizes


def test_readme_sizes_are_measured(tarball, node_project, python_wheel):
    pyodide = node_project / "node_modules" / "pyodide"
    measured = {
        "npm tarball": tarball["info"]["size"],
        "npm package, installed": tarball["info"]["unpackedSize"],
        "wheel inside the npm package": tarball["files"]["web/dist/edgerun.whl"],
        "Pyodide, as a page downloads it": sum(os.path.getsize(pyodide / n) for n in PYODIDE_FILES),
        "Python wheel": os.path.getsize(python_wheel),
    }
    readme = _readme_sizes()
    keys = {name: [k for k in readme if name in k] for name in measured}
    report = "\n".join(f"  {name}: {size / 1e3:,.0f} KB" for name, size in measured.items())
    for name, found in keys.items():
        assert len(found) == 1, (f"README.md's '## The packages' table needs one row naming "
                                 f"'{name}' (found {found}); measured:\n{report}")
    off = {name: (readme[keys[name][0]], size) for name, size in measured.items()
           if abs(readme[keys[name][0]] - size) > TOLERANCE * size}
    assert not off, (f"README.md's sizes are more than {TOLERANCE:.0%} off for {sorted(off)}; "
                     f"measured:\n{report}")
