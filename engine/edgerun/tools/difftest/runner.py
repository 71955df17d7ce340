"""Generating cases, running them on edgerun's providers and onnxruntime, and reporting.

Case `index` of seed `seed` is always the same graph (its generator draws from
`np.random.default_rng([seed, index])`), so a report names every case by (seed, index) and
`--seed S --index I` replays it; mismatches are also written out as model.onnx + inputs.npz.
"""
from __future__ import annotations

from typing import Optional

import json
import os
import signal
import time
import traceback
import warnings
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

import numpy as np

from .builder import Case, Tolerance
from .families import FAMILIES, pick
from .oracle import PROVIDER_TOLERANCE, mismatch, onnxruntime_outputs, reference_outputs

# statuses of one case on one provider
PASSED, WRONG, CRASHED, UNCLAIMED, INVALID, ORT_DEPARTS, REFUSED = (
    "passed", "wrong", "crashed", "unclaimed", "invalid", "ort_departs", "refused")
# REFUSED: onnxruntime raised on the case (the reference, more lenient, ran it) and edgerun
# raised one of its own errors naming the problem: both refuse, neither is wrong.
FAILING = (WRONG, CRASHED)
CASE_TIMEOUT_S = 120


@dataclass
class Outcome:
    provider: str
    status: str
    detail: str = ""
    oracle: str = ""          # "onnxruntime" or "reference"


def generate(seed: int, index: int, families=None) -> Case:
    """Case `index` of `seed`, from the named families (default: all, by weight)."""
    rng = np.random.default_rng([seed, index])
    names = sorted(families or FAMILIES)
    weights = np.array([FAMILIES[n][1] for n in names], float)
    name = pick(rng, names, weights / weights.sum())
    case = FAMILIES[name][0](rng)
    case.seed = (seed, index)
    return case


# "cpu-plain": the CPU provider through the executor's plain loop (a profiled run), without
# the generated plan code, inlined ops and remembered shape results the fast path uses: the
# semantics those are tested against.
PLAIN_CPU = "cpu-plain"


def _session(case: Case, provider: str):
    import edgerun

    options = edgerun.SessionOptions()
    options.enable_profiling = provider == PLAIN_CPU
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return edgerun.InferenceSession(case.model, options,
                                        providers=["cpu" if provider == PLAIN_CPU else provider])


def decoy_feeds(feeds: dict) -> dict:
    """Feeds of the same shapes and types with other values (integers rolled, so indices
    stay in range): a run with these first must not leave anything behind (a remembered
    shape result, a prepared weight) that changes the next run's answer."""
    decoys = {}
    for name, value in feeds.items():
        value = np.asarray(value)
        if value.dtype.kind == "f":
            decoys[name] = (value * -0.5 + 0.25).astype(value.dtype)
        elif value.dtype.kind in "iub" and value.size > 1:
            decoys[name] = np.roll(value, 1)
        else:
            decoys[name] = value.copy()
    return decoys


def _claims_wholly(session, provider: str) -> str:
    """'' when every node runs on `provider`, else the first node it refused and why."""
    for node in session.explain()["nodes"]:
        if node["provider"] != provider:
            return (f"{node['op_type']} ran on {node['provider']} "
                    f"({'; '.join(node['refused_by'])[:200]})")
    return ""


class _Timeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Timeout(f"no result within {CASE_TIMEOUT_S} s")


def run_case(case: Case, providers: list) -> list:
    """One Outcome per provider."""
    want, why = onnxruntime_outputs(case)
    oracle = "onnxruntime"
    if want is None:
        want, ref_why = reference_outputs(case)
        oracle = "reference"
        if want is None:
            detail = f"onnxruntime: {why}; reference: {ref_why}"
            return [Outcome(p, INVALID, detail) for p in providers]
    return [_run_on(case, provider, want, oracle, ort_refused=oracle == "reference")
            for provider in providers]


