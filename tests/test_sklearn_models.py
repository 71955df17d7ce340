"""scikit-learn models exported with skl2onnx (the ai.onnx.ml domain) match onnxruntime."""
import warnings

import numpy as np
import onnxruntime
import pytest
from skl2onnx import to_onnx
from sklearn.datasets import load_diabetes, load_iris
from sklearn.ensemble import (GradientBoostingRegressor, RandomForestClassifier,
                              RandomForestRegressor)
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, Normalizer, StandardScaler
from sklearn.svm import SVC, SVR
from sklearn.tree import DecisionTreeClassifier

import edgerun

CLASSIFIERS = {
    "logistic_regression": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
    "svc_rbf_proba": lambda: SVC(probability=True, random_state=0),
    "svc_poly": lambda: SVC(kernel="poly", degree=3),
    "decision_tree": lambda: DecisionTreeClassifier(max_depth=5, random_state=0),
    "random_forest": lambda: RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0),
    "knn": lambda: make_pipeline(MinMaxScaler(), KNeighborsClassifier(3)),
}
REGRESSORS = {
    "svr": lambda: make_pipeline(Normalizer(), SVR()),
    "random_forest_regressor": lambda: RandomForestRegressor(n_estimators=10, max_depth=5,
                                                             random_state=0),
    "gradient_boosting_regressor": lambda: GradientBoostingRegressor(n_estimators=30,
                                                                     random_state=0),
}


def _compare(model, x, rtol=1e-4):
    """Every output against onnxruntime's, for all rows, one row and a few (kernels read a
    few rows one by one and many rows vectorised)."""
    onx = to_onnx(model, x[:1], target_opset={"": 17, "ai.onnx.ml": 3}).SerializeToString()
    so = onnxruntime.SessionOptions()
    so.log_severity_level = 3
    theirs = onnxruntime.InferenceSession(onx, so)
    mine = edgerun.InferenceSession(onx)
    for rows in (x, x[:1], x[-5:]):
        _compare_outputs(mine.run(None, {"X": rows}), theirs.run(None, {"X": rows}), rtol)


def _compare_outputs(got, expected, rtol):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if isinstance(e, list):            # ZipMap: a list of {label: probability}
            assert [sorted(d) for d in g] == [sorted(d) for d in e]
            for gd, ed in zip(g, e):
                np.testing.assert_allclose([gd[k] for k in sorted(ed)],
                                           [ed[k] for k in sorted(ed)], rtol=rtol, atol=1e-5)
        else:
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=rtol, atol=1e-4)


@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_classifier_matches_onnxruntime(name):
    x, y = load_iris(return_X_y=True)
    x = x.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CLASSIFIERS[name]().fit(x, y)
    _compare(model, x)


@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_two_class_classifier_matches_onnxruntime(name):
    """Two classes take their own paths (one decision value, onnxruntime's binary label and
    score rules)."""
    x, y = load_iris(return_X_y=True)
    x = x.astype(np.float32)
    y = (y == 2).astype(np.int64)        # not separable by one feature: both classes mix
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CLASSIFIERS[name]().fit(x, y)
    # onnxruntime computes the cubic kernel's dot products in float32 (edgerun in float64):
    # its decision values are ~2e-4 off where the cube magnifies the rounding
    _compare(model, x, rtol=1e-3 if name == "svc_poly" else 1e-4)


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_regressor_matches_onnxruntime(name):
    x, y = load_diabetes(return_X_y=True)
    x = x.astype(np.float32)
    model = REGRESSORS[name]().fit(x, y)
    _compare(model, x)
