"""Where a WebGPU replay's time goes, on the adapter wgpu opens: the cost of a dispatch of a
trivial kernel (chained in one pass, or one submit each), then per benchmark row the whole
replay's time against its kernels' GPU time: each recorded dispatch in a compute pass of its
own with timestamps written at the pass's start and end (the 'timestamp-query' feature; the
values are read as nanoseconds), grouped by kernel.

    python bench/gpu_check/dispatch_profile.py ppocr_mobile_cls_batch1 minilm_l6_int8_seq16

A replay far slower than its kernels' sum is host- or barrier-bound (per-dispatch cost); a
kernel whose time dominates is the one to make faster.
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


def _request_timestamps() -> None:
    """The devices wgpu opens in this process ask for the 'timestamp-query' feature."""
    import wgpu

    adapter_class = type(wgpu.gpu.request_adapter_sync())
    plain = adapter_class.request_device_sync

    def with_timestamps(self, **kwargs):
        kwargs["required_features"] = list(kwargs.get("required_features") or []) + [
            "timestamp-query"]
        return plain(self, **kwargs)
    adapter_class.request_device_sync = with_timestamps


def trivial_dispatch_costs(gpu) -> None:
    """Prints the per-dispatch microseconds of a trivial kernel chained in one pass
    (n = 1..400), and of one submitted and waited for alone."""
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


def kernel_name(label: str) -> str:
    """'node 'x' (Conv): conv/direct_3x3' -> 'Conv: conv/direct_3x3'."""
    match = re.match(r"node '.*' \((\w+)\): (.*)", label)
    return f"{match.group(1)}: {match.group(2)}" if match else label


def kernel_times(gpu, program) -> list:
    """(kernel name, GPU seconds) of each of the program's dispatches, each submitted in a
    compute pass of its own that writes a timestamp at its start and end."""
    import wgpu

    device = gpu.device
    native = device.device
    batches = [(params, d) for kind, params, dispatches in program.events
               if kind == programs_module.BATCH for d in dispatches]
    count = 2 * len(batches)
    queries = native.create_query_set(type="timestamp", count=count)
    resolved = native.create_buffer(size=8 * count, usage=wgpu.BufferUsage.QUERY_RESOLVE
                                    | wgpu.BufferUsage.COPY_SRC)
    for i, (params, d) in enumerate(batches):
        params_buffer = device._params_for(len(params))
        native.queue.write_buffer(params_buffer, 0, params)
        encoder = native.create_command_encoder()
        compute = encoder.begin_compute_pass(timestamp_writes={
            "query_set": queries, "beginning_of_pass_write_index": 2 * i,
            "end_of_pass_write_index": 2 * i + 1})
        compute.set_pipeline(d.pipeline)
        compute.set_bind_group(0, device._bind_groups.get(d, params_buffer))
        compute.dispatch_workgroups(*d.groups)
        compute.end()
        native.queue.submit([encoder.finish()])
    encoder = native.create_command_encoder()
    encoder.resolve_query_set(queries, 0, count, resolved, 0)
    native.queue.submit([encoder.finish()])
    stamps = np.frombuffer(native.queue.read_buffer(resolved, 0, 8 * count), np.uint64)
    return [(kernel_name(d.label), float(stamps[2 * i + 1] - stamps[2 * i]) * 1e-9)
            for i, (_, d) in enumerate(batches)]


def profile_row(name: str, case, gpu) -> None:
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
    best: dict = {}
    for _ in range(3):                      # each dispatch's best of three
        for i, (kernel, seconds) in enumerate(kernel_times(gpu, program)):
            best[i] = (kernel, min(seconds, best.get(i, (kernel, seconds))[1]))
    per_kernel: dict = collections.defaultdict(list)
    for kernel, seconds in best.values():
        per_kernel[kernel].append(seconds)
    total = sum(sum(v) for v in per_kernel.values())
    print(f"\n{name}: replay {replay * 1e3:.2f} ms; {program.dispatches} dispatches in "
          f"{program.batches} submits; their kernels' GPU time {total * 1e3:.2f} ms")
    rows = sorted(per_kernel.items(), key=lambda kv: -sum(kv[1]))
    for kernel, times in rows[:12]:
        print(f"  {sum(times) * 1e3:8.3f} ms  x{len(times):<4d} median "
              f"{np.median(times) * 1e6:8.1f} us  {kernel[:90]}")


def main(names) -> None:
    _request_timestamps()
    gpu = shared_context()
    print("adapter:", gpu.device.description, flush=True)
    trivial_dispatch_costs(gpu)
    cases = all_cases()
    for name in names:
        try:
            profile_row(name, cases[name], gpu)
        except Exception as e:   # noqa: BLE001 - report and go on to the next row
            print(f"\n{name}: failed: {type(e).__name__}: {e}")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
