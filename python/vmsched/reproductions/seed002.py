"""Reproduction of seed 002 (Ongaro, Cox, Rixner, slides of "Scheduling I/O in Virtual Machine
Monitors", VEE 2008; source document 002_c93a1aee7be7816d): the ping latency to an idle guest
(G8) behind 7 compute and 7 streaming guests on Xen's Credit scheduler, with dom0 as the driver
domain. The slides report 36.6 s and 67.2 ms for the original system, 259.2 ms and 6.6 ms with
the round-robin event-channel fix, 6.6 ms with BOOST and 5.1 ms with BOOST and no tickle on
every event; which figure belongs to which configuration and guest mix was lost with the plots
(ERRATA X6). So every combination of {dom0's scan order} × {boost_on_wake} × {tickle: on every
wake, none (`tickle_on_wake = false`), deferred to the end of the sender's batch of events
(`deferred_tickle`)} is run on `seed002_io_ping` (Xen 3.3 Credit1, one pCPU, a 32-bit dom0), on
the full mix and on the two single mixes (compute guests only, streaming guests only), and the
ping latency, the stream bandwidth and the mechanism (dom0's ports table: which port waited; who
G8 and dom0 waited behind) are printed beside the document's figures. The slides do not give the
machine, so both machines they allow are run (docs/seed002.md, "Why the last stage is ~100 ms",
point 3): the shipped one, every domain on one pCPU, and dom0 alone on a pCPU of its own with the
fifteen guests on a second. The ping mean is over the answered requests, so every place that
shows it also shows how many requests were not answered (dropped on a full ring, answered after
the timeout, or still unanswered at the end). The tables run one seed per combination; each
step of the slides is then compared with the one before it over several seeds (5; the short
form 3, on the shipped machine only), stating a change only where Welch's t-test, Holm-corrected, finds one
(`vmsched.stats`). docs/seed002.md reads the results.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.table import Table

from vmsched.api import _atomic_write, run
from vmsched.executor import make_executor
from vmsched.reproductions import register

SCENARIO = "seed002_io_ping"
ORDERS = ["lowest_first", "round_robin"]
BOOLS = [False, True]
#: The tickle variants: True (on every wake, Xen's), False (none: `tickle_on_wake = false`, the
#: slides' change read literally) and "deferred" (one reschedule after the sender's batch of
#: events: `deferred_tickle`, the slides' "waiting until all events have been processed").
TICKLES = [False, True, "deferred"]
#: Domain indices in the scenario: dom0 0, compute1..7 = 1..7, stream1..7 = 8..14, g8 = 15.
COMPUTE = range(1, 8)
STREAM = range(8, 15)
GUESTS = range(1, 16)
#: The two machines the slides allow (docs/seed002.md, point 3): the scenario's (one pCPU shared
#: by dom0 and the fifteen guests) and dom0 pinned alone to pCPU 0 with every guest on pCPU 1.
ONE_PCPU = "1 pCPU"
DOM0_OWN_PCPU = "dom0 on its own pCPU"
MACHINES = {
    ONE_PCPU: {},
    DOM0_OWN_PCPU: {"machine.pcpus": 2, "domain.0.pcpus": [0],
                    **{f"domain.{d}.pcpus": [1] for d in GUESTS}},
}
#: The guest mixes: which guests keep their workload (the others stay idle, their ports unused).
FULL_MIX = "compute + stream"
MIXES = {
    FULL_MIX: (),
    "compute only": tuple(STREAM),
    "stream only": tuple(COMPUTE),
}
#: The slides' configurations, in the order they are presented, with their figures.
DOCUMENT = [
    ("original (Xen 3 unstable)", "36.6 s and 67.2 ms (two mixes)"),
    ("event channel fix", "259.2 ms and 6.6 ms (two mixes)"),
    ("fix + BOOST, tickle", "6.6 ms"),
    ("fix + BOOST, no tickle", "5.1 ms"),
]
#: The two readings of which switches each slide had (ERRATA X6; docs/seed002.md): per reading,
#: (slide, its figures, (scan order, boost_on_wake, tickle_on_wake)).
READINGS = {
    "shipped (Xen 3 unstable had BOOST and tickling)": [
        ("original", "36.6 s / 67.2 ms", ("lowest_first", True, True)),
        ("event channel fix", "259.2 ms / 6.6 ms", ("round_robin", True, True)),
        ("Boost/No Tickle", "5.1 ms", ("round_robin", True, False)),
        ("Boost/No Tickle, deferred reading", "5.1 ms", ("round_robin", True, "deferred")),
    ],
    "X6 (the original had no BOOST)": [
        ("original", "36.6 s / 67.2 ms", ("lowest_first", False, True)),
        ("event channel fix", "259.2 ms / 6.6 ms", ("round_robin", False, True)),
        ("fix + BOOST", "6.6 ms", ("round_robin", True, True)),
        ("fix + BOOST, no tickle", "5.1 ms", ("round_robin", True, False)),
        ("fix + BOOST, deferred tickle", "5.1 ms", ("round_robin", True, "deferred")),
    ],
}


#: The tickle variant as the tables' `tickle` column has it (one type per column).
TICKLE_COLUMN = {True: "every wake", False: "none", "deferred": "deferred"}


def tickle_name(tickle) -> str:
    return {True: "tickle", False: "no tickle", "deferred": "deferred tickle"}[tickle]


def config_name(order: str, boost: bool, tickle) -> str:
    """Short name of a combination: dom0's scan (LF lowest-first, RR round-robin), BOOST, tickle."""
    return (f"{'LF' if order == 'lowest_first' else 'RR'}, {'BOOST' if boost else 'no BOOST'}, "
            f"{tickle_name(tickle)}")


