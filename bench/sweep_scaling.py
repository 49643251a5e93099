"""Sweep scaling: a sweep of 64 short points at `--jobs 1` and `--jobs 2` (issue 15 item 4).

Runs `vmsched sweep` as a user would (a fresh process per sweep) and reports its wall time and
its CPU time (the sweep's process and its workers), then times the pool alone in this process:
the 64 points through `make_executor(jobs)` with the same point function the sweep uses, with
the time to the first result (the workers' start-up) apart. Usage:

    python bench/sweep_scaling.py [--duration-ms 200,2000] [--jobs 1,2] [--repeat 3]

Figures go in docs/performance.md ("Sweep scaling"); say how many cores and how loaded.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "seed000_context1_ratelimit.toml"
POINTS = 64


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cli_sweep(duration_ms: int, jobs: int) -> tuple[float, float]:
    """(wall, CPU) of one `vmsched sweep` of 64 points: 2 ratelimits x 32 seeds."""
    out = Path(tempfile.mkdtemp(prefix="vmsched-sweep-scaling-"))
    try:
        cmd = [sys.executable, "-m", "vmsched.cli", "sweep", str(SCENARIO),
               "--set", f"run.duration_ms={duration_ms}", "--set", "run.warmup_ms=0",
               "--set", "host.ratelimit_us=1000,2000", "--seeds", str(POINTS // 2),
               "--jobs", str(jobs), "-o", str(out / "o")]
        c0, t0 = _children_cpu(), time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0, _children_cpu() - c0
    finally:
        shutil.rmtree(out, ignore_errors=True)


def pool_only(duration_ms: int, jobs: int) -> tuple[float, float]:
    """(wall, time to the first result) of the 64 points through the executor alone."""
    from vmsched import sweep_runner
    from vmsched.executor import make_executor

    base = [("run.duration_ms", str(duration_ms)), ("run.warmup_ms", "0")]
    items = ((str(SCENARIO), base, {"run.seed": i + 1}, "k") for i in range(POINTS))
    t0 = time.perf_counter()
    first = None
    with make_executor(jobs, POINTS) as ex:
        for _, f in ex.imap_unordered(sweep_runner._run_point, items):
            f.result()
            if first is None:
                first = time.perf_counter() - t0
    return time.perf_counter() - t0, first or 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-ms", default="200,2000")
    ap.add_argument("--jobs", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    print("duration_ms jobs | sweep wall s  sweep CPU s | pool wall s  first result s  (min of "
          f"{a.repeat})")
    for d in (int(x) for x in a.duration_ms.split(",")):
        for j in (int(x) for x in a.jobs.split(",")):
            cli = min((cli_sweep(d, j) for _ in range(a.repeat)), key=lambda r: r[0])
            pool = min((pool_only(d, j) for _ in range(a.repeat)), key=lambda r: r[0])
            print(f"{d:>11} {j:>4} | {cli[0]:>12.2f} {cli[1]:>12.2f} | {pool[0]:>11.2f} "
                  f"{pool[1]:>14.2f}")


if __name__ == "__main__":
    main()