def _run_on(case: Case, provider: str, want: list, oracle: str,
            ort_refused: bool = False) -> Outcome:
    from edgerun.errors import EdgerunError, NotImplementedOp

    tolerance = case.tolerance.widened(PROVIDER_TOLERANCE.get(provider, 1.0))
    use_alarm = hasattr(signal, "SIGALRM")
    if use_alarm:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        signal.alarm(CASE_TIMEOUT_S)
    try:
        try:
            session = _session(case, provider)
        except NotImplementedOp as e:
            return Outcome(provider, UNCLAIMED, str(e)[:300], oracle)
        refused = _claims_wholly(session, "cpu" if provider == PLAIN_CPU else provider)
        if refused:
            return Outcome(provider, UNCLAIMED, refused, oracle)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                session.run(None, decoy_feeds(case.feeds))
            except EdgerunError:
                pass                  # other values may be invalid (a Range too long...)
            got = session.run(None, case.feeds)
    except Exception as e:   # noqa: BLE001 - every failure is a finding
        status = REFUSED if ort_refused and isinstance(e, EdgerunError) else CRASHED
        return Outcome(provider, status, _describe_exception(e), oracle)
    finally:
        if use_alarm:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
    why = mismatch(got, want, tolerance, case.unordered_outputs)
    if why is None:
        return Outcome(provider, PASSED, "", oracle)
    if oracle == "onnxruntime":
        reference, ref_why = reference_outputs(case)
        if reference is not None and mismatch(got, reference, tolerance,
                                              case.unordered_outputs) is None:
            return Outcome(provider, ORT_DEPARTS, f"onnxruntime: {why}", "reference")
        why += "" if reference is not None else f" (reference could not run: {ref_why})"
    return Outcome(provider, WRONG, why, oracle)


def _describe_exception(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return f"{type(e).__name__}: {str(e)[:300]}{where}"


# ---------------------------------------------------------------- writing cases out


def save_case(case: Case, outcome: Outcome, folder: str) -> str:
    """Writes model.onnx, inputs.npz and case.json under folder/NAME; returns the path."""
    seed, index = case.seed or (0, 0)
    path = os.path.join(folder, f"{outcome.provider}-{outcome.status}-s{seed}-i{index}")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "model.onnx"), "wb") as f:
        f.write(case.model)
    arrays: dict = {k: np.asarray(v) for k, v in case.feeds.items()}
    np.savez(os.path.join(path, "inputs.npz"), **arrays)
    with open(os.path.join(path, "case.json"), "w") as f:
        json.dump({"family": case.family, "summary": case.summary, "seed": seed,
                   "index": index, "provider": outcome.provider, "status": outcome.status,
                   "detail": outcome.detail, "oracle": outcome.oracle,
                   "tolerance": asdict(case.tolerance), "layouts": case.layouts,
                   "unordered_outputs": list(case.unordered_outputs),
                   "replay": f"python -m edgerun.tools.difftest --replay {path}"}, f, indent=1)
    return path


def load_case(path: str) -> Case:
    """A case written by save_case."""
    with open(os.path.join(path, "case.json")) as f:
        info = json.load(f)
    with open(os.path.join(path, "model.onnx"), "rb") as f:
        model = f.read()
    with np.load(os.path.join(path, "inputs.npz")) as data:
        feeds = {k: data[k] for k in data.files}
    return Case(info["family"], model, feeds, Tolerance(**info["tolerance"]), info["summary"],
                (info["seed"], info["index"]), tuple(info["unordered_outputs"]),
                info["layouts"])


# ---------------------------------------------------------------- many cases


@dataclass
class Report:
    """Counts per provider and status, per provider, family and status, and the cases
    that failed or where onnxruntime departed from the reference."""
    seed: int
    cases: int = 0
    counts: dict = field(default_factory=lambda: defaultdict(Counter))
    by_family: dict = field(default_factory=lambda: defaultdict(Counter))
    findings: list = field(default_factory=list)
    seconds: float = 0.0

    def add(self, case: Case, outcomes: list, saved: dict) -> None:
        self.cases += 1
        for o in outcomes:
            self.counts[o.provider][o.status] += 1
            self.by_family[f"{o.provider}/{case.family}"][o.status] += 1
            if o.status in FAILING or o.status in (ORT_DEPARTS, REFUSED) or \
                    (o.status == INVALID and o.provider == outcomes[0].provider):
                self.findings.append({"provider": o.provider, "status": o.status,
                                      "index": case.seed[1], "family": case.family,
                                      "summary": case.summary, "detail": o.detail,
                                      "saved": saved.get(o.provider, "")})

    def merge(self, other: "Report") -> None:
        self.cases += other.cases
        for key, counter in other.counts.items():
            self.counts[key].update(counter)
        for key, counter in other.by_family.items():
            self.by_family[key].update(counter)
        self.findings.extend(other.findings)

    def failures(self) -> int:
        return sum(c[s] for c in self.counts.values() for s in FAILING)

    def as_dict(self) -> dict:
        return {"seed": self.seed, "cases": self.cases, "seconds": round(self.seconds, 1),
                "counts": {k: dict(v) for k, v in self.counts.items()},
                "by_family": {k: dict(v) for k, v in sorted(self.by_family.items())},
                "findings": self.findings}

    def table(self) -> str:
        statuses = [PASSED, WRONG, CRASHED, ORT_DEPARTS, REFUSED, UNCLAIMED, INVALID]
        lines = ["| provider | claimed wholly | " + " | ".join(statuses) + " |",
                 "|---|---|" + "---|" * len(statuses)]
        for provider, counter in self.counts.items():
            claimed = sum(counter[s] for s in (PASSED, WRONG, CRASHED, ORT_DEPARTS, REFUSED))
            lines.append(f"| {provider} | {claimed} | " +
                         " | ".join(str(counter[s]) for s in statuses) + " |")
        return "\n".join(lines)


