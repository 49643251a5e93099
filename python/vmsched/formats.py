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
