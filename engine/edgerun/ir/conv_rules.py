"""Convolution geometry every provider shares (pure Python)."""
from __future__ import annotations


def _ints(values) -> list:
    return [int(v) for v in values]


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def transpose_output_geometry(in_shape, kernel, strides, dilations, pads, auto_pad,
                              output_padding, output_shape) -> tuple:
    """(output spatial shape, pads_begin, strides, dilations) of a transposed convolution,
    per the ONNX spec: an explicit or SAME output_shape fixes the padding, else pads do."""
    rank = len(in_shape)
    strides = _ints(strides) if strides else [1] * rank
    dilations = _ints(dilations) if dilations else [1] * rank
    output_padding = _ints(output_padding) if output_padding else [0] * rank
    auto_pad = _text(auto_pad or "NOTSET")
    natural = [s * (size - 1) + op + (k - 1) * d + 1
               for s, size, op, k, d in zip(strides, in_shape, output_padding, kernel, dilations)]
    if output_shape:
        output_shape = _ints(output_shape)[-rank:]   # some exporters give (N, C, *spatial)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [size * s for size, s in zip(in_shape, strides)]

    if output_shape and (auto_pad in ("SAME_UPPER", "SAME_LOWER") or not pads):
        totals = [n - o for n, o in zip(natural, output_shape)]
        if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
            # an explicit output_shape past the natural size adds positions at the end
            # (onnxruntime and the reference clamp the padding at 0)
            totals = [max(t, 0) for t in totals]
        if auto_pad == "SAME_UPPER":
            begin = [t // 2 for t in totals]
        else:
            begin = [t - t // 2 for t in totals]
        return output_shape, begin, strides, dilations

    if auto_pad == "VALID" or not pads:
        pads = [0] * (2 * rank)
    pads = _ints(pads)
    if len(pads) != 2 * rank:
        raise ValueError(f"pads {pads} must have {2 * rank} entries")
    if not output_shape:
        output_shape = [n - pads[i] - pads[rank + i] for i, n in enumerate(natural)]
    return output_shape, pads[:rank], strides, dilations
