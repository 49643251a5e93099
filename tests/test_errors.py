"""Every input error is a project error: `vmsched.ScenarioError` with file, line and field, one
line in the CLI (exit status 2, plain text), picklable across process pools; a core panic is a
`CoreError` that prints nothing. The behaviour is specified in issue 18 item 1 and
docs/scenarios.md ("Errors and limits")."""

import os
import pickle
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import pytest

import vmsched
from vmsched.errors import MAX_SCENARIO_BYTES

BASE = '''name = "t"
[run]
duration_ms = 100
warmup_ms = 0
seed = 1
[machine]
pcpus = 4
[host]
scheduler = "credit2"
ratelimit_us = 1000
[[domain]]
name = "d"
vcpus = 2
[domain.kernel]
preempt = "none"
[domain.sched]
scheduler = "cfs"
hz = 250
[[domain.workload]]
kind = "cpu_loop"
name = "hog"
[[domain.workload]]
kind = "program"
name = "app"
channels = ["lock"]
tokens = [1]
steps = [
  { op = "compute", us = 100 },
  { op = "wait", chan = "lock" },
  { op = "signal", chan = "lock" },
  { op = "loop", to = 0 },
]
[[domain.workload]]
kind = "cyclictest"
name = "ct"
threads = 1
interval_us = 1000
'''


def cli(*args):
    return subprocess.run([sys.executable, "-m", "vmsched.cli", *args], capture_output=True,
                          text=True, timeout=300)


def sub(old, new):
    assert old in BASE, old
    return BASE.replace(old, new, 1)


def after(anchor, line):
    return sub(anchor, anchor + line)


# name: (scenario text, the field path its error must name)
MALFORMED = {
    # unknown fields, at every table (tagged tables lose serde's positions: see errpath.rs)
    "unknown-top": (after('name = "t"\n', "frobnicate = 1\n"), "frobnicate"),
    "unknown-run": (after("seed = 1\n", "frobnicate = 1\n"), "run.frobnicate"),
    "unknown-machine": (after("pcpus = 4\n", "frobnicate = 1\n"), "machine.frobnicate"),
    "unknown-host": (after("ratelimit_us = 1000\n", "frobnicate = 1\n"), "host.frobnicate"),
    "unknown-domain": (after("vcpus = 2\n", "frobnicate = 1\n"), "domain.0.frobnicate"),
    "unknown-kernel": (after('preempt = "none"\n', "frobnicate = 1\n"),
                       "domain.0.kernel.frobnicate"),
    "unknown-sched": (after("hz = 250\n", "frobnicate = 1\n"), "domain.0.sched.frobnicate"),
    "unknown-cpu_loop": (after('name = "hog"\n', "frobnicate = 1\n"),
                         "domain.0.workload.0.frobnicate"),
    "unknown-cyclictest": (after("interval_us = 1000\n", "frobnicate = 1\n"),
                           "domain.0.workload.2.frobnicate"),
    "unknown-step": (sub('{ op = "compute", us = 100 }', '{ op = "compute", us = 100, frob = 1 }'),
                     "domain.0.workload.1.steps.0.frob"),
    # wrong types and values serde refuses
    "type-seed": (sub("seed = 1", 'seed = "x"'), "run.seed"),
    "negative-duration": (sub("duration_ms = 100", "duration_ms = -5"), "run.duration_ms"),
    "type-pcpus": (sub("pcpus = 4", 'pcpus = "four"'), "machine.pcpus"),
    "float-pcpus": (sub("pcpus = 4", "pcpus = 4.5"), "machine.pcpus"),
    "huge-pcpus": (sub("pcpus = 4", "pcpus = 99999999999"), "machine.pcpus"),
    "type-ratelimit": (sub("ratelimit_us = 1000", "ratelimit_us = true"), "host.ratelimit_us"),
    "bad-host-scheduler": (sub('scheduler = "credit2"', 'scheduler = "credit9"'),
                           "host.scheduler"),
    "bad-version": (after("ratelimit_us = 1000\n", 'version = "9.9"\n'), "host.version"),
    "type-vcpus": (sub("vcpus = 2", "vcpus = [2]"), "domain.0.vcpus"),
    "bad-preempt": (sub('preempt = "none"', 'preempt = "sometimes"'), "domain.0.kernel.preempt"),
    "type-hz": (sub("hz = 250", 'hz = "fast"'), "domain.0.sched.hz"),
    "bad-guest-scheduler": (sub('scheduler = "cfs"', 'scheduler = "muqss"'),
                            "domain.0.sched.scheduler"),
    "bad-kind": (sub('kind = "cpu_loop"', 'kind = "dance"'), "domain.0.workload.0.kind"),
    "missing-kind": (sub('kind = "cpu_loop"\n', ""), "domain.0.workload.0.kind"),
    "missing-name": (sub('name = "hog"\n', ""), "domain.0.workload.0.name"),
    "missing-domain": (BASE[:BASE.index("[[domain]]")], "domain"),
    "type-copies": (after('name = "hog"\n', 'copies = "two"\n'), "domain.0.workload.0.copies"),
    "bad-op": (sub('op = "compute"', 'op = "dance"'), "domain.0.workload.1.steps.0.op"),
    "type-step-us": (sub('{ op = "compute", us = 100 }', '{ op = "compute", us = "x" }'),
                     "domain.0.workload.1.steps.0.us"),
    "type-steps": (sub("steps = [", "steps = 3\nx = ["), "domain.0.workload.1.steps"),
    "type-interval": (sub("interval_us = 1000", 'interval_us = "x"'),
                      "domain.0.workload.2.interval_us"),
    "negative-threads": (sub("threads = 1", "threads = -1"), "domain.0.workload.2.threads"),
    "type-affinity": (after('name = "hog"\n', 'affinity = "all"\n'),
                      "domain.0.workload.0.affinity"),
    "type-tokens": (sub("tokens = [1]", 'tokens = ["a"]'), "domain.0.workload.1.tokens.0"),
    # files that are not TOML
    "duplicate-key": (sub("pcpus = 4", "pcpus = 4\npcpus = 5"), "machine.pcpus"),
    "syntax": (sub("pcpus = 4", "pcpus = = 4"), "machine.pcpus"),
    "syntax-in-array-of-tables": (sub("threads = 1", "threads = = 1"),
                                  "domain.0.workload.2.threads"),
    # out of range (validation)
    "range-ratelimit": (sub("ratelimit_us = 1000", "ratelimit_us = 50"), "host.ratelimit_us"),
    "range-vcpus": (sub("vcpus = 2", "vcpus = 0"), "domain.0.vcpus"),
    "range-weight": (after("vcpus = 2\n", "weight = 0\n"), "domain.0.weight"),
    "range-copies": (after('name = "hog"\n', "copies = 0\n"), "domain.0.workload.0.copies"),
    "range-affinity": (after('name = "hog"\n', "affinity = [9]\n"),
                       "domain.0.workload.0.affinity"),
    "range-interval": (sub("interval_us = 1000", "interval_us = 0"),
                       "domain.0.workload.2.interval_us"),
    "unknown-channel": (sub('{ op = "wait", chan = "lock" }', '{ op = "wait", chan = "nope" }'),
                        "domain.0.workload.1.steps.1"),
}


