"""Regenerates the example outputs in docs/explain.md (`python3 scripts/explain_examples.py`).

Each example is a run and an explain, printed as `vmsched explain` prints it (100 columns); the
block between `<!-- explain:NAME -->` and `<!-- /explain:NAME -->` is replaced by the output.
tests/test_explain.py checks that the page holds what this script writes.
"""

import re
import sys
import tempfile
from pathlib import Path

import vmsched

DOC = Path(__file__).resolve().parent.parent / "docs" / "explain.md"

#: name: (scenario, overrides, task, worst)
EXAMPLES = {
    # Fixed phases (run.vary = false): the situations docs/explain.md describes.
    "seed000": ("seed000_context1_ratelimit", {"run.duration_ms": 1000, "run.vary": False},
                "context1.child", 1),
    "cyclictest": ("rt_cyclictest", {"run.vary": False}, "ct.t0", 1),
}


def render(name: str) -> str:
    scenario, overrides, task, worst = EXAMPLES[name]
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "run"
        vmsched.run(scenario, set=overrides, out=out)
        ex = vmsched.explain(out, task, worst=worst)
    text = "\n".join(line.rstrip() for line in ex.text(width=100).splitlines())
    return text.strip("\n") + "\n"


def block(name: str, text: str) -> str:
    return f"<!-- explain:{name} -->\n```text\n{text}```\n<!-- /explain:{name} -->"


def pattern(name: str) -> re.Pattern:
    return re.compile(rf"<!-- explain:{name} -->\n.*?<!-- /explain:{name} -->", re.S)


def main() -> int:
    doc = DOC.read_text()
    for name in EXAMPLES:
        new = block(name, render(name))
        doc, n = pattern(name).subn(lambda _m, new=new: new, doc)
        if n != 1:
            print(f"docs/explain.md: no block for '{name}'", file=sys.stderr)
            return 1
    DOC.write_text(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
