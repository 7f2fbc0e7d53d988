"""Small immutable result objects shared by every layer of headroom.

Arrays are numpy arrays; the dataclasses are frozen so that a result, once
computed, cannot drift.  Units live in the field names.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Version of the JSON documents headroom writes (``headroom summary --json``).
SCHEMA_VERSION = 2

#: Percentiles reported for every throughput bin: (name, numerator, denominator).
#: Kept as exact fractions so that ranks are computed in integers.
PERCENTILES: tuple[tuple[str, int, int], ...] = (
    ("p50", 50, 100),
    ("p90", 90, 100),
    ("p95", 95, 100),
    ("p99", 99, 100),
    ("p995", 995, 1000),
    ("p999", 999, 1000),
)


def extra_percentiles(objective) -> tuple[tuple[str, int, int], ...]:
    """The objective's percentile when it is not one of :data:`PERCENTILES` (``p97``): computed besides them."""
    if objective is None or objective.q is None or objective.name in {p[0] for p in PERCENTILES}:
        return ()
    return ((objective.name, *objective.q),)


#: A percentile is called "thin" when fewer requests than this lie above it.
MIN_TAIL_REQUESTS = 10


class HeadroomError(Exception):
    """A problem with the user's input, reported in one line (CLI exit code 2)."""


#: Notebook display of the result classes: class name -> (module, function) that renders it as HTML.
#: A registry by name, so that this module (imported by everything) imports no renderer.
HTML_RENDERERS: dict[str, tuple[str, str]] = {
    "Run": ("headroom.html", "run_table"),
    "Summary": ("headroom.html", "capacity_table"),
    "Comparison": ("headroom.html", "verdict"),
    "History": ("headroom.history_view", "history_table"),
    "Endpoints": ("headroom.endpoint_html", "endpoints_table"),
    "ProfileSet": ("headroom.profiles.html", "profile_set_html"),
    "ProfileDiff": ("headroom.profiles.html", "diff_html"),
}


def render_html(kind: str, obj) -> str:
    """The HTML of a result object, by its renderer in :data:`HTML_RENDERERS`."""
    import importlib

    module, name = HTML_RENDERERS[kind]
    return str(getattr(importlib.import_module(module), name)(obj))


@dataclass(frozen=True, eq=False)
class RunMeta:
    """Labels of a run: where it came from and what the metadata file said."""

    label: str
    source: str
    fields: dict[str, Any] = field(default_factory=dict)
    #: concurrency of every step when the input file gives it (JMeter allThreads, k6 vus)
    step_concurrency: tuple[int | None, ...] | None = None
    #: rate steps of an open-loop ramp (k6 arrival rate, Gatling open model, vegeta/oha rates):
    #: per step a dict of intended_rps, sent_rps, dropped, fell_behind (None: unknown)
    step_rates: tuple[dict, ...] | None = None

    def ramp(self) -> tuple[int, int] | None:
        """Return ``(lower, step)`` of the concurrency ramp, when metadata gives it."""
        lower = self.fields.get("lower_concurrency")
        step = self.fields.get("concurrency_step")
        if isinstance(lower, int) and isinstance(step, int) and not isinstance(lower, bool):
            return lower, step
        return None

    def concurrency(self, step_index: int) -> int | None:
        """Concurrency of step ``step_index``: from the input file when it gives it, else
        ``lower + k * step`` from metadata, or None if unknown."""
        if self.step_concurrency is not None and 0 <= step_index < len(self.step_concurrency):
            return self.step_concurrency[step_index]
        done = self.fields.get("concurrency")  # headroom ramp's levels, one per step (repeated levels too)
        if isinstance(done, list) and 0 <= step_index < len(done):
            c = done[step_index]
            if isinstance(c, int) and not isinstance(c, bool):
                return c
        ramp = self.ramp()
        if ramp is None:
            return None
        return ramp[0] + step_index * ramp[1]


