"""headroom: capacity and latency-vs-throughput analysis of load-test ramps."""

from .io import load_run, reduce_run
from .model import HeadroomError, Objective, Run, parse_objective
from .summary import Summary, analyze, to_json

__version__ = "0.1.0"

__all__ = [
    "HeadroomError",
    "Objective",
    "Run",
    "Summary",
    "__version__",
    "analyze",
    "load_run",
    "parse_objective",
    "reduce_run",
    "to_json",
]
