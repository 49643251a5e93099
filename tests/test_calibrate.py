"""`vmsched calibrate`: the probes run, the profile they make is a cost profile a scenario loads
(its figures land in the scenario's fields), and the CLI writes it. Real timings are noisy here:
nothing is asserted of their values beyond being measurements."""

import re

import pytest

import vmsched
from vmsched import _core
from vmsched.calibrate import calibrate, derive
from vmsched.cli import main

BARE = """name = "bare"
costs = "{profile}"
[run]
duration_ms = 20
[machine]
pcpus = 1
hypervisor = "kvm"
[host]
scheduler = "linux"
[[host.process]]
kind = "context1"
name = "pair"
"""


@pytest.fixture(scope="module")
def quick():
    return calibrate(quick=True)


def test_every_probe_reports_a_median_and_its_spread(quick):
    _, m = quick
    assert set(m) == {"syscall", "pipe_op", "round_trip", "ctxsw", "wakeup", "timer",
                      "timer_slack50", "timer_expiry"}
    assert isinstance(m["timer_expiry"]["fifo"], bool)
    for name, s in m.items():
        assert s["reps"] >= 1, name
        assert s["min_ns"] <= s["p10_ns"] <= s["median_ns"] <= s["p90_ns"] <= s["max_ns"], name


def test_a_probe_refuses_bad_counts():
    with pytest.raises(OSError, match="reps"):
        _core.probe_syscall(0, 10)
    with pytest.raises(OSError, match="affinity"):
        _core.probe_timer_expiry(1, 1, 1000, 1 << 20)


def test_the_timer_expiry_is_the_probes_less_the_switch():
    def s(v):
        return {"median_ns": v}

    m = {k: s(1000) for k in ("syscall", "pipe_op", "round_trip", "wakeup", "timer",
                              "timer_slack50")}
    m["ctxsw"] = s(4000)  # the switch: 2000
    m["timer_expiry"] = s(41000)
    assert derive(m)["machine"]["timer_expiry_ns"] == 39000
    m["timer_expiry"] = s(1500)
    assert derive(m)["machine"]["timer_expiry_ns"] == 0


def test_the_profile_is_loaded_by_a_scenario(quick, tmp_path):
    text, m = quick
    prof = tmp_path / "here.toml"
    prof.write_text(text)
    f = derive(m)
    scen = tmp_path / "bare.toml"
    scen.write_text(BARE.format(profile=prof))
    s = vmsched.check(scen)
    assert s["costs"] == str(prof)
    assert s["machine"]["ctxsw_cost_ns"] == f["machine"]["ctxsw_cost_ns"]
    assert s["machine"]["ipi_latency_ns"] == f["machine"]["ipi_latency_ns"]
    assert s["machine"]["timer_expiry_ns"] == f["machine"]["timer_expiry_ns"]
    pair = s["host"]["process"][0]
    for k, v in f["workload.context1"].items():
        assert pair[k] == v, k
    # Every figure has a comment above it saying how it was measured.
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\w+ = \d+$", line):
            assert lines[i - 1].startswith("#"), line
    r = vmsched.run(scen)
    assert r.figure("pair")["value"] > 0


def test_cli_writes_the_profile(tmp_path, capsys):
    out = tmp_path / "p.toml"
    assert main(["calibrate", "--quick", "-o", str(out)]) == 0
    assert "[workload.context1]" in out.read_text()
    assert main(["calibrate", "--quick", "-o", str(out)]) == 2  # exists: --force replaces it
    assert "exists" in capsys.readouterr().out
