"""The errors edgerun raises. Each names the problem: which model part, input or node,
what was expected and what was got. Names mirror onnxruntime's exception classes."""


class EdgerunError(Exception):
    """Base class of every error edgerun raises on purpose."""


class InvalidProtobuf(EdgerunError):
    """The model bytes are not a valid ONNX ModelProto (truncated, corrupt, wrong file)."""


class InvalidGraph(EdgerunError):
    """The model decodes but is not a valid graph (dangling names, cycles, bad external data)."""


class NotImplementedOp(EdgerunError):
    """An operator (or domain, or opset) no available provider implements."""


class InvalidArgument(EdgerunError):
    """A run-time argument is wrong: unknown or missing input, wrong dtype, rank or shape."""


class KernelRefused(EdgerunError):
    """A device kernel does not take the values it was given (an element type or layout it
    has no code for, known only at run time). The executor runs the node on the next
    provider that claims it instead (runtime/refusals.py); never seen by users unless no
    later provider runs the node.

    `routine`: a refusal by design, not a missing kernel (WebGPU leaves arithmetic on small
    host values, shapes, to the host provider); providers do not count those."""

    def __init__(self, why: str, routine: bool = False):
        super().__init__(why)
        self.routine = routine


class Fail(EdgerunError):
    """A node failed while running; the message names the node and operator."""


class RunTerminated(Fail):
    """The run stopped because its RunOptions.terminate was set (onnxruntime raises too)."""
