"""Chaos mode's figure (issue 14 item 6; docs/chaos.md): `vmsched chaos` and
`vmsched.chaos.sweep`/`plot` on a short cyclictest scenario."""

import subprocess
import sys

import pytest

from vmsched import chaos

SCENARIO = """
[run]
duration_ms = 400
warmup_ms = 20
seed = 5
[machine]
pcpus = 1
[host]
scheduler = "pinned"
[[domain]]
name = "g"
vcpus = 1
[domain.sched]
scheduler = "eevdf"
kernel = "6.12"
[[domain.workload]]
kind = "cyclictest"
name = "ct"
threads = 1
interval_us = 1000
priority = 90
"""


@pytest.fixture
def scenario(tmp_path):
    f = tmp_path / "ct.toml"
    f.write_text(SCENARIO)
    return f


def test_sweep_reads_back_the_injected_steal_and_latency_grows(scenario):
    df = chaos.sweep(scenario, [0, 0.2], duration="fixed", mean_us=500)
    assert df["rate"].to_list() == [0.0, 0.2]
    calm, wild = df.row(0, named=True), df.row(1, named=True)
    # An idle guest is stalled only when it wants to run: its steal is well under the rate,
    # but not zero (wake-ups fall into stalls).
    assert calm["steal"] == 0.0
    assert 0.0 < wild["steal"] < 0.2
    # A wake-up falling into a 500 µs stall waits up to its end.
    assert wild["max_us"] > calm["max_us"] + 200
    assert wild["max_us"] <= calm["max_us"] + 550
    assert wild["p99_us"] >= calm["p99_us"]


def test_the_results_and_the_sweep_count_the_stalls(scenario, tmp_path):
    import polars as pl

    import vmsched

    r = vmsched.run(scenario, set={"domain.0.chaos.rate": 0.2, "domain.0.chaos.mean_us": 500,
                                   "domain.0.chaos.duration": "fixed"})
    c = r.chaos
    assert c.columns == ["domain", "vcpu", "name", "stalls", "stalled_ns", "rate", "mean_us"]
    row = c.row(0, named=True)
    assert (row["domain"], row["vcpu"], row["name"]) == ("g", 0, "g.v0")
    # Fixed 500 µs stalls: the stalled time is whole stalls, but for the ones cut by the
    # window's edges (at most two).
    assert abs(row["stalled_ns"] - row["stalls"] * 500_000) <= 2 * 500_000
    # count × mean ≈ rate × time: 380 ms at a 2.5 ms mean cycle is ~150 stalls; the count's
    # standard deviation is about 7 % of it (exponential gaps); 25 % is over three of them.
    want = 0.2 * r.measured_ns
    assert abs(row["stalls"] * 500_000 / want - 1) < 0.25
    # The run's written tables carry it; without chaos mode there is none.
    r.write(tmp_path / "out")
    assert pl.read_parquet(tmp_path / "out" / "chaos.parquet").equals(c)
    assert vmsched.run(scenario).chaos.is_empty()
    # The sweep keeps it beside the steal it caused (an idle guest: less than the stalls).
    df = chaos.sweep(scenario, [0, 0.2], duration="fixed", mean_us=500)
    calm, wild = df.row(0, named=True), df.row(1, named=True)
    assert (calm["stalls"], calm["stalled"]) == (0, 0.0)
    assert wild["stalls"] == row["stalls"]
    assert wild["stalled"] == row["stalled_ns"] / r.measured_ns
    assert wild["steal"] < wild["stalled"]


def test_the_same_seed_gives_the_same_table(scenario):
    a = chaos.sweep(scenario, [0.1], mean_us=300)
    b = chaos.sweep(scenario, [0.1], mean_us=300)
    assert a.equals(b)


def test_bad_arguments_are_refused(scenario):
    with pytest.raises(ValueError, match="rate"):
        chaos.sweep(scenario, [1.5])
    with pytest.raises(ValueError, match="duration"):
        chaos.sweep(scenario, [0.1], duration="normal")
    with pytest.raises(ValueError, match="domain"):
        chaos.sweep(scenario, [0.1], domain=3)


def test_the_command_writes_the_png(scenario, tmp_path):
    out = tmp_path / "chaos.png"
    p = subprocess.run([sys.executable, "-m", "vmsched.cli", "chaos", str(scenario),
                        "--rates", "0,0.1", "--seeds", "2", "--mean-us", "300", "-o", str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "g/ct" in p.stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = subprocess.run([sys.executable, "-m", "vmsched.cli", "chaos", str(scenario),
                          "--rates", "0,x"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--rates" in bad.stdout + bad.stderr