def test_the_base_scenario_is_valid(tmp_path):
    f = tmp_path / "base.toml"
    f.write_text(BASE)
    vmsched.check(f)


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_every_file_error_names_its_field(tmp_path, name):
    text, field = MALFORMED[name]
    f = tmp_path / f"{name}.toml"
    f.write_text(text)
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.check(f)
    err = e.value
    assert err.field == field, str(err)
    assert err.file == str(f) and isinstance(err.line, int) and err.line >= 1
    assert str(err).startswith(f"{f}:{err.line}: {field}: "), str(err)
    assert "\n" not in str(err)


def test_an_override_python_cannot_pass_names_the_key():
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.check("seed000_ncopy", set={"run.seed": 2**70})
    assert e.value.field == "run.seed" and "out of range" in str(e.value)


def test_a_set_item_without_a_value_is_one_line_exit_2():
    p = cli("run", "seed000_ncopy", "--set", "run.seed")
    assert p.returncode == 2 and p.stderr == "", p.stdout + p.stderr
    assert p.stdout.startswith("error: --set expects key=value")


def test_an_override_type_error_names_the_key():
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.check("seed000_ncopy", set={"domain.0.workload.0.jitter_pct": [1, 2]})
    assert e.value.field == "domain.0.workload.0.jitter_pct"


