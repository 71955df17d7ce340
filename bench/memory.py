"""Peak memory of the current process above a baseline taken after imports and feeds.

Linux: writing "5" to /proc/self/clear_refs resets the kernel's resident-memory high-water mark
(VmHWM) to the current RSS, so `VmHWM at the end - VmRSS at the baseline` is the peak that the
engine's session creation and runs added. Without /proc (macOS) the fallback is the growth of
getrusage's ru_maxrss, a lower bound when imports had already pushed the peak higher.
"""
from __future__ import annotations

import gc
import resource
import sys

METHOD_PROC = ("VmHWM - VmRSS at baseline in a fresh subprocess per engine; the high-water "
               "mark is reset via /proc/self/clear_refs after imports and feeds")
METHOD_RUSAGE = ("growth of getrusage ru_maxrss in a fresh subprocess per engine (lower bound: "
                 "the mark could not be reset after imports)")


def _proc_status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _ru_maxrss_kb() -> int:
    value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return value // 1024 if sys.platform == "darwin" else value   # bytes on macOS


class PeakMemory:
    """Call `start()` when the baseline is reached, `peak_mb()` at the end."""

    def start(self) -> None:
        gc.collect()
        self.method = METHOD_RUSAGE
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            if _proc_status_kb("VmHWM") is not None:
                self.method = METHOD_PROC
        except OSError:
            pass
        if self.method == METHOD_PROC:
            self.baseline_kb = _proc_status_kb("VmRSS")
        else:
            self.baseline_kb = _ru_maxrss_kb()

    def peak_mb(self) -> float:
        end = _proc_status_kb("VmHWM") if self.method == METHOD_PROC else _ru_maxrss_kb()
        return max(0, end - self.baseline_kb) / 1024.0
