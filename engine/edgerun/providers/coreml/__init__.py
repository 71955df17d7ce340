"""The CoreML execution provider: ONNX partitions lowered to Core ML ML Programs.

    provider.py      the provider (capability, compile, run per input signature)
    capability.py    which nodes it claims and why it refuses others (the lowering registry)
    lowering.py      partition -> MIL program with coremltools' MIL builder; the registry
    ops/             one lowering function per ONNX operator, by family
    mlpackage.py     convert to an ML Program, save as .mlpackage, validate what was saved
    reference.py     numpy interpreter of the emitted MIL ops (proves lowerings off Apple)

coremltools is needed to lower (pip install coremltools==9.0); prediction needs Apple's
Core ML framework, so the provider is available on macOS and iOS only.
"""
