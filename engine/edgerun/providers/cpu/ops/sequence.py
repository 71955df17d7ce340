"""Sequence and optional operators: SequenceConstruct ... ConcatFromSequence, Optional*.

A sequence is a Python list of numpy arrays and an empty optional is None. Kernels build new
lists and never mutate the list they receive: it may be a value another node still reads.
"""
import numpy as np

from ..registry import kernel


def _position(position, length: int, allow_end: bool) -> int:
    """A sequence position as a non-negative index, checked against the spec's range."""
    pos = int(np.asarray(position).reshape(-1)[0])
    high = length if allow_end else length - 1
    if not -length <= pos <= high:
        raise ValueError(f"position {pos} is out of range [{-length}, {high}] "
                         f"for a sequence of length {length}")
    return pos + length if pos < 0 else pos


def _normalize_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


@kernel("SequenceConstruct", since=11)
def sequence_construct(ctx, *tensors):
    return list(tensors)


@kernel("SequenceEmpty", since=11)
def sequence_empty(ctx, dtype=1):
    return []


@kernel("SequenceInsert", since=11)
def sequence_insert(ctx, sequence, tensor, position=None):
    result = list(sequence)
    if position is None:
        result.append(tensor)
    else:
        result.insert(_position(position, len(sequence), allow_end=True), tensor)
    return result


@kernel("SequenceAt", since=11)
def sequence_at(ctx, sequence, position):
    return sequence[_position(position, len(sequence), allow_end=False)]


@kernel("SequenceErase", since=11)
def sequence_erase(ctx, sequence, position=None):
    if not sequence:
        raise ValueError("SequenceErase on an empty sequence")
    index = len(sequence) - 1 if position is None else \
        _position(position, len(sequence), allow_end=False)
    return sequence[:index] + sequence[index + 1:]


@kernel("SequenceLength", since=11)
def sequence_length(ctx, sequence):
    return np.array(len(sequence), dtype=np.int64)


def _split_points(split, dim: int) -> list:
    """Boundaries along the axis for a scalar chunk size or a 1-D list of lengths."""
    split = np.asarray(split)
    if split.ndim == 0:
        chunk = int(split)
        if chunk <= 0:
            raise ValueError(f"split must be positive, got {chunk}")
        return list(range(chunk, dim, chunk))
    lengths = [int(n) for n in split.reshape(-1)]
    if sum(lengths) != dim:
        raise ValueError(f"split lengths {lengths} sum to {sum(lengths)}, "
                         f"expected the axis size {dim}")
    return list(np.cumsum(lengths)[:-1])


@kernel("SplitToSequence", since=11)
def split_to_sequence(ctx, x, split=None, axis=0, keepdims=1):
    axis = _normalize_axis(axis, x.ndim)
    if split is None:
        parts = np.split(x, x.shape[axis], axis=axis) if x.shape[axis] else []
        if not keepdims:
            parts = [np.squeeze(p, axis=axis) for p in parts]
        return parts
    return np.split(x, _split_points(split, x.shape[axis]), axis=axis)


@kernel("ConcatFromSequence", since=11)
def concat_from_sequence(ctx, sequence, axis, new_axis=0):
    if not sequence:
        raise ValueError("ConcatFromSequence needs at least one tensor, got an empty sequence")
    rank = sequence[0].ndim + (1 if new_axis else 0)
    axis = _normalize_axis(axis, rank)
    if new_axis:
        return np.stack(sequence, axis=axis)
    return np.concatenate(sequence, axis=axis)


@kernel("Optional", since=15)
def optional(ctx, value=None, type=None):
    return value


@kernel("OptionalHasElement", since=15)
def optional_has_element(ctx, value=None):
    return np.array(value is not None)


@kernel("OptionalGetElement", since=15)
def optional_get_element(ctx, value):
    if value is None:
        raise ValueError("OptionalGetElement on an empty optional")
    return value
