"""Where a WebGPU replay's time goes, on the adapter wgpu opens: the cost of a dispatch of a
trivial kernel (chained in one pass, or one submit each), then per benchmark row the whole
replay's time against the sum of its dispatches run one at a time (each submitted alone and
waited for, less the trivial kernel's cost measured the same way), grouped by kernel.

    python bench/gpu_check/dispatch_profile.py ppocr_mobile_cls_batch1 minilm_l6_int8_seq16

A replay far slower than its kernels' sum is host- or barrier-bound (per-dispatch cost); a
kernel whose isolated time dominates is the one to make faster.
"""
from __future__ import annotations

import collections
import os
import re
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import edgerun  # noqa: E402
from bench.cases import all_cases  # noqa: E402
from edgerun.providers.webgpu import program as programs_module  # noqa: E402
from edgerun.providers.webgpu.provider import shared_context  # noqa: E402

TRIVIAL = """
@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < arrayLength(&a)) { a[g.x] = a[g.x] + 1.0; }
}
"""


def best_of(fn, repeat: int = 7) -> float:
    fn()
    return min(_timed(fn) for _ in range(repeat))


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def trivial_dispatch_costs(gpu) -> float:
    """Per-dispatch microseconds of a trivial kernel chained in one pass (n = 1..400), and
    of one submitted and waited for alone; returns the latter (the per-kernel baseline)."""
    import wgpu

    device = gpu.device.device
    pipeline = device.create_compute_pipeline(layout="auto", compute={
        "module": device.create_shader_module(code=TRIVIAL), "entry_point": "main"})
    buffers = [device.create_buffer(size=4096, usage=wgpu.BufferUsage.STORAGE
                                    | wgpu.BufferUsage.COPY_SRC) for _ in range(8)]
    groups = [device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=[
        {"binding": 0, "resource": {"buffer": b, "offset": 0, "size": 4096}}]) for b in buffers]

    def chain(n: int, same_buffer: bool) -> None:
        encoder = device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        for i in range(n):
            compute.set_pipeline(pipeline)
            compute.set_bind_group(0, groups[0 if same_buffer else i % 8])
            compute.dispatch_workgroups(16)
        compute.end()
        device.queue.submit([encoder.finish()])
        device.queue.read_buffer(buffers[0], 0, 4)

    for n in (1, 10, 100, 400):
        dependent = best_of(lambda: chain(n, True))
        independent = best_of(lambda: chain(n, False))
        print(f"trivial kernel x{n:<4d} in one pass, submit + wait: {dependent * 1e6 / n:7.1f} "
              f"us/dispatch on one buffer, {independent * 1e6 / n:7.1f} on 8 buffers",
              flush=True)
    alone = best_of(lambda: chain(1, True), repeat=30)
    print(f"one trivial dispatch submitted and waited for: {alone * 1e6:.1f} us")
    return alone


def kernel_name(label: str) -> str:
    """'node 'x' (Conv): conv/direct_3x3' -> 'Conv: conv/direct_3x3'."""
    match = re.match(r"node '.*' \((\w+)\): (.*)", label)
    return f"{match.group(1)}: {match.group(2)}" if match else label


def profile_row(name: str, case, gpu, baseline: float) -> None:
    path, feeds = case()
    session = edgerun.InferenceSession(path, providers=["webgpu", "cpu"])
    for _ in range(3):
        session.run(None, feeds)
    provider = next(p for p in session._providers if p.name == "webgpu")
    recorded = [p for table in provider.captured for p in table.values() if p is not None]
    replay = best_of(lambda: session.run(None, feeds), repeat=15)
    if not recorded:
        print(f"\n{name}: run {replay * 1e3:.2f} ms, not captured "
              f"({gpu.programs_refused or session.explain().get('graph_capture')})")
        return
    program = recorded[-1]
    device = gpu.device
    per_kernel: dict = collections.defaultdict(list)
    sync = program.outputs[0].buffer if hasattr(program.outputs[0], "buffer") else None
    for kind, params, dispatches in program.events:
        if kind != programs_module.BATCH:
            continue
        for d in dispatches:
            def alone(d=d, params=params):
                device.run_batch(params, [d])
                device.read_buffer(sync or d.bindings[0].buffer, 4)
            per_kernel[kernel_name(d.label)].append(best_of(alone, repeat=3) - baseline)
    total = sum(sum(v) for v in per_kernel.values())
    print(f"\n{name}: replay {replay * 1e3:.2f} ms; {program.dispatches} dispatches in "
          f"{program.batches} submits; kernels alone (less the trivial dispatch's "
          f"{baseline * 1e6:.0f} us) sum to {total * 1e3:.2f} ms")
    rows = sorted(per_kernel.items(), key=lambda kv: -sum(kv[1]))
    for kernel, times in rows[:15]:
        print(f"  {sum(times) * 1e3:8.3f} ms  x{len(times):<4d} median "
              f"{np.median(times) * 1e6:8.1f} us  {kernel[:90]}")


def main(names) -> None:
    gpu = shared_context()
    print("adapter:", gpu.device.description, flush=True)
    baseline = trivial_dispatch_costs(gpu)
    cases = all_cases()
    for name in names:
        try:
            profile_row(name, cases[name], gpu, baseline)
        except Exception as e:   # noqa: BLE001 - report and go on to the next row
            print(f"\n{name}: failed: {type(e).__name__}: {e}")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