@dataclass(frozen=True, eq=False)
class Requests:
    """Per-request columns in file order (throughputramp writes completion order).

    The requests of step ``k`` are ``[step_offsets[k], step_offsets[k + 1])``;
    within a step they are not sorted by start time (use :meth:`sorted_step`).
    """

    start_ns: np.ndarray  # int64, UTC nanoseconds since the epoch
    latency_s: np.ndarray  # float64, seconds
    step_offsets: np.ndarray  # int64, length n_steps + 1

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    @property
    def n_steps(self) -> int:
        return int(self.step_offsets.shape[0] - 1)

    def sorted_step(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(start_ns, latency_s) of step ``k`` sorted by start time."""
        a, b = self.step_offsets[k], self.step_offsets[k + 1]
        order = np.argsort(self.start_ns[a:b], kind="stable")
        return self.start_ns[a:b][order], self.latency_s[a:b][order]

    def step_index(self) -> np.ndarray:
        """The step index of every request (int32)."""
        counts = np.diff(self.step_offsets)
        return np.repeat(np.arange(self.n_steps, dtype=np.int32), counts)


@dataclass(frozen=True, eq=False)
class CpuSamples:
    """CPU samples of the system under test.

    ``pct[i]`` is the percentage busy over ``(time_ns[i - 1], time_ns[i]]``;
    the first sample's interval is taken to be the median sampling interval.
    ``pct`` is the mean over CPUs when the file has per-CPU columns (then
    ``per_cpu`` holds them) and ``cores`` says how many cores 100 % of
    ``pct`` stands for, so that CPU seconds = pct / 100 * cores * seconds.
    """

    time_ns: np.ndarray
    pct: np.ndarray
    per_cpu: np.ndarray | None
    cores: float
    source: str

    def __len__(self) -> int:
        return int(self.time_ns.shape[0])


@dataclass(frozen=True, eq=False)
class Run:
    """One load-test run: its requests, CPU samples (if any) and metadata.

    A run read by :func:`headroom.reduce_run` has ``requests=None`` and
    ``reduced`` (a :class:`headroom.reduce.ReducedRun`: steps, buckets,
    bucket histograms) instead.
    """

    requests: Requests | None
    cpu: CpuSamples | None
    meta: RunMeta
    errors: int = 0
    error_codes: dict[int, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    format: str = "throughputramp"
    reduced: Any = None
    step_errors: Any = None  # failed requests per step (numpy int64), None when the format cannot tell
    #: every (step, request name)'s requests (headroom.endpoints.EndpointCounts), None without names
    endpoints: Any = None

    @property
    def errors_known(self) -> bool:
        """Whether the input records failed requests (a status column); throughputramp files do not."""
        return self.step_errors is not None

    @property
    def label(self) -> str:
        return self.meta.label

    @property
    def n_requests(self) -> int:
        """Successful requests read (failed ones are counted in ``errors``)."""
        if self.requests is not None:
            return len(self.requests)
        return int(self.reduced.steps.requests.sum()) if self.reduced is not None else 0

    @property
    def n_steps(self) -> int:
        """Load steps (sections of the request file)."""
        if self.requests is not None:
            return self.requests.n_steps
        return len(self.reduced.steps) if self.reduced is not None else 0

    def __repr__(self) -> str:
        return (
            f"<Run {self.label!r}: {self.format}, {self.n_steps} steps, {self.n_requests:,} requests, "
            f"{'CPU samples' if self.cpu is not None else 'no CPU samples'}>"
        )

    def _repr_html_(self) -> str:
        return render_html("Run", self)

    def requests_frame(self):
        """The requests as a pandas DataFrame (start time, latency, step)."""
        import pandas as pd

        if self.requests is None:
            raise HeadroomError(
                "this run was reduced while reading (reduce_run): load it with load_run for its requests"
            )
        return pd.DataFrame(
            {
                "start": pd.to_datetime(self.requests.start_ns, utc=True),
                "latency_s": self.requests.latency_s,
                "step": self.requests.step_index(),
            }
        )


@dataclass(frozen=True)
class Objective:
    """A latency objective such as ``p99 <= 20 ms``."""

    name: str  # "p99", "p995", "mean", ...
    q: tuple[int, int] | None  # exact quantile as a fraction; None for the mean
    bound_s: float

    def __str__(self) -> str:
        return f"{percentile_label(self.name)}<={_fmt_seconds(self.bound_s)}"

    @property
    def field(self) -> str:
        """The bin column this objective reads (``p99_s``, ``mean_s``...)."""
        return f"{self.name}_s"


_OBJECTIVE_RE = re.compile(
    r"^\s*(?P<stat>p\d+(?:\.\d+)?|mean)\s*(?P<op><=?|=<|>=?|=)\s*(?P<val>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>s|ms|us|µs)\s*$"
)
_UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}


def parse_objective(text: str) -> Objective:
    """Parse ``p99<=20ms``, ``p99.9<=0.1s``, ``mean<=5ms`` into an :class:`Objective`."""
    m = _OBJECTIVE_RE.match(text)
    if not m:
        raise HeadroomError(
            f"bad objective {text!r}: expected PERCENTILE<=VALUE UNIT, e.g. p99<=20ms or p99.9<=0.1s"
        )
    if m["op"] != "<=":
        # latencies are quantized (0.1 ms in many formats), so '<' and '<=' differ at the bound; an
        # objective is a ceiling the percentile may reach: only '<=' is meant, and said
        stat, val, unit = m["stat"], m["val"], m["unit"]
        raise HeadroomError(
            f"bad objective {text!r}: only '<=' is supported (the percentile may reach the bound); "
            f"write {stat}<={val}{unit}"
        )
    stat, val, unit = m["stat"], float(m["val"]), m["unit"]
    bound = val * _UNIT_S[unit]
    if bound <= 0:
        raise HeadroomError(f"bad objective {text!r}: the bound must be positive")
    if stat == "mean":
        return Objective("mean", None, bound)
    digits = stat[1:]
    whole, _, frac = digits.partition(".")
    num = int(whole + frac)
    den = 100 * 10 ** len(frac)
    if not 0 < num < den:
        raise HeadroomError(f"bad objective {text!r}: the percentile must be between 0 and 100")
    g = math.gcd(num, den)
    num, den = num // g, den // g
    name = "p" + (whole + frac).rstrip("0") if frac else stat
    for pname, pn, pd_ in PERCENTILES:
        if pn * den == num * pd_:
            name = pname
    return Objective(name, (num, den), bound)


def percentile_label(name: str) -> str:
    """How a percentile is written for people: ``p999`` -> ``p99.9``, ``p995`` -> ``p99.5``, ``p50`` stays."""
    digits = name[1:]
    if name.startswith("p") and digits.isdigit() and len(digits) > 2:
        return f"p{digits[:2]}.{digits[2:]}"
    return name


def parse_duration(text: str) -> float:
    """Parse ``1s``, ``500ms``, ``0.25`` (seconds) into seconds."""
    m = re.match(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(s|ms|us|µs)?\s*$", text)
    if not m:
        raise HeadroomError(f"bad duration {text!r}: expected e.g. 1s, 500ms or 0.25")
    value = float(m[1]) * _UNIT_S[m[2] or "s"]
    if value <= 0:
        raise HeadroomError(f"bad duration {text!r}: must be positive")
    return value


def _fmt_seconds(s: float) -> str:
    if s >= 1:
        return f"{s:g}s"
    if s >= 1e-3:
        return f"{s * 1e3:g}ms"
    return f"{s * 1e6:g}us"
