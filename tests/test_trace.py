"""The Perfetto trace (`vmsched run --trace`, `vmsched.run(trace=...)`): decoded with Perfetto's
published trace proto (the `perfetto` package) and checked against the run's own figures."""

import json
import subprocess
import sys
from collections import defaultdict

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

import vmsched

TrackEvent = pb.TrackEvent

SMALL = {"run.duration_ms": 300, "run.warmup_ms": 50}


class Decoded:
    """A decoded trace: its tracks, and the closed slices and instants on each."""

    def __init__(self, path):
        trace = pb.Trace.FromString(path.read_bytes())
        self.tracks = {}
        self.slices = defaultdict(list)  # uuid -> [(begin, end, name, category)]
        self.instants = defaultdict(list)  # uuid -> [(t, name)]
        self.unclosed = 0
        self.last_ts = 0
        open_ = defaultdict(list)
        for p in trace.packet:
            if p.HasField("track_descriptor"):
                d = p.track_descriptor
                assert d.uuid not in self.tracks, f"track {d.uuid} described twice"
                self.tracks[d.uuid] = d
            elif p.HasField("track_event"):
                e = p.track_event
                assert e.track_uuid in self.tracks, "an event on an undescribed track"
                assert p.timestamp >= self.last_ts, "events out of time order"
                self.last_ts = p.timestamp
                if e.type == TrackEvent.TYPE_SLICE_BEGIN:
                    open_[e.track_uuid].append((p.timestamp, e.name, list(e.categories)))
                elif e.type == TrackEvent.TYPE_SLICE_END:
                    t0, name, cats = open_[e.track_uuid].pop()
                    self.slices[e.track_uuid].append((t0, p.timestamp, name,
                                                      cats[0] if cats else None))
                elif e.type == TrackEvent.TYPE_INSTANT:
                    self.instants[e.track_uuid].append((p.timestamp, e.name))
        self.unclosed = sum(len(v) for v in open_.values())

    def processes(self):
        return {d.process.pid: d.process.process_name
                for d in self.tracks.values() if d.HasField("process")}

    def threads(self, pid=None):
        return {d.uuid: d.thread.thread_name for d in self.tracks.values()
                if d.HasField("thread") and (pid is None or d.thread.pid == pid)}

    def pid_of(self, uuid):
        return self.tracks[uuid].thread.pid

    def children(self, uuid):
        return [d for d in self.tracks.values() if d.parent_uuid == uuid]


def clipped(slices, lo, hi, keep=lambda s: True):
    """Total time of `slices` inside [lo, hi]."""
    return sum(max(0, min(b, hi) - max(a, lo)) for a, b, *_ in slices if keep((a, b, *_)))


