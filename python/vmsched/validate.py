"""`vmsched validate`: the same workloads on this machine's Linux and in the model, side by side.

The real side runs here: cyclictest and hackbench from rt-tests (Debian's `rt-tests`), the
Context1 pair with the project's own probe (crates/vmsched-probe, UnixBench's loop), and CPU
hogs as busy-looping processes pinned to the measured CPU. The model side is bare metal: a
scenario with a Linux host level (`hypervisor = "kvm"`, `[host] scheduler = "linux"`) and no
domain, whose host scheduler is the running kernel's (its release mapped to the nearest
modelled one, said in the output when not exact), whose per-operation costs are a cost profile
(`vmsched calibrate`'s, measured first unless one is given: among them the host's timer
expiry, `[machine] timer_expiry_ns`, which every cyclictest wake-up pays), and whose workloads are
`[[host.process]]` entries. Rows: cyclictest with 0, 1, 2 and 4 hogs, SCHED_OTHER and FIFO;
the Context1 pair pinned to one CPU with 0, 1 and 2 hogs; hackbench (pipes, one group).
Each row prints the real figure, the model's, and model / real. A row whose real side is not
permitted here (FIFO, pinning) or whose tool is missing is skipped with the reason.

Real timings on a shared or virtual machine are noisy: the rows are evidence, not a test; the
test of this module (tests/test_validate.py) checks only that both sides ran.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from vmsched import _core

HOGS_CT = (0, 1, 2, 4)
HOGS_C1 = (0, 1, 2)
FIFO_PRIO = 80
HB_FDS = 4  # hackbench -f: senders and receivers per group


@dataclass
class Row:
    """One line of the table: what ran, its figure on each side."""

    name: str
    metric: str
    unit: str
    real: float | None = None
    model: float | None = None
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        if self.real is None or self.model is None or self.real == 0:
            return None
        return self.model / self.real


@dataclass(frozen=True)
class Lengths:
    ct_loops: int  # cyclictest periods of 1 ms
    c1_reps: int
    c1_iters: int
    c1_ms: int  # the model's measured window for Context1
    hb_loops: int


FULL = Lengths(ct_loops=5000, c1_reps=9, c1_iters=20000, c1_ms=2000, hb_loops=2000)
QUICK = Lengths(ct_loops=200, c1_reps=3, c1_iters=500, c1_ms=100, hb_loops=100)


def kernel_model(release: str | None = None) -> tuple[str, str, str]:
    """(scheduler, kernel, note) of the modelled Linux nearest the running kernel's release:
    EEVDF 6.18, 6.12 or 6.6 from 6.6 on, CFS 5.10 from 5.10 to 6.5, CFS 3.17 before. The note
    says when the release is not the one modelled (empty when it is)."""
    release = release or os.uname().release
    m = re.match(r"(\d+)\.(\d+)", release)
    if not m:
        return "eevdf", "6.18", f"kernel release '{release}' not understood: modelled as EEVDF 6.18"
    v = (int(m[1]), int(m[2]))
    for lo, sched, kern in (((6, 18), "eevdf", "6.18"), ((6, 12), "eevdf", "6.12"),
                            ((6, 6), "eevdf", "6.6"), ((5, 10), "cfs", "5.10"),
                            ((0, 0), "cfs", "3.17")):
        if v >= lo:
            exact = v == lo
            note = "" if exact else (f"Linux {v[0]}.{v[1]} runs here; modelled as "
                                     f"{sched.upper()} {kern}, the nearest modelled before it")
            return sched, kern, note
    raise AssertionError("unreachable: (0, 0) matches every release")


# ---- the real side -----------------------------------------------------------------------------


class Hogs:
    """`n` busy-looping processes pinned to `cpu` while the context is open."""

    def __init__(self, n: int, cpu: int):
        self.n, self.cpu, self.procs = n, cpu, []

    def __enter__(self) -> Hogs:
        code = f"import os\nos.sched_setaffinity(0, {{{self.cpu}}})\nwhile True:\n    pass\n"
        for _ in range(self.n):
            self.procs.append(subprocess.Popen([sys.executable, "-c", code]))
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


def can_pin(cpu: int) -> str | None:
    """None if this process may pin itself to `cpu`, else the reason."""
    try:
        old = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {cpu})
        os.sched_setaffinity(0, old)
        return None
    except OSError as e:
        return f"pinning to CPU {cpu} not permitted: {e.strerror}"


def can_fifo() -> str | None:
    """None if a child may take SCHED_FIFO here, else the reason."""
    try:
        r = subprocess.run([sys.executable, "-c",
                            "import os; os.sched_setscheduler(0, os.SCHED_FIFO, "
                            f"os.sched_param({FIFO_PRIO}))"], capture_output=True, text=True)
    except OSError as e:
        return str(e)
    if r.returncode != 0:
        return "SCHED_FIFO not permitted here (needs CAP_SYS_NICE or an RLIMIT_RTPRIO)"
    return None


def real_cyclictest(cpu: int, hogs: int, prio: int, loops: int) -> tuple[float, float]:
    """(Avg, Max) in µs of `cyclictest -q -t 1 -a CPU -i 1000 -l LOOPS [-p PRIO]`."""
    cmd = ["cyclictest", "-q", "-t", "1", "-a", str(cpu), "-i", "1000", "-l", str(loops)]
    if prio:
        cmd += ["-p", str(prio)]
    with Hogs(hogs, cpu):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60 + loops / 500)
    m = re.search(r"Avg:\s*(\d+)\s+Max:\s*(\d+)", r.stdout)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"cyclictest failed ({r.returncode}): {r.stderr.strip()[:200]}")
    return float(m[1]), float(m[2])


def real_context1(cpu: int, hogs: int, n: Lengths) -> float:
    """The pinned pair's round trips per second (the probe's median repetition)."""
    with Hogs(hogs, cpu):
        s = _core.probe_round_trip(n.c1_reps, n.c1_iters, (cpu, cpu))
    return 1e9 / s["median_ns"]


def real_hackbench(loops: int) -> float:
    """Messages per second of `hackbench -p -g 1 -f 4 -l LOOPS` (f senders each pass `loops`
    messages to each of f receivers)."""
    r = subprocess.run(["hackbench", "-p", "-g", "1", "-f", str(HB_FDS), "-l", str(loops)],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r"Time:\s*([\d.]+)", r.stdout)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"hackbench failed ({r.returncode}): {r.stderr.strip()[:200]}")
    return HB_FDS * HB_FDS * loops / max(float(m[1]), 1e-6)


# ---- the model side ----------------------------------------------------------------------------


def bare_metal(profile: Path, pcpus: int, processes: str, duration_ms: int,
               warmup_ms: int = 0, release: str | None = None) -> str:
    """A bare-metal scenario: the running kernel's scheduler over `pcpus` CPUs, the profile's
    costs, and `processes` ([[host.process]] tables) as its tasks."""
    sched, kern, _ = kernel_model(release)
    return (f'name = "validate"\ncosts = "{profile.resolve()}"\n'
            f"[run]\nduration_ms = {duration_ms}\nwarmup_ms = {warmup_ms}\n"
            f'[machine]\npcpus = {pcpus}\nhypervisor = "kvm"\n'
            f'[host]\nscheduler = "linux"\n[host.sched]\nscheduler = "{sched}"\n'
            f'kernel = "{kern}"\n' + processes)


def _hogs(n: int, cpu: int) -> str:
    if n == 0:
        return ""
    return (f'[[host.process]]\nkind = "cpu_loop"\nname = "hog"\ncopies = {n}\n'
            f"affinity = [{cpu}]\n")


def _run(text: str, tmp: Path, name: str):
    import vmsched

    p = tmp / f"{name}.toml"
    p.write_text(text)
    return vmsched.run(p)


def model_cyclictest(profile: Path, tmp: Path, pcpus: int, cpu: int, hogs: int, prio: int,
                     loops: int) -> tuple[float, float]:
    """(avg, max) in µs of the model's cyclictest."""
    procs = (f'[[host.process]]\nkind = "cyclictest"\nname = "ct"\ninterval_us = 1000\n'
             f"priority = {prio}\naffinity = [{cpu}]\n" + _hogs(hogs, cpu))
    r = _run(bare_metal(profile, pcpus, procs, loops + 1), tmp, f"ct{hogs}p{prio}")
    w = r.workload("ct")
    h = dict(w["histograms"])
    first = next(iter(h.values()), {})
    return w["figure"]["value"], first.get("max_ns", 0) / 1000