def paper_config(order: str, boost: bool, tickle) -> str:
    """Which of the slides' configurations a combination is, on the two readings of ERRATA X6
    (docs/seed002.md): "X6", the original had no BOOST; "shipped", Xen 3 unstable had BOOST
    (since 3.0.4) and tickling. '' for the combinations neither reading shows."""
    return {
        ("lowest_first", False, True): "original (X6)",
        ("lowest_first", True, True): "original (shipped)",
        ("round_robin", False, True): "fix (X6)",
        ("round_robin", True, True): "fix + BOOST (X6) = fix (shipped)",
        ("round_robin", True, False): "Boost/No Tickle (both)",
        ("round_robin", True, "deferred"): "Boost/No Tickle, deferred (both)",
    }.get((order, boost, tickle), "")


def _one(args) -> dict:
    """One point: (mix, scan order, boost_on_wake, tickle (True, False or "deferred"), duration
    in ms[, seed[, machine]]): the machine a key of `MACHINES` (default the scenario's, one
    pCPU)."""
    mix, order, boost, tickle, duration_ms, *rest = args
    seed = rest[:1] if rest and rest[0] is not None else []
    machine = rest[1] if len(rest) > 1 else ONE_PCPU
    ov = {"domain.0.kernel.evtchn_order": order, "host.boost_on_wake": boost,
          "host.tickle_on_wake": tickle is not False, "run.duration_ms": duration_ms,
          **MACHINES[machine]}
    if tickle == "deferred":
        ov["host.deferred_tickle"] = True
    for d in MIXES[mix]:
        ov[f"domain.{d}.workload"] = []
    if seed:
        ov["run.seed"] = seed[0]
    res = run(SCENARIO, set=ov)
    wl = res.workloads
    ping = wl.filter(pl.col("kind") == "ping").row(0, named=True)
    streams = wl.filter(pl.col("kind") == "stream")
    cpu = wl.filter(pl.col("kind") == "cpu_loop")
    ports = res.ports.filter(pl.col("level") == "dom0")
    g8_port = ports.filter(pl.col("handler").str.starts_with("netback:g8")).row(0, named=True)
    nic = ports.filter(pl.col("handler") == "nic").row(0, named=True)
    ent = {r["name"]: r for r in res.entities.iter_rows(named=True)}
    bw = streams["value"].to_list()
    replies = ping["count_replies"] or 0
    return {
        "machine": machine, "mix": mix, "order": order, "boost": boost, "tickle": TICKLE_COLUMN[tickle],
        "config": config_name(order, boost, tickle), "paper": paper_config(order, boost, tickle),
        "duration_ms": duration_ms,
        "ping_requests": ping["count_requests"], "ping_replies": replies,
        "ping_lost": ping["count_lost"], "ping_late": ping["count_late"],
        # Requests that found the NIC's (or G8's) ring full: the streams share the NIC's ring.
        "ping_dropped": ping["count_dropped"],
        # Neither answered in time nor dropped: still pending at the end of the run (a reply
        # later than the timeout is `ping_late`).
        "ping_unanswered": ping["count_unanswered"],
        # The mean over the answered requests; None when none was answered in the timeout.
        "ping_mean_ms": ping["value"] / 1e3 if replies else None,
        "ping_p99_ms": ping["rtt_p99_ns"] / 1e6 if replies else None,
        "ping_max_ms": ping["rtt_max_us"] / 1e3 if replies else None,
        "stream_total_mbps": sum(bw), "stream_min_mbps": min(bw, default=0.0),
        "stream_max_mbps": max(bw, default=0.0),
        "compute_share_pct": 100.0 * sum(cpu["value"].to_list()),
        "dom0_share_pct": 100.0 * ent["dom0.v0"]["cpu_share"],
        "dom0_wait_max_ms": ent["dom0.v0"]["wait_max_ns"] / 1e6,
        "dom0_wait_mean_ms": ent["dom0.v0"]["wait_mean_ns"] / 1e6,
        "dom0_runs": ent["dom0.v0"]["runs"], "dom0_preemptions": ent["dom0.v0"]["preemptions"],
        "dom0_mean_run_us": ent["dom0.v0"]["running_ns"] / max(1, ent["dom0.v0"]["runs"]) / 1e3,
        "g8_wait_max_ms": ent["g8.v0"]["wait_max_ns"] / 1e6,
        "nic_port": nic["port"], "nic_served": nic["served"],
        "g8_port": g8_port["port"], "g8_port_served": g8_port["served"],
        "g8_port_max_wait_ms": g8_port["max_wait_ns"] / 1e6,
        "g8_port_pending_ms": g8_port["pending_ns"] / 1e6,
        "backend_max_wait_ms": max(ports.filter(pl.col("handler").str.starts_with("netback:"))
                                   ["max_wait_ns"].to_list(), default=0) / 1e6,
    }