@pytest.fixture(scope="module", params=["seed000_context1_ratelimit", "seed000_ncopy"])
def traced(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "out.pftrace"
    r = vmsched.run(request.param, set=SMALL, trace=path)
    return request.param, r, Decoded(path)


def test_tracing_does_not_change_the_results(traced):
    name, r, _ = traced
    plain = vmsched.run(name, set=SMALL)
    traced_raw = dict(r.raw)
    assert traced_raw.pop("trace")["records"] > 0
    assert json.dumps(traced_raw, sort_keys=True) == json.dumps(plain.raw, sort_keys=True)
    assert plain.trace is None


def test_every_slice_closes_and_the_trace_is_complete(traced):
    _, r, d = traced
    assert d.unclosed == 0
    assert r.trace["dropped"] == 0 and r.trace["truncated_at_ns"] is None
    assert d.last_ts <= r.raw["duration_ns"]


def test_one_track_per_pcpu_in_the_host_process(traced):
    name, _, d = traced
    pcpus = vmsched.check(name)["machine"]["pcpus"]
    host = [pid for pid, n in d.processes().items() if n.startswith("host ")]
    assert len(host) == 1
    assert sorted(d.threads(host[0]).values()) == sorted(f"pCPU {i}" for i in range(pcpus))


def test_vcpu_and_task_tracks_are_grouped_by_domain_and_vcpus_link_their_host_entity(traced):
    _, r, d = traced
    ents = r.entities
    procs = d.processes()
    by_name = {}
    for uuid, tname in d.threads().items():
        by_name.setdefault(tname, []).append(uuid)
    for e in ents.iter_rows(named=True):
        domain = e["level"] if e["kind"] == "task" else e["name"].rsplit(".v", 1)[0]
        uuids = [u for u in by_name.get(e["name"], []) if procs[d.pid_of(u)].startswith(domain + " ")]
        assert len(uuids) == 1, f"{e['name']}: one track in {domain}'s process"
        if e["kind"] == "vcpu":
            # The vCPU as a CPU of its guest: a child of the host entity's track, named after it.
            kids = d.children(uuids[0])
            cpu_tracks = [k for k in kids if " as cpu" in k.name]
            assert len(cpu_tracks) == 1, e["name"]
            assert cpu_tracks[0].name.startswith(e["name"] + " as cpu")


def test_running_time_from_slices_equals_the_reported_running_time(traced):
    """Per entity, at every level: its own track's `running` slices, the slices named after it
    on the CPUs of its level, and the run's running_ns agree (ns, clipped to the measured
    window); its `runnable` slices give runnable_ns."""
    _, r, d = traced
    lo, hi = r.raw["warmup_ns"], r.raw["duration_ns"]
    procs = d.processes()
    threads = d.threads()
    host_pid = next(pid for pid, n in procs.items() if n.startswith("host "))
    pcpu_tracks = list(d.threads(host_pid))
    guest_cpu_tracks = defaultdict(list)  # domain -> its vCPUs' CPU tracks
    for u, desc in d.tracks.items():
        if " as cpu" in desc.name:
            guest_cpu_tracks[desc.name.rsplit(" of ", 1)[1]].append(u)
    checked = 0
    for e in r.entities.iter_rows(named=True):
        domain = e["level"] if e["kind"] == "task" else e["name"].rsplit(".v", 1)[0]
        (own,) = [u for u, n in threads.items()
                  if n == e["name"] and procs[d.pid_of(u)].startswith(domain + " ")]
        running = clipped(d.slices[own], lo, hi, lambda s: s[3] == "running")
        runnable = clipped(d.slices[own], lo, hi, lambda s: s[3] == "runnable")
        assert running == e["running_ns"], e["name"]
        assert runnable == e["runnable_ns"], e["name"]
        cpus = pcpu_tracks if e["kind"] == "vcpu" else guest_cpu_tracks[domain]
        on_cpus = sum(clipped(d.slices[c], lo, hi, lambda s, n=e["name"]: s[2] == n)
                      for c in cpus)
        assert on_cpus == e["running_ns"], e["name"]
        checked += 1
    assert checked == r.entities.height
    assert sum(e["running_ns"] for e in r.entities.iter_rows(named=True)) > 0


def test_policy_figures_are_counter_tracks_under_their_entity(traced):
    _, _, d = traced
    counters = [t for t in d.tracks.values() if t.HasField("counter")]
    assert any(t.name.endswith("credit2 probe") for t in counters)
    assert any(t.name.endswith("cfs probe") for t in counters)
    for t in counters:
        assert d.tracks[t.parent_uuid].thread.thread_name == t.name.rsplit(" ", 2)[0]


def test_wakeups_reschedules_and_timers_are_instants(traced):
    _, _, d = traced
    names = {n for v in d.instants.values() for _, n in v}
    assert {"wake", "block", "resched", "tick"} <= names


def test_a_full_buffer_truncates_the_trace_and_says_so(tmp_path):
    path = tmp_path / "t.pftrace"
    r = vmsched.run("seed000_context1_ratelimit", set=SMALL, trace=path, trace_max_records=500)
    info = r.trace
    assert info["records"] == 500 and info["max_records"] == 500 and info["dropped"] > 0
    at = info["truncated_at_ns"]
    assert 0 < at < r.raw["duration_ns"]
    d = Decoded(path)
    assert d.unclosed == 0
    assert d.last_ts == at
    notes = [t for t in d.tracks.values() if t.name == "vmsched"]
    assert [n for _, n in d.instants[notes[0].uuid]] == ["trace truncated"]
    with pytest.raises(ValueError, match="trace_max_records"):
        vmsched.run("seed000_context1_ratelimit", set=SMALL, trace=path, trace_max_records=0)


def test_cli_writes_the_trace_and_warns_when_truncated(tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "vmsched.cli", "run",
                               "seed000_context1_ratelimit", "--set", "run.duration_ms=100",
                               "--set", "run.warmup_ms=0", *args],
                              check=False, capture_output=True, text=True)

    out = tmp_path / "run.pftrace"
    p = cli("--trace", str(out))
    assert p.returncode == 0, p.stderr
    assert "trace written to" in p.stdout and out.stat().st_size > 0
    assert "truncated" not in p.stdout
    p = cli("--trace", str(out), "--trace-limit", "100")
    assert p.returncode == 0, p.stderr
    assert "trace truncated" in p.stdout
    p = cli("--trace", str(tmp_path / "no" / "such" / "dir.pftrace"))
    assert p.returncode == 2 and "error" in p.stdout
    p = cli("--trace", str(out), "--trace-limit", "0")
    assert p.returncode == 2 and "--trace-limit" in p.stderr