def model_context1(profile: Path, tmp: Path, pcpus: int, cpu: int, hogs: int,
                   n: Lengths) -> float:
    procs = (f'[[host.process]]\nkind = "context1"\nname = "pair"\naffinity = [{cpu}]\n'
             f"jitter_pct = 10\n" + _hogs(hogs, cpu))
    r = _run(bare_metal(profile, pcpus, procs, n.c1_ms + 100, 100), tmp, f"c1_{hogs}")
    return r.figure("pair")["value"]


def timer_expiry_ns(profile_text: str) -> int | None:
    """The profile's `[machine] timer_expiry_ns`, or None when it has none (a profile written
    before the field: the model then charges no timer expiry)."""
    import tomllib

    v = tomllib.loads(profile_text).get("machine", {}).get("timer_expiry_ns")
    return None if v is None else int(v)


def context1_costs(profile_text: str) -> dict[str, int]:
    """The `c_*_ns` figures of a profile's [workload.context1] (the only table with them)."""
    return {k: int(v) for k, v in re.findall(r"^(c_\w+_ns)\s*=\s*(\d+)", profile_text, re.M)}


def hackbench_program(c1: dict[str, int], fds: int = HB_FDS) -> str:
    """hackbench -p -g 1 -f FDS as a program workload: a main task forks FDS receivers, each
    reading its own pipe, and FDS senders, each writing one message to every receiver's pipe
    per loop (rt-tests hackbench.c's sender and receiver); every step costs what the profile's
    Context1 figures say a pipe write, a read, a wake-up and a sleep cost. Senders and
    receivers loop forever: the figure is messages received per second (the `msgs` counter)."""
    op = c1.get("c_syscall_ns", 400) + c1.get("c_pipe_rw_ns", 1000)
    wake, block = c1.get("c_wakeup_ns", 2000), c1.get("c_block_ns", 2000)
    steps: list[str] = []
    # 0 .. 2*fds-1: the forks; then the main task exits.
    recv_at = 2 * fds + 1
    send_at = recv_at + 4 * fds
    for r in range(fds):
        steps.append(f"{{ op = \"fork\", child_at = {recv_at + 4 * r} }}")
    for _ in range(fds):
        steps.append(f"{{ op = \"fork\", child_at = {send_at} }}")
    steps.append('{ op = "exit" }')
    for r in range(fds):
        at = len(steps)
        steps += [f'{{ op = "wait", chan = "r{r}", block_cost_ns = {block} }}',
                  f'{{ op = "compute", ns = {op}, kernel = true }}',
                  '{ op = "count", counter = "msgs" }',
                  f'{{ op = "loop", to = {at} }}']
    for r in range(fds):
        steps += [f'{{ op = "compute", ns = {op}, kernel = true }}',
                  f'{{ op = "signal", chan = "r{r}", sync = true, wake_cost_ns = {wake} }}']
    steps.append(f'{{ op = "loop", to = {send_at} }}')
    chans = ", ".join(f'"r{r}"' for r in range(fds))
    return ('[[host.process]]\nkind = "program"\nname = "hackbench"\n'
            f"max_tasks = {2 * fds + 1}\nchannels = [{chans}]\ncounters = [\"msgs\"]\n"
            "steps = [\n  " + ",\n  ".join(steps) + ",\n]\n")


