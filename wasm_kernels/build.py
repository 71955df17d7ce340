"""Build edgerun's WebAssembly kernels: every wasm_kernels/*.c into one SIMD128 module.

    python wasm_kernels/build.py            # writes engine/edgerun/providers/wasm/edgerun_kernels.wasm
    python wasm_kernels/build.py --check    # rebuilds in a temp dir, fails if the committed build differs

The compiler is zig's clang (`pip install ziglang==0.17.1`, `python -m ziglang cc`), or a
system clang with wasm-ld (`apt-get install clang lld`) when ziglang is missing. Next to the
.wasm goes `edgerun_kernels.json`: the hash of the sources (these files and this script) and
of the module, which the provider checks at load so a stale build fails with this command.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "engine"))
from edgerun.providers.wasm.build_info import (STAMP_PATH, WASM_PATH,  # noqa: E402
                                               sources_hash)

FLAGS = ["-O3", "-msimd128", "-mbulk-memory", "-mnontrapping-fptoint",
         "-nostdlib", "-ffreestanding", "-fvisibility=hidden", "-std=c11", "-Wall",
         "-Wno-unused-function", "-Werror",
         "-Wl,--no-entry", "-Wl,--export-dynamic", "-Wl,--strip-all",
         "-Wl,--initial-memory=4194304", "-Wl,--max-memory=4294901760",
         "-Wl,-z,stack-size=1048576"]


def compiler() -> list:
    """The C compiler command for wasm32, preferring the pinned zig."""
    if importlib.util.find_spec("ziglang") is not None:
        return [sys.executable, "-m", "ziglang", "cc", "--target=wasm32-freestanding"]
    if shutil.which("clang") and shutil.which("wasm-ld"):
        return ["clang", "--target=wasm32-unknown-unknown"]
    raise SystemExit("no wasm32 C compiler: pip install ziglang==0.17.1 "
                     "(or apt-get install clang lld)")


def toolchain_version(cc: list) -> str:
    out = subprocess.run(cc[:-1] + ["--version"] if "ziglang" in cc else cc + ["--version"],
                         capture_output=True, text=True)
    return (out.stdout or out.stderr).splitlines()[0].strip() if out.returncode == 0 else "?"


def build(out_path: str) -> bytes:
    cc = compiler()
    sources = sorted(glob.glob(os.path.join(HERE, "*.c")))
    cmd = cc + FLAGS + ["-o", out_path] + sources
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE)
    if result.returncode != 0:
        raise SystemExit(f"building the wasm kernels failed:\n{' '.join(cmd)}\n"
                         f"{result.stdout}{result.stderr}")
    with open(out_path, "rb") as f:
        return f.read()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="rebuild in a temporary folder and compare with the committed one")
    args = parser.parse_args(argv)
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = build(os.path.join(tmp, "k.wasm"))
        with open(WASM_PATH, "rb") as f:
            committed = f.read()
        with open(STAMP_PATH) as f:
            stamp = json.load(f)
        problems = []
        if stamp.get("sources_sha256") != sources_hash():
            problems.append("the sources changed since the committed build")
        if fresh != committed:
            problems.append("a fresh build differs from the committed .wasm")
        if problems:
            print("; ".join(problems) + ": run python wasm_kernels/build.py", file=sys.stderr)
            return 1
        print(f"ok: {os.path.relpath(WASM_PATH, ROOT)} is up to date ({len(fresh)} bytes)")
        return 0
    data = build(WASM_PATH)
    stamp = {"sources_sha256": sources_hash(), "wasm_sha256": hashlib.sha256(data).hexdigest(),
             "toolchain": toolchain_version(compiler()), "bytes": len(data)}
    with open(STAMP_PATH, "w") as f:
        json.dump(stamp, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.relpath(WASM_PATH, ROOT)} ({len(data)} bytes, {stamp['toolchain']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
