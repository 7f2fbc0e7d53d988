"""Server telemetry from Prometheus: range queries over a run's load window.

headroom asks Prometheus' HTTP API for the raw counter or gauge over the
run's load window.  A series selector (the defaults, ``process_cpu_seconds_total{job="api"}``)
is read as the samples Prometheus stored, at their scrape times (an instant
query of ``SELECTOR[Ns]``: no look-back, nothing repeated; the default series
in one request); any other PromQL expression (``sum(...)``) through the
range-query API (``/api/v1/query_range``) at the run's resolution (1 s by
default).  A counter becomes a rate here, not in PromQL, so that its
intervals are the real ones between two samples:

* the rate over ``(t[i-1], t[i]]`` is ``(v[i] - v[i-1]) / (t[i] - t[i-1])``;
* a value lower than the previous one is a counter reset (the server
  restarted): that interval is missing (the CPU used between the last scrape
  and the restart is unknown), the next one counts from the new value;
* a pause longer than 1.5 sampling intervals (a failed scrape, the target down:
  Prometheus marks the series stale) is a gap, and the interval across it is missing.

Missing stays missing (NaN); nothing is carried forward.  A query written
as a rate already (``rate(...)``, ``irate(...)``) is read as a gauge of cores.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from .model import Series, Telemetry, TelemetryError

#: Prometheus returns at most 11,000 points per series and query
MAX_POINTS = 10_000

#: series -> (default query, kind, required): kind "counter" becomes a rate
DEFAULTS = {
    "cpu_cores": ("process_cpu_seconds_total", "counter", True),
    "rss_bytes": ("process_resident_memory_bytes", "gauge", True),
    "heap_inuse_bytes": ("go_memstats_heap_inuse_bytes", "gauge", False),
    "gc_cpu_share": ("go_gc_duration_seconds_sum", "counter", False),
    "alloc_bytes_per_s": ("go_memstats_alloc_bytes_total", "counter", False),
    "gc_cycles_per_s": ("go_gc_duration_seconds_count", "counter", False),
}
_RATE = re.compile(r"^\s*(sum\s*(by|without)?\s*(\([^)]*\))?\s*\(\s*)?i?rate\s*\(", re.IGNORECASE)
_BARE = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{.*\})?\s*$")


@dataclass(frozen=True)
class PromSource:
    """Where and what to ask: the server URL, the queries, a label matcher for the defaults.

    Parameters
    ----------
    url
        Prometheus' base URL, e.g. ``http://127.0.0.1:9090``.
    cpu_query, memory_query
        PromQL for the server's CPU seconds (a counter) and resident memory
        (bytes, a gauge); default: the Go/Python client's ``process_*`` metrics.
    match
        Label matchers added to the default queries, e.g. ``job="api"``.
    step_s
        Resolution of the range queries (the run's, 1 s by default).
    timeout_s
        Per HTTP request.
    """

    url: str
    cpu_query: str | None = None
    memory_query: str | None = None
    match: str | None = None
    step_s: float = 1.0
    timeout_s: float = 30.0

    def query_for(self, key: str) -> tuple[str, str, bool]:
        """(query, kind, required) of a series."""
        default, kind, required = DEFAULTS[key]
        given = {"cpu_cores": self.cpu_query, "rss_bytes": self.memory_query}.get(key)
        if given:
            return given, ("gauge" if _RATE.match(given) else kind), True
        m = self.match.strip().strip("{}") if self.match else ""
        return (f"{default}{{{m}}}" if m else default), kind, required

    def describe(self) -> str:
        return f"--prometheus {self.url}"


def _get(src: PromSource, path: str, params: dict) -> dict:
    import urllib.error  # (here: reading a run that has no Prometheus need not load the HTTP client)
    import urllib.parse
    import urllib.request

    url = src.url.rstrip("/") + path + "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=src.timeout_s) as r:
            body = r.read()
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            doc = json.loads(body)
            msg = doc.get("error", "")
        except ValueError:
            msg = body[:200].decode("utf-8", "replace")
        raise TelemetryError(
            f"{src.describe()}: Prometheus refused {params.get('query', path)!r}: {msg}"
        ) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise TelemetryError(
            f"{src.describe()}: cannot reach Prometheus ({reason}): check the URL and that it is running"
        ) from None
    try:
        doc = json.loads(body)
    except ValueError:
        raise TelemetryError(
            f"{src.describe()}: the answer is not Prometheus' JSON API (is the URL right?)"
        ) from None
    if doc.get("status") != "success":
        raise TelemetryError(f"{src.describe()}: {doc.get('errorType', 'error')}: {doc.get('error', '')}")
    return doc["data"]


def range_query(
    src: PromSource, query: str, start_s: float, end_s: float
) -> list[tuple[dict, np.ndarray, np.ndarray]]:
    """``query_range`` over ``[start_s, end_s]`` at ``src.step_s``, in pieces of at most
    :data:`MAX_POINTS` points: per series (labels, times in s, values)."""
    out: dict[str, tuple[dict, list, list]] = {}
    span = src.step_s * MAX_POINTS
    t = start_s
    while t < end_s:
        hi = min(end_s, t + span - src.step_s)
        data = _get(
            src,
            "/api/v1/query_range",
            {"query": query, "start": f"{t:.3f}", "end": f"{hi:.3f}", "step": f"{src.step_s:g}"},
        )
        if data.get("resultType") != "matrix":
            raise TelemetryError(
                f"{src.describe()}: {query!r} is not a range query result (got {data.get('resultType')})"
            )
        for r in data["result"]:
            key = json.dumps(r["metric"], sort_keys=True)
            entry = out.setdefault(key, (r["metric"], [], []))
            for ts, v in r["values"]:
                entry[1].append(float(ts))
                entry[2].append(float(v))
        t = hi + src.step_s
    return [(m, np.asarray(ts, np.float64), np.asarray(vs, np.float64)) for m, ts, vs in out.values()]


def _one_series(src: PromSource, query: str, rows, start_s: float, end_s: float, required: bool, notes=None):
    """The one series a query returned; an optional one (a Go runtime series the user did not ask for)
    that is missing or ambiguous is None (ambiguous: said in ``notes``), a required one an error."""
    if len(rows) > 1 and not required:
        if notes is not None:
            notes.append(
                f"{src.describe()}: {query!r} returned {len(rows)} series (several servers): left out "
                "(optional; --prometheus-match 'job=\"...\"' picks one server for it)"
            )
        return None
    if not rows:
        if not required:
            return None
        raise TelemetryError(
            f"{src.describe()}: {query!r} returned no series between {_utc(start_s)} and {_utc(end_s)}: "
            "check the query and its labels (--prometheus-match 'job=\"...\"') in Prometheus' expression browser"
        )
    if len(rows) > 1:
        labels = "; ".join(
            "{" + ",".join(f'{k}="{v}"' for k, v in sorted(m.items())) + "}" for m, _, _ in rows[:3]
        )
        raise TelemetryError(
            f"{src.describe()}: {query!r} returned {len(rows)} series ({labels}): narrow it to one server "
            "with labels (--prometheus-match) or add them up with sum(...)"
        )
    return rows[0]


def _utc(t: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _interval(t: np.ndarray) -> float:
    """The sampling interval of a series: the median time between its samples (s)."""
    return float(np.median(np.diff(t))) if len(t) > 1 else 1.0


def counter_rate(times_s: np.ndarray, values: np.ndarray):
    """Per-interval rate of a counter: (start_ns, end_ns, rate), NaN across a reset or a gap.

    ``times_s`` are the times of the samples (the scrapes, or a range query's
    evaluations).  A value lower than the previous one (a reset) or a pause
    longer than 1.5 sampling intervals (a gap) makes that interval NaN.
    """
    t, v = np.asarray(times_s, np.float64), np.asarray(values, np.float64)
    if len(v) < 2:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
    dt, dv = np.diff(t), np.diff(v)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(dt > 0, dv / np.where(dt > 0, dt, 1), np.nan)
    rate[(dv < 0) | (dt > 1.5 * _interval(t) + 1e-9)] = np.nan
    return (t[:-1] * 1e9).astype(np.int64), (t[1:] * 1e9).astype(np.int64), rate


def gauge_intervals(times_s: np.ndarray, values: np.ndarray):
    """A gauge's samples as intervals: each covers the sampling interval before it (never more,
    so that a gap stays a gap)."""
    t = np.asarray(times_s, np.float64)
    end = (t * 1e9).astype(np.int64)
    return end - int(_interval(t) * 1e9), end, np.asarray(values, np.float64).copy()


def _is_counter_named(query: str) -> bool:
    m = _BARE.match(query)
    return bool(m) and (m[1].endswith("_total") or m[1].endswith("_sum") or m[1].endswith("_count"))


def check_kind(src: PromSource, query: str, values: np.ndarray, kind: str) -> None:
    """A counter given as a gauge is refused: by Prometheus' metadata when the query is a bare
    metric, else when the values fall more often than counter resets would explain."""
    if kind != "counter":
        return
    m = _BARE.match(query)
    if m and not _is_counter_named(query):
        try:
            meta = _get(src, "/api/v1/metadata", {"metric": m[1]})
        except TelemetryError:
            meta = {}
        types = {e.get("type") for e in meta.get(m[1], [])}
        if types and "counter" not in types:
            raise TelemetryError(
                f"{src.describe()}: {query!r} is a {'/'.join(sorted(t for t in types if t))}, not a counter: "
                "give the counter of CPU seconds (e.g. process_cpu_seconds_total), or rate(...) of it"
            )
    falls = int(np.sum(np.diff(values) < 0)) if len(values) > 1 else 0
    if falls > max(3, len(values) // 20):
        raise TelemetryError(
            f"{src.describe()}: {query!r} falls {falls} times in {len(values)} samples: a gauge, not a counter; "
            "give the counter of CPU seconds (e.g. process_cpu_seconds_total), or rate(...) of it"
        )


def raw_samples(
    src: PromSource, selector: str, start_s: float, end_s: float
) -> list[tuple[dict, np.ndarray, np.ndarray]]:
    """The samples Prometheus stored for a series selector over ``(start_s, end_s]``, at their
    scrape times: an instant query of ``SELECTOR[Ns]`` (no look-back, so nothing is repeated)."""
    width = max(1, int(np.ceil(end_s - start_s)))
    data = _get(src, "/api/v1/query", {"query": f"{selector}[{width}s]", "time": f"{end_s:.3f}"})
    out = []
    for r in data.get("result", []):
        vals = r.get("values", [])
        out.append(
            (r["metric"], np.array([float(x[0]) for x in vals]), np.array([float(x[1]) for x in vals]))
        )
    return out


def _series_rows(src: PromSource, plan: dict, start_s: float, end_s: float) -> dict[str, list]:
    """Per series key, the rows its query returned.  The default selectors (one label matcher for
    all) are read in one query of their raw samples; a bare selector of the user's in one each;
    any other PromQL expression through the range-query API at ``src.step_s``."""
    rows: dict[str, list] = {}
    batch: dict[str, list[str]] = {}  # label part -> keys
    for key, (query, _kind, _req) in plan.items():
        m = _BARE.match(query)
        if m:
            batch.setdefault((m[2] or "{}").strip("{} "), []).append(key)
        else:
            rows[key] = range_query(src, query, start_s, end_s)
    for labels, keys in batch.items():
        names = {_BARE.match(plan[k][0])[1]: k for k in keys}
        if len(names) == 1:
            sel = plan[keys[0]][0]
        else:
            sel = "{" + f'__name__=~"{"|".join(sorted(names))}"' + (f",{labels}" if labels else "") + "}"
        for k in keys:
            rows[k] = []
        for metric, t, v in raw_samples(src, sel, start_s, end_s):
            metric = dict(metric)
            k = names.get(metric.pop("__name__", None), keys[0])
            rows[k].append((metric, t, v))
    return rows


def fetch(src: PromSource, start_ns: int, end_ns: int, *, pad_s: float = 3.0) -> Telemetry:
    """Every series :data:`DEFAULTS` names, over the load window ``[start_ns, end_ns]`` (padded by
    ``pad_s`` so that the first and last intervals are whole).  Required series that are
    missing or ambiguous raise :class:`TelemetryError`; optional ones (Go runtime) are left out, an
    ambiguous one (several servers) with a note in the telemetry's warnings."""
    start_s = float(np.floor(start_ns / 1e9 - pad_s))
    end_s = float(np.ceil(end_ns / 1e9 + pad_s))
    plan = {key: src.query_for(key) for key in DEFAULTS}
    found = _series_rows(src, plan, start_s, end_s)
    series: dict[str, Series] = {}
    notes: list[str] = []
    for key, (query, kind, required) in plan.items():
        row = _one_series(src, query, found.get(key, []), start_s, end_s, required, notes)
        if row is None:
            continue
        _, t, vals = row
        if kind == "counter":
            check_kind(src, query, vals, kind)
            a, b, v = counter_rate(t, vals)
        else:
            a, b, v = gauge_intervals(t, vals)
        series[key] = Series(key, _unit(key), a, b, v, f"prometheus {src.url} {query}")
    if "gc_cpu_share" in series and not np.isfinite(series["gc_cpu_share"].values).any():
        del series["gc_cpu_share"]
    _check_cover(src, series, start_ns, end_ns)
    return Telemetry(series, f"prometheus {src.url}", warnings=tuple(notes))


def _unit(key: str) -> str:
    from .model import KEYS

    return KEYS[key]


def _check_cover(src: PromSource, series: dict[str, Series], start_ns: int, end_ns: int) -> None:
    """The CPU and memory series must cover most of the load window."""
    for key in ("cpu_cores", "rss_bytes"):
        s = series.get(key)
        if s is None:
            continue
        known = np.isfinite(s.values)
        a = np.clip(s.start_ns[known], start_ns, end_ns)
        b = np.clip(s.end_ns[known], start_ns, end_ns)
        cover = float(np.sum(b - a)) / max(1, end_ns - start_ns)
        if cover < 0.5:
            raise TelemetryError(
                f"{src.describe()}: {s.source.split(' ', 2)[-1]!r} covers {cover:.0%} of the run's load window "
                f"({_utc(start_ns / 1e9)} to {_utc(end_ns / 1e9)}): was Prometheus scraping the server then, "
                "and is its retention long enough?"
            )
