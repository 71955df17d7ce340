"""Mutation fuzzing of model files: every broken model must give one of edgerun's errors.

    python -m edgerun.tools.fuzz --cases N --seed S [--out DIR]

Seeds are small real models (the digits MLP, a few random graphs of the difftest families,
a graph with If and Loop subgraphs). Each case mutates one seed's bytes (bits flipped, bytes
overwritten, inserted or deleted, the file truncated, a length or tag varint rewritten to
an extreme, a field's wire type changed, a message spliced from elsewhere) or its structure
(dims out of range, attributes of the wrong type, inputs renamed to dangle, nodes reordered
into cycles, deeply nested subgraphs), then loads it with InferenceSession and, when that
succeeds, runs it on feeds of its declared shapes. Outcomes: `ok`, `refused` (an
EdgerunError: what a broken file should give), `escaped` (any other exception: a bug),
`hang` (no result within the time limit: a bug). Escapes and hangs are written out
(model.onnx, case.json) for replay with `--replay FILE`.
Needs onnx (pip install -e ".[test]") to build the structural mutations.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import sys
import time
import traceback
import warnings

import numpy as np

from .difftest.runner import limit_memory

CASE_TIMEOUT_S = 20
OK, REFUSED, ESCAPED, HANG = "ok", "refused", "escaped", "hang"


# ---------------------------------------------------------------- seeds


def seed_models() -> list:
    """(name, model bytes) of the models mutations start from."""
    from onnx import TensorProto, helper

    from .difftest import generate

    seeds = []
    digits = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "digits",
                          "digits_mlp.onnx")
    if os.path.exists(digits):
        with open(digits, "rb") as f:
            seeds.append(("digits_mlp", f.read()))
    for index, family in enumerate(["conv", "rnn", "resize", "gather_scatter", "norm",
                                    "movement", "pool", "matmul"]):
        seeds.append((f"difftest_{family}", generate(7, index, [family]).model))
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Add", ["v_in", "x"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["b"], then_branch=then, else_branch=other),
         helper.make_node("Loop", ["n", "c", "b"], ["y"], body=body)], "control",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
         helper.make_tensor("n", TensorProto.INT64, [], [3])])
    seeds.append(("control_flow", helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()))
    return seeds


# ---------------------------------------------------------------- mutations


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


EXTREMES = [0, 1, 0x7F, 0x80, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 62, 2 ** 63 - 1, 2 ** 64 - 1,
            10 ** 12]


def mutate_bytes(rng, original: bytes) -> tuple:
    """(mutated bytes, what was done)."""
    data = bytearray(original) or bytearray(b"\x08")   # an earlier step may have emptied it
    kind = ["flip", "overwrite", "insert", "delete", "truncate", "varint", "wiretype",
            "splice"][int(rng.integers(8))]
    at = int(rng.integers(max(len(data), 1)))
    if kind == "flip":
        for _ in range(int(rng.integers(1, 9))):
            i = int(rng.integers(len(data)))
            data[i] ^= 1 << int(rng.integers(8))
    elif kind == "overwrite":
        n = int(rng.integers(1, 17))
        data[at:at + n] = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
    elif kind == "insert":
        data[at:at] = rng.integers(0, 256, int(rng.integers(1, 33)), dtype=np.uint8).tobytes()
    elif kind == "delete":
        del data[at:at + int(rng.integers(1, 33))]
    elif kind == "truncate":
        del data[at:]
    elif kind == "varint":           # a varint (length, dim, enum) replaced by an extreme
        end = at
        while end < len(data) and data[end] & 0x80:
            end += 1
        data[at:end + 1] = _varint(EXTREMES[int(rng.integers(len(EXTREMES)))])
    elif kind == "wiretype":         # a field key's wire type changed
        if data:
            data[at] = (data[at] & ~7) | int(rng.integers(8))
    else:                            # a chunk copied from elsewhere in the file
        n = int(rng.integers(2, 65))
        src = int(rng.integers(max(len(data) - n, 1)))
        data[at:at] = data[src:src + n]
    return bytes(data), f"bytes:{kind}@{at}"


def mutate_structure(rng, data: bytes) -> tuple:
    """(mutated bytes, what was done), through onnx's protobuf classes."""
    import onnx
    from onnx import helper

    model = onnx.ModelProto()
    model.ParseFromString(data)
    graph = model.graph
    kind = ["dims", "attribute", "dangling", "cycle", "nesting", "opset", "types",
            "duplicate_output", "empty"][int(rng.integers(9))]
    nodes = list(graph.node)
    if kind == "dims":
        targets = [t for t in graph.initializer] + [v.type.tensor_type.shape for v in graph.input]
        if targets:
            target = targets[int(rng.integers(len(targets)))]
            value = int([-1, 0, 10 ** 12, 2 ** 40, 3][int(rng.integers(5))])
            if hasattr(target, "dims") and target.dims:
                target.dims[int(rng.integers(len(target.dims)))] = value
            elif hasattr(target, "dim") and target.dim:
                target.dim[int(rng.integers(len(target.dim)))].dim_value = max(value, 0)
    elif kind == "attribute" and nodes:
        node = nodes[int(rng.integers(len(nodes)))]
        if node.attribute:
            attr = node.attribute[int(rng.integers(len(node.attribute)))]
            replacement = [helper.make_attribute(attr.name, "text"),
                           helper.make_attribute(attr.name, [1, -5, 10 ** 12]),
                           helper.make_attribute(attr.name, 0),
                           helper.make_attribute(attr.name, 2.5),
                           helper.make_attribute(attr.name, -(10 ** 15))][int(rng.integers(5))]
            attr.CopyFrom(replacement)
        else:
            node.attribute.append(helper.make_attribute("axis", 10 ** 9))
    elif kind == "dangling" and nodes:
        node = nodes[int(rng.integers(len(nodes)))]
        if node.input:
            node.input[int(rng.integers(len(node.input)))] = "no_such_value"
        else:
            node.input.append("no_such_value")
    elif kind == "cycle" and len(nodes) > 1:
        first, last = nodes[0], nodes[-1]
        if first.input and last.output:
            first.input[0] = last.output[0]
    elif kind == "nesting":
        depth = int([3, 50, 500, 2000][int(rng.integers(4))])
        leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "leaf", [],
                                 [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT,
                                                                None)])
        inner = leaf
        for level in range(depth):      # (one branch nests, so the file grows linearly)
            node = helper.make_node("If", ["c"], [f"o{level}"], then_branch=inner,
                                    else_branch=leaf)
            inner = helper.make_graph([node], f"g{level}", [], [helper.make_tensor_value_info(
                f"o{level}", onnx.TensorProto.FLOAT, None)])
        graph.node.extend(inner.node)
    elif kind == "opset":
        del model.opset_import[:]
        model.opset_import.append(helper.make_opsetid(
            ["", "ai.onnx", "com.unknown"][int(rng.integers(3))],
            int([0, 1, 99, 10 ** 9][int(rng.integers(4))])))
    elif kind == "types":
        values = list(graph.input) + list(graph.output)
        if values:
            value = values[int(rng.integers(len(values)))]
            value.type.tensor_type.elem_type = int([0, 8, 99, 17, 2 ** 30][int(rng.integers(5))])
    elif kind == "duplicate_output" and nodes:
        nodes[-1].output.append(nodes[0].output[0] if nodes[0].output else "x")
    elif kind == "empty":
        del graph.node[:]
    return model.SerializeToString(), f"structure:{kind}"


