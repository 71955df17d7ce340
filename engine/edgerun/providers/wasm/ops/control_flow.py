"""If: the condition is read on the host (a small bool with its value attached) and the
chosen branch runs as a subgraph through `ctx.run_graph`, whose nodes were partitioned like
any others (so they run on wasm too). Branch outputs come back as host values and are
uploaded, so the If's consumers find wasm tensors as usual."""
from __future__ import annotations

from . import operator


@operator("If")
def bind_if(dev, node, opset):
    then_branch, else_branch = node.attr("then_branch"), node.attr("else_branch")

    def run(ctx, cond, **_):
        values = dev.ints(cond)
        if len(values) != 1:
            raise ValueError(f"If condition must hold exactly one element, got shape "
                             f"{list(cond.shape)}")
        outputs = ctx.run_graph(then_branch if values[0] else else_branch, [])
        return tuple(dev.upload(v) for v in outputs)
    return run
