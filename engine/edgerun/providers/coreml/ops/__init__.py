"""Lowering functions, one module per operator family; importing this registers them all."""
from . import elementwise, nn, tensor  # noqa: F401
