"""The xentrace export (`vmsched run --xentrace`, `vmsched.run(xentrace=...)`): the file's
layout, and Xen's own readers on it: Debian's `xentrace_format` prints the expected records, and
`xenalyze`'s per-vCPU runstate summary agrees with the run's own figures.

The readers come from Debian's xen-utils-common, which scripts/test.sh installs. Without them a
test skips with the reason, except under CI (CI=true), where a missing reader is a failure.
Debian 12 ships xentrace_format as a Python 2 script (with a python3 first line, which fails on
its Python 2 syntax), so it is run with a Python 2 interpreter when one is found."""

import glob
import os
import re
import shutil
import struct
import subprocess
import sys
from collections import Counter

import pytest

import vmsched

CPU_CHANGE = 0x0001F003
SWITCH = 0x0002800A
IDLE = 0x7FFF


def parse(path):
    """The records of a xentrace file: (pCPU, event, cycles or None, data words)."""
    b = path.read_bytes()
    out, i = [], 0
    while i < len(b):
        hdr, pcpu, size = struct.unpack_from("<III", b, i)
        assert hdr == 0x2000_0000 | CPU_CHANGE, f"a window starts with cpu_change at {i}"
        i += 12
        end = i + size
        while i < end:
            (h,) = struct.unpack_from("<I", b, i)
            i += 4
            cycles = None
            if h >> 31:
                (cycles,) = struct.unpack_from("<Q", b, i)
                i += 8
            n = (h >> 28) & 7
            data = struct.unpack_from(f"<{n}I", b, i)
            i += 4 * n
            out.append((pcpu, h & 0x0FFF_FFFF, cycles, data))
        assert i == end, "a window holds whole records"
    return out


def _missing(msg):
    if os.environ.get("CI") == "true":
        pytest.fail(f"{msg}: CI's install step (scripts/test.sh) must provide it")
    pytest.skip(msg)


def _tool(name):
    p = shutil.which(name)
    if p is None:
        _missing(f"{name} is not installed (Debian's xen-utils-common; scripts/test.sh "
                 "installs it)")
    return p