def points(duration_ms: int, mixes=None, machines=None) -> list[tuple]:
    """Every (mix, order, boost, tickle, duration, seed, machine) of the reproduction."""
    return [(mix, o, b, t, duration_ms, None, m) for m in (machines or MACHINES)
            for mix in (mixes or MIXES) for o in ORDERS for b in BOOLS for t in TICKLES]


#: The comparisons of the slides' stages, each against the one before it, per reading:
#: (later stage, earlier stage), as (scan order, boost_on_wake, tickle) keys of `READINGS`.
STAGES = {
    "shipped": [(("round_robin", True, True), ("lowest_first", True, True)),
                (("round_robin", True, False), ("round_robin", True, True)),
                (("round_robin", True, "deferred"), ("round_robin", True, True))],
    "X6": [(("round_robin", False, True), ("lowest_first", False, True)),
           (("round_robin", True, True), ("round_robin", False, True)),
           (("round_robin", True, False), ("round_robin", True, True)),
           (("round_robin", True, "deferred"), ("round_robin", True, True))],
}
#: Seeds of the comparisons (the table's run is the first): full form and short form; the
#: short form compares on the shipped machine only (to keep CI's time).
CMP_SEEDS, QUICK_CMP_SEEDS = 5, 3
QUICK_CMP_MACHINES = [ONE_PCPU]


def cmp_keys() -> list[tuple]:
    """The (order, boost, tickle) combinations the comparisons need, in first-use order."""
    return list(dict.fromkeys(k for pairs in STAGES.values() for pair in pairs for k in pair))


