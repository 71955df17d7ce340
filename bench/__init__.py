"""edgerun's CPU benchmark: edgerun against onnxruntime (1 thread and default threads) and
onnx's ReferenceEvaluator, on the real-model set plus MiniLM-L6, all in one run.

    python -m bench [--models NAMES] [--repeat N] [--out DIR]      (or: edgerun bench ...)

Each (model, engine) pair runs in its own subprocess (bench/worker.py) so peak memory does not
mix between engines; bench/runner.py collects the results, bench/report.py writes the JSON,
the Markdown tables and the PNG chart.
"""
