"""The command line: run, sweep, check, list; exit codes and messages."""

import subprocess
import sys


def vmsched(*args, **kw):
    return subprocess.run([sys.executable, "-m", "vmsched.cli", *args], capture_output=True,
                          text=True, **kw)


def test_run_prints_summary(tmp_path):
    p = vmsched("run", "seed000_context1_ratelimit", "--set", "run.duration_ms=200",
                "--set", "run.warmup_ms=0", "-o", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "domU1.v0" in p.stdout and "lps" in p.stdout
    assert (tmp_path / "summary.json").exists()


def test_run_prints_the_log(tmp_path):
    """A CPU going offline that breaks an affinity is logged, and `run` prints the log."""
    f = tmp_path / "pinned.toml"
    f.write_text("""
[run]
duration_ms = 200
[machine]
pcpus = 2
[host]
scheduler = "credit2"
[[domain]]
name = "g"
vcpus = 2
vcpu_pcpus = [[0], [1]]
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "loop"
[[event]]
at_ms = 100
action = "cpu_offline"
cpu = 1
""")
    p = vmsched("run", str(f))
    assert p.returncode == 0, p.stderr
    assert "breaking affinity of g.v1" in p.stdout, p.stdout


def test_check_bad_file_exit_2(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[machine]\npcpus = 2\nfrobnicate = true\n")
    p = vmsched("check", str(f))
    assert p.returncode == 2
    assert "bad.toml:3" in p.stdout and "frobnicate" in p.stdout


def test_check_says_what_a_run_costs():
    p = vmsched("check", "seed000_context1_ratelimit")
    assert p.returncode == 0, p.stderr
    assert "estimate: peak memory" in p.stdout and "results up to" in p.stdout, p.stdout
    # A file this machine's limit refuses to run is still a valid file: said, not failed.
    p = vmsched("check", "seed000_context1_ratelimit", "--set", "run.duration_ms=100000000",
                "--set", "run.memory_limit_mb=1")
    assert p.returncode == 0, p.stderr
    assert ": ok" in p.stdout and "more than the limit of 1 MB" in p.stdout, p.stdout


def test_sweep_writes_table_and_plot(tmp_path):
    p = vmsched("sweep", "seed000_context1_ratelimit", "--set", "host.ratelimit_us=1000,20000",
                "--set", "run.duration_ms=200", "--set", "run.warmup_ms=0", "--jobs", "2",
                "-o", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "sweep.csv").read_text().count("\n") >= 3
    assert (tmp_path / "sweep.png").exists()


def test_list_names_shipped_scenarios():
    p = vmsched("list")
    assert p.returncode == 0
    assert "seed000_context1_ratelimit" in p.stdout


def test_list_names_host_schedulers_and_each_loads(tmp_path):
    import vmsched as api
    from vmsched.cli import HOST_SCHEDULERS

    p = vmsched("list")
    assert p.returncode == 0
    for name in ("rtds", "null", "arinc653", "rtds_reservation", "null_static",
                 "arinc653_partitions", "linux", "kvm_host", "kvm_coordinated"):
        assert name in p.stdout
    for name, _ in HOST_SCHEDULERS:
        f = tmp_path / f"{name}.toml"
        # The Linux host is a KVM host: it needs the KVM hypervisor.
        hv = 'hypervisor = "kvm"\n' if name == "linux" else ""
        f.write_text(f'[machine]\npcpus = 1\n{hv}[host]\nscheduler = "{name}"\n'
                     '[[domain]]\nname = "a"\nvcpus = 1\n[domain.sched]\nscheduler = "cfs"\n')
        assert api.check(f)["host"]["scheduler"] == name


def test_version_strings_survive_set():
    p = vmsched("check", "seed000_context1_ratelimit", "--set", "domain.0.sched.version=5.10",
                "--set", "host.version=4.20.2")
    assert p.returncode == 0, p.stdout + p.stderr


def test_sweep_keeps_versions_as_text():
    from vmsched.cli import _split_grid

    grid, fixed = _split_grid(["host.version=4.20.0,4.20.2", "x=1,0.5", "run.seed=3"])
    assert grid == {"host.version": ["4.20.0", "4.20.2"], "x": [1, 0.5]} and fixed == ["run.seed=3"]


def test_set_takes_versions_unquoted_in_run_and_sweep(tmp_path):
    p = vmsched("run", "seed000_context1_ratelimit", "--set", "host.version=4.21",
                "--set", "run.duration_ms=100", "--set", "run.warmup_ms=0")
    assert p.returncode == 0, p.stdout + p.stderr
    p = vmsched("sweep", "seed000_context1_ratelimit", "--set", "host.version=4.20.2,4.21",
                "--set", "run.duration_ms=100", "--set", "run.warmup_ms=0", "--jobs", "1",
                "-o", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    import polars as pl

    df = pl.read_csv(tmp_path / "sweep.csv", infer_schema=False)
    assert sorted(set(df["host.version"])) == ["4.20.2", "4.21"]


def test_bad_set_value_names_key_and_type():
    p = vmsched("run", "seed000_context1_ratelimit", "--set", "host.ratelimit_us=lots")
    assert p.returncode == 2
    assert "host.ratelimit_us" in p.stdout and "expected an integer" in p.stdout


def test_reproduce_list():
    p = vmsched("reproduce", "--list")
    assert p.returncode == 0, p.stderr
    assert "seed000" in p.stdout and "000_b3ad2313bd30aebd" in p.stdout
    p = vmsched("reproduce", "no_such_document")
    assert p.returncode == 2 and "seed000" in p.stdout
