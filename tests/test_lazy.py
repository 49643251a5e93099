"""vmsched._lazy: polars is imported on first use, not by `import vmsched` (issue 15 item 4)."""

import subprocess
import sys

from vmsched._lazy import lazy


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sys.modules))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_import_vmsched_and_the_cli_do_not_import_polars_or_matplotlib():
    mods = _modules_after("import vmsched, vmsched.cli, vmsched.sweep_runner, vmsched.executor")
    assert "vmsched.cli" in mods
    assert "polars" not in mods
    assert "matplotlib" not in mods


def test_a_run_imports_polars_when_it_builds_its_tables():
    mods = _modules_after("import vmsched\n"
                          "vmsched.run('seed000_context1_ratelimit', "
                          "set={'run.duration_ms': 20, 'run.warmup_ms': 0})")
    assert "polars" in mods


def test_a_lazy_module_imports_on_first_attribute_and_forwards():
    m = lazy("json")
    assert "not yet imported" in repr(m)
    assert m.dumps([1, 2]) == "[1, 2]"
    assert "not yet imported" not in repr(m)
    import json

    assert m.loads is json.loads
