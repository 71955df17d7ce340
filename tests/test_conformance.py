"""Every ONNX node conformance case (onnx==1.23.2) through the CPU provider.

Tolerances are each case's own (onnx's defaults: rtol 1e-3, atol 1e-7), compared the way
onnx's backend runner compares (see edgerun/tools/conformance.py). Cases listed in
tools/conformance_expected_failures.json are strict xfails: each names its reason, and a
listed case that starts passing fails here until it is taken off the list.
"""
import pytest

from edgerun.tools import conformance

CASES = conformance.load_cases()
EXPECTED = conformance.expected_failures()


def test_all_cases_are_collected():
    assert len(CASES) == 1884


def test_expected_failures_are_real_case_names():
    names = {c["name"] for c in CASES}
    assert set(EXPECTED) <= names


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
