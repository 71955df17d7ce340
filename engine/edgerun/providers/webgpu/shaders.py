"""WGSL sources: the files of wgsl_kernels/ and their (deliberately small) templating.

A family file is split into kernels at lines `//! kernel NAME`. The source of a kernel is
snippets.wgsl + lanes.wgsl's section for its LANES (one_lane for 1, the default: no workgroup
memory, no barrier; shared_lanes otherwise) + the family prelude + its section, with every
`{{KEY}}` replaced by the value given for KEY. That is all: no conditionals or loops in
templates; variants are values chosen by the Python side (an activation expression, a block
size). See wgsl_kernels/README.md.
"""
from __future__ import annotations

from typing import Optional

import importlib.resources
import os
import pathlib
import re

WORKGROUP_SIZE = 64
_MARKER = re.compile(r"^//! kernel (\w+)\s*$", re.M)
_KEY = re.compile(r"\{\{(\w+)\}\}")


def kernel_dir() -> str:
    """EDGERUN_WGSL_DIR, else the package's `wgsl/` (in the source tree a link to
    wgsl_kernels/, which wheels ship as files: how Pyodide finds them), else wgsl_kernels/
    itself (a checkout where the link did not survive, e.g. Windows without symlinks)."""
    env = os.environ.get("EDGERUN_WGSL_DIR")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    packaged = os.path.join(here, "wgsl")
    if os.path.isdir(packaged):
        return packaged
    return os.path.normpath(os.path.join(here, "..", "..", "..", "..", "wgsl_kernels"))


def _kernel_folder():
    """Where the WGSL files are read from: kernel_dir(), or the package data itself when the
    package is imported from its zipped wheel (a page's Pyodide), which has no folder."""
    folder = kernel_dir()
    if os.environ.get("EDGERUN_WGSL_DIR") or os.path.isdir(folder):
        return pathlib.Path(folder)
    return importlib.resources.files(__package__) / "wgsl"


class ShaderLibrary:
    def __init__(self, directory: Optional[str] = None):
        self.directory = pathlib.Path(directory) if directory else _kernel_folder()
        self._families: dict = {}

    def _read(self, name: str) -> str:
        path = self.directory / f"{name}.wgsl"
        try:
            return path.read_text(encoding="utf-8")
        except OSError as e:
            raise FileNotFoundError(f"WGSL kernel file {path} is missing ({e}); set "
                                    f"EDGERUN_WGSL_DIR to the wgsl_kernels folder") from e

    def _family(self, family: str) -> tuple:
        """(prelude, {kernel: section}) of a family file, parsed once."""
        if family not in self._families:
            text = self._read(family)
            parts = _MARKER.split(text)
            self._families[family] = (parts[0], dict(zip(parts[1::2], parts[2::2])))
        return self._families[family]

    def source(self, family: str, kernel: str, subs: dict) -> str:
        prelude, sections = self._family(family)
        if kernel not in sections:
            raise KeyError(f"{family}.wgsl has no kernel '{kernel}' "
                           f"(it has {', '.join(sorted(sections))})")
        header, _ = self._family("snippets")
        _, lane_sections = self._family("lanes")
        values = {"WG": WORKGROUP_SIZE, "LANES": 1, **subs}
        lanes = lane_sections["one_lane" if values["LANES"] == 1 else "shared_lanes"]
        return fill(header + lanes + prelude + sections[kernel], values, f"{family}/{kernel}")


def fill(text: str, values: dict, where: str) -> str:
    def value(match):
        key = match.group(1)
        if key not in values:
            raise KeyError(f"WGSL kernel {where} needs a value for {{{{{key}}}}}")
        return str(values[key])
    return _KEY.sub(value, text)
