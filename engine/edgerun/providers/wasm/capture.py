"""The wasm provider's captured graph: a model the provider runs whole becomes one node,
com.edgerun::WasmProgram (providers/graph_capture.py, called from the provider's
prepare_model, before partitioning), whose runs after the first of each input signature are
a single recorded program (program.py). The node's kernel runs the subgraph through
`ctx.run_graph` while recording the first run of each signature, and replays the program
afterwards; runs that cannot be replayed (the host read data computed in the run, another
provider took part) stay node by node.

The node takes and returns host values (its kernel's `host_io`: the executor plans no copy
steps around it, and explain() counts its transfers as copies): a replay writes the feeds
straight into the program's input blocks and reads its outputs, with no intermediate
device tensors.

The signature is what the host's decisions may depend on: each input's element type and
shape, and the values of small integer inputs (the device keeps those on the host).
"""
from __future__ import annotations

from collections import OrderedDict

from ...ir import dtypes
from ...ir.host_tensor import HostTensor
from ..graph_capture import CAPTURE_OPS, capture_graph
from .device import UNHELD_TYPES, DeviceValue, WasmTensor, small_ints
from .ops import EDGERUN, operator
from .program import MAX_PROGRAMS, Recorder

OP_TYPE = CAPTURE_OPS[0]
DOMAIN = EDGERUN[0]


def capture(model, provider, ahead: tuple = ()) -> bool:
    return capture_graph(model, provider, OP_TYPE, ahead)


def signature(values):
    """The replay key of these host values (each input's element type, shape and, for a
    small integer input, its values), or None when one is not a tensor linear memory holds
    as is (a sequence, strings, a packed sub-byte type, a device value)."""
    key = []
    for v in values:
        if v is None:
            key.append(None)
            continue
        if type(v) is not HostTensor or v.elem_type in UNHELD_TYPES or \
                dtypes.elem_type(v.elem_type).bits < 8:
            return None
        key.append((v.elem_type, v.shape, small_ints(v.elem_type, v.size, v.data)))
    return tuple(key)


@operator(OP_TYPE, domains=EDGERUN)
def bind_program(dev, node, opset):
    body = node.attr("body")
    programs: OrderedDict = OrderedDict()     # signature -> Program, or None: not replayable

    def run(ctx, *values, **_):
        key = signature(values)
        if key is not None:
            with dev.lock:
                if key not in programs:
                    return record(ctx, key, values)
                program = programs[key]
                programs.move_to_end(key)
                outputs = program.replay(values) if program is not None else None
            if outputs is not None:
                return outputs
        return tuple(ctx.run_graph(body, list(values)))

    def record(ctx, key, values):
        recorder = Recorder(dev)
        try:
            owned = recorder.own_inputs(values)
            outputs = [v.source if type(v) is DeviceValue else v
                       for v in ctx.run_graph(body, owned)]
        except BaseException:
            recorder.stop()
            recorder.pool.close()
            raise
        recorder.stop()
        programs[key] = recorder.finish(owned, outputs)
        if len(programs) > MAX_PROGRAMS:
            programs.popitem(last=False)
        return tuple(dev.download(v) if type(v) is WasmTensor else v for v in outputs)

    def program_for(values):
        """The recorded program a run with these host values replays, or None."""
        key = signature(values)
        return programs.get(key) if key is not None else None

    run.host_io = True   # type: ignore[attr-defined]
    run.program_for = program_for   # type: ignore[attr-defined]
    return run
