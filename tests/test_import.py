"""`vmsched import` and `vmsched.import_*`: xl.cfg, sysctl dumps and rt-app JSON into scenario
TOML (docs/import.md), and every bad input as one project error (issue 18 items 1 and 8)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vmsched

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

XL = """\
# A guest in the style of xl.cfg(5)'s examples.
name = "web"
type = "pvh"
memory = 2048
vcpus = 2
maxvcpus = 4
cpus = ["0", "1-3,^2"]
cpus_soft = "all"
cpu_weight = 512
cap = 150
disk = [ 'vdev=xvda, target=/dev/vg/web' ]
"""

SYSCTL = """\
kernel.sched_latency_ns = 12000000
kernel.sched_min_granularity_ns = 1500000
kernel.sched_wakeup_granularity_ns = 2000000
kernel.sched_child_runs_first = 0
vm.swappiness = 10
/sys/kernel/debug/sched_features:GENTLE_FAIR_SLEEPERS NO_START_DEBIT NO_HRTICK
"""

RTAPP = """\
{
  "global": { "duration": 1, "calibration": "CPU0" },
  "tasks": {
    "ticker": { "policy": "SCHED_FIFO", "priority": 20, "cpus": [1],
                "phases": { "p": { "run": 200, "timer": { "ref": "unique", "period": 1000 } } } },
    "batch": { "instance": 2, "run": 5000, "sleep": 1000 }
  }
}
"""


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "vmsched.cli", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


@pytest.fixture
def files(tmp_path):
    out = {}
    for name, text in (("web.cfg", XL), ("sysctl.txt", SYSCTL), ("app.json", RTAPP)):
        (tmp_path / name).write_text(text)
        out[name] = tmp_path / name
    return out


def test_import_xl_gives_a_domain_and_notes(files):
    d = vmsched.import_xl(files["web.cfg"], pcpus=4)
    dom = d.table["domain"][0]
    assert (dom["name"], dom["vcpus"], dom["weight"], dom["cap"]) == ("web", 2, 512, 150)
    assert dom["vcpu_pcpus"] == [[0], [1, 3]]
    assert "soft_pcpus" not in dom  # "all" is the default
    keys = [n.key for n in d.notes]
    assert keys == ["type", "memory", "maxvcpus", "disk"]
    assert d.notes[2].line == 6 and "offline" in d.notes[2].message
    assert tomllib.loads(d.toml)["domain"][0] == dom


def test_import_sysctl_gives_cfs_parameters(files):
    d = vmsched.import_sysctl(files["sysctl.txt"])
    s = d.table["domain"][0]["sched"]
    assert s == {"scheduler": "cfs", "sched_latency_ns": 12000000,
                 "sched_min_granularity_ns": 1500000, "sched_wakeup_granularity_ns": 2000000,
                 "gentle_fair_sleepers": True, "start_debit": False}
    text = "\n".join(map(str, d.notes))
    assert "NO_HRTICK: a Linux 5.10 feature the model does not model" in text
    assert "sched_child_runs_first" in text and "1 keys outside" in text


def test_import_rtapp_gives_program_workloads(files):
    d = vmsched.import_rtapp(files["app.json"])
    assert d.table["run"] == {"duration_ms": 1000}
    ticker, batch = d.table["domain"][0]["workload"]
    assert (ticker["kind"], ticker["policy"], ticker["rt_priority"]) == ("program", "fifo", 20)
    assert ticker["steps"][:2] == [{"op": "compute", "us": 200},
                                   {"op": "sleep", "us": 800, "slack_ns": 0}]
    assert batch["copies"] == 2 and "policy" not in batch  # normal, the default
    assert any(n.key == "timer" and "approximated" in n.message for n in d.notes)


def test_a_skeleton_of_the_three_runs(files):
    parts = [vmsched.import_xl(files["web.cfg"], pcpus=4), vmsched.import_sysctl(files["sysctl.txt"]),
             vmsched.import_rtapp(files["app.json"])]
    text = vmsched.import_skeleton(parts, host="credit2", pcpus=4)
    s = tomllib.loads(text)
    assert s["machine"] == {"pcpus": 4} and s["host"] == {"scheduler": "credit2"}
    assert [w["name"] for w in s["domain"][0]["workload"]] == ["ticker", "batch"]
    f = files["web.cfg"].parent / "s.toml"
    f.write_text(text)
    r = vmsched.run(f, set={"run.duration_ms": 50})
    counts = {w["name"]: dict(w["counters"])["loops"] for w in r.workload_records()}
    assert counts["ticker"] > 0 and counts["batch"] > 0, counts


def test_an_rtapp_deadline_task_runs_as_one(tmp_path):
    # rt-app's doc/examples/deadline.json shape: 10 ms of work every 100 ms under a 12 ms budget.
    (tmp_path / "dl.json").write_text(
        '{"global": {"default_policy": "SCHED_DEADLINE", "duration": 1},\n'
        ' "tasks": {"thread0": {"run": 10000,\n'
        '   "timer": {"ref": "unique", "period": 100000},\n'
        '   "dl-runtime": 12000, "dl-period": 100000}}}')
    part = vmsched.import_rtapp(tmp_path / "dl.json")
    (w,) = part.table["domain"][0]["workload"]
    assert (w["policy"], w["sched_runtime_ns"], w["sched_period_ns"]) == (
        "deadline", 12_000_000, 100_000_000)
    f = tmp_path / "s.toml"
    f.write_text(vmsched.import_skeleton([part], pcpus=1))
    r = vmsched.run(f, set={"run.vary": False})  # loops counted exactly: fixed start
    (rec,) = r.workload_records()
    # The thread loops forever (rt-app's default without phases), one loop per 100 ms period
    # over the 1 s run.
    assert dict(rec["counters"])["loops"] in (10, 11), rec


def test_a_skeleton_that_does_not_validate_names_its_field(files, tmp_path):
    (tmp_path / "far.json").write_text('{"tasks": {"t": {"cpus": [5], "run": 10, "sleep": 10}}}')
    part = vmsched.import_rtapp(tmp_path / "far.json")
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.import_skeleton([part], pcpus=2)
    assert e.value.field == "domain.0.workload.0.affinity"


def test_cli_prints_toml_with_the_notes_as_comments(files):
    p = cli("import", "xl", str(files["web.cfg"]), "--pcpus", "4")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "#   note: line 6: maxvcpus: 4:" in p.stdout
    assert tomllib.loads(p.stdout)["domain"][0]["name"] == "web"


def test_cli_writes_a_whole_scenario_that_checks(files, tmp_path):
    out = tmp_path / "s.toml"
    args = ("import", "xl", str(files["web.cfg"]), "--host", "credit2", "--pcpus", "4",
            "--sysctl", str(files["sysctl.txt"]), "--rtapp", str(files["app.json"]), "-o", str(out))
    p = cli(*args)
    assert p.returncode == 0, p.stdout + p.stderr
    assert cli("check", str(out)).returncode == 0
    # An existing file is replaced only with --force.
    p = cli(*args)
    assert p.returncode == 2 and "exists" in p.stdout and len(p.stdout.splitlines()) == 1
    assert cli(*args, "--force").returncode == 0


BAD = {
    # format, text, expected one-line message part
    "xl-value": ("xl", 'name = "w"\nvcpus = 2\ncap = 900\n', ":3: cap: must be in 0..=200"),
    "xl-syntax": ("xl", 'name = "w"\nvcpus = two\n', ":2: vcpus: expected a value"),
    "xl-numa": ("xl", 'name = "w"\ncpus = "nodes:0"\n', ":2: cpus: 'nodes:0': NUMA"),
    "xl-name": ("xl", "vcpus = 1\n", ": name: missing"),
    "sysctl-line": ("sysctl", "kernel.sched_latency_ns = 1\ngarbage here\n", ":2: expected"),
    "sysctl-range": ("sysctl", "\nkernel.sched_tunable_scaling = 5\n",
                     ":2: kernel.sched_tunable_scaling: 5 is outside 0..=2"),
    "rtapp-lock": ("rtapp", '{"tasks": {"t": {"run": 1,\n"lock": "m"}}}',
                   ":2: tasks.t.lock: rt-app `lock` events synchronise"),
    "rtapp-json": ("rtapp", '{"tasks": {\n"t": {"run": 1 "sleep": 2}}}', ":2: expected ',' or '}'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_files_are_one_line_exit_2_naming_line_and_key(tmp_path, case):
    fmt, text, says = BAD[case]
    f = tmp_path / "in.txt"
    f.write_text(text)
    p = cli("import", fmt, str(f))
    assert p.returncode == 2 and p.stderr == "", p.stdout + p.stderr
    out = p.stdout.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"error: {f}") and says in out[0], out
    reader = {"xl": vmsched.import_xl, "sysctl": vmsched.import_sysctl,
              "rtapp": vmsched.import_rtapp}[fmt]
    with pytest.raises(vmsched.ScenarioError) as e:
        reader(f)
    assert e.value.file == str(f) and says in str(e.value)


UNREADABLE = {
    "utf16": (lambda f: f.write_bytes('name = "x"\n'.encode("utf-16")), "UTF-16"),
    "invalid-utf8": (lambda f: f.write_bytes(b'name = "\xc3\x28"\n'),
                     "invalid byte 0xc3 at byte offset 8"),
    "binary": (lambda f: f.write_bytes(b"\x7fELF\x02\x00"), "NUL byte at byte offset 5"),
    "directory": (lambda f: f.mkdir(), "is a directory"),
    "missing": (lambda f: None, "no such file"),
    "too-large": (lambda f: f.write_bytes(b"#" * (4 * 1024 * 1024 + 1)), "4 MiB limit"),
}


@pytest.mark.parametrize("kind", sorted(UNREADABLE))
@pytest.mark.parametrize("fmt", ["xl", "sysctl", "rtapp"])
def test_unreadable_files_are_scenario_errors(tmp_path, kind, fmt):
    make, says = UNREADABLE[kind]
    f = tmp_path / "in.cfg"
    make(f)
    reader = {"xl": vmsched.import_xl, "sysctl": vmsched.import_sysctl,
              "rtapp": vmsched.import_rtapp}[fmt]
    with pytest.raises(vmsched.ScenarioError, match=says) as e:
        reader(f)
    assert e.value.file == str(f)
    if fmt == "xl":
        p = cli("import", fmt, str(f))
        assert p.returncode == 2 and p.stderr == "" and len(p.stdout.splitlines()) == 1, p.stdout
        assert says in p.stdout


def test_a_bom_is_accepted(tmp_path):
    f = tmp_path / "bom.cfg"
    f.write_bytes(b"\xef\xbb\xbf" + XL.encode())
    assert vmsched.import_xl(f, pcpus=4).table["domain"][0]["name"] == "web"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_a_file_without_read_permission(tmp_path):
    f = tmp_path / "secret.cfg"
    f.write_text(XL)
    f.chmod(0)
    with pytest.raises(vmsched.ScenarioError, match="permission denied"):
        vmsched.import_xl(f)


def test_import_errors_pickle_and_print_as_text(tmp_path):
    f = tmp_path / "[red]x.cfg"
    f.write_text('name = "w"\nvcpus = 0\n')
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.import_xl(f)
    back = pickle.loads(pickle.dumps(e.value))
    assert (back.file, back.line, back.field) == (str(f), 2, "vcpus")
    assert str(back) == f"{f}:2: vcpus: must be in 1..=4096, got 0"
    p = cli("import", "xl", str(f))
    assert p.returncode == 2 and "[red]x.cfg:2: vcpus" in p.stdout


def test_sysctl_and_rtapp_options_need_host(files):
    p = cli("import", "xl", str(files["web.cfg"]), "--rtapp", str(files["app.json"]))
    assert p.returncode == 2 and "give --host" in p.stdout


# Random files through the whole Python front (binding and importers.py): only ScenarioError.
# The readers themselves are fuzzed by fuzz/fuzz_targets/{xlcfg,sysctl,rtapp}.rs.
_pieces = st.sampled_from([
    XL, SYSCTL, RTAPP, "name = ", "cpus = ", '"0-3,^1"', "[", "]", "{", "}", '"tasks"', ":", ",",
    '"run"', "kernel.sched_latency_ns = ", "NO_START_DEBIT", "\n", "#", "'", '"', "\\", "0x",
    "-1", "99999999999999999999", "\ufeff", "é",
])
_texts = st.one_of(st.lists(_pieces, max_size=12).map("".join), st.text(max_size=200))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(["xl", "sysctl", "rtapp"]),
       data=st.one_of(_texts.map(lambda t: t.encode("utf-8", "surrogatepass")),
                      st.binary(max_size=200)),
       pcpus=st.sampled_from([None, 1, 8]))
def test_any_file_gives_a_fragment_or_a_scenario_error(tmp_path, fmt, data, pcpus):
    f = tmp_path / "in.cfg"
    f.write_bytes(data)
    try:
        d = {"xl": lambda: vmsched.import_xl(f, pcpus=pcpus), "sysctl": lambda: vmsched.import_sysctl(f),
             "rtapp": lambda: vmsched.import_rtapp(f)}[fmt]()
    except vmsched.ScenarioError as e:
        assert e.file == str(f) and (e.line is not None or e.field), e
        return
    try:
        vmsched.import_skeleton([d], pcpus=pcpus)
    except vmsched.ScenarioError as e:
        assert e.field, e
