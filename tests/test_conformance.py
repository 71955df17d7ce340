"""Every ONNX node conformance case (onnx==1.23.2) through the CPU provider, and through the
wasm and webgpu providers alone (every node on that provider).

Tolerances are each case's own (onnx's defaults: rtol 1e-3, atol 1e-7; wasm and webgpu have
an absolute floor, conformance.PROVIDER_ATOL), compared the way onnx's backend runner
compares (see edgerun/tools/conformance.py). Cases listed in
tools/conformance_expected_failures[_PROVIDER].json are strict xfails: each names its reason
(for wasm and webgpu mostly the node the provider does not claim, and why), and a listed
case that starts passing fails here until it is taken off the list
(`python -m edgerun.tools.conformance --providers P --update-expected`).
"""
import pytest

from conftest import need
from edgerun.tools import conformance

CASES = conformance.load_cases()
EXPECTED = conformance.expected_failures()
EXPECTED_ON = {p: conformance.expected_failures(p) for p in ("wasm", "webgpu")}


def test_all_cases_are_collected():
    assert len(CASES) == 1884


def test_expected_failures_are_real_case_names():
    names = {c["name"] for c in CASES}
    assert set(EXPECTED) <= names
    for provider, expected in EXPECTED_ON.items():
        assert set(expected) <= names, provider


def test_cpu_kernel_modules_all_import():
    from edgerun.providers.cpu import registry
    from edgerun.providers.cpu.ops import IMPORT_ERRORS

    registry.supported_ops()
    assert IMPORT_ERRORS == {}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_node_case(case):
    ok, reason = conformance.run_case(case)
    if case["name"] in EXPECTED:
        assert not ok, (f"{case['name']} now passes: remove it from "
                        f"conformance_expected_failures.json")
        pytest.xfail(EXPECTED[case["name"]])
    assert ok, reason


@pytest.fixture(scope="module")
def wasm_ready():
    from edgerun.providers.wasm.provider import WasmProvider

    ok, why = WasmProvider.available()
    need(ok, f"the wasm provider ({why})", "pip install wasmtime==50.0.1")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_node_case_on_wasm(case, wasm_ready):
    _check_on("wasm", case)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_node_case_on_webgpu(case, gpu):
    _check_on("webgpu", case)


def _check_on(provider: str, case: dict) -> None:
    ok, reason = conformance.run_case(case, provider)
    expected = EXPECTED_ON[provider]
    if case["name"] in expected:
        assert not ok, (f"{case['name']} now runs wholly on {provider} and matches: remove it "
                        f"from conformance_expected_failures_{provider}.json")
        pytest.xfail(expected[case["name"]])
    assert ok, reason
