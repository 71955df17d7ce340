"""Convolution geometry every provider shares (pure Python)."""
from __future__ import annotations

from dataclasses import dataclass


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


@dataclass
class WindowGeometry:
    """Where the sliding windows of one N-D convolution or pooling lie.

    Window `o` along axis `i` covers input positions
    `o * strides[i] - pads_begin[i] + k * dilations[i]` for k in range(kernel[i]).
    """
    out_shape: list
    pads_begin: list
    pads_end: list
    kernel: list
    strides: list
    dilations: list

    def padded_extent(self, axis: int) -> int:
        """Input length (padding included) the last window of `axis` reaches."""
        span = (self.kernel[axis] - 1) * self.dilations[axis] + 1
        return (self.out_shape[axis] - 1) * self.strides[axis] + span


def window_geometry(in_shape, kernel, strides=None, dilations=None, pads=None,
                    auto_pad="NOTSET", ceil_mode=0) -> WindowGeometry:
    """Output size and padding of a sliding window over `in_shape` (spatial axes only).

    auto_pad SAME_UPPER/SAME_LOWER: output = ceil(input / stride), padding split evenly with
    the odd element at the end (UPPER) or the beginning (LOWER); VALID: no padding;
    NOTSET: explicit `pads` [x1_begin, x2_begin, ..., x1_end, x2_end, ...]. `ceil_mode`
    rounds the output size up, dropping a last window that would start in the end padding.
    """
    rank = len(in_shape)
    kernel = [int(k) for k in kernel]
    strides = _ints(strides) if strides else [1] * rank
    dilations = _ints(dilations) if dilations else [1] * rank
    auto_pad = _text(auto_pad or "NOTSET")
    if len(kernel) != rank or len(strides) != rank or len(dilations) != rank:
        raise ValueError(f"kernel_shape {kernel}, strides {strides} and dilations {dilations} "
                         f"must each have {rank} entries, one per spatial axis")
    if min(strides, default=1) < 1 or min(dilations, default=1) < 1 or min(kernel, default=1) < 1:
        raise ValueError(f"strides {strides}, dilations {dilations} and kernel_shape {kernel} "
                         f"must be positive")
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]

    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [-(-size // s) for size, s in zip(in_shape, strides)]
        totals = [max(0, (o - 1) * s + span - size)
                  for o, s, span, size in zip(out_shape, strides, spans, in_shape)]
        small = [t // 2 for t in totals]
        large = [t - t // 2 for t in totals]
        begin, end = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
    elif auto_pad in ("VALID", "NOTSET"):
        if auto_pad == "VALID" or not pads:
            begin, end = [0] * rank, [0] * rank
        else:
            pads = _ints(pads)
            if len(pads) != 2 * rank:
                raise ValueError(f"pads {pads} must have {2 * rank} entries")
            begin, end = pads[:rank], pads[rank:]
        out_shape = []
        for i in range(rank):
            room = in_shape[i] + begin[i] + end[i] - spans[i]
            if ceil_mode:
                size = -(-room // strides[i]) + 1
                if (size - 1) * strides[i] >= in_shape[i] + begin[i]:
                    size -= 1   # the last window would start inside the end padding
            else:
                size = room // strides[i] + 1
            out_shape.append(max(size, 0))
    else:
        raise ValueError(f"auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, "
                         f"got {auto_pad!r}")
    return WindowGeometry(out_shape, begin, end, kernel, strides, dilations)
