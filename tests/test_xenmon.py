"""xenmon's figures (docs/xenmon.md) through the API (`r.xenmon`, `r.xenmon_text`) and the
command line (`vmsched run --xenmon`, `vmsched xenmon RUN_DIR`)."""

import subprocess
import sys

import polars as pl
import pytest

import vmsched

# One pCPU under Credit1 4.20: a vCPU that wakes every 10 ms beside two hogs.
SCENARIO = """
name = "xm"
[run]
duration_ms = 2500
warmup_ms = 500
seed = 1
xenmon_window_ms = 1000
vary = false                 # the windows' bounds are checked exactly (docs/design.md, Variation)

[machine]
pcpus = 1

[host]
scheduler = "credit"
version = "4.20"
""" + "".join(f"""
[[domain]]
name = "{name}"
vcpus = 1
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
{wl}
""" for name, wl in [
    ("io", 'kind = "cyclictest"\nname = "ct"\ninterval_us = 10000\nmain_thread = false'),
    ("hog1", 'kind = "cpu_loop"\nname = "hog"'),
    ("hog2", 'kind = "cpu_loop"\nname = "hog"'),
])


@pytest.fixture
def scenario(tmp_path):
    f = tmp_path / "xm.toml"
    f.write_text(SCENARIO)
    return f


def cli(*args):
    return subprocess.run([sys.executable, "-m", "vmsched.cli", *args], capture_output=True,
                          text=True)


def test_the_table_has_the_run_and_each_window_per_domain_and_vcpu(scenario):
    r = vmsched.run(scenario)
    x = r.xenmon
    # The measured run (window null) and two 1 s windows, each with 3 domains and 3 vCPUs.
    assert x.filter(pl.col("window").is_null()).height == 6
    assert sorted(x["window"].drop_nulls().unique().to_list()) == [0, 1]
    v = x.filter(pl.col("kind") == "vcpu")
    shares = v["gotten_pct"] + v["waited_pct"] + v["blocked_pct"] + v["offline_pct"]
    assert ((shares - 100).abs() < 1e-9).all()
    # One busy pCPU: the domains' gotten shares of each scope add up to one CPU.
    per_scope = (x.filter(pl.col("kind") == "domain")
                 .group_by("window").agg(pl.col("gotten_pct").sum()))
    assert ((per_scope["gotten_pct"] - 100).abs() < 1e-6).all()
    run = v.filter(pl.col("window").is_null())
    by = {row["domain"]: row for row in run.to_dicts()}
    # A hog is only ever preempted; the ticker only wakes (and BOOST runs it at once).
    assert by["hog1"]["wait_max_wake_ns"] == 0 and by["hog1"]["wait_max_preempt_ns"] > 20e6
    assert by["io"]["wait_max_preempt_ns"] == 0 and by["io"]["wait_max_wake_ns"] < 100_000
    # The execution count is the entities table's switch-ins.
    ents = r.entities.filter(pl.col("kind") == "vcpu")
    assert sorted(run["exec_count"].to_list()) == sorted(ents["runs"].to_list())
    # Deterministic.
    assert vmsched.run(scenario).xenmon.equals(x)


def test_xenmon_text_prints_xenmons_lines(scenario):
    r = vmsched.run(scenario)
    text = r.xenmon_text()
    for label in ("Gotten", "Allocated", "Blocked", "Waited", "Execution count",
                  "Worst wait (wake/preempt)"):
        assert sum(line.endswith(label) for line in text.splitlines()) == 3, label
    assert "Window 1, 1.500-2.500 s" in text
    assert "hog1.v0" not in text and "hog1.v0" in r.xenmon_text(window=0, vcpus=True)
    with pytest.raises(ValueError, match="no window 7"):
        r.xenmon_text(window=7)


def test_windows_can_be_turned_off(scenario):
    r = vmsched.run(scenario, set={"run.xenmon_window_ms": 0})
    assert r.xenmon["window"].null_count() == r.xenmon.height == 6
    assert "No windows" in r.xenmon_text()


def test_cli_run_xenmon_and_the_xenmon_command(scenario, tmp_path):
    out = tmp_path / "out"
    p = cli("run", str(scenario), "--xenmon", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "Gotten" in p.stdout and "Window 1" in p.stdout
    assert (out / "xenmon.parquet").is_file()
    p = cli("xenmon", str(out), "--window", "0", "--vcpus")
    assert p.returncode == 0, p.stderr
    assert "Window 0, 0.500-1.500 s" in p.stdout and "io.v0" in p.stdout
    p = cli("xenmon", str(tmp_path))
    assert p.returncode == 2 and "no xenmon table" in p.stdout
    p = cli("xenmon", str(out), "--window", "9")
    assert p.returncode == 2 and "no window 9" in p.stdout
