"""Recorded GPU programs: a captured graph's device work for one input signature, replayed
without running the graph's Python.

A model the WebGPU provider claims whole is captured (providers/graph_capture.py) into one
node, com.edgerun::WebGpuProgram. The first run of each signature runs the graph node by node
while the GpuContext logs to a `Recorder` every upload (buffer, bytes) and every submitted
batch (parameter bytes, dispatches). Later runs with that signature copy the new inputs into
the program's own input buffers and resubmit the log: the same uploads and dispatches, in the
same order, on the same buffers, so the GPU computes exactly what a node-by-node run would.
On a real GPU that is the difference between ~20 ms and ~2 ms of host time for MiniLM-L6.

Why the replay is the same computation:
- The signature is everything the host's decisions may depend on: each input's element type
  and shape, and the values of inputs the provider keeps on the host (small integer tensors:
  shape arithmetic reads them). Host arithmetic on those and on constants gives the same
  results in every run of the signature; its uploads are in the log. A small GPU input also
  has a host mirror; where a kernel read it (a Clip bound fed as an input), a replay also
  needs the same values there, else the run goes node by node.
- A run in which the host read device data (a download, a host mirror read back, a node that
  ran on the CPU instead, a GPU buffer exported), or whose graph draws random numbers, is
  not recorded (`refused`, with the reason): its later runs stay node by node.
- Every buffer the log touches is pinned in the pool: nothing else is given it while the
  program lives, so what the log reads between its own writes is what the recorded run read.
  Outputs are copied out of the program's buffers, so a caller keeping one across runs is
  not overwritten by the next replay.
"""
from __future__ import annotations

from typing import Optional

from collections import OrderedDict

from ...ir.walk import subgraph_reads
from ...runtime import cancel
from ..graph_capture import CAPTURE_OPS, DOMAIN, capture_graph, has_random_ops
from . import host_values
from .memory import GpuTensor

OP_TYPE = CAPTURE_OPS[1]
MAX_PROGRAMS = 4           # signatures kept per captured graph (least recently used dropped)
MAX_HOST_KEY = 4096        # host inputs (kept on the host, keyed by value) up to this size
WRITE, BATCH = 0, 1


def capture(model, provider, ahead: tuple = ()) -> bool:
    """Capture the graph unless it draws random numbers, or a control-flow body reads a
    graph input from the enclosing scope (bodies read outer values on the host: a feed on
    the GPU would be read back every run, and the host would decide from its values)."""
    graph = model.graph
    if has_random_ops(graph):
        return False
    feeds = {v.name for v in graph.inputs} - set(graph.initializers)
    if any(subgraph_reads(node) & feeds for node in graph.nodes):
        return False
    return capture_graph(model, provider, OP_TYPE, ahead)


def is_program(node) -> bool:
    return node.op_type == OP_TYPE and node.domain == DOMAIN


class Recorder:
    def __init__(self, inputs: list):
        self.events: list = []     # (WRITE, buffer, bytes) | (BATCH, params, dispatches)
        self.why_not = ""          # why the run cannot be replayed ("" = it can)
        self._inputs = inputs
        self._input_of = {id(t.alloc): i for i, t in enumerate(inputs)
                          if isinstance(t, GpuTensor)}
        self.mirrors_read: dict = {}   # input index -> the host mirror's key a kernel read

    def read_mirror(self, t: GpuTensor) -> None:
        """A kernel read the host mirror of `t`: if `t` is (a view of) an input, replays need
        that input's values to be the same."""
        i = self._input_of.get(id(t.alloc))
        if i is not None:                   # keyed as the input, whatever the view's shape
            self.mirrors_read[i] = _host_key(self._inputs[i].host)

    def wrote(self, buffer, data) -> None:
        self.events.append((WRITE, buffer, bytes(data)))

    def submitted(self, params: bytes, dispatches: list) -> None:
        self.events.append((BATCH, params, dispatches))

    def taint(self, why: str) -> None:
        self.why_not = self.why_not or why


