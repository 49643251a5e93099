"""The I/O path from Python (docs/io.md): the shipped io_ping scenario, the ping's and the
stream's figures and counters in the results and their tables, the scan order as an override."""

from pathlib import Path

import polars as pl
import pytest

import vmsched

SMALL = {"run.duration_ms": 400, "run.warmup_ms": 100}


def test_io_ping_reports_the_rtt_in_its_figure_counters_and_histogram():
    r = vmsched.run("io_ping", set=SMALL)
    fig = r.figure("ping")
    assert (fig["name"], fig["unit"]) == ("avg_rtt", "us")
    assert r.counter("ping", "requests") >= 30
    assert r.counter("ping", "replies") + r.counter("ping", "lost") == r.counter("ping", "requests")
    wl = r.workloads.filter(pl.col("workload") == "ping")
    assert wl["kind"][0] == "ping"
    assert wl["rtt_count"][0] == r.counter("ping", "replies")
    ports = r.ports
    assert list(ports["handler"]) == ["nic", "netback:web/ping", "netfront:ping"]
    assert list(ports["level"]) == ["dom0", "dom0", "web"]
    assert (ports["served"] > 0).all()
    # The figure is the exact mean of the histogram, in microseconds.
    hist = next(w for w in r.raw["workloads"] if w["name"] == "ping")["histograms"][0][1]
    assert abs(fig["value"] - hist["mean_ns"] / 1000) < 1e-9


def test_a_stream_reports_its_bandwidth(tmp_path):
    src = (Path(vmsched.__file__).parent / "scenarios" / "io_ping.toml").read_text()
    src += ('\n[[domain]]\nname = "st"\nvcpus = 1\n[domain.sched]\nscheduler = "cfs"\n'
            '[[domain.workload]]\nkind = "stream"\nname = "st"\nrate_mbps = 100\n')
    f = tmp_path / "io_stream.toml"
    f.write_text(src)
    r = vmsched.run(f, set=SMALL)
    fig = r.figure("st")
    assert fig["unit"] == "Mbit/s" and 0 < fig["value"] <= 101
    assert r.counter("st", "bytes") == 1500 * r.counter("st", "packets")


def test_the_scan_order_is_an_override():
    r = vmsched.run("io_ping", set={**SMALL, "domain.0.kernel.evtchn_order": "lowest_first"})
    assert r.counter("ping", "replies") > 0
    assert vmsched.run("seed000_ncopy", set=SMALL).ports.is_empty()
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.check("io_ping", set={"domain.0.kernel.evtchn_order": "highest_first"})
    assert "evtchn_order" in str(e.value)


def test_the_trace_shows_the_event_channels(tmp_path):
    from test_trace import Decoded

    path = tmp_path / "io.pftrace"
    r = vmsched.run("io_ping", set=SMALL, trace=path)
    d = Decoded(path)
    assert d.unclosed == 0
    names = [n for v in d.instants.values() for _, n in v]
    handled = sum(r.ports["served"])
    # Every port served after the warm-up shows a handler and its end (and some before it).
    assert names.count("evtchn handler") >= handled
    assert names.count("evtchn handler end") >= handled
    assert names.count("evtchn notify") >= handled


def test_hvm_ioreq_blocks_the_vcpu_in_xen_and_dom0_serves_it():
    # The shipped HVM device-model scenario (ERRATA X9): each emulated access keeps hvm.v0
    # offline (blocked in Xen) for dom0's kick and device-model work; BOOST and tickle let both
    # wakes preempt the hog, so the vCPU never waits; without BOOST they wait behind it.
    # Fixed window (run.vary = false): dom0's time is counted exactly per access.
    r = vmsched.run("hvm_ioreq", set={**SMALL, "run.vary": False})
    ents = {e["name"]: e for e in r.entities.iter_rows(named=True)}
    port = r.ports.filter(pl.col("handler") == "ioreq:hvm.v0").row(0, named=True)
    assert port["level"] == "dom0" and port["served"] > 100
    v = ents["hvm.v0"]
    assert v["offline_ns"] == port["served"] * (2000 + 2000 + 10000)
    assert v["wait_max_ns"] == 0
    plain = vmsched.run("hvm_ioreq", set={**SMALL, "host.boost_on_wake": False})
    w = next(e for e in plain.entities.iter_rows(named=True) if e["name"] == "hvm.v0")
    assert w["wait_max_ns"] > 1_000_000