def _python2():
    """A Python 2 interpreter, for Debian's xentrace_format (a Python 2 script)."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    cands = [shutil.which("python2"), shutil.which("python2.7")]
    cands += sorted(glob.glob(os.path.join(root, "versions", "2.7*", "bin", "python2.7")))
    for c in filter(None, cands):
        try:
            v = subprocess.run([c, "-c", "import sys; print(sys.version_info[0])"],
                               capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        if v.returncode == 0 and v.stdout.strip() == "2":
            return c
    pytest.skip("no Python 2 interpreter: Debian 12's xentrace_format is a Python 2 script")


def run(tmp_path, scenario, ms, **kw):
    path = tmp_path / f"{scenario}.bin"
    r = vmsched.run(scenario, set={"run.duration_ms": ms, "run.warmup_ms": 0},
                    xentrace=path, **kw)
    return r, path


def host_vcpus(r):
    e = r.entities
    return e.filter(e["level"] == "host").to_dicts()


def test_the_file_holds_what_the_result_says_and_perfetto_can_be_written_at_once(tmp_path):
    pf = tmp_path / "t.pftrace"
    r, path = run(tmp_path, "seed000_context1_ratelimit", 300, trace=pf)
    assert pf.stat().st_size > 0 and r.trace["dropped"] == 0
    x = r.xentrace
    assert x["cpu_hz"] == 2_400_000_000
    assert dict(x["domains"]) == {"domU1": 1, "domU2": 2}
    recs = parse(path)
    assert len(recs) == x["records"]
    assert Counter(e for _, e, _, _ in recs) == dict(x["by_event"])
    assert all(c is not None for _, _, c, _ in recs), "every record has a cycle count"
    ids = {d for _, d in x["domains"]} | {IDLE}
    for _, e, _, data in recs:
        if e == SWITCH:
            assert data[0] in ids and data[2] in ids
    # Cycles are the run's time at 2.4 GHz: nothing after its end.
    assert max(c for _, _, c, _ in recs) <= 1 + 300_000_000 * 2.4
    # Same scenario, same bytes; another frequency scales the cycle counts.
    r2, p2 = run(tmp_path / "..", "seed000_context1_ratelimit", 300)
    assert p2.read_bytes() == path.read_bytes()
    r3 = vmsched.run("seed000_context1_ratelimit", xentrace=tmp_path / "f.bin",
                     xentrace_cpu_hz=1_000_000_000,
                     set={"run.duration_ms": 300, "run.warmup_ms": 0})
    assert r3.xentrace["cpu_hz"] == 10**9
    c1 = [c for _, _, c, _ in parse(tmp_path / "f.bin")]
    c24 = [c for _, _, c, _ in recs]
    # Each count is floored from the run's ns; rescaling a floored count floors twice, which
    # lands one cycle low for a time off the 5 ns grid (timer jitter, run.vary, makes them).
    want = sorted(1 + (c - 1) * 10**9 // 2_400_000_000 for c in c24)
    assert len(c1) == len(want)
    assert all(0 <= a - b <= 1 for a, b in zip(sorted(c1), want))


def test_the_bound_cuts_the_file_where_the_trace_stops(tmp_path):
    r, path = run(tmp_path, "seed000_context1_ratelimit", 300, trace_max_records=200)
    t = r.xentrace["trace"]
    assert t["dropped"] > 0 and t["truncated_at_ns"] is not None
    recs = parse(path)
    assert 0 < len(recs) == r.xentrace["records"]
    # Every record but the lost-record reports (stamped at the run's end: below) is before
    # the truncation.
    assert max(c for _, e, c, _ in recs if e != 0x0001F001) <= 1 + t["truncated_at_ns"] * 2.4


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="xentrace_cpu_hz"):
        vmsched.run("seed000_context1_ratelimit", xentrace=tmp_path / "x.bin",
                    xentrace_cpu_hz=0, set={"run.duration_ms": 10, "run.warmup_ms": 0})
    p = subprocess.run([sys.executable, "-m", "vmsched.cli", "run", "seed000_context1_ratelimit",
                        "--set", "run.duration_ms=10", "--set", "run.warmup_ms=0", "--xentrace",
                        str(tmp_path / "no" / "such" / "dir" / "x.bin")],
                       capture_output=True, text=True)
    out = p.stdout + p.stderr
    assert p.returncode == 2, out
    assert "xentrace" in out and "x.bin" in out


def test_cli_writes_the_file_and_names_the_domains(tmp_path):
    path = tmp_path / "cli.bin"
    p = subprocess.run([sys.executable, "-m", "vmsched.cli", "run", "seed000_context1_ratelimit",
                        "--set", "run.duration_ms=300", "--set", "run.warmup_ms=0",
                        "--xentrace", str(path)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "xentrace written to" in p.stdout and "domU1=1" in p.stdout
    r, mine = run(tmp_path, "seed000_context1_ratelimit", 300)
    assert path.read_bytes() == mine.read_bytes()


def formats(path=vmsched.XENTRACE_FORMATS):
    """Our definitions file: event id -> the event's name as printed (TRC_... and, for a
    runstate change, its from->to)."""
    names = {}
    for line in path.read_text().splitlines():
        if not line.startswith("0x"):
            continue
        ev, fmt = line.split(None, 1)
        m = re.search(r"(TRC_\w+(?: \w+->\w+)?)", fmt)
        if m:
            names[int(ev, 16)] = m.group(1)
    return names


@pytest.mark.parametrize("scenario,ms,class_ids", [
    # Credit2: credit burn, tickle, schedule.
    ("seed000_context1_ratelimit", 300, {0x22203, 0x22206, 0x22215}),
    # Credit1: tickle, boost, schedule.
    ("credit1_boost_interactive", 1500, {0x22006, 0x22007, 0x22009}),
    # RTDS: tickle, runq pick, budget burn, replenish, schedule; null: pick, assign, schedule.
    ("rtds_reservation", 1000, {0x22801, 0x22802, 0x22803, 0x22804, 0x22806}),
    ("null_static", 1500, {0x22A01, 0x22A02, 0x22A05, 0x28001, 0x28002}),
    # Cpupools: Credit2's and RTDS's schedules; the moves put vCPUs to sleep and wake them.
    ("cpupools", 1500, {0x22215, 0x22203, 0x22806, 0x22803, 0x28003}),
    # Create, destroy, pause: DOM_ADD, DOM_REM, SLEEP.
    ("lifecycle_boot_fork", 1500, {0x28001, 0x28002, 0x28003, 0x22215}),
    # Credit2 as in 4.2.1, read with its own definitions file: burn, tickle, reset.
    ("credit2_4_2_1_slices", 500, {0x22003, 0x22006})])
def test_xentrace_format_prints_the_records(tmp_path, scenario, ms, class_ids):
    tool = _tool("xentrace_format")
    py2 = _python2()
    r, path = run(tmp_path, scenario, ms)
    fmt = vmsched.XENTRACE_FORMATS_4_2_1 if "4_2_1" in scenario else vmsched.XENTRACE_FORMATS
    with path.open("rb") as f:
        p = subprocess.run([py2, tool, str(fmt)], stdin=f,
                           capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert not any("unknown event" in ln for ln in lines), "every event id has a name"
    names = formats(fmt)
    printed = Counter(m.group(1) for ln in lines if (m := re.search(r"(TRC_\w+(?: \w+->\w+)?)",
                                                                     ln)))
    expected = Counter()
    for ev, n in r.xentrace["by_event"]:
        expected[names[ev]] += n
    assert printed == expected
    # The scheduler's own records are in the file and printed under their names.
    for ev in class_ids:
        assert printed[names[ev]] > 0, f"{scenario}: no {names[ev]}"
    # Each record is printed on the pCPU of its window, with the run's domain and vCPU ids.
    npcpu = len(r.entities.filter(r.entities["level"] == "host")) and max(
        pc for pc, _, _, _ in parse(path)) + 1
    ids = {d for _, d in r.xentrace["domains"]} | {IDLE}
    vcpus = {(d, int(name.rsplit(".v", 1)[1])) for name, d in
             ((e["name"], dict(r.xentrace["domains"])[e["name"].rsplit(".v", 1)[0]])
              for e in host_vcpus(r))}
    switches = [ln for ln in lines if "TRC_SCHED_SWITCH " in ln]
    assert len(switches) == dict(r.xentrace["by_event"])[SWITCH] > 10
    for ln in switches:
        cpu = int(re.match(r"CPU(\d+) ", ln).group(1))
        assert cpu < npcpu
        for d, v in re.findall(r"d(\d+)v(\d+)", ln):
            d, v = int(d), int(v)
            assert d in ids
            assert (d, v) in vcpus or (d == IDLE and v == cpu), ln


XENALYZE_STATE = re.compile(r"^\s+(running|runnable|blocked|offline):\s+(\d+)\s+[\d.]+s\s+(\d+)")


def xenalyze_runstates(text):
    """xenalyze -s's per-vCPU runstate lines: (domain, vcpu) -> state -> (count, mean cycles)."""
    out, dom, vcpu = {}, None, None
    for ln in text.splitlines():
        if m := re.match(r"^\|-- Domain (\d+) --\|", ln):
            dom, vcpu = int(m.group(1)), None
        elif m := re.match(r"^-- v(\d+) --", ln):
            vcpu = int(m.group(1))
            out[(dom, vcpu)] = {}
        elif vcpu is not None and (m := XENALYZE_STATE.match(ln)):
            out[(dom, vcpu)][m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return out


@pytest.mark.parametrize("scenario,ms", [("seed000_context1_ratelimit", 1000),
                                         ("credit1_boost_interactive", 1500),
                                         ("seed000_ncopy", 500),
                                         ("rtds_reservation", 1000),
                                         ("arinc653_partitions", 1000),
                                         ("cpupools", 1500),
                                         ("lifecycle_boot_fork", 1500),
                                         ("credit2_4_2_1_slices", 500)])
def test_xenalyze_runstate_summary_agrees_with_the_run(tmp_path, scenario, ms):
    tool = _tool("xenalyze")
    r, path = run(tmp_path, scenario, ms)
    hz = r.xentrace["cpu_hz"]
    p = subprocess.run([tool, f"--cpu-hz={hz}", "-s", str(path)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    got = xenalyze_runstates(p.stdout)
    doms = dict(r.xentrace["domains"])
    exact = 0
    for e in host_vcpus(r):
        dom, v = e["name"].rsplit(".v", 1)
        key = (doms[dom], int(v))
        if key not in got:
            # A vCPU that never woke has no record.
            assert e["running_ns"] == e["runnable_ns"] == 0, f"xenalyze has no {e['name']}"
            continue
        n, mean = got[key].get("running", (0, 0))
        cycles = e["running_ns"] * hz // 10**9
        # xenalyze counts the running intervals the trace closes: all of them unless the vCPU
        # still runs at the end (that last one is open). Its mean is a whole number of cycles
        # (up to n lost), and each interval's start and end may sit one cycle late (a change
        # on another pCPU at the instant of the vCPU's last one: docs/trace.md).
        if e["final_state"] != "running":
            assert abs(n * mean - cycles) <= 3 * n + 1, (e["name"], n, mean, cycles)
            exact += 1
        else:
            assert n * mean <= cycles + 2 * n, (e["name"], n, mean, cycles)
    assert exact > 0, "no vCPU ended off its CPU: nothing compared exactly"


def test_a_truncated_file_ends_with_lost_records_that_xenalyze_reads(tmp_path):
    """The bound drops records from `truncated_at_ns` on: every pCPU's buffer ends with one
    TRC_LOST_RECORDS (count, the vCPU current there as domain | vCPU << 16, the first lost
    cycle count) stamped at the end of the run, and xenalyze still reads the file."""
    r, path = run(tmp_path, "seed000_context1_ratelimit", 300, trace_max_records=2000)
    t = r.xentrace["trace"]
    assert t["dropped"] > 0
    recs = parse(path)
    lost = [(p, c, d) for p, e, c, d in recs if e == 0x0001F001]
    npcpu = 1 + max(p for p, _, _, _ in recs)
    assert sorted(p for p, _, _ in lost) == list(range(npcpu))
    first = 1 + t["truncated_at_ns"] * 24 // 10
    end = 1 + 300_000_000 * 24 // 10
    ids = {d for _, d in r.xentrace["domains"]} | {IDLE}
    for p, c, d in lost:
        assert d[0] == t["dropped"]
        assert d[2] | d[3] << 32 == first
        assert c == end > first
        assert d[1] & 0xFFFF in ids
        # The last record of its pCPU.
        assert [e for q, e, _, _ in recs if q == p][-1] == 0x0001F001
    tool = _tool("xenalyze")
    p = subprocess.run([tool, "--cpu-hz=2400000000", "-s", str(path)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "FATAL" not in p.stdout + p.stderr
