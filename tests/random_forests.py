"""Random tree ensembles for the tree-kernel tests: TreeEnsembleRegressor models (ai.onnx.ml
opset 3) of random full-ish trees, every comparison mode, NaN tracked to either side, some
subtrees cut short into leaves."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def random_tree_regressor(trees: int, depth: int, features: int, seed: int,
                          aggregate: str = "SUM", targets: int = 2, spread: bool = False,
                          double: bool = False, modes: tuple = tuple(MODES), base: bool = False):
    """Each leaf has one weight per target; with `spread`, two weights on random targets
    instead (several weights per leaf, targets some leaves never reach). `double`: the
    thresholds (nodes_values_as_tensor) and the input are float64. `modes`: the comparisons
    the decision nodes draw from. `base`: a random base value per target."""
    r = np.random.default_rng(seed)
    attrs: dict = {k: [] for k in (
        "nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
        "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
        "target_treeids", "target_nodeids", "target_ids", "target_weights")}
    for t in range(trees):
        count = [0]

        def grow(level):
            node = count[0]
            count[0] += 1
            leaf = level == depth or (level > 1 and r.random() < 0.2)
            attrs["nodes_treeids"].append(t)
            attrs["nodes_nodeids"].append(node)
            attrs["nodes_featureids"].append(int(r.integers(features)) if not leaf else 0)
            attrs["nodes_modes"].append("LEAF" if leaf else modes[int(r.integers(len(modes)))])
            attrs["nodes_values"].append(float(np.round(r.standard_normal(), 1)))
            attrs["nodes_missing_value_tracks_true"].append(int(r.integers(2)))
            index = len(attrs["nodes_truenodeids"])
            attrs["nodes_truenodeids"].append(0)
            attrs["nodes_falsenodeids"].append(0)
            if leaf:
                chosen = r.integers(targets, size=2) if spread else range(targets)
                for target in chosen:
                    attrs["target_treeids"].append(t)
                    attrs["target_nodeids"].append(node)
                    attrs["target_ids"].append(int(target))
                    attrs["target_weights"].append(float(r.standard_normal()))
                return node
            attrs["nodes_truenodeids"][index] = grow(level + 1)
            attrs["nodes_falsenodeids"][index] = grow(level + 1)
            return node
        grow(0)
    if base:
        attrs["base_values"] = r.standard_normal(targets).tolist()
    if double:
        attrs["nodes_values_as_tensor"] = numpy_helper.from_array(
            np.asarray(attrs.pop("nodes_values"), np.float64) + 1e-9, "values")
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml",
                            n_targets=targets, aggregate_function=aggregate, **attrs)
    kind = TensorProto.DOUBLE if double else TensorProto.FLOAT
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", kind, [None, features])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("ai.onnx.ml", 3)],
                             ir_version=9)