def model_hackbench(profile: Path, tmp: Path, pcpus: int, duration_ms: int) -> float:
    c1 = context1_costs(profile.read_text())
    r = _run(bare_metal(profile, pcpus, hackbench_program(c1), duration_ms + 20, 20), tmp,
             "hackbench")
    return r.counter("hackbench", "msgs") / (duration_ms / 1000)


# ---- the whole table ---------------------------------------------------------------------------


def validate(profile: str | os.PathLike | None = None, quick: bool = False,
             progress=None) -> tuple[list[Row], list[str]]:
    """Runs every row on both sides; returns (rows, notes). `profile`: a cost profile file (or
    None: `vmsched calibrate` measures one first). `progress(name)` is called before each row."""
    from vmsched.calibrate import calibrate, cpus

    n = QUICK if quick else FULL
    notes: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="vmsched-validate-"))
    try:
        if profile is None:
            prof = tmp / "profile.toml"
            calibrate(prof, quick=quick)
            notes.append("costs: measured now by `vmsched calibrate`"
                         + (" --quick" if quick else ""))
        else:
            prof = Path(profile)
            notes.append(f"costs: {prof}")
        expiry = timer_expiry_ns(prof.read_text())
        notes.append("model timer expiry: "
                     + (f"{expiry / 1000:.1f} us (the profile's machine.timer_expiry_ns)"
                        if expiry is not None else
                        "none (the profile has no machine.timer_expiry_ns: calibrate again)"))
        sched, kern, knote = kernel_model()
        notes.append(f"model: bare metal, Linux {sched.upper()} {kern}"
                     + (f" ({knote})" if knote else f" (the running kernel, {os.uname().release})"))
        allowed = cpus()
        cpu = allowed[-1]
        pcpus = os.cpu_count() or len(allowed)
        pin = can_pin(cpu)
        fifo = can_fifo()
        have_ct = shutil.which("cyclictest")
        have_hb = shutil.which("hackbench")
        rows: list[Row] = []

        def row(r: Row, real, model, skip: str | None) -> None:
            if progress:
                progress(r.name)
            if skip:
                r.skipped = skip
            else:
                try:
                    r.real = real()
                except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                    r.skipped = f"real side failed: {e}"
                r.model = model()
            rows.append(r)

        for prio in (0, FIFO_PRIO):
            pol = "FIFO" if prio else "OTHER"
            for h in HOGS_CT:
                skip = (None if have_ct else "cyclictest not installed (apt-get install rt-tests)")
                skip = skip or pin or (fifo if prio else None)
                maxes = {}

                def real(h=h, prio=prio):
                    avg, mx = real_cyclictest(cpu, h, prio, n.ct_loops)
                    maxes["real"] = mx
                    return avg

                def model(h=h, prio=prio):
                    avg, mx = model_cyclictest(prof, tmp, pcpus, cpu, h, prio, n.ct_loops)
                    maxes["model"] = mx
                    return avg

                r = Row(f"cyclictest {pol} {h} hog{'s' if h != 1 else ''}", "avg latency", "us")
                row(r, real, model, skip)
                if "real" in maxes and "model" in maxes:
                    r.notes.append(f"max {maxes['real']:.0f} / {maxes['model']:.0f} us")
        for h in HOGS_C1:
            r = Row(f"context1 pair {h} hog{'s' if h != 1 else ''}", "round trips", "/s")
            row(r, lambda h=h: real_context1(cpu, h, n),
                lambda h=h: model_context1(prof, tmp, pcpus, cpu, h, n), pin)
        hb_ms = 50 if quick else 500
        r = Row(f"hackbench -p -g 1 -f {HB_FDS}", "messages", "/s")
        row(r, lambda: real_hackbench(n.hb_loops),
            lambda: model_hackbench(prof, tmp, pcpus, hb_ms),
            None if have_hb else "hackbench not installed (apt-get install rt-tests)")
        notes.append("load average (1, 5, 15 min) at the end: "
                     + ", ".join(f"{x:.1f}" for x in os.getloadavg())
                     + f" on {os.cpu_count()} CPUs (other work on the machine shows in the real "
                       "side)")
        return rows, notes
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.0f}" if abs(v) >= 10 else f"{v:.2f}"


def table(rows: list[Row], notes: list[str]) -> str:
    """The side-by-side table as text (also Markdown)."""
    out = ["| row | figure | real | model | model / real | error | notes |",
           "|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}"
        err = "-" if r.ratio is None else f"{(r.ratio - 1) * 100:+.0f} %"
        note = "; ".join(([f"skipped: {r.skipped}"] if r.skipped else []) + r.notes)
        out.append(f"| {r.name} | {r.metric} ({r.unit}) | {_fmt(r.real)} | {_fmt(r.model)} "
                   f"| {ratio} | {err} | {note} |")
    return "\n".join(out + [""] + [f"- {x}" for x in notes])
