"""Headless Chromium for the tests of web pages (demos, packed sites): one launch per test
module, pages served from 127.0.0.1 (a secure context, so `navigator.gpu` exists).

Needs: `apt-get install -y chromium` (Debian's, at /usr/bin/chromium; override with
EDGERUN_CHROMIUM), `pip install playwright` (never `playwright install`: it downloads a
browser), and `npm ci` (node_modules/pyodide). In CI a missing one fails (conftest.need).
"""
from __future__ import annotations

import contextlib
import os

from conftest import ROOT, need

CHROMIUM = os.environ.get("EDGERUN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--enable-unsafe-webgpu", "--no-sandbox", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-quic"]
PYODIDE = os.path.join(ROOT, "node_modules", "pyodide")
TIMEOUT_MS = 240_000


def require_browser() -> None:
    """Skip locally / fail in CI, saying what to install."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        need(False, "Playwright", "pip install playwright (no `playwright install`)")
    need(os.path.exists(CHROMIUM), f"Chromium at {CHROMIUM}", "apt-get install -y chromium")
    need(os.path.isdir(PYODIDE), "node_modules/pyodide", "npm ci")


@contextlib.contextmanager
def chromium(profile_dir: str):
    """A headless Chromium context with WebGPU (SwiftShader) on."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile_dir, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context.set_default_timeout(TIMEOUT_MS)
        try:
            yield context
        finally:
            context.close()


@contextlib.contextmanager
def served(folder: str, also=()):
    """Serve `folder` on 127.0.0.1; yields the base URL. `also`: folders its links may reach
    (repo_site links into the checkout and Pyodide's package)."""
    from edgerun.web.serve import serve

    server, url = serve(folder, also=also)
    try:
        yield url
    finally:
        server.shutdown()


def repo_site(folder: str) -> str:
    """A served copy of the repository's web layout, with a freshly built wheel:
    node_modules/pyodide, web/*.js, web/dist/edgerun.whl and examples/ (links, not copies,
    except the wheel), so the demos load exactly as from the repository root. The start-up
    snapshots come along when the checkout's web/dist was built from these sources
    (pack.web.write_engine), as `npm run build` before the tests leaves it."""
    from edgerun.pack.web import write_engine

    os.makedirs(os.path.join(folder, "node_modules"))
    os.symlink(PYODIDE, os.path.join(folder, "node_modules", "pyodide"))
    os.symlink(os.path.join(ROOT, "examples"), os.path.join(folder, "examples"))
    web = os.path.join(folder, "web")
    os.makedirs(os.path.join(web, "dist"))
    for name in os.listdir(os.path.join(ROOT, "web")):
        if name.endswith(".js"):
            os.symlink(os.path.join(ROOT, "web", name), os.path.join(web, name))
    write_engine(os.path.join(web, "dist"), AssertionError)
    return folder


def console_errors(page) -> list:
    """Collects the page's console errors and uncaught exceptions (for failure messages)."""
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors
