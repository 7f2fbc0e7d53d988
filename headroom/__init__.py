"""headroom: capacity and latency-vs-throughput analysis of load-test ramps.

The public API, importable from the top level::

    import headroom
    run = headroom.load_run("data/runs/nginx-keepalive")        # a Run
    s = headroom.analyze(run, objective="p99<=5ms")              # a Summary (strings as the CLI takes)
    c = headroom.compare_runs(base_summary, s)                  # a Comparison
    headroom.plot.headroom(s)                                   # matplotlib, imported on first use

Names are resolved lazily: ``import headroom`` loads numpy only, never
matplotlib, scipy or pandas, so the CLI and a notebook start fast.
Units live in field names (``latency_s``: seconds, ``rps``: requests per
second, ``cpu_pct``: percent); the CLI and the reports print latency in ms.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._version import __version__

#: public name -> module that defines it
_EXPORTS = {
    "HeadroomError": "model",
    "Objective": "model",
    "Run": "model",
    "parse_objective": "model",
    "load_run": "io",
    "reduce_run": "io",
    "Summary": "summary",
    "analyze": "summary",
    "to_json": "summary",
    "StepTable": "steps",
    "USLFit": "scalability",
    "fit_usl": "scalability",
    "Comparison": "compare",
    "compare_runs": "compare",
}
#: submodules reachable as attributes (``headroom.plot``), imported on first use
_MODULES = ("plot", "html", "text", "report", "compare", "summary", "io", "model", "profiles")

__all__ = [
    "Comparison",
    "HeadroomError",
    "Objective",
    "Run",
    "StepTable",
    "Summary",
    "USLFit",
    "__version__",
    "analyze",
    "compare_runs",
    "fit_usl",
    "load_run",
    "parse_objective",
    "plot",
    "profiles",
    "reduce_run",
    "to_json",
]


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    elif name in _MODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'headroom' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | set(_MODULES))


if TYPE_CHECKING:  # for type checkers and editors; never executed
    from . import plot, profiles
    from .compare import Comparison, compare_runs
    from .io import load_run, reduce_run
    from .model import HeadroomError, Objective, Run, parse_objective
    from .scalability import USLFit, fit_usl
    from .steps import StepTable
    from .summary import Summary, analyze, to_json
