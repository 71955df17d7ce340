"""Train the built-in example model and export it to ONNX.

A small multilayer perceptron on scikit-learn's handwritten digits (8x8 images, 10 classes,
shipped with scikit-learn, so no download), exported with skl2onnx. Writes, next to this file:

- digits_mlp.onnx      the model: input "input" float32 [N, 64], outputs label int64 [N] and
                       probabilities float32 [N, 10]
- digits_holdout.npz   the held-out split the model never saw (X float32, y int64)

Run: python examples/digits/make_model.py   (needs: pip install scikit-learn skl2onnx onnx)
"""
import os

import numpy as np
from skl2onnx import to_onnx
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    digits = load_digits()
    x = digits.data.astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=0,
                                                        stratify=y)
    model = make_pipeline(StandardScaler(),
                          MLPClassifier(hidden_layer_sizes=(64, 32), max_iter=500,
                                        random_state=0))
    model.fit(x_train, y_train)
    print(f"scikit-learn held-out accuracy: {model.score(x_test, y_test):.4f}")

    onx = to_onnx(model, x_train[:1], options={"zipmap": False},
                  target_opset={"": 17, "ai.onnx.ml": 3}, initial_types=None)
    onx.graph.input[0].name = "input"
    for node in onx.graph.node:
        node.input[:] = ["input" if n == "X" else n for n in node.input]
    onx.graph.doc_string = "MLP on scikit-learn digits, made by examples/digits/make_model.py"
    onx.producer_name = "edgerun examples"
    with open(os.path.join(HERE, "digits_mlp.onnx"), "wb") as f:
        f.write(onx.SerializeToString())
    np.savez_compressed(os.path.join(HERE, "digits_holdout.npz"), X=x_test, y=y_test)
    print(f"wrote digits_mlp.onnx ({len(onx.SerializeToString())} bytes) and "
          f"digits_holdout.npz ({len(y_test)} samples)")


if __name__ == "__main__":
    main()
