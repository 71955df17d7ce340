"""Command line of the differential tester (see the package docstring)."""
from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m edgerun.tools.difftest",
        description="Random graphs on edgerun's providers vs onnxruntime (and the ONNX "
                    "reference where they disagree).")
    parser.add_argument("--providers", default="cpu",
                        help="comma-separated: cpu, cpu-plain (the executor's plain loop), "
                             "wasm, webgpu")
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--first", type=int, default=0, help="index of the first case")
    parser.add_argument("--index", type=int, help="run only this case (replay by seed)")
    parser.add_argument("--families", help="comma-separated families (default: all)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--max-memory-gb", type=float, default=8.0,
                        help="data limit per process (a case past it counts as a crash)")
    parser.add_argument("--out", default="reports/difftest",
                        help="folder for report.json and failing cases")
    parser.add_argument("--replay", help="a case folder written by an earlier run")
    parser.add_argument("--list", action="store_true", help="list the families and exit")
    args = parser.parse_args(argv)
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        print('difftest needs onnx and onnxruntime: pip install -e ".[test]"', file=sys.stderr)
        return 2
    from .families import FAMILIES
    from .runner import FAILING, generate, load_case, run_case, run_parallel

    if args.list:
        for name, (fn, weight) in sorted(FAMILIES.items()):
            print(f"{name:16} weight {weight:<4} {(fn.__doc__ or '').strip().splitlines()[0] if fn.__doc__ else ''}")
        return 0
    providers = [p.strip() for p in args.providers.split(",") if p.strip()]
    families = args.families.split(",") if args.families else None
    if families and set(families) - set(FAMILIES):
        print(f"unknown families {sorted(set(families) - set(FAMILIES))}; known: "
              f"{', '.join(sorted(FAMILIES))}", file=sys.stderr)
        return 2
    if args.replay or args.index is not None:
        case = load_case(args.replay) if args.replay else generate(args.seed, args.index,
                                                                   families)
        print(f"case {case.seed}: [{case.family}] {case.summary}")
        print(f"layouts: {case.layouts}")
        failed = False
        for o in run_case(case, providers):
            print(f"  {o.provider}: {o.status} (oracle {o.oracle}) {o.detail}")
            failed |= o.status in FAILING
        return 1 if failed else 0

    def progress(done, total, report):
        if done % 500 == 0 or done == total:
            print(f"  {done}/{total} cases, {report.failures()} failing", file=sys.stderr,
                  flush=True)

    print(f"difftest: {args.cases} cases from seed {args.seed} on {', '.join(providers)}",
          file=sys.stderr)
    report = run_parallel(args.seed, args.cases, providers, families, args.out, args.jobs,
                          progress=progress, first=args.first, memory_gb=args.max_memory_gb)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(report.as_dict(), f, indent=1)
    print(report.table())
    for finding in report.findings:
        if finding["status"] in FAILING:
            print(f"{finding['status'].upper()} {finding['provider']} s{args.seed} "
                  f"i{finding['index']} [{finding['family']}] {finding['summary'][:160]}\n"
                  f"    {finding['detail'][:300]}")
    departs = [f for f in report.findings if f["status"] == "ort_departs"]
    if departs:
        print(f"{len(departs)} cases where onnxruntime departs from the ONNX reference "
              f"(edgerun agrees with the reference); see report.json")
    print(f"{report.cases} cases in {report.seconds:.0f} s; report: "
          f"{os.path.join(args.out, 'report.json')}")
    return 1 if report.failures() else 0


if __name__ == "__main__":
    sys.exit(main())
