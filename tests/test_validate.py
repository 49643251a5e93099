"""`vmsched validate --quick`: both sides ran on every row that is not skipped (with a reason),
and the table has every row. Real timings are noisy here: no assertion on their values."""

import shutil
from pathlib import Path

import pytest

from vmsched.cli import main
from vmsched.validate import (
    HOGS_C1,
    HOGS_CT,
    hackbench_program,
    kernel_model,
    model_cyclictest,
    timer_expiry_ns,
    validate,
)


def test_kernel_release_maps_to_the_nearest_modelled_scheduler():
    assert kernel_model("6.18.44-fc") == ("eevdf", "6.18", "")
    assert kernel_model("6.12.3")[:2] == ("eevdf", "6.12")
    sched, kern, note = kernel_model("6.14.0")
    assert (sched, kern) == ("eevdf", "6.12") and "6.14" in note
    assert kernel_model("6.1.0")[:2] == ("cfs", "5.10")
    assert kernel_model("4.19.0")[:2] == ("cfs", "3.17")
    assert "not understood" in kernel_model("weird")[2]


def test_hackbench_program_forks_every_sender_and_receiver():
    text = hackbench_program({"c_syscall_ns": 100, "c_pipe_rw_ns": 200}, fds=3)
    assert text.count('op = "fork"') == 6
    assert "max_tasks = 7" in text
    assert 'chan = "r2"' in text and 'chan = "r3"' not in text
    assert "ns = 300" in text


def test_the_model_side_pays_the_profiles_timer_expiry(tmp_path):
    assert timer_expiry_ns("[machine]\nctxsw_cost_ns = 1\n") is None
    prof = tmp_path / "p.toml"
    prof.write_text("[machine]\ntimer_expiry_ns = 0\n")
    base = model_cyclictest(prof, tmp_path, 2, 1, 0, 80, 50)
    prof.write_text("[machine]\ntimer_expiry_ns = 40000\n")
    assert timer_expiry_ns(prof.read_text()) == 40000
    avg, mx = model_cyclictest(prof, tmp_path, 2, 1, 0, 80, 50)
    # A FIFO cyclictest on an idle CPU: every wake-up exactly 40 us later (avg and max, in us).
    assert avg == pytest.approx(base[0] + 40) and mx == pytest.approx(base[1] + 40)


@pytest.fixture(scope="module")
def quick():
    return validate(quick=True)


def test_every_row_ran_on_both_sides_or_says_why(quick):
    rows, notes = quick
    names = [r.name for r in rows]
    expect = ([f"cyclictest {p} {h} hog{'s' if h != 1 else ''}"
               for p in ("OTHER", "FIFO") for h in HOGS_CT]
              + [f"context1 pair {h} hog{'s' if h != 1 else ''}" for h in HOGS_C1]
              + ["hackbench -p -g 1 -f 4"])
    assert names == expect
    for r in rows:
        if r.skipped:
            assert r.skipped.strip(), r.name
            continue
        assert r.real is not None and r.real >= 0, r.name
        assert r.model is not None and r.model >= 0, r.name
    assert any("model: bare metal" in n for n in notes)
    if shutil.which("cyclictest") and shutil.which("hackbench"):
        # With rt-tests here (CI installs it), a row may be skipped only where the machine
        # does not permit FIFO or pinning.
        assert all(r.skipped is None or "not permitted" in r.skipped for r in rows), \
            [(r.name, r.skipped) for r in rows]


def test_cli_prints_the_table(capsys):
    prof = Path(__file__).parent.parent / "crates/vmsched-core/profiles/cortex-a55.toml"
    assert main(["validate", "--quick", "--profile", str(prof)]) == 0
    out = capsys.readouterr().out
    assert "| row | figure | real | model | model / real | error |" in out
    assert "hackbench" in out and "context1 pair 2 hogs" in out
