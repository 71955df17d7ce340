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


def _compare(model, x):
    onx = to_onnx(model, x[:1], target_opset={"": 17, "ai.onnx.ml": 3}).SerializeToString()
    so = onnxruntime.SessionOptions()
    so.log_severity_level = 3
    expected = onnxruntime.InferenceSession(onx, so).run(None, {"X": x})
    got = edgerun.InferenceSession(onx).run(None, {"X": x})
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if isinstance(e, list):            # ZipMap: a list of {label: probability}
            assert [sorted(d) for d in g] == [sorted(d) for d in e]
            for gd, ed in zip(g, e):
                np.testing.assert_allclose([gd[k] for k in sorted(ed)],
                                           [ed[k] for k in sorted(ed)], rtol=1e-4, atol=1e-5)
        else:
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_classifier_matches_onnxruntime(name):
    x, y = load_iris(return_X_y=True)
    x = x.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CLASSIFIERS[name]().fit(x, y)
    _compare(model, x)


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_regressor_matches_onnxruntime(name):
    x, y = load_diabetes(return_X_y=True)
    x = x.astype(np.float32)
    model = REGRESSORS[name]().fit(x, y)
    _compare(model, x)