def comparisons(rows: list[dict], machines=None) -> list[tuple]:
    """Each stage of the slides against the one before it (`STAGES`), on the full mix and per
    machine (of `machines`, default all), on the ping mean over the answered requests (Welch's
    t-test over the seeds of `rows`, a seed without an answer left out; Holm-corrected over
    all: `vmsched.stats`).
    Returns (machine, reading, later key, earlier key, `Comparison`)."""
    from vmsched.stats import compare_all

    def pings(machine, key):
        return [r["ping_mean_ms"] for r in rows if r["machine"] == machine
                and r["mix"] == FULL_MIX and (r["order"], r["boost"], r["tickle"])
                == (key[0], key[1], TICKLE_COLUMN[key[2]]) and r["ping_mean_ms"] is not None]

    keys, pairs = [], []
    for machine in machines or MACHINES:
        for reading, stages in STAGES.items():
            for later, earlier in stages:
                keys.append((machine, reading, later, earlier))
                pairs.append((config_name(*later), pings(machine, later),
                              config_name(*earlier), pings(machine, earlier)))
    return [(*k, c) for k, c in zip(keys, compare_all(pairs))]


def _fmt(x, unit=" ms") -> str:
    if x is None:
        return "-"
    if unit == " ms" and x >= 1000:
        return f"{x / 1000:.1f} s"
    return f"{x:,.1f}{unit}"


def _dom0_runs(r: dict) -> str:
    """dom0's completed runs with their mean length and preemptions; a dom0 that never switched
    out (busy on its own pCPU the whole run) has no completed run, only the one still going."""
    if r["dom0_runs"] == 0:
        ran_ms = r["dom0_mean_run_us"] / 1e3
        return f"none ended (one run of {ran_ms:.0f} ms)" if ran_ms > 0 else "0"
    return f"{r['dom0_runs']} ({r['dom0_mean_run_us']:.0f} µs, {r['dom0_preemptions']})"


def unanswered(r: dict) -> str:
    """The requests the ping mean does not count: `n/requests` not answered in time, and why
    (dropped on a full ring, answered after the timeout, still pending at the end)."""
    why = [f"{r[k]} {w}" for k, w in (("ping_dropped", "dropped"), ("ping_late", "late"),
                                       ("ping_unanswered", "pending")) if r[k]]
    return f"{r['ping_lost']}/{r['ping_requests']}" + (f" ({', '.join(why)})" if why else "")


def ping_text(r: dict, duration_ms: int) -> str:
    """The ping of one row as the readings print it: mean, p99 and max over the answered
    requests, beside how many were not answered."""
    if r["ping_replies"]:
        return (f"mean {_fmt(r['ping_mean_ms'])}, p99 {_fmt(r['ping_p99_ms'])}, max "
                f"{_fmt(r['ping_max_ms'])} over {r['ping_replies']} answered; not answered "
                f"{unanswered(r)}")
    return (f"no reply in {duration_ms / 1000:.0f} s, not answered {unanswered(r)} (G8's port "
            f"{r['g8_port']} served {r['g8_port_served']} times)")


