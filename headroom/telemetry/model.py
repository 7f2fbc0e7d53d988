"""Server telemetry as time series: what one source said about the server during a run.

Every series is a list of intervals ``(start_ns, end_ns]`` with one value
each: a counter turned into a rate covers the time between two of its
samples, a gauge's sample covers the interval since the previous one.  An
interval whose value is not known (a missing scrape, a counter reset, the
target down) is NaN and stays NaN: nothing here carries a value across a gap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model import CpuSamples, HeadroomError

#: telemetry files (telemetry.json, memStats.csv) written by this version
SCHEMA_VERSION = 1


class TelemetryError(HeadroomError):
    """Telemetry that cannot be used: one line naming the source and what to do."""


@dataclass(frozen=True, eq=False)
class Series:
    """One quantity over time: ``values[i]`` holds over ``(start_ns[i], end_ns[i]]``.

    ``unit`` is part of the name (``cores``, ``bytes``, ``share``, ``bytes_per_s``,
    ``per_s``); ``source`` says where it came from (a query, a PID, a file).
    """

    key: str
    unit: str
    start_ns: np.ndarray
    end_ns: np.ndarray
    values: np.ndarray
    source: str

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def __repr__(self) -> str:
        ok = int(np.isfinite(self.values).sum())
        return f"<Series {self.key} [{self.unit}]: {ok} of {len(self)} intervals known, from {self.source}>"

    def _repr_html_(self) -> str:
        from html import escape

        return f"<code>{escape(repr(self))}</code>"

    def clip(self, lo_ns: int, hi_ns: int) -> Series:
        """The intervals that overlap ``(lo_ns, hi_ns]``."""
        keep = (self.end_ns > lo_ns) & (self.start_ns < hi_ns)
        return Series(
            self.key, self.unit, self.start_ns[keep], self.end_ns[keep], self.values[keep], self.source
        )


#: the series a Telemetry may carry, with their units
KEYS = {
    "cpu_cores": "cores",
    "rss_bytes": "bytes",
    "heap_inuse_bytes": "bytes",
    "gc_cpu_share": "share",
    "alloc_bytes_per_s": "bytes_per_s",
    "gc_cycles_per_s": "per_s",
}


@dataclass(frozen=True, eq=False)
class Telemetry:
    """The server's CPU, memory and (for a Go server) GC over one run, by key (see :data:`KEYS`)."""

    series: dict[str, Series] = field(default_factory=dict)
    source: str = ""
    warnings: tuple[str, ...] = ()

    def get(self, key: str) -> Series | None:
        return self.series.get(key)

    def __repr__(self) -> str:
        keys = ", ".join(f"{k} [{s.unit}]" for k, s in self.series.items()) or "nothing"
        return f"<Telemetry from {self.source}: {keys}>"

    def _repr_html_(self) -> str:
        from html import escape

        return f"<code>{escape(repr(self))}</code>"

    def cpu_samples(self) -> CpuSamples | None:
        """The CPU series as :class:`headroom.model.CpuSamples` (100 % = one core; NaN where missing)."""
        s = self.get("cpu_cores")
        if s is None or len(s) == 0:
            return None
        return cpu_samples_of(s)


def cpu_samples_of(s: Series) -> CpuSamples:
    """A CPU-cores series as CpuSamples: a sample at every interval's end, and a NaN sample
    at the end of every hole between intervals, so that no value spreads over a gap."""
    times: list[int] = []
    vals: list[float] = []
    prev_end = None
    for a, b, v in zip(s.start_ns.tolist(), s.end_ns.tolist(), s.values.tolist()):
        if prev_end is not None and a > prev_end:
            times.append(a)
            vals.append(float("nan"))
        times.append(b)
        vals.append(100.0 * v)
        prev_end = b
    return CpuSamples(
        time_ns=np.asarray(times, np.int64),
        pct=np.asarray(vals, np.float64),
        per_cpu=None,
        cores=1.0,
        source=s.source,
    )


def mean_over(
    s: Series, start_ns: np.ndarray, length_s: np.ndarray, *, min_coverage: float = 0.5
) -> np.ndarray:
    """Time-weighted mean of ``s`` over each ``[start, start + length)``; NaN when the known
    intervals cover less than ``min_coverage`` of it."""
    out = np.full(len(start_ns), np.nan)
    known = np.isfinite(s.values)
    a, b, v = s.start_ns[known].astype(np.float64), s.end_ns[known].astype(np.float64), s.values[known]
    for i, (lo, n) in enumerate(zip(np.asarray(start_ns, np.float64), np.asarray(length_s, np.float64))):
        hi = lo + n * 1e9
        w = np.clip(np.minimum(b, hi) - np.maximum(a, lo), 0, None)
        cov = w.sum()
        if n > 0 and cov >= min_coverage * n * 1e9:
            out[i] = float((w * v).sum() / cov)
    return out


def points_in(s: Series, lo_ns: int, hi_ns: int) -> np.ndarray:
    """The known values of the intervals that end inside ``(lo_ns, hi_ns]`` (gauge samples of a step)."""
    m = (s.end_ns > lo_ns) & (s.end_ns <= hi_ns) & np.isfinite(s.values)
    return s.values[m]


def is_scraped(cpu: CpuSamples | None) -> bool:
    """Whether CPU samples came from a scraped counter (Prometheus, live or saved by ``headroom telemetry``)."""
    return cpu is not None and "prometheus" in cpu.source


def cpu_inner(cpu: CpuSamples, start_ns: np.ndarray, length_s: np.ndarray) -> np.ndarray:
    """Mean CPU % of each step from the sample intervals that lie inside it.

    A scraped counter's intervals are the real ones between two scrapes; one that
    straddles a step's edge mixes the step with what came before or after it (in an
    interleaved A/B recording: the server idle while the other side runs), so a
    step is measured over its whole intervals only: the counter's increase from
    the first scrape inside the step to the last, over the time between them.  A
    step with no whole interval falls back to the overlap-weighted mean of the
    intervals that touch it; a missing (NaN) interval counts as not covered.
    """
    t = cpu.time_ns.astype(np.int64)
    a, b, v = t[:-1], t[1:], cpu.pct[1:]
    s = Series("cpu_pct", "pct", a, b, v, cpu.source)
    out = np.full(len(start_ns), np.nan)
    for i, (lo, n) in enumerate(
        zip(np.asarray(start_ns, np.int64).tolist(), np.asarray(length_s, float).tolist())
    ):
        hi = lo + int(n * 1e9)
        inside = (a >= lo) & (b <= hi) & np.isfinite(v)
        if inside.any():
            w = (b[inside] - a[inside]).astype(np.float64)
            out[i] = float((w * v[inside]).sum() / w.sum())
        else:
            out[i] = mean_over(s, np.array([lo]), np.array([n]))[0]
    return out