def bad_file(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text(sub("vcpus = 2", "vcpus = 0"))
    return f


def test_scenario_error_has_a_readable_str_and_attributes(tmp_path):
    f = bad_file(tmp_path)
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.check(f)
    err = e.value
    line = BASE.splitlines().index("vcpus = 2") + 1
    assert str(err) == f"{f}:{line}: domain.0.vcpus: {err.message}"
    assert (err.file, err.line, err.field) == (str(f), line, "domain.0.vcpus")


def test_scenario_error_pickles(tmp_path):
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.check(bad_file(tmp_path))
    back = pickle.loads(pickle.dumps(e.value))
    assert type(back) is vmsched.ScenarioError
    assert (str(back), back.file, back.line, back.field, back.message) == (
        str(e.value), e.value.file, e.value.line, e.value.field, e.value.message)
    core = pickle.loads(pickle.dumps(vmsched.CoreError("invariant: x")))
    assert type(core) is vmsched.CoreError and str(core) == "invariant: x"


def test_scenario_error_crosses_a_process_pool(tmp_path):
    f = bad_file(tmp_path)
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        fut = pool.submit(vmsched.check, str(f))
        with pytest.raises(vmsched.ScenarioError) as e:
            fut.result(timeout=120)
    assert e.value.field == "domain.0.vcpus" and e.value.file == str(f)


def test_a_sweep_with_one_invalid_point_reports_that_point(tmp_path):
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.sweep("seed000_ncopy", {"domain.0.vcpus": [4, 0]}, jobs=2, out=tmp_path / "s",
                      progress=False, set={"run.duration_ms": 50, "run.warmup_ms": 0})
    assert e.value.field == "domain.0.vcpus"


# The files a scenario path may name, and the message each must give.
def write_input(tmp_path, kind):
    f = tmp_path / f"{kind}.toml"
    if kind == "binary":
        f.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    elif kind == "utf16":
        f.write_bytes(BASE.encode("utf-16"))
    elif kind == "invalid-utf8":
        f.write_bytes(BASE.encode()[:40] + b"\xc3\x28" + BASE.encode()[40:])
    elif kind == "directory":
        f.mkdir()
    elif kind == "missing":
        pass
    elif kind == "too-large":
        with open(f, "wb") as h:
            h.truncate(MAX_SCENARIO_BYTES + 1)
    return f


INPUTS = {
    "binary": "NUL byte at byte offset 7",
    "utf16": "UTF-16",
    "invalid-utf8": "invalid byte 0xc3 at byte offset 40",
    "directory": "is a directory",
    "missing": "no such file",
    "too-large": "16 MiB limit",
}


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_unreadable_inputs_are_scenario_errors(tmp_path, kind):
    f = write_input(tmp_path, kind)
    for call in (vmsched.check, vmsched.run):
        with pytest.raises(vmsched.ScenarioError, match=INPUTS[kind]) as e:
            call(f)
        assert e.value.file == str(f)


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_unreadable_inputs_are_one_line_exit_2_in_the_cli(tmp_path, kind):
    f = write_input(tmp_path, kind)
    for cmd in ("check", "run"):
        p = cli(cmd, str(f))
        assert p.returncode == 2, p.stdout + p.stderr
        assert p.stderr == "", p.stderr
        out = p.stdout.strip().splitlines()
        assert len(out) == 1 and out[0].startswith("error: ") and INPUTS[kind] in out[0], out


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_a_file_without_read_permission(tmp_path):
    f = tmp_path / "secret.toml"
    f.write_text(BASE)
    f.chmod(0)
    with pytest.raises(vmsched.ScenarioError, match="permission denied"):
        vmsched.check(f)


def test_utf8_with_a_byte_order_mark_is_accepted(tmp_path):
    f = tmp_path / "bom.toml"
    f.write_bytes(b"\xef\xbb\xbf" + BASE.encode())
    assert vmsched.check(f)["domain"][0]["name"] == "d"


def test_markup_in_an_error_is_printed_as_text(tmp_path):
    f = tmp_path / "m.toml"
    f.write_text(sub('name = "d"', 'name = "[/x] [red]d"') + '[[domain]]\nname = "[/x] [red]d"\n'
                 'vcpus = 1\n[domain.sched]\nscheduler = "cfs"\n')
    p = cli("check", str(f))
    assert p.returncode == 2 and p.stderr == "", p.stdout + p.stderr
    assert "'[/x] [red]d' is used twice" in p.stdout and len(p.stdout.strip().splitlines()) == 1


def test_markup_in_a_domain_name_is_printed_as_text(tmp_path):
    f = tmp_path / "m.toml"
    f.write_text(sub('name = "d"', 'name = "[/x]d[bold]"'))
    p = cli("run", str(f))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[/x]d[bold]" in p.stdout


def test_a_core_panic_prints_nothing_and_keeps_its_message():
    code = ("import vmsched, vmsched._core as c\n"
            "try:\n    c._panic_for_tests('on purpose')\n"
            "except vmsched.CoreError as e:\n    print(e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout.startswith("invariant: on purpose (at ") and "lib.rs" in p.stdout