def _plot(full: dict, outdir: Path, duration_ms: int) -> Path:
    """seed002_ping.png: the full mix's ping mean per combination, one panel per machine, with
    the slides' figures as horizontal lines. The means span four decades, so they are points on
    a log scale (a bar's length means nothing there; vmsched.plot's rules); a combination with
    no reply is a red cross at the run's length. Below each point: not answered / requests (the
    mean counts only the answered ones). One seed per point: no spread to show."""
    from vmsched.plot import finish, pyplot

    plt = pyplot()
    keys = [(o, b, t) for o in ORDERS for b in BOOLS for t in TICKLES]
    fig, axes = plt.subplots(1, len(MACHINES), figsize=(7 * len(MACHINES), 4.8), sharey=True,
                             squeeze=False)
    top = duration_ms  # "no reply": drawn at the run's length
    colors = {True: "tab:blue", False: "tab:green", "deferred": "tab:orange"}
    names = {True: "tickle on every wake", False: "no tickle", "deferred": "deferred tickle"}
    for ax, machine in zip(axes[0], MACHINES):
        for x, k in enumerate(keys):
            r = full[(machine, *k)]
            if r["ping_replies"]:
                ax.plot(x, r["ping_mean_ms"], "o", ms=7, color=colors[k[2]],
                        label=names[k[2]] if k[:2] == keys[0][:2] else None)
                v = r["ping_mean_ms"]
            else:
                ax.plot(x, top, "X", ms=9, color="tab:red",
                        label="no reply (drawn at the run's length)")
                v = top
            ax.annotate(f"{r['ping_lost']}/{r['ping_requests']}", (x, v), fontsize=6,
                        ha="center", va="top", xytext=(0, -7), textcoords="offset points")
        for i, (fig_ms, label) in enumerate(((36600, "36.6 s"), (259.2, "259.2 ms"),
                                             (67.2, "67.2 ms"), (6.6, "6.6 ms"),
                                             (5.1, "5.1 ms"))):
            ax.axhline(fig_ms, color="grey", lw=0.6, ls="--")
            ax.text(len(keys) - 0.5 if i % 2 == 0 else -0.5, fig_ms, f"slides {label}",
                    fontsize=6, va="bottom", ha="right" if i % 2 == 0 else "left",
                    color="grey")
        ax.set_ylim(0.5, top * 3)
        ax.set_xlim(-0.7, len(keys) - 0.3)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([config_name(*k) for k in keys], rotation=70, ha="right", fontsize=6)
        finish(ax, "dom0's event-channel scan, BOOST, tickle",
               "ping mean (ms)" if ax is axes[0][0] else "", log_y=True,
               title=f"{machine}, {FULL_MIX}, {duration_ms / 1000:.0f} s (one seed per point)")
    handles, labels = [], []
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=len(labels))
    fig.suptitle("seed002: ping to the idle guest G8, mean over the answered requests; below each "
                 "point: not answered / requests", fontsize=8)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    path = outdir / "seed002_ping.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(quick: bool = False, jobs: int | None = None, out: str | Path = "out/reproduce/seed002",
         console: Console | None = None) -> int:
    """Runs every point (2 machines × 3 mixes × 2 scan orders × BOOST on/off × tickle
    on/none/deferred), prints the tables beside the document's figures, writes
    seed002.csv/json and seed002_ping.png into `out`."""
    console = console or Console()
    duration = 10000 if quick else 120000
    pts = points(duration)
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    done = {}
    with make_executor(jobs, len(pts)) as ex:
        for (p,), f in ex.imap_unordered(_one, ((p,) for p in pts)):
            done[p] = f.result()
    rows = [done[p] for p in pts]
    pl.DataFrame(rows).write_csv(outdir / "seed002.csv")
    _atomic_write(outdir / "seed002.json", json.dumps(rows, indent=1))

    console.print("[bold]Published[/bold] (seed 002, ping latency to the idle guest G8):")
    for name, fig in DOCUMENT:
        console.print(f"  {name}: {fig}")
    for machine in MACHINES:
        for mix in MIXES:
            t = Table(title=f"seed002, {machine}, {mix}: Xen 3.3 Credit1, {duration / 1000:.0f} s "
                      "simulated (LF lowest-first, RR round-robin scan in dom0; the ping mean, "
                      "p99 and max are over the answered requests)")
            for c in ("dom0 scan, BOOST, tickle", "slides' config", "ping mean", "p99", "max",
                      "not answered", "streams Mbit/s (min-max)", "compute %", "dom0 %",
                      "G8 port (served, max pending)", "dom0 runs (mean run, preempted)",
                      "dom0 wait (mean, worst)", "G8 worst wait"):
                t.add_column(c, justify="right")
            for r in rows:
                if r["mix"] != mix or r["machine"] != machine:
                    continue
                t.add_row(r["config"], r["paper"] or "-", _fmt(r["ping_mean_ms"]),
                          _fmt(r["ping_p99_ms"]), _fmt(r["ping_max_ms"]), unanswered(r),
                          f"{r['stream_total_mbps']:.0f} ({r['stream_min_mbps']:.0f}-"
                          f"{r['stream_max_mbps']:.0f})" if mix != "compute only" else "-",
                          f"{r['compute_share_pct']:.0f}" if mix != "stream only" else "-",
                          f"{r['dom0_share_pct']:.1f}",
                          f"{r['g8_port']}: {r['g8_port_served']}, "
                          f"{_fmt(r['g8_port_max_wait_ms'])}",
                          _dom0_runs(r),
                          f"{_fmt(r['dom0_wait_mean_ms'])}, {_fmt(r['dom0_wait_max_ms'])}",
                          _fmt(r["g8_wait_max_ms"]))
            console.print(t)
    full = {(m, o, b, t): done[(x, o, b, t, d, s, m)] for (x, o, b, t, d, s, m) in pts
            if x == FULL_MIX}
    for reading, slides in READINGS.items():
        console.print(f"\n[bold]Reading {reading}[/bold], {FULL_MIX}, both machines:")
        for slide, fig, key in slides:
            console.print(f"  {slide}: published {fig}")
            for machine in MACHINES:
                r = full[(machine, *key)]
                console.print(f"    {machine}: simulated {ping_text(r, duration)}; streams "
                              f"{r['stream_total_mbps']:.0f} Mbit/s")
    png = _plot(full, outdir, duration)
    console.print(f"Plot of both machines beside the slides' figures: {png}")
    _print_comparisons(quick, duration, jobs, rows, outdir, console)
    # The starving combination's schedule, to open in Perfetto: dom0 runs a few hundred µs,
    # a streaming guest it woke BOOSTed preempts it, the compute guests' 30 ms slices follow.
    trace = outdir / "seed002_lowest_first_boost_tickle.pftrace"
    run(SCENARIO, set={"domain.0.kernel.evtchn_order": "lowest_first", "host.boost_on_wake": True,
                       "host.tickle_on_wake": True, "run.duration_ms": 3000}, trace=trace)
    console.print(f"The starving schedule (lowest-first, BOOST, tickle; 3 s): {trace}")
    console.print("Which configuration pairs with which figure, which machine, and why the model "
                  "differs where it does: docs/seed002.md. Tables: " + str(outdir))
    return 0


