"""Run ONNX's node conformance cases through edgerun.

    python -m edgerun.tools.conformance [-k SUBSTRING] [--op OPTYPE] [--json report.json]
                                        [--providers cpu|wasm|webgpu] [--update-expected]

Cases come from `onnx.backend.test.case.node.collect_testcases` (onnx==1.23.2, a test
dependency) and are cached under ~/.cache/edgerun/ so later runs need no onnx import.
Outputs are compared as onnx's own backend runner does: same number of outputs, equal
dtypes and shapes, strings exactly, numbers with the case's rtol/atol (default 1e-3/1e-7).
Random operators (Bernoulli, Random*, Multinomial, Dropout in training mode) can only be
compared on dtype and shape: their expected values come from numpy's generator.
"""
from __future__ import annotations

from typing import Optional

import argparse
import json
import os
import pickle
import sys
import time
import warnings

import numpy as np

ONNX_VERSION = "1.23.2"
CACHE_DIR = os.path.join(os.environ.get("EDGERUN_CACHE", os.path.expanduser("~/.cache/edgerun")),
                         f"conformance-onnx-{ONNX_VERSION}-v2")
RANDOM_OPS = {"Bernoulli", "RandomNormal", "RandomNormalLike", "RandomUniform",
              "RandomUniformLike", "Multinomial"}

# Cases edgerun does not pass yet, with the reason (name -> reason). They count as failures
# in the totals; `--update-expected` rewrites the file from a full run.
EXPECTED_FAILURES_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                      "conformance_expected_failures.json")


def expected_failures_path(provider: str = "cpu") -> str:
    """The expected-failure list of a provider (the CPU provider's has no suffix)."""
    if provider == "cpu":
        return EXPECTED_FAILURES_PATH
    return EXPECTED_FAILURES_PATH.replace(".json", f"_{provider}.json")


