"""vmsched: a fast, faithful, deterministic simulator of CPU scheduling in virtualized systems.

The Python front of the Rust core: load and check scenarios, run them, sweep parameters, tune
them (Optuna), and reproduce the source documents' experiments.

    >>> import vmsched
    >>> r = vmsched.run("seed000_context1_ratelimit", set={"host.ratelimit_us": 20000,
    ...                                                    "run.duration_ms": 200})
    >>> r.figure("context1")["unit"]
    'lps'
"""

from pathlib import Path

from vmsched.api import Estimate, Result, SeedRuns, check, estimate, run, scenario_path, sweep
from vmsched.errors import BudgetWarning, CoreError, ScenarioError
from vmsched.explain import Explanation, explain
from vmsched.importers import (
                               import_ftrace,
                               import_perf,
                               import_rtapp,
                               import_skeleton,
                               import_sysctl,
                               import_xl,
)
from vmsched.replay import replay_compare
from vmsched.report import report

# `vmsched.tune` is the function (the module stays importable as `vmsched.tune` in sys.modules
# for `from vmsched.tune import ...`); Optuna is imported only when it is called.
from vmsched.tune import tune  # noqa: E402  isort: skip

#: xentrace_format's definitions file for the xentrace files vmsched writes (docs/trace.md).
XENTRACE_FORMATS = Path(__file__).with_name("xentrace.formats")
#: The same for a trace of Credit2 as in Xen 4.2.1, whose records reuse other ids (docs/trace.md).
XENTRACE_FORMATS_4_2_1 = Path(__file__).with_name("xentrace-4.2.1.formats")

__all__ = ["BudgetWarning", "CoreError", "Estimate", "Explanation", "Result", "ScenarioError",
           "SeedRuns",
           "XENTRACE_FORMATS", "XENTRACE_FORMATS_4_2_1", "check", "explain",
           "estimate", "import_ftrace", "import_perf", "import_rtapp", "import_skeleton",
           "import_sysctl", "import_xl", "replay_compare", "report", "run", "scenario_path",
           "sweep", "tune"]
__version__ = "0.1.0"