def _print_comparisons(quick: bool, duration: int, jobs, rows: list[dict], outdir: Path,
                       console) -> None:
    """Runs the comparisons' further seeds (the table's runs are the first seed) and prints,
    per machine, which of the slides' steps change the ping mean significantly; writes
    seed002_seeds.csv."""
    from vmsched.api import base_seed
    from vmsched.stats import family_note

    s0 = base_seed(SCENARIO)
    n = QUICK_CMP_SEEDS if quick else CMP_SEEDS
    machines = QUICK_CMP_MACHINES if quick else list(MACHINES)
    first = [{**r, "seed": s0} for r in rows
             if r["mix"] == FULL_MIX and r["machine"] in machines]
    pts = [(FULL_MIX, *k, duration, s0 + i, m) for m in machines for k in cmp_keys()
           for i in range(1, n)]
    done = {}
    with make_executor(jobs, len(pts)) as ex:
        for (p,), f in ex.imap_unordered(_one, ((p,) for p in pts)):
            done[p] = {**f.result(), "seed": p[5]}
    seeded = first + [done[p] for p in pts]
    pl.DataFrame(seeded).write_csv(outdir / "seed002_seeds.csv")
    console.print(f"\n[bold]Comparisons[/bold]: each step of the slides against the one before "
                  f"it, {FULL_MIX}, ping mean over the answered requests (ms), {n} seeds of "
                  f"{duration / 1000:.0f} s" + (f" ({', '.join(machines)} only)" if quick else "")
                  + ":")
    cs = comparisons(seeded, machines)
    for machine, reading, later, earlier, c in cs:
        console.print(f"  {machine}, reading {reading}: {_cmp_text(c)}", highlight=False)
    console.print(family_note([c for *_, c in cs]) + " A seed whose ping was never answered "
                  "has no mean and is left out.", highlight=False)


def _cmp_text(c) -> str:
    """A comparison's verdict; where one side was never answered, that instead."""
    if c.a.n == 0 or c.b.n == 0:
        never = [x for x, s in ((c.a_label, c.a), (c.b_label, c.b)) if s.n == 0]
        return (f"{c.a_label} against {c.b_label}: " + " and ".join(never)
                + " never answered on any seed")
    return c.verdict() + f"; means {c.a.mean:.2f} against {c.b.mean:.2f} ms"


REPRODUCTION = register(
    name="seed002",
    title="Ongaro, Cox, Rixner (VEE 2008), Scheduling I/O in VMMs: ping latency to an idle guest",
    source="002_c93a1aee7be7816d",
    run=main,
)
