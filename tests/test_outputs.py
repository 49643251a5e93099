"""Output directories (issue 18 item 7): written whole into a temporary directory and renamed
into place, never through a symbolic link; an existing directory is refused unless replaced
whole; a path that names a file is a one-line error, not a traceback."""

import json
import os
import subprocess
import sys

import pytest

import vmsched

SMALL = {"run.duration_ms": 50, "run.warmup_ms": 0}


def cli(*args):
    return subprocess.run([sys.executable, "-m", "vmsched.cli", *args], capture_output=True,
                          text=True)


def test_new_directory_is_complete_and_no_temporary_is_left(tmp_path):
    out = tmp_path / "a" / "b"
    vmsched.run("seed000_ncopy", set=SMALL, out=out)
    # Every non-empty result table as Parquet; no per-sample JSON (issue 18 item 4).
    assert {p.name for p in out.iterdir()} == {
        "summary.json", "entities.parquet", "workloads.parquet", "counters.parquet",
        "xenmon.parquet", "scenario.toml"}
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["b"]


def test_existing_directory_is_refused_then_replaced_whole(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.txt").write_text("from an earlier run")
    with pytest.raises(FileExistsError, match="already exists"):
        vmsched.run("seed000_ncopy", set=SMALL, out=out)
    assert sorted(p.name for p in out.iterdir()) == ["stale.txt"]
    vmsched.run("seed000_ncopy", set=SMALL, out=out, overwrite=True)
    names = {p.name for p in out.iterdir()}
    assert "stale.txt" not in names and "summary.json" in names
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], "temporaries left behind"


def test_results_are_never_written_through_a_symbolic_link(tmp_path):
    victim = tmp_path / "victim.json"
    victim.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").symlink_to(victim)
    with pytest.raises(FileExistsError):
        vmsched.run("seed000_ncopy", set=SMALL, out=out)
    vmsched.run("seed000_ncopy", set=SMALL, out=out, overwrite=True)
    assert victim.read_text() == "keep me"
    assert not (out / "summary.json").is_symlink()
    assert json.loads((out / "summary.json").read_text())["workloads"]
    # The output directory itself a link: refused, and replaced (the link, not its target).
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(FileExistsError, match="symbolic link"):
        vmsched.run("seed000_ncopy", set=SMALL, out=link)
    vmsched.run("seed000_ncopy", set=SMALL, out=link, overwrite=True)
    assert not link.is_symlink() and (link / "summary.json").exists()
    assert list(target.iterdir()) == []


def test_a_failed_write_leaves_the_old_directory(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    r = vmsched.run("seed000_ncopy", set=SMALL)

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(type(r), "summary", boom)
    with pytest.raises(KeyboardInterrupt):
        r.write(out, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == ["old.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_output_naming_a_file_is_refused_before_the_run(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    for out in (f, f / "below"):
        with pytest.raises(NotADirectoryError, match="is a file"):
            vmsched.run("seed000_ncopy", set=SMALL, out=out)
    assert f.read_text() == "x"


@pytest.mark.parametrize("where", ["file", "below", "nonempty"])
def test_cli_output_errors_are_one_line_exit_2(tmp_path, where):
    f = tmp_path / "file"
    f.write_text("x")
    d = tmp_path / "d"
    d.mkdir()
    (d / "x").write_text("x")
    out = {"file": f, "below": f / "sub", "nonempty": d}[where]
    p = cli("run", "seed000_ncopy", "--set", "run.duration_ms=50", "-o", str(out))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr and p.stdout.strip().startswith("error:")
    assert len(p.stdout.strip().splitlines()) == 1, p.stdout
    assert str(out) in p.stdout.replace("\n", "")
    if where == "nonempty":
        p = cli("run", "seed000_ncopy", "--set", "run.duration_ms=50", "--set", "run.warmup_ms=0",
                "-o", str(out), "--force")
        assert p.returncode == 0, p.stdout + p.stderr
        assert (out / "summary.json").exists() and not (out / "x").exists()


def test_cli_prints_a_path_with_brackets_as_text(tmp_path):
    (tmp_path / "a[").mkdir()
    d = tmp_path / "a[" / "x]"  # the path holds rich markup: "[/x]"
    d.mkdir()
    (d / "x").write_text("x")
    p = cli("run", "seed000_ncopy", "--set", "run.duration_ms=50", "-o", str(d))
    assert p.returncode == 2 and "[/x]" in p.stdout and "Traceback" not in p.stderr


def test_output_permissions_follow_the_umask(tmp_path):
    out = tmp_path / "out"
    vmsched.run("seed000_ncopy", set=SMALL, out=out)
    mask = os.umask(0)
    os.umask(mask)
    assert (out.stat().st_mode & 0o777) == 0o777 & ~mask
    assert ((out / "summary.json").stat().st_mode & 0o777) == 0o666 & ~mask
