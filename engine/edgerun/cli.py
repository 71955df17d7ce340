"""The `edgerun` command line.

    edgerun demo                         classify the built-in digits example (the main job)
    edgerun run MODEL [--input name=file.npy ...] [--providers cpu,...] [--repeat N]
    edgerun info MODEL
    edgerun explain MODEL [--providers webgpu,cpu] [--json] [--plan]
    edgerun conformance [-k SUBSTRING] [--op OP] [--json FILE] [--providers cpu|wasm|webgpu]
    edgerun difftest [--providers cpu,wasm,webgpu] [--cases N] [--seed S] [--jobs J]
    edgerun bench [--models NAMES] [--repeat N] [--out DIR]   (source checkout: bench/)
    edgerun pack MODEL --target web|android|ios --out DIR [--force] [--input-shape NAME=1,3,224,224]
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time

EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
DIGITS_DIR = os.path.normpath(os.path.join(EXAMPLES_DIR, "digits"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="edgerun", description="ONNX inference with edgerun")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="classify the built-in digits example's held-out set")
    demo.add_argument("--providers", help="comma-separated, in priority order (default: best "
                                          "available)")

    run = sub.add_parser("run", help="run a model and summarize its outputs")
    run.add_argument("model")
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                     help="an input from a .npy file (default: random values)")
    run.add_argument("--providers", help="comma-separated, in priority order")
    run.add_argument("--repeat", type=int, default=10, help="timed runs after a warm-up")

    info = sub.add_parser("info", help="inputs, outputs, opsets and operators of a model")
    info.add_argument("model")

    explain = sub.add_parser("explain", help="which provider runs each node, why others "
                                             "refused it, and the device/host copies per run")
    explain.add_argument("model")
    explain.add_argument("--providers", help="comma-separated, in priority order (default: best "
                                             "available)")
    explain.add_argument("--json", action="store_true", help="print session.explain() as JSON")
    explain.add_argument("--plan", action="store_true",
                         help="print the Python source the main graph's plan runs as")

    conf = sub.add_parser("conformance", help="run the ONNX node conformance cases")
    conf.add_argument("args", nargs=argparse.REMAINDER)

    diff = sub.add_parser("difftest", help="random graphs on edgerun's providers against "
                                           "onnxruntime (python -m edgerun.tools.difftest)")
    diff.add_argument("args", nargs=argparse.REMAINDER)

    bench = sub.add_parser("bench", help="CPU benchmark against onnxruntime (python -m bench)")
    bench.add_argument("args", nargs=argparse.REMAINDER)

    pack = sub.add_parser("pack", help="a static web site or a ready-to-build Android or iOS "
                                       "app running MODEL")
    pack.add_argument("model")
    pack.add_argument("--target", required=True, help="web, android or ios")
    pack.add_argument("--out", required=True, help="the folder to write (must not exist)")
    pack.add_argument("--force", action="store_true", help="replace an existing --out folder")
    pack.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                      help="fix an input's shape (symbolic dims default to 1)")

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:   # its options (--models ...) belong to bench's own parser
        return cmd_bench(argv[1:])
    if argv[:1] == ["conformance"]:   # likewise -k/--op belong to the conformance runner
        from .tools import conformance
        return conformance.main(argv[1:])
    if argv[:1] == ["difftest"]:
        from .tools.difftest.__main__ import main as difftest
        return difftest(argv[1:])
    args = parser.parse_args(argv)
    from .errors import EdgerunError

    try:
        if args.command == "demo":
            return cmd_demo(args)
        if args.command == "run":
            return cmd_run(args)
        if args.command == "info":
            return cmd_info(args)
        if args.command == "explain":
            return cmd_explain(args)
        if args.command == "pack":
            from .pack.cli import cmd_pack
            return cmd_pack(args)
        from .tools import conformance
        return conformance.main(args.args)
    except EdgerunError as e:
        print(f"edgerun: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


def _providers(text):
    if text:
        return [p.strip() for p in text.split(",") if p.strip()]
    from .providers.registry import recommended_providers
    return recommended_providers()


def cmd_demo(args) -> int:
    import numpy as np

    import edgerun

    model_path = os.path.join(DIGITS_DIR, "digits_mlp.onnx")
    data_path = os.path.join(DIGITS_DIR, "digits_holdout.npz")
    if not os.path.exists(model_path):
        print(f"edgerun: the example model is missing at {model_path}; recreate it with "
              f"python examples/digits/make_model.py", file=sys.stderr)
        return 2
    print(f"model: {os.path.relpath(model_path)} (MLP trained on scikit-learn digits)")
    sess = edgerun.InferenceSession(model_path, providers=_providers(args.providers))
    print(f"providers: {', '.join(sess.get_providers())}   load: {sess.load_seconds * 1e3:.1f} ms")
    _print_native_kernels(sess)
    data = np.load(data_path)
    x, y = data["X"], data["y"]
    t0 = time.perf_counter()
    labels, probs = sess.run(None, {"input": x})
    batch_ms = (time.perf_counter() - t0) * 1e3
    singles = []
    for row in x[:100]:
        t0 = time.perf_counter()
        sess.run(None, {"input": row[None]})
        singles.append((time.perf_counter() - t0) * 1e3)
    accuracy = float((labels == y).mean())
    print(f"held-out set: {len(y)} images of 8x8 digits")
    print(f"accuracy: {accuracy:.4f} ({int((labels == y).sum())}/{len(y)})")
    print(f"latency: batch of {len(y)} in {batch_ms:.2f} ms; one image: median "
          f"{statistics.median(singles):.3f} ms over {len(singles)} runs")
    shown = ", ".join(f"{int(p)} ({probs[i].max():.2f})" for i, p in enumerate(labels[:8]))
    print(f"first predictions (confidence): {shown}; truth: {y[:8].tolist()}")
    return 0


def _print_native_kernels(sess) -> None:
    """Whether the CPU provider runs its native kernels here, and on what (or why not)."""
    if "CPUExecutionProvider" in sess.get_providers():
        from .providers.cpu.native import library
        where = f" ({library.isa()})" if library.library() is not None else ""
        print(f"native CPU kernels: {library.status()}{where}")


def cmd_run(args) -> int:
    import numpy as np

    import edgerun

    sess = edgerun.InferenceSession(args.model, providers=_providers(args.providers))
    print(f"loaded {args.model} in {sess.load_seconds * 1e3:.1f} ms; providers: "
          f"{', '.join(sess.get_providers())}")
    _print_native_kernels(sess)
    given = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep:
            print(f"edgerun: --input expects NAME=FILE.npy, got '{item}'", file=sys.stderr)
            return 2
        given[name] = np.load(path, allow_pickle=False)
    feeds = {arg.name: given.pop(arg.name) if arg.name in given else random_input(arg)
             for arg in sess.get_inputs()}
    feeds.update(given)   # unknown names: let run() name the problem
    t0 = time.perf_counter()
    outputs = sess.run(None, feeds)
    first = (time.perf_counter() - t0) * 1e3
    times = []
    for _ in range(max(0, args.repeat)):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    for arg, value in zip(sess.get_outputs(), outputs):
        print(f"{arg.name}: {summarize(value)}")
    median = f", median of {len(times)}: {statistics.median(times):.3f} ms" if times else ""
    print(f"latency: first run {first:.3f} ms{median}")
    return 0


def cmd_explain(args) -> int:
    import json

    import edgerun

    sess = edgerun.InferenceSession(args.model, providers=_providers(args.providers))
    if args.plan:
        print(sess.plan_source() or "(the plan runs step by step: too long to write out)")
        return 0
    report = sess.explain()
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    width = max([len(n["node"] or n["op_type"]) for n in report["nodes"]] + [4])
    # "if refused": the provider that runs the node when its kernel refuses the inputs at
    # run time (runtime/refusals.py)
    print(f"{'node':<{width}}  {'op':<20} {'provider':<8} {'if refused':<10} refused by")
    for n in report["nodes"]:
        refused = "; ".join(n["refused_by"]) or "-"
        print(f"{n['node'] or n['op_type']:<{width}}  {n['op_type']:<20} {n['provider']:<8} "
              f"{n['falls_back_to'] or '-':<10} {refused}")
    from .providers.registry import short_name

    counts = collections.Counter(n["provider"] for n in report["nodes"])
    order = [short_name(p) for p in report["providers"]]
    print(f"\n{len(report['nodes'])} nodes: " + ", ".join(f"{p} {counts[p]}" for p in order
                                                       if counts.get(p)))
    print(f"nodes not on {order[0]}: {len(report['nodes']) - counts.get(order[0], 0)}")
    print(f"device/host copies per run: {report['copies_per_run']} (main graph), "
          f"{report['copies_per_subgraph_run']} inside control-flow bodies per body run")
    return 0


def random_input(arg):
    """A value for a model input from its declared type (symbolic dims become 1)."""
    import numpy as np

    from .ir import dtypes

    shape = [d if isinstance(d, int) and d >= 0 else 1 for d in (arg.shape or [])]
    type_name = arg.type[len("tensor("):-1] if arg.type.startswith("tensor(") else "float"
    code = next((t.code for t in dtypes.BY_CODE.values() if t.type_str == type_name), 1)
    rng = np.random.default_rng(0)
    if code == dtypes.STRING:
        return np.full(shape, "a", dtype=object)
    dtype = dtypes.numpy_dtype(code)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 10, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def summarize(value) -> str:
    import numpy as np

    if value is None:
        return "None (empty optional)"
    if isinstance(value, list):
        return f"sequence of {len(value)}" + (f", first: {summarize(value[0])}" if value else "")
    if isinstance(value, dict):
        return f"map of {len(value)} entries"
    text = f"{value.dtype} {list(value.shape)}"
    if value.size and value.dtype.kind in "biuf":
        v = value.astype(np.float64)
        text += f" min {v.min():.4g} max {v.max():.4g} mean {v.mean():.4g}"
    head = value.reshape(-1)[:6].tolist()
    return f"{text} first {head}"


def cmd_bench(argv: list) -> int:
    """The benchmark lives in the source checkout's bench/ folder, next to engine/."""
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    if not os.path.exists(os.path.join(root, "bench", "runner.py")):
        print("edgerun: error: the benchmark needs a source checkout (bench/ next to engine/); "
              f"not found under {root}", file=sys.stderr)
        return 2
    sys.path.insert(0, root)
    from bench.runner import main as bench_main
    return bench_main(argv)


def cmd_info(args) -> int:
    from .onnx import load_model

    model = load_model(args.model)
    g = model.graph
    init = set(g.initializers)
    print(f"model: {args.model}")
    print(f"producer: {model.producer_name} {model.producer_version}   ir_version: "
          f"{model.ir_version}")
    print("opsets: " + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in
                                 sorted(model.opset_imports.items())))
    from .session.metadata import NodeArg
    print("inputs:")
    for v in g.inputs:
        if v.name not in init:
            a = NodeArg.from_value_info(v)
            print(f"  {a.name}: {a.type} {a.shape}")
    print("outputs:")
    for v in g.outputs:
        a = NodeArg.from_value_info(v)
        print(f"  {a.name}: {a.type} {a.shape}")
    size = sum(len(t.raw) for t in g.initializers.values())
    print(f"initializers: {len(g.initializers)} ({size / 1e6:.2f} MB)")
    counts = collections.Counter(f"{n.domain + '::' if n.domain else ''}{n.op_type}"
                                 for n in g.nodes)
    print(f"nodes: {len(g.nodes)}")
    for op, n in counts.most_common():
        print(f"  {op:32s} {n}")
    if model.functions:
        print(f"functions: {', '.join(f.name for f in model.functions)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