def run_range(seed: int, start: int, stop: int, providers: list, families=None,
              out_dir: Optional[str] = None, progress=None) -> Report:
    """Cases start..stop-1 of `seed` on `providers`; failures saved under out_dir."""
    report = Report(seed)
    began = time.perf_counter()
    for index in range(start, stop):
        case = generate(seed, index, families)
        outcomes = run_case(case, providers)
        saved = {}
        if out_dir:
            for o in outcomes:
                if o.status in FAILING:
                    saved[o.provider] = save_case(case, o, os.path.join(out_dir, "failures"))
        report.add(case, outcomes, saved)
        if progress:
            progress(index - start + 1, stop - start, report)
    report.seconds = time.perf_counter() - began
    return report


def limit_memory(gigabytes: float) -> None:
    """Cap this process's data (numpy's arrays, not the address space wasmtime and wgpu
    reserve): a case asking for too much raises MemoryError, reported as a crash, instead of
    the machine's OOM killer ending the run."""
    try:
        import resource
    except ImportError:          # not on this platform
        return
    limit = int(gigabytes * (1 << 30))
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _worker(args) -> Report:
    seed, start, stop, providers, families, out_dir, memory_gb = args
    limit_memory(memory_gb)
    return run_range(seed, start, stop, providers, families, out_dir)


def run_parallel(seed: int, count: int, providers: list, families=None, out_dir=None,
                 jobs: int = 1, chunk: int = 200, progress=None, first: int = 0,
                 memory_gb: float = 8.0) -> Report:
    """Cases first..first+count-1 on `jobs` processes (spawned: wgpu and wasmtime state is
    per process), in chunks so progress shows as they finish. A worker that dies (a crash
    in native code) is reported as a crash of its chunk's cases, which are then run one
    process each to name the case."""
    if jobs <= 1:
        limit_memory(memory_gb)
        return run_range(seed, first, first + count, providers, families, out_dir, progress)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    tasks = [(seed, s, min(s + chunk, first + count), providers, families, out_dir, memory_gb)
             for s in range(first, first + count, chunk)]
    report = Report(seed)
    began = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    retried: set = set()
    while tasks:
        broken = []
        with ProcessPoolExecutor(jobs, mp_context=context) as pool:
            futures = {pool.submit(_worker, task): task for task in tasks}
            for future, task in futures.items():
                try:
                    report.merge(future.result())
                except BrokenProcessPool:   # this task's worker died, or a neighbour's did
                    broken.append(task)
                    continue
                if progress:
                    progress(report.cases, count, report)
        tasks = [task for task in broken if task[1] not in retried]
        retried.update(task[1] for task in tasks)
        for task in broken:
            if task in tasks:
                continue            # retried in a fresh pool first
            for index in range(task[1], task[2]):    # broke twice: one process per case
                report.merge(_isolated_case(seed, index, providers, families, out_dir, memory_gb))
    report.seconds = time.perf_counter() - began
    return report


def _isolated_case(seed, index, providers, families, out_dir, memory_gb) -> Report:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    task = (seed, index, index + 1, providers, families, out_dir, memory_gb)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            return pool.submit(_worker, task).result()
        except BrokenProcessPool:
            case = generate(seed, index, families)
            report = Report(seed)
            report.add(case, [Outcome(p, CRASHED, "the process running the case died (a "
                                         "crash in native code, or killed for memory)")
                              for p in providers], {})
            return report
