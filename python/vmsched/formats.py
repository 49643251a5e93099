"""Benchmarks' own output formats, made from a run's results."""

from __future__ import annotations


def cyclictest_histogram(workload: dict) -> str:
    """cyclictest's `-q -h N` output of the seed era (rt-tests v0.89; ERRATA W3).

    "# Total" counts in-range samples only; the averages are over all samples.
    """
    hists = [h for _, h in workload["histograms"]]
    if not hists or not hists[0].get("buckets_us"):
        raise ValueError("cyclictest output needs the histogram (histogram_us > 0)")
    n = len(hists[0]["buckets_us"])
    lines = ["# /dev/cpu_dma_latency set to 0us", "# Histogram"]
    for i in range(n):
        lines.append(f"{i:06d} " + "\t".join(f"{h['buckets_us'][i]:06d}" for h in hists))
    def row(label, vals):
        return f"# {label}: " + " ".join(vals)
    lines.append(row("Total", [f"{sum(h['buckets_us']):09d}" for h in hists]))
    lines.append(row("Min Latencies", [f"{h['min_us']:05d}" for h in hists]))
    lines.append(row("Avg Latencies", [f"{int(h['avg_us']):05d}" for h in hists]))
    lines.append(row("Max Latencies", [f"{h['max_us']:05d}" for h in hists]))
    lines.append(row("Histogram Overflows", [f"{h['overflows']:05d}" for h in hists]))
    lines.append("# Histogram Overflow at cycle number:")
    for i, h in enumerate(hists):
        cycles = " ".join(f"{c:05d}" for c in h.get("overflow_cycles", []))
        more = " # 00000 others" if h["overflows"] > len(h.get("overflow_cycles", [])) else ""
        lines.append(f"# Thread {i}: {cycles}{more}")
    return "\n".join(lines)


def _time_scale(ns: float) -> str:
    """A duration as xenmon prints one: ns, us, ms or s with two decimals."""
    if ns < 1e3:
        return f"{ns:4.2f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:4.2f} us"
    if ns < 1e9:
        return f"{ns / 1e6:4.2f} ms"
    return f"{ns / 1e9:4.2f} s"


def _xenmon_cells(r: dict | None) -> dict[str, tuple[str, str, str]]:
    """One row's figures as xenmon's three columns (total per second, %, per unit)."""
    if r is None:
        return {}
    per_s = 1e9 / max(r["passed_ns"], 1)
    return {
        "Gotten": (_time_scale(r["gotten_ns"] * per_s), f"{r['gotten_pct']:3.2f}%",
                   f"{_time_scale(r['gotten_per_ex_ns'])}/ex"),
        "Allocated": ("", "", f"{_time_scale(r['allocated_per_ex_ns'])}/ex"),
        "Blocked": (_time_scale(r["blocked_ns"] * per_s), f"{r['blocked_pct']:3.2f}%", ""),
        "Waited": (_time_scale(r["waited_ns"] * per_s), f"{r['waited_pct']:3.2f}%",
                   f"{_time_scale(r['waited_per_ex_ns'])}/ex"),
        "Execution count": ("", "", f"{r['exec_per_s']:.0f}/s"),
        "Worst wait (wake/preempt)": (_time_scale(r["wait_max_ns"]),
                                      _time_scale(r["wait_max_wake_ns"]),
                                      _time_scale(r["wait_max_preempt_ns"])),
    }


def xenmon_screen(xenmon, window: int | None = None, vcpus: bool = False) -> str:
    """The `xenmon` table (docs/xenmon.md) printed as xenmon prints its per-domain lines.

    xenmon's two column groups, "Last 10 seconds" and "Last 1 second", are here the measured
    run and one window (`window`, default the last; none if the run kept no windows). Each
    domain (and with `vcpus` each vCPU, named `domain.vN`) gets xenmon's lines: Gotten (time
    per second, % of one CPU, per execution), Allocated (mean slice per execution), Blocked,
    Waited, Execution count (per second), and a line xenmon lacks, the worst wait over all,
    after a wake and after a preemption. One screen per scheduling level (xenmon: per pCPU).
    """
    rows = xenmon.to_dicts()
    windows = sorted({r["window"] for r in rows if r["window"] is not None})
    if window is None and windows:
        window = windows[-1]
    elif window is not None and window not in windows:
        raise ValueError(f"no window {window} (the run kept windows 0..{len(windows) - 1})"
                         if windows else f"no window {window}: the run kept no windows")
    kinds = ("domain", "vcpu") if vcpus else ("domain",)
    out: list[str] = []
    levels = list(dict.fromkeys(r["level"] for r in rows))
    for level in levels:
        mine = [r for r in rows if r["level"] == level and r["kind"] in kinds]
        run_rows = [r for r in mine if r["window"] is None]
        win = {(r["kind"], r["name"]): r for r in mine if r["window"] == window}
        idw = max([len(r["name"]) for r in run_rows] + [4]) + 2
        total_run = sum(r["gotten_pct"] for r in run_rows if r["kind"] == "domain")
        total_win = sum(r["gotten_pct"] for r in win.values() if r["kind"] == "domain")
        if window is not None:
            w0 = next(iter(win.values()))
            right = (f"Window {window}, {w0['start_ns'] / 1e9:.3f}-"
                     f"{(w0['start_ns'] + w0['passed_ns']) / 1e9:.3f} s ({total_win:3.2f}%)")
        else:
            right = "No windows"
        r0 = run_rows[0] if run_rows else None
        left = (f"Whole run, {r0['passed_ns'] / 1e9:.3f} s ({total_run:3.2f}%)" if r0
                else "Whole run")
        # The column groups start where their figures do (xenmon's layout: a fixed grid).
        head = f" Host = {level}"
        out.append(f"{head:<{idw + 2}}{left:<43}{right}")
        out.append(" " + "=" * (idw + 2 + 43 + 43 + 26))
        for r in run_rows:
            a = _xenmon_cells(r)
            b = _xenmon_cells(win.get((r["kind"], r["name"])))
            for label, (t, p, e) in a.items():
                t2, p2, e2 = b.get(label, ("", "", ""))
                out.append(f"  {r['name']:<{idw}}{t:>10}  {p:>9}  {e:>16}    "
                           f"{t2:>10}  {p2:>9}  {e2:>16}    {label}")
        tr, tw = f"{total_run:3.2f}%", f"{total_win:3.2f}%"
        out.append(f" *{'':<{idw + 1}}{'':>10}  {tr:>9}  {'':>16}    {'':>10}  {tw:>9}")
    return "\n".join(out)
