"""`vmsched calibrate`: this machine's per-operation costs, measured, as a cost profile.

The microbenchmarks are the project's own (crates/vmsched-probe, called through
`vmsched._core.probe_*`): a null system call, a pipe operation, UnixBench Context1's round
trip, lmbench lat_ctx's context switch, a cross-CPU wake-up, a timer's overshoot and the
timer-expiry path alone (a pinned FIFO thread's wake-up against its deadline). Each is
repeated and reported as a median with its spread; the profile takes the medians, and each
figure's comment says how it was measured and derived. A scenario names the profile with
`costs = "path/to/profile.toml"` (docs/scenarios.md, crates/vmsched-core/src/scenario/costs.rs).

What the probes measure is not always one model field: lat_ctx's switch includes the wake-up
and the sleep around the switch itself, and the model charges those as three costs
(`c_wakeup_ns`, `c_block_ns` and the kernel's `ctxsw_cost_ns`). The profile splits it in the
proportions of spec/workloads.md §0's x86 column (1 : 1 : 2), so that their sum, which is what
a pinned Context1 pair pays per switch, is the measured one.
"""

from __future__ import annotations

import datetime
import os
import platform
import textwrap
from dataclasses import dataclass
from pathlib import Path

from vmsched import _core


@dataclass(frozen=True)
class Counts:
    """Repetitions and operations per repetition of the probes."""

    reps: int
    loop: int  # syscall and pipe loops
    trips: int  # round trips
    wakes: int  # wake-ups and timer expiries per repetition


FULL = Counts(reps=15, loop=20000, trips=5000, wakes=200)
QUICK = Counts(reps=3, loop=2000, trips=300, wakes=20)


def cpus() -> list[int]:
    """The CPUs this process may run on."""
    return list(_core.probe_allowed_cpus())


def measure(quick: bool = False) -> dict[str, dict]:
    """Runs every probe; name -> its stats (median_ns, p10_ns, p90_ns, min_ns, max_ns, reps)."""
    c = QUICK if quick else FULL
    allowed = cpus()
    a, b = allowed[0], allowed[-1]
    m = {
        "syscall": _core.probe_syscall(c.reps, c.loop),
        "pipe_op": _core.probe_pipe_op(c.reps, c.loop),
        "round_trip": _core.probe_round_trip(c.reps, c.trips, None),
        "ctxsw": _core.probe_ctxsw(c.reps, c.trips, a),
        "timer": _core.probe_timer(c.reps, c.wakes, 1_000_000, 0),
        "timer_slack50": _core.probe_timer(c.reps, c.wakes, 1_000_000, 50_000),
    }
    # A wake-up across CPUs needs two; on one CPU it is measured there (and says so).
    m["wakeup"] = _core.probe_wakeup(c.reps, c.wakes, a, b)
    m["wakeup"]["cross_cpu"] = a != b
    # The timer-expiry path on the CPU validate runs cyclictest on (the last allowed one).
    m["timer_expiry"] = _core.probe_timer_expiry(c.reps, c.wakes, 1_000_000, b)
    m["timer_expiry"]["cpu"] = b
    return m


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def _spread(s: dict) -> str:
    return (f"median {s['median_ns']:.0f} ns, p10-p90 {s['p10_ns']:.0f}-{s['p90_ns']:.0f} ns "
            f"over {s['reps']} repetitions")


def _comment(text: str) -> list[str]:
    return textwrap.wrap(text, width=96, initial_indent="# ", subsequent_indent="# ")


def derive(m: dict[str, dict]) -> dict[str, dict[str, int]]:
    """The profile's fields from the probes' medians: {table: {field: ns}}."""
    med = {k: v["median_ns"] for k, v in m.items()}
    switch = med["ctxsw"]  # lat_ctx: wake-up + sleep + switch, per switch
    ctxsw = round(switch / 2)
    syscall = round(med["syscall"])
    pipe = max(0, round(med["pipe_op"] - med["syscall"]))
    # Wake-up to running on an idle CPU: the write and the read around it, the switch, and
    # what is left: the IPI and the idle exit, the model's ipi_latency_ns.
    ipi = max(0, round(med["wakeup"] - 2 * med["pipe_op"] - ctxsw))
    # A timer's deadline to its thread running: the interrupt, the expiry and the wake-up (the
    # model's timer_expiry_ns) and the switch to the thread (its ctxsw_cost_ns, charged apart).
    expiry = max(0, round(med["timer_expiry"] - ctxsw))
    return {
        "machine": {"ctxsw_cost_ns": ctxsw, "ipi_latency_ns": ipi,
                    "timer_expiry_ns": expiry},
        "kernel": {"ctxsw_cost_ns": ctxsw},
        "workload.context1": {
            "c_syscall_ns": syscall,
            "c_pipe_rw_ns": pipe,
            "c_wakeup_ns": round(switch / 4),
            "c_block_ns": round(switch / 4),
            "c_user_ns": 30,
        },
        "measured": {
            "round_trip_ns": round(med["round_trip"]),
            "switch_total_ns": round(switch),
            "wakeup_ns": round(med["wakeup"]),
            "timer_overshoot_ns": round(med["timer"]),
            "timer_overshoot_slack50_ns": round(med["timer_slack50"]),
            "timer_expiry_whole_ns": round(med["timer_expiry"]),
        },
    }


