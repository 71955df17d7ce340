"""CumSum, CumProd: same shape and type as the input."""
from __future__ import annotations

from ..registry import infer
from ._common import same_as_input


@infer("CumSum", "CumProd")
def cumulative(ctx):
    return [same_as_input(ctx)]
