"""Real models give the same outputs as onnxruntime (rtol 1e-3, atol 1e-4) on fixed inputs, at
batch 1 and at a larger batch, with their dynamic dimensions varied (real_models.py)."""
import numpy as np
import onnxruntime
import pytest

import edgerun

from conftest import record_prepared_builds
from real_models import model_variant, variant_ids

RTOL, ATOL = 1e-3, 1e-4


@pytest.mark.parametrize("variant", variant_ids())
def test_matches_onnxruntime(variant):
    name = variant
    path, feeds = model_variant(*variant.split("/"))
    so = onnxruntime.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    expected = onnxruntime.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(
        None, feeds)
    sess = edgerun.InferenceSession(path)
    got = sess.run(None, feeds)
    assert len(got) == len(expected)
    for arg, g, e in zip(sess.get_outputs(), got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape, arg.name
        if e.size > 1 and e.dtype.kind == "f":
            assert np.ptp(e) > 1e-6, f"{name}: {arg.name} is constant: parity would prove nothing"
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=f"{name}: {arg.name}")


@pytest.mark.parametrize("variant", variant_ids())
def test_a_second_run_prepares_nothing(variant, monkeypatch):
    """What kernels derive from weights (packed, centered, transposed; conv plans) is built
    in the first run and reused: a second run of the same shapes builds nothing. (A cache key
    made of a fresh array, such as a zero point reshaped on every call, would rebuild the
    weights on every run.)"""
    path, feeds = model_variant(*variant.split("/"))
    sess = edgerun.InferenceSession(path)
    sess.run(None, feeds)
    builds = record_prepared_builds(monkeypatch)
    sess.run(None, feeds)
    assert not builds, f"{variant}: rebuilt on the second run: {builds[:5]}"
