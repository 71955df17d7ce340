"""The differential net: random graphs of every operator family on cpu, wasm and webgpu,
compared with onnxruntime (the ONNX reference decides where onnxruntime departs from the
spec; tolerances in edgerun/tools/difftest/oracle.py and per family).

A fixed seed and a sample of CASES graphs, split over the families by their weights; the
full runs (100,000 cases) are `python -m edgerun.tools.difftest` (see the tool's doc).
A failure names the case: replay it with
`python -m edgerun.tools.difftest --seed SEED --index I --families FAMILY --providers P`.
"""
import os

import numpy as np
import pytest

from edgerun.tools.difftest import FAMILIES, generate, run_case
from edgerun.tools.difftest.builder import GraphBuilder
from edgerun.tools.difftest.oracle import mismatch
from edgerun.tools.difftest.runner import (FAILING, ORT_DEPARTS, PASSED, REFUSED,
                                           UNCLAIMED, WRONG)

SEED = 20261126
CASES = int(os.environ.get("EDGERUN_DIFFTEST_CASES", "3000"))


def _counts() -> dict:
    total = sum(weight for _, weight in FAMILIES.values())
    return {name: max(20, round(CASES * weight / total)) for name, (_, weight) in
            FAMILIES.items()}


def _providers(request) -> list:
    providers = ["cpu", "wasm"]
    request.getfixturevalue("gpu")       # webgpu on lavapipe (a failure in CI when missing)
    return providers + ["webgpu"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_random_graphs_match_onnxruntime(family, request):
    providers = _providers(request)
    failures, claimed = [], {p: 0 for p in providers}
    for index in range(_counts()[family]):
        case = generate(SEED, index, [family])
        for outcome in run_case(case, providers):
            if outcome.status in FAILING:
                failures.append(f"{outcome.provider} i{index}: {outcome.status}: "
                                f"{case.summary}\n    {outcome.detail}")
            if outcome.status == UNCLAIMED and outcome.provider == "cpu":
                failures.append(f"cpu i{index}: the CPU provider refused {case.summary}: "
                                f"{outcome.detail}")
            if outcome.status in (PASSED, ORT_DEPARTS, REFUSED):
                claimed[outcome.provider] += 1
    assert not failures, (f"seed {SEED}, family {family}: {len(failures)} failing\n" +
                          "\n".join(failures[:20]))
    assert claimed["cpu"] > 0.9 * _counts()[family], claimed    # few invalid cases


def test_same_seed_and_index_give_the_same_case():
    a, b = generate(7, 123), generate(7, 123)
    assert a.model == b.model and a.summary == b.summary
    assert a.feeds.keys() == b.feeds.keys()
    for k in a.feeds:
        np.testing.assert_array_equal(a.feeds[k], b.feeds[k])


def test_layout_wrappers_give_the_node_the_same_values():
    """A graph input fed through a Transpose, Slice (step 2 or -1) or Expand reaches the node
    as the value the generator meant (checked with onnxruntime on Identity)."""
    import onnxruntime

    rng = np.random.default_rng(0)
    seen = set()
    for trial in range(60):
        b = GraphBuilder(rng, 17)
        value = rng.standard_normal((2, 3, 4)).astype(np.float32)
        name = b.operand(value)
        layout = next(iter(b.layouts.values()))
        seen.add(layout)
        if layout == "broadcast":           # the operand was narrowed along one axis first
            source = next(iter(b.feeds.values()))
            value = np.broadcast_to(source, value.shape)
        (y,) = b.node("Identity", [name])
        b.output(y)
        case = b.build("check", "Identity", None)
        got = onnxruntime.InferenceSession(case.model).run(None, case.feeds)[0]
        np.testing.assert_array_equal(got, value, err_msg=layout)
    assert seen == {"plain", "transposed", "sliced", "broadcast"}


def test_comparison_catches_what_it_must():
    from edgerun.tools.difftest.builder import Tolerance

    tol = Tolerance()
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    assert mismatch([x], [x.copy()], tol) is None
    assert "shape" in mismatch([x.reshape(4, 3)], [x], tol)
    assert "dtype" in mismatch([x.astype(np.float64)], [x], tol)
    worse = x.copy()
    worse[1, 2] += 1e-2
    assert "max abs error" in mismatch([worse], [x], tol)
    nan = x.copy()
    nan[0, 0] = np.nan
    assert "NaN" in mismatch([nan], [x], tol)
    assert "differ" in mismatch([np.array([1, 2])], [np.array([1, 3])], tol)


def test_outcomes_are_classified_by_both_oracles(monkeypatch):
    """edgerun vs onnxruntime, then the reference: a departure of onnxruntime alone is
    ORT_DEPARTS, of both WRONG; an operator no provider has is UNCLAIMED."""
    from edgerun.tools.difftest import runner

    case = next(c for c in (generate(1, i, ["unary"]) for i in range(200))
                if c.summary.startswith("Relu ") and "float32" in c.summary)
    assert [o.status for o in run_case(case, ["cpu"])] == [PASSED]
    truth = runner.reference_outputs(case)[0]
    off = [t + 1 for t in truth]
    monkeypatch.setattr(runner, "onnxruntime_outputs", lambda c: (off, None))
    assert [o.status for o in run_case(case, ["cpu"])] == [ORT_DEPARTS]
    monkeypatch.setattr(runner, "reference_outputs", lambda c: (off, None))
    assert [o.status for o in run_case(case, ["cpu"])] == [WRONG]
    monkeypatch.setattr(runner, "onnxruntime_outputs", lambda c: (None, "refused"))
    monkeypatch.setattr(runner, "reference_outputs", lambda c: (truth, None))
    broken = generate(1, 0, ["unary"])
    broken.model = case.model.replace(b"Relu", b"Relx")     # an op nobody has
    assert [o.status for o in run_case(broken, ["cpu"])] == [UNCLAIMED]