class Program:
    """One signature's recorded command stream, its own input buffers and its outputs."""

    def __init__(self, gpu, inputs: list, events: list, outputs: list, mirrors_read: dict):
        self.gpu = gpu
        self.mirrors_read = mirrors_read
        self.inputs = inputs       # per input: the program's GpuTensor copy, or the host value
        self.events = events
        self.outputs = outputs     # GpuTensors in pinned buffers, or host values
        self.buffers = [t.buffer for t in inputs + outputs if isinstance(t, GpuTensor)]
        for kind, a, b in events:
            if kind == WRITE:
                self.buffers.append(a)
            else:
                self.buffers += [binding.buffer for d in b for binding in d.bindings]
        self.dispatches = sum(len(b) for kind, _, b in events if kind == BATCH)
        self.batches = sum(1 for kind, _, _ in events if kind == BATCH)
        gpu.pool.pin(self.buffers)

    def replay(self, values) -> Optional[tuple]:
        """The outputs of a run with `values` (of this program's signature): the inputs
        copied in, the log resubmitted, the outputs copied out, in as few submits as the log
        has batches (the copies ride in the first and last batch's encoder). None where an
        input whose host mirror a kernel read holds other values."""
        for i, key in self.mirrors_read.items():
            host = values[i].host
            if host is None or _host_key(host) != key:
                return None
        gpu = self.gpu
        device = gpu.device
        with gpu.lock:
            gpu.flush()
            copies_in = [(value.buffer, mine.buffer, mine.size * 4)
                         for mine, value in zip(self.inputs, values)
                         if isinstance(mine, GpuTensor) and mine.size]
            outputs, copies_out = self._fresh_outputs()
            last = len(self.events) - 1
            for i, (kind, a, b) in enumerate(self.events):
                if kind == WRITE:
                    device.write_buffer(a, b)
                    continue
                device.run_batch(a, b, copies_in, copies_out if i == last else ())
                copies_in = []
                if i == last:
                    copies_out = []
            for source, target, nbytes in copies_in + copies_out:   # not in a batch
                device.copy_buffer(source, target, nbytes)
            gpu.stats["dispatches"] += self.dispatches
            gpu.stats["flushes"] += self.batches
            gpu.stats["replays"] += 1
            return outputs

    def copy_outputs(self) -> tuple:
        """The outputs in buffers of their own (GPU copies), host values as copies."""
        outputs, copies = self._fresh_outputs()
        for source, target, nbytes in copies:
            self.gpu.device.copy_buffer(source, target, nbytes)
        return outputs

    def _fresh_outputs(self) -> tuple:
        """(outputs in new buffers, the copies that fill them)."""
        out, copies = [], []
        for t in self.outputs:
            if isinstance(t, GpuTensor):
                mine, copy = _fresh_copy(self.gpu, t)
                copies += copy
                out.append(mine)
            else:
                out.append(host_values.copied(t))
        return tuple(out), copies

    def release(self) -> None:
        """Unpin the buffers (once): the pool may give them out again."""
        buffers, self.buffers = self.buffers, []
        if buffers:
            self.gpu.pool.unpin(buffers)

    def __del__(self):
        try:
            self.release()
        except Exception:   # noqa: BLE001 - interpreter shutdown
            pass


def signature(values):
    """The replay key of these device values (element type and shape of each GPU tensor;
    type, shape and values of each small host tensor), or None when one is neither."""
    key: list = []
    for v in values:
        if v is None:
            key.append(None)
        elif isinstance(v, GpuTensor):
            key.append((v.dtype, v.shape))
        elif host_values.is_host_tensor(v):
            key.append(_host_key(v))
        else:
            return None                     # a weight in parts, a sequence
        if key[-1] is False:
            return None
    return tuple(key)


def _host_key(value):
    """(element type, shape, bytes) of a host tensor of at most MAX_HOST_KEY elements, else
    False (the provider keeps small tensors on the host; larger ones are not keyed)."""
    try:
        if host_values.element_count(value) > MAX_HOST_KEY:
            return False
        return host_values.raw(value)
    except Exception:   # noqa: BLE001 - strings, objects: not a tensor the GPU holds
        return False


def bind_program(provider, node):
    """The captured graph's kernel: record the first run of each signature, replay later."""
    body = node.attr("body")
    gpu = provider.gpu
    programs: OrderedDict = OrderedDict()     # signature -> Program, or None: not replayable
    provider.captured.append(programs)

    def run(ctx, *values, **_):
        key = signature(values) if cancel.watched() is None else None
        if key is None:
            return tuple(ctx.run_graph(body, list(values), provider.device))
        with gpu.lock:
            if key not in programs:
                return record(ctx, key, values)
            programs.move_to_end(key)
            program = programs[key]
            outputs = program.replay(values) if program is not None else None
            if outputs is not None:
                return outputs
        return tuple(ctx.run_graph(body, list(values), provider.device))

    def record(ctx, key, values):
        gpu.flush()
        own = [_own_copy(gpu, v) if isinstance(v, GpuTensor) else v for v in values]
        recorder = gpu.recorder = Recorder(own)
        try:
            outputs = ctx.run_graph(body, own, provider.device)
            gpu.flush()
        finally:
            gpu.recorder = None
        if not recorder.why_not:
            recorder.why_not = _unreplayable_output(outputs)
        if recorder.why_not:
            keep(key, None)
            refused = gpu.programs_refused
            refused[recorder.why_not] = refused.get(recorder.why_not, 0) + 1
            return tuple(outputs)
        program = Program(gpu, own, recorder.events, list(outputs), recorder.mirrors_read)
        keep(key, program)
        gpu.stats["programs"] += 1
        return program.copy_outputs()

    def keep(key, program) -> None:
        """Remember what the signature records as (None: not replayable), dropping the
        least recently used signature past MAX_PROGRAMS."""
        programs[key] = program
        if len(programs) > MAX_PROGRAMS:
            dropped = programs.popitem(last=False)[1]
            if dropped is not None:
                dropped.release()

    run.body_on_device = provider.device   # type: ignore[attr-defined]
    return run


def release_all(programs: OrderedDict) -> None:
    """Drop every recorded program (their buffers return to the pool); later runs record
    again."""
    for program in programs.values():
        if program is not None:
            program.release()
    programs.clear()


def _fresh_copy(gpu, t: GpuTensor) -> tuple:
    """(a new tensor like `t`, its host mirror too; the buffer copies that fill it)."""
    mine = gpu.empty(t.shape, t.dtype)
    mine.host = t.host
    return mine, ([(t.buffer, mine.buffer, t.size * 4)] if t.size else [])


def _own_copy(gpu, t: GpuTensor) -> GpuTensor:
    mine, copies = _fresh_copy(gpu, t)
    for copy in copies:
        gpu.device.copy_buffer(*copy)
    return mine


def _unreplayable_output(outputs) -> str:
    for v in outputs:
        if v is not None and not isinstance(v, GpuTensor) and not host_values.is_host_tensor(v):
            return f"an output is a {type(v).__name__}"
    return ""
