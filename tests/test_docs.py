"""The documentation's snippets run: the scenario reference is a valid scenario."""

import re
from pathlib import Path

import vmsched

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_scenario_reference_example_is_valid(tmp_path):
    text = (DOCS / "scenarios.md").read_text()
    block = re.search(r"```toml\n(.*?)```", text, re.S).group(1)
    f = tmp_path / "reference.toml"
    f.write_text(block)
    s = vmsched.check(f)
    assert s["host"]["scheduler"] == "credit2" and s["domain"][0]["vcpus"] == 4
    r = vmsched.run(f, set={"run.duration_ms": 200, "run.warmup_ms": 0})
    assert {w["name"] for w in r.raw["workloads"]} == {"context1", "ct", "hog", "app"}
