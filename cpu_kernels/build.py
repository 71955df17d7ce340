"""Build edgerun's native CPU kernels: every cpu_kernels/*.c into one shared library per
platform, which the CPU provider loads with ctypes where it ships (providers/cpu/native).

    python cpu_kernels/build.py            # writes engine/edgerun/providers/cpu/native/libedgerun_cpu-*.so
    python cpu_kernels/build.py --check    # rebuilds in a temp dir, fails if the committed build differs

The compiler is zig's clang (`pip install ziglang==0.17.1`, `python -m ziglang cc`), which
cross-compiles every target from any host; x86_64 Linux is built against glibc 2.17, so the
library loads on any distribution of the last decade. Next to the libraries goes
`edgerun_cpu.json`: the hash of the sources (these files and this script) and of each
library, which the loader checks so a stale build is named (with this command) rather than
run. The kernels pick their instruction set at run time (CPUID), so one x86_64 library serves
every x86_64 CPU; a CPU without any of them keeps numpy's paths.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "engine"))
from edgerun.providers.cpu.native.library import (LIBRARY_DIR, STAMP_PATH,  # noqa: E402
                                                  library_name, sources_hash)

# platform tag (as library_name spells it) -> zig target
TARGETS = {"x86_64-linux": "x86_64-linux-gnu.2.17"}
FLAGS = ["-O3", "-ffp-contract=off", "-shared", "-fPIC", "-fvisibility=hidden", "-std=c11",
         "-Wall", "-Werror", "-g0", "-s", "-lm", "-lpthread"]


def compiler() -> list:
    if importlib.util.find_spec("ziglang") is None:
        raise SystemExit("no C compiler for the native kernels: pip install ziglang==0.17.1")
    return [sys.executable, "-m", "ziglang", "cc"]


def toolchain_version() -> str:
    out = subprocess.run([sys.executable, "-m", "ziglang", "version"], capture_output=True, text=True)
    return f"zig {out.stdout.strip()}" if out.returncode == 0 else "?"


def build(folder: str) -> dict:
    """Builds every target into `folder`; returns {platform: library bytes}."""
    sources = sorted(os.path.join(HERE, n) for n in os.listdir(HERE) if n.endswith(".c"))
    built = {}
    for platform, target in TARGETS.items():
        path = os.path.join(folder, library_name(platform))
        cmd = compiler() + ["-target", target] + FLAGS + ["-o", path] + sources
        result = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE)
        if result.returncode != 0:
            raise SystemExit(f"building the native kernels for {platform} failed:\n"
                             f"{' '.join(cmd)}\n{result.stdout}{result.stderr}")
        with open(path, "rb") as f:
            built[platform] = f.read()
    return built


def committed() -> dict:
    built = {}
    for platform in TARGETS:
        path = os.path.join(LIBRARY_DIR, library_name(platform))
        if os.path.exists(path):
            with open(path, "rb") as f:
                built[platform] = f.read()
    return built


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="rebuild in a temporary folder and compare with the committed build")
    args = parser.parse_args(argv)
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = build(tmp)
        problems = []
        with open(STAMP_PATH) as f:
            if json.load(f).get("sources_sha256") != sources_hash():
                problems.append("the sources changed since the committed build")
        if fresh != committed():
            problems.append("a fresh build differs from the committed libraries")
        if problems:
            print("; ".join(problems) + ": run python cpu_kernels/build.py", file=sys.stderr)
            return 1
        print(f"ok: the native kernels are up to date ({', '.join(fresh)})")
        return 0
    built = build(LIBRARY_DIR)
    stamp = {"sources_sha256": sources_hash(), "toolchain": toolchain_version(),
             "libraries": {platform: {"sha256": hashlib.sha256(data).hexdigest(),
                                      "bytes": len(data)} for platform, data in built.items()}}
    with open(STAMP_PATH, "w") as f:
        json.dump(stamp, f, indent=1)
        f.write("\n")
    for platform, data in built.items():
        print(f"wrote {library_name(platform)} ({len(data)} bytes, {stamp['toolchain']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