def expected_failures(provider: str = "cpu") -> dict:
    path = expected_failures_path(provider)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def load_cases() -> list:
    """Every node case as a dict: name, model (bytes), data_sets, rtol, atol, ops."""
    path = os.path.join(CACHE_DIR, "cases.pkl")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return pickle.load(f)
    cases = _generate_cases()
    os.makedirs(CACHE_DIR, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        pickle.dump(cases, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)
    return cases


def _generate_cases() -> list:
    try:
        import onnx
        from onnx.backend.test.case.node import collect_testcases
    except ImportError:
        raise SystemExit(f"generating the conformance cases needs onnx: "
                         f"pip install onnx=={ONNX_VERSION}") from None
    if onnx.__version__ != ONNX_VERSION:
        raise SystemExit(f"conformance cases are pinned to onnx=={ONNX_VERSION}, found "
                         f"{onnx.__version__}: pip install onnx=={ONNX_VERSION}")
    print("generating ONNX node conformance cases (once) ...", file=sys.stderr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = collect_testcases(None)
    cases = []
    for tc in raw:
        assert tc.model is not None and tc.data_sets is not None, tc.name   # node cases have both
        cases.append({
            "name": tc.name,
            "model": tc.model.SerializeToString(),
            "data_sets": [([_to_numpy(v) for v in i], [_to_numpy(v) for v in o])
                          for i, o in tc.data_sets],
            "rtol": tc.rtol, "atol": tc.atol,
            "ops": sorted({n.op_type for n in tc.model.graph.node}),
        })
    return cases


def _to_numpy(value):
    """Some cases give TensorProto (or sequences/optionals of them) instead of arrays."""
    import onnx
    from onnx import numpy_helper

    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, onnx.SequenceProto):
        return numpy_helper.to_list(value)
    if isinstance(value, onnx.OptionalProto):
        return numpy_helper.to_optional(value)
    if isinstance(value, list):
        return [_to_numpy(v) for v in value]
    return value


def select(cases: list, substring: Optional[str] = None, op: Optional[str] = None) -> list:
    out = cases
    if substring:
        out = [c for c in out if substring.lower() in c["name"].lower()]
    if op:
        out = [c for c in out if op in c["ops"]]
    return out


# Absolute tolerance floors per provider (the cases' own atol is 1e-7 by default): GPU
# transcendentals and summation orders differ from float64-derived expectations by more.
PROVIDER_ATOL = {"cpu": 0.0, "wasm": 1e-6, "webgpu": 1e-4}
PROVIDERS = tuple(PROVIDER_ATOL)


def run_case(case: dict, provider: str = "cpu") -> tuple:
    """(passed, reason) of the case run wholly on `provider`; reason says what differs,
    what was raised, or which node the provider refused (and why)."""
    from edgerun import InferenceSession

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sess = InferenceSession(case["model"], providers=[provider])
            refused = _off_provider(sess, provider)
            if refused:
                return False, refused
            names = [i.name for i in sess.get_inputs()]
            shape_only = _shape_only(case)
            atol = max(case["atol"], PROVIDER_ATOL[provider])
            for inputs, expected in case["data_sets"]:
                got = sess.run(None, dict(zip(names, inputs)))
                problem = compare_outputs(expected, got, case["rtol"], atol, shape_only)
                if problem:
                    return False, problem
            on_host = _host_fallbacks(sess)
            if on_host:
                return False, on_host
    except Exception as e:  # noqa: BLE001 - a conformance run reports every failure
        return False, f"{type(e).__name__}: {e}"
    return True, ""


def _off_provider(sess, provider: str) -> str:
    """'' when every node runs on `provider`, else which did not and why."""
    if provider == "cpu":
        return ""
    for node in sess.explain()["nodes"]:
        if node["provider"] != provider:
            why = "; ".join(node["refused_by"]) or f"ran on {node['provider']}"
            return f"not claimed: {node['domain']}::{node['op_type']} ({why})"
    return ""


def _host_fallbacks(sess) -> str:
    """'' unless the wasm kernels refused a node's inputs at run time (an element type they do
    not compute) and the numpy CPU provider ran it: a page has no numpy, so it would fail there."""
    for provider in sess._providers:
        ran = provider.stats.get("host_fallbacks") if provider.name == "wasm" else None
        if ran:
            return f"ran on the numpy CPU kernel (no numpy in a page): {ran}"
    return ""


def _shape_only(case: dict) -> bool:
    if RANDOM_OPS & set(case["ops"]):
        return True
    name = case["name"]
    return "dropout" in name and "training" in name and "zero_ratio" not in name


def compare_outputs(expected: list, got: list, rtol: float, atol: float,
                    shape_only: bool = False) -> str:
    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for i, (e, g) in enumerate(zip(expected, got)):
        problem = _compare_value(e, g, rtol, atol, shape_only)
        if problem:
            return f"output {i}: {problem}"
    return ""


def _compare_value(e, g, rtol, atol, shape_only) -> str:
    if isinstance(e, (list, tuple)):
        if not isinstance(g, (list, tuple)):
            return f"expected a sequence, got {type(g).__name__}"
        if len(e) != len(g):
            return f"sequence of {len(g)} items, expected {len(e)}"
        for j, (ej, gj) in enumerate(zip(e, g)):
            problem = _compare_value(ej, gj, rtol, atol, shape_only)
            if problem:
                return f"item {j}: {problem}"
        return ""
    if e is None:
        return "" if g is None else f"expected an empty optional, got {type(g).__name__}"
    if not isinstance(g, np.ndarray):
        return f"expected an array, got {type(g).__name__}"
    e = np.asarray(e)
    if e.shape != g.shape:
        return f"shape {list(g.shape)}, expected {list(e.shape)}"
    if e.dtype == object:
        if g.dtype != object or not np.array_equal(e, g):
            return f"strings differ: got {g.ravel()[:5].tolist()}, expected {e.ravel()[:5].tolist()}"
        return ""
    if e.dtype != g.dtype:
        return f"dtype {g.dtype}, expected {e.dtype}"
    if shape_only:
        return ""
    if e.dtype.name == "bfloat16":
        rtol = max(rtol, 2 ** -6)
    if e.dtype.kind not in "biufc":      # ml_dtypes floats and ints compare as float64
        e, g = e.astype(np.float64), g.astype(np.float64)
    try:
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    except AssertionError as err:
        lines = [ln for ln in str(err).splitlines() if ln.strip()]
        return " ".join(lines[1:4])[:300]
    return ""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgerun.tools.conformance",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("-k", help="only cases whose name contains this")
    parser.add_argument("--op", help="only cases that use this operator")
    parser.add_argument("--json", help="write a per-case report here")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the totals")
    parser.add_argument("--update-expected", action="store_true",
                        help="rewrite the expected-failures list from this (full) run")
    parser.add_argument("--providers", default="cpu",
                        help="the provider every node must run on: cpu (default), wasm or "
                             "webgpu; a case it does not claim wholly fails, naming the node")
    args = parser.parse_args(argv)
    provider = args.providers
    if provider not in PROVIDERS:
        raise SystemExit(f"--providers takes one of {', '.join(PROVIDERS)}, got {provider!r}")
    expected = expected_failures(provider)

    cases = select(load_cases(), args.k, args.op)
    report, passed = [], 0
    started = time.perf_counter()
    for n, case in enumerate(cases, 1):
        t0 = time.perf_counter()
        ok, reason = run_case(case, provider)
        why = reason
        if ok and case["name"] in expected:
            reason = f"passes but is listed as an expected failure: {expected[case['name']]}"
        elif not ok and case["name"] in expected:
            reason = f"expected failure: {expected[case['name']]} ({reason})"
        passed += ok
        report.append({"name": case["name"], "passed": ok, "reason": reason, "why": why,
                       "ops": case["ops"], "seconds": round(time.perf_counter() - t0, 4)})
        if not ok and not args.quiet:
            print(f"FAIL {case['name']}: {reason[:400]}")
        if sys.stderr.isatty() and n % 50 == 0:
            print(f"  {n}/{len(cases)} ...", file=sys.stderr)
    failed = len(cases) - passed
    print(f"{provider}: {passed} passed, {failed} failed "
          f"({time.perf_counter() - started:.1f} s)")
    if args.update_expected:
        if args.k or args.op:
            raise SystemExit("--update-expected needs a full run (no -k/--op)")
        failures = {r["name"]: r["why"][:200] for r in report if not r["passed"]}
        path = expected_failures_path(provider)
        with open(path, "w") as f:
            json.dump(failures, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"wrote {len(failures)} expected failures to {path}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"onnx": ONNX_VERSION, "passed": passed, "failed": failed,
                       "cases": report}, f, indent=1)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