def profile_text(m: dict[str, dict], name: str = "local") -> str:
    """The profile as TOML, each figure with a comment saying how it was measured."""
    f = derive(m)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    uname = os.uname()
    cross = "across CPUs" if m["wakeup"].get("cross_cpu") else "on one CPU (only one allowed)"
    c1 = f["workload.context1"]
    te = m["timer_expiry"]
    te_how = (f"a thread pinned to CPU {te.get('cpu', '?')}, "
              + ("SCHED_FIFO 80" if te.get("fifo") else
                 "SCHED_OTHER (FIFO not permitted here: other tasks on that CPU can delay it)"))
    head = [
        f"vmsched cost profile measured by `vmsched calibrate` on {uname.nodename}, {now}: "
        f"{_cpu_model()}, {os.cpu_count()} CPUs, Linux {uname.release} ({uname.machine}). "
        "Each figure is a median over repetitions of the project's microbenchmarks "
        "(crates/vmsched-probe); a scenario names this file with costs = \"PATH\".",
    ]
    tables: list[tuple[str, list[tuple[str, str, int]]]] = [
        ("machine", [
            ("A task switch: lmbench lat_ctx's method (two processes pinned to one CPU pass a "
             "word through two pipes; the round trip less four pipe operations, halved: "
             f"{_spread(m['ctxsw'])}), of which the switch is taken as half (spec/workloads.md "
             "§0's x86 proportions; the wake-up and the sleep are Context1's c_wakeup_ns and "
             "c_block_ns).", "ctxsw_cost_ns", f["machine"]["ctxsw_cost_ns"]),
            (f"A wake-up {cross}: the writer's clock before write(2) to the reader's after "
             f"read(2) returned ({_spread(m['wakeup'])}), less two pipe operations and the "
             "switch above: the IPI and the idle CPU's exit.",
             "ipi_latency_ns", f["machine"]["ipi_latency_ns"]),
            ("A host timer's expiry: clock_nanosleep to an absolute time 1 ms ahead from "
             f"{te_how}, slack 1 ns, then now - deadline ({_spread(te)}), less the switch "
             "above: the hrtimer interrupt, the idle CPU's exit, the expiry and the wake-up.",
             "timer_expiry_ns", f["machine"]["timer_expiry_ns"]),
        ]),
        ("kernel", [
            ("A guest's task switch: the host's above (a guest kernel on this machine's CPUs).",
             "ctxsw_cost_ns", f["kernel"]["ctxsw_cost_ns"]),
        ]),
        ("workload.context1", [
            (f"getppid(2) in a loop: {_spread(m['syscall'])}.", "c_syscall_ns",
             c1["c_syscall_ns"]),
            ("A write or a read of one word on a pipe in one process (no wake-up, no sleep): "
             f"{_spread(m['pipe_op'])}, less the system call.", "c_pipe_rw_ns",
             c1["c_pipe_rw_ns"]),
            ("The wake-up of the reader by the writer: a quarter of lat_ctx's switch (see "
             "[machine] ctxsw_cost_ns).", "c_wakeup_ns", c1["c_wakeup_ns"]),
            ("The sleep of a reader on an empty pipe: another quarter of it.", "c_block_ns",
             c1["c_block_ns"]),
            ("Context1's user-space check and increment: not measured (a few instructions).",
             "c_user_ns", c1["c_user_ns"]),
        ]),
        ("measured", [
            ("Figures no model field takes, kept for the record. Context1's round trip, both "
             f"processes free to move: {_spread(m['round_trip'])}.", "round_trip_ns",
             f["measured"]["round_trip_ns"]),
            ("lat_ctx's whole switch (wake-up + sleep + switch).", "switch_total_ns",
             f["measured"]["switch_total_ns"]),
            (f"The wake-up {cross}, whole (see [machine] ipi_latency_ns).", "wakeup_ns",
             f["measured"]["wakeup_ns"]),
            ("clock_nanosleep to an absolute time 1 ms ahead, then now - expiry, with the "
             f"timer slack at 1 ns: {_spread(m['timer'])}.", "timer_overshoot_ns",
             f["measured"]["timer_overshoot_ns"]),
            ("The same with SCHED_OTHER's default 50 us slack: "
             f"{_spread(m['timer_slack50'])}.", "timer_overshoot_slack50_ns",
             f["measured"]["timer_overshoot_slack50_ns"]),
            ("The pinned thread's whole deadline-to-running (see [machine] timer_expiry_ns).",
             "timer_expiry_whole_ns", f["measured"]["timer_expiry_whole_ns"]),
        ]),
    ]
    lines = [*_comment(head[0]), "", "[profile]", f'name = "{name}"',
             f'description = "measured on {uname.nodename}: Linux {uname.release}, '
             f'{_cpu_model()}"']
    for table, fields in tables:
        lines += ["", f"[{table}]"]
        for text, key, value in fields:
            lines += [*_comment(text), f"{key} = {value}"]
    lines.append("")
    return "\n".join(lines)


def calibrate(out: str | os.PathLike | None = None, quick: bool = False,
              name: str = "local") -> tuple[str, dict[str, dict]]:
    """Measures and returns (profile text, the probes' stats); writes the text to `out`."""
    m = measure(quick)
    text = profile_text(m, name)
    if out is not None:
        Path(out).write_text(text)
    return text, m
