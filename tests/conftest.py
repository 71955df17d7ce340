"""Shared test setup.

In CI (CI=true) a missing tool is a failure, never a skip: `need()` turns the skip into an
error there. Locally a skip says exactly what to install.
"""
import os
import warnings

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def need(condition: bool, what: str, install: str) -> None:
    """Skip locally (saying how to install `what`), fail in CI."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{what} is required in CI: {install}")
    pytest.skip(f"{what} is missing: {install}")


WEBGPU_INSTALL = ("apt-get install -y --no-install-recommends mesa-vulkan-drivers libvulkan1 && "
                  "pip install wgpu==0.32.0")


@pytest.fixture(scope="module")
def gpu():
    """The WebGPU provider's shared context (native wgpu; lavapipe's Vulkan in CI)."""
    try:
        import wgpu  # noqa: F401
    except ImportError:
        need(False, "wgpu", WEBGPU_INSTALL)
    from edgerun.providers.webgpu.provider import WebGpuProvider, shared_context
    ok, why = WebGpuProvider.available()
    need(ok, f"a WebGPU adapter ({why})", WEBGPU_INSTALL)
    return shared_context()


def usable_provider(name: str) -> str:
    """`name`, after checking that its provider can run here (skip locally, fail in CI)."""
    if name == "wasm":
        from edgerun.providers.wasm.provider import WasmProvider
        ok, _ = WasmProvider.available()
        need(ok, "the wasm provider", "pip install wasmtime==50.0.1")
    if name == "webgpu":
        from edgerun.providers.webgpu.provider import WebGpuProvider
        ok, why = WebGpuProvider.available()
        need(ok, f"a WebGPU adapter ({why})", WEBGPU_INSTALL)
    return name


def webgpu_session(model, providers=("webgpu", "cpu")):
    """A session that fails, rather than warns, when the webgpu provider is skipped."""
    import edgerun

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        return edgerun.InferenceSession(model, providers=list(providers))


def record_prepared_builds(monkeypatch) -> list:
    """From now on, every build KernelContext.prepared runs (its cache missed) as (op type,
    key), in the list returned: what a second run of a session must leave empty."""
    from edgerun.runtime.kernel_context import KernelContext

    builds: list = []
    real = KernelContext.prepared

    def counting(self, key, sources, build):
        return real(self, key, sources, lambda: builds.append((self.node.op_type, key)) or build())

    monkeypatch.setattr(KernelContext, "prepared", counting)
    return builds
