"""ImageDecoder: an HWC uint8 image whose height and width come from the encoded bytes."""
from __future__ import annotations

from ...ir import dtypes
from ..context import tensor
from ..registry import infer


@infer("ImageDecoder")
def image_decoder(ctx):
    channels = 1 if ctx.attr("pixel_format", "RGB") == "Grayscale" else 3
    return [tensor(dtypes.UINT8, (ctx.fresh(), ctx.fresh(), channels))]
