"""Shape rules of operators that more than one layer computes (shape inference, every
provider): one definition each, pure Python."""
from __future__ import annotations


def split_lengths(dim: int, count: int) -> list:
    """Split's `count` near-equal chunks of `dim` (opset 18's num_outputs, or as many equal
    parts as outputs): ceil(dim / count) each, the last ones what remains (possibly 0)."""
    chunk = -(-dim // count)
    lengths, remaining = [], dim
    for _ in range(count):
        lengths.append(min(chunk, remaining))
        remaining -= lengths[-1]
    return lengths
