"""The KVM host from Python (docs/kvm.md): coordinated scheduling's hypercall counts in the
`coord` table, coordination as an override (as the seed-003 reproduction sets it), and a
run-time chrt of a vCPU thread."""

from pathlib import Path

import polars as pl
import pytest

import vmsched

SMALL = {"run.duration_ms": 400, "run.warmup_ms": 100}


def test_coordinated_scenario_reports_its_hypercalls():
    r = vmsched.run("kvm_coordinated", set=SMALL)
    c = r.coord
    assert list(c["domain"]) == ["guest"]
    boosts, unboosts = c["boost_hypercalls"][0], c["unboost_hypercalls"][0]
    assert boosts > 100 and abs(boosts - unboosts) <= 1
    assert c["bound_expiries"][0] == 0


def test_coordination_is_an_override():
    off = vmsched.run("kvm_host", set=SMALL)
    assert off.coord.is_empty()
    on = vmsched.run("kvm_host", set={**SMALL, "domain.0.coord.enable": True})
    assert on.coord["boost_hypercalls"][0] > 100
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.check("kvm_host", set={"domain.0.coord.enable": True,
                                       "domain.0.coord.boost_rt_priority": 0})
    assert "domain.0.coord.boost_rt_priority" in str(e.value)


def test_a_vcpu_thread_made_fifo_at_run_time_takes_its_pcpu(tmp_path):
    src = Path(vmsched.__file__).parent / "scenarios" / "kvm_coordinated.toml"
    text = src.read_text().replace("enable = true", "enable = false")
    text += ('\n[[event]]\nat_ms = 100\naction = "sched_vcpu"\ndomain = "guest"\n'
             'policy = "fifo"\nrt_priority = 5\n')
    f = tmp_path / "chrt.toml"
    f.write_text(text)
    r = vmsched.run(f, set=SMALL)
    v = r.entities.filter((pl.col("level") == "host") & (pl.col("name") == "guest.v0"))
    assert v["cpu_share"][0] > 0.9
