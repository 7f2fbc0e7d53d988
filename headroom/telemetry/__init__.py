"""Server telemetry: CPU (cores), resident memory (bytes) and Go GC, from three sources.

* the local process tree (psutil, while ``headroom ramp`` records: ``headroom.ramp.cpu``);
* Prometheus range queries (:mod:`headroom.telemetry.prometheus`), at recording time or
  after the fact for a run of any format;
* the Go runtime's ``go_*`` metrics through the same Prometheus endpoint.

What a remote source returned is saved into the run folder (``cpuStats.csv``,
``memStats.csv``, ``telemetry.json``: :mod:`headroom.telemetry.files`) so that the
run reads the same offline.  A run's telemetry is found with :func:`telemetry_of`.
"""

from __future__ import annotations

import weakref

from .model import KEYS, SCHEMA_VERSION, Series, Telemetry, TelemetryError, mean_over, points_in

__all__ = [
    "KEYS",
    "SCHEMA_VERSION",
    "PromSource",
    "Series",
    "Telemetry",
    "TelemetryError",
    "attach",
    "mean_over",
    "points_in",
    "telemetry_of",
]

# Run is a frozen dataclass of headroom.model (not this package's): until it carries a
# ``telemetry`` field (WIRING.md), a run's telemetry is kept beside it, by identity.
_ATTACHED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def attach(run, tel: Telemetry | None):
    """Remember ``tel`` as the telemetry of ``run`` (returns ``run``)."""
    if tel is not None:
        _ATTACHED[run] = tel
    return run


def telemetry_of(run) -> Telemetry | None:
    """The telemetry of a run (memory, GC; CPU is ``run.cpu``), None when it has none."""
    t = getattr(run, "telemetry", None)
    return t if t is not None else _ATTACHED.get(run)


def __getattr__(name: str):
    # the Prometheus client (urllib, http.client) is imported when asked for, not by ``import headroom``
    if name == "PromSource":
        from .prometheus import PromSource

        return PromSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
