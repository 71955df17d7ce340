"""`edgerun pack` arguments -> edgerun.pack.pack()."""
from __future__ import annotations

from . import PackError, pack


def parse_input_shapes(items: list) -> dict:
    shapes = {}
    for item in items:
        name, sep, dims = item.partition("=")
        try:
            shapes[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            sep = ""
        if not sep or not name:
            raise PackError(f"--input-shape expects NAME=D1,D2,... with integer dims, "
                            f"got '{item}'")
    return shapes


def cmd_pack(args) -> int:
    pack(args.model, args.target, args.out, force=args.force,
         input_shapes=parse_input_shapes(args.input_shape))
    return 0