# ---------------------------------------------------------------- running one case


class _Hang(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Hang()


FEED_TYPES = {"float": np.float32, "double": np.float64, "int64": np.int64,
              "int32": np.int32, "bool": np.bool_, "float16": np.float16, "uint8": np.uint8,
              "int8": np.int8}


def _feeds(session, rng) -> dict:
    """Random feeds of the declared shapes (symbolic or odd dims 1)."""
    feeds = {}
    for arg in session.get_inputs():
        shape = [d if isinstance(d, int) and 0 <= d <= 64 else 1 for d in arg.shape or []]
        kind = arg.type[len("tensor("):-1] if arg.type.startswith("tensor(") else "float"
        feeds[arg.name] = (rng.standard_normal(shape) * 3).astype(FEED_TYPES.get(kind,
                                                                                 np.float32))
    return feeds


def run_case(data: bytes, rng) -> tuple:
    """(outcome, detail) of loading and running one model's bytes."""
    import edgerun
    from edgerun.errors import EdgerunError

    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(CASE_TIMEOUT_S)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            session = edgerun.InferenceSession(data)
            session.run(None, _feeds(session, rng))
        return OK, ""
    except EdgerunError as e:
        return REFUSED, f"{type(e).__name__}: {str(e)[:200]}"
    except _Hang:
        return HANG, f"no result within {CASE_TIMEOUT_S} s"
    except BaseException as e:   # noqa: BLE001 - anything else is the finding
        if isinstance(e, KeyboardInterrupt):
            raise
        frame = traceback.extract_tb(e.__traceback__)[-1]
        return ESCAPED, (f"{type(e).__name__}: {str(e)[:200]} at "
                         f"{os.path.basename(frame.filename)}:{frame.lineno}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def make_case(seeds: list, seed: int, index: int) -> tuple:
    """(seed model name, mutated bytes, what was done) of case `index`."""
    rng = np.random.default_rng([seed, index])
    name, data = seeds[int(rng.integers(len(seeds)))]
    if rng.random() < 0.35:
        try:
            data, how = mutate_structure(rng, data)
        except Exception as e:   # noqa: BLE001 - the seed itself was broken by... nothing
            how = f"structure failed: {e}"
    else:
        how = ""
    for _ in range(int(rng.integers(1, 4)) if not how or rng.random() < 0.3 else 0):
        data, step = mutate_bytes(rng, data)
        how = f"{how} {step}".strip()
    return name, data, how, rng


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgerun.tools.fuzz",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--out", default="reports/fuzz")
    parser.add_argument("--replay", help="a model.onnx written by an earlier run")
    parser.add_argument("--max-memory-gb", type=float, default=8.0,
                        help="data limit of the process (past it, MemoryError: an escape)")
    args = parser.parse_args(argv)
    if args.replay:
        with open(args.replay, "rb") as f:
            outcome, detail = run_case(f.read(), np.random.default_rng(0))
        print(outcome, detail)
        return 1 if outcome in (ESCAPED, HANG) else 0
    limit_memory(args.max_memory_gb)        # a blowup is a MemoryError (an escape), not OOM
    seeds = seed_models()
    counts: collections.Counter = collections.Counter()
    findings: list = []
    started = time.perf_counter()
    for index in range(args.first, args.first + args.cases):
        name, data, how, rng = make_case(seeds, args.seed, index)
        outcome, detail = run_case(data, rng)
        counts[outcome] += 1
        if outcome in (ESCAPED, HANG):
            folder = os.path.join(args.out, f"{outcome}-s{args.seed}-i{index}")
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "model.onnx"), "wb") as f:
                f.write(data)
            with open(os.path.join(folder, "case.json"), "w") as f:
                json.dump({"seed_model": name, "mutation": how, "outcome": outcome,
                           "detail": detail}, f, indent=1)
            findings.append(f"{outcome.upper()} i{index} [{name}: {how}] {detail}")
        done = index - args.first + 1
        if done % 1000 == 0:
            print(f"  {done}/{args.cases}: {dict(counts)}", file=sys.stderr, flush=True)
    print("\n".join(findings))
    print(f"{args.cases} cases (seed {args.seed}) in {time.perf_counter() - started:.0f} s: "
          f"{dict(counts)}")
    return 1 if counts[ESCAPED] or counts[HANG] else 0


if __name__ == "__main__":
    sys.exit(main())
