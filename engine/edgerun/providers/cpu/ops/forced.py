"""A kernel's choice among exact methods that tests can force (Conv's method, a pool's
reduction path, how tree ensembles find their leaves): `with CHOICE.forced(name):` makes
`CHOICE.value` that name within the block; it is None otherwise, and the kernel picks."""
from __future__ import annotations

from typing import Callable, Optional

import contextlib


class ForcedChoice:
    def __init__(self, what: str, names: tuple, on_change: Optional[Callable] = None):
        self.what, self.names = what, names
        self.value: Optional[str] = None
        self._on_change = on_change         # e.g. drop plans cached under the old choice

    @contextlib.contextmanager
    def forced(self, name: str):
        if name not in self.names:
            raise ValueError(f"unknown {self.what} {name!r}; choices: {self.names}")
        previous, self.value = self.value, name
        self._changed()
        try:
            yield
        finally:
            self.value = previous
            self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()
