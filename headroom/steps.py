"""The per-step table: a ramp's unit of analysis.

A ramp is an experiment whose independent variable is concurrency: every
step holds it constant, so a step is one measurement of the system at one
load.  Capacity figures and comparisons are computed from this table; the
throughput-bin view (``binning.py``) stays for the headroom plot.

Per step: concurrency, duration (first request start to last response),
requests, errors (None when the format has no status column: unknown, not
0), throughput of completed requests and of successful ones (goodput),
exact latency percentiles of the successful requests, the server's CPU
(time-weighted over the step) and CPU seconds per request, and a Little's
law check.

Little's law in a closed loop: ``N = X * R`` when every client is always
inside a request.  ``little = X * mean latency / N`` below ``LITTLE_MIN``
means the clients spent a good part of the step outside requests (the
load generator's own work, a saturated client, pauses): the generator, not
the server, set the pace, and the step says less about the server.  Such
steps are flagged ``client-paced``; they are still used.

Each step's percentile comes with an order-statistic interval
(:func:`percentile_interval`): the distribution-free confidence interval of
a quantile, read off the step's own latency histogram.  It treats the
step's requests as independent, so it covers sampling within the step only:
it is wide where a percentile stands on few requests (a p99 of 200
requests), narrow on 50,000, and never includes the 10-30 % by which two
runs of one build differ at a single step.

A step is ``short`` when it lasts less than ``MIN_STEP_S`` or has fewer than
``MIN_STEP_REQUESTS`` requests: it is shown, flagged, and left out of the
model and the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .aggregate import NS, Steps, cpu_over
from .binning import LatencyStats
from .model import CpuSamples

MIN_STEP_S = 0.5
MIN_STEP_REQUESTS = 50
LITTLE_MIN = 0.75


@dataclass(frozen=True, eq=False)
class StepTable:
    """One row per load step; units in the names, latencies in seconds."""

    index: np.ndarray
    concurrency: np.ndarray  # float; NaN when the run does not say
    duration_s: np.ndarray
    requests: np.ndarray  # successful requests (the latencies below are theirs)
    errors: np.ndarray | None  # failed requests per step; None: unknown (no status column)
    rps: np.ndarray  # completed requests (successful + failed) per second
    goodput_rps: np.ndarray  # successful requests per second
    latency: LatencyStats
    cpu_pct: np.ndarray  # time-weighted over the step; NaN without CPU data
    cpu_s_per_req: np.ndarray
    little: np.ndarray  # X * mean latency / N (1: clients always inside a request)
    short: np.ndarray  # bool
    cpu_cores: float
    #: rate steps (open loop) only: intended and sent req/s, iterations the tool dropped, and
    #: whether the step fell behind its schedule (True/False/None: unknown); None for closed loops
    intended_rps: np.ndarray | None = None
    sent_rps: np.ndarray | None = None
    dropped: tuple[int | None, ...] | None = None
    fell_behind: tuple[bool | None, ...] | None = None

    def __len__(self) -> int:
        return int(self.index.shape[0])

    @property
    def usable(self) -> np.ndarray:
        """Steps with a throughput that are long enough to trust."""
        return np.isfinite(self.rps) & (self.rps > 0) & ~self.short

    @property
    def kind(self) -> str:
        """``rate`` for the steps of an open-loop ramp (a request rate was planned), else ``concurrency``."""
        return "rate" if self.intended_rps is not None else "concurrency"

    @property
    def client_paced(self) -> np.ndarray:
        return np.isfinite(self.little) & (self.little < LITTLE_MIN)

    @property
    def error_rate(self) -> np.ndarray | None:
        if self.errors is None:
            return None
        total = self.requests + self.errors
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, self.errors / np.maximum(total, 1), np.nan)

    @property
    def known_concurrency(self) -> bool:
        return bool(len(self.concurrency)) and bool(np.isfinite(self.concurrency).all())

    def order(self) -> np.ndarray:
        """Step indices by concurrency (by index when concurrency is unknown)."""
        if self.known_concurrency:
            return np.argsort(self.concurrency, kind="stable")
        return np.arange(len(self))

    def flags(self, i: int) -> list[str]:
        """What to know about step ``i``: short, client-paced, thin percentiles, fell behind schedule."""
        out = []
        if self.fell_behind is not None and self.fell_behind[i]:
            out.append("fell behind")
        if self.short[i]:
            out.append("short")
        if self.client_paced[i]:
            out.append("client-paced")
        if self.requests[i] and self.latency.thin["p99"][i]:
            out.append("thin p99")
        return out


def _binomial_cdf(n: int, num: int, den: int) -> np.ndarray:
    """P(B <= k) for k = 0..n, B ~ Binomial(n, num/den), exactly (log-space, no scipy)."""
    q = num / den
    k = np.arange(n + 1, dtype=np.float64)
    log_comb = np.concatenate([[0.0], np.cumsum(np.log(n - k[1:] + 1) - np.log(k[1:]))])
    logpmf = log_comb + k * np.log(q) + (n - k) * np.log1p(-q)
    pmf = np.exp(logpmf - logpmf.max())
    cdf = np.cumsum(pmf)
    return cdf / cdf[-1]


def order_statistic_ranks(n: int, num: int, den: int, confidence: float = 0.95) -> tuple[int, int, bool]:
    """1-based ranks (lo, hi) whose order statistics bracket the num/den quantile of n values.

    ``P(X_(lo) <= quantile <= X_(hi)) >= confidence`` for independent draws
    of any continuous distribution.  ``open`` is True when the upper rank
    would lie beyond the largest value: the interval then ends at the
    maximum and its top is a lower bound.
    """
    alpha = (1.0 - confidence) / 2.0
    cdf = _binomial_cdf(n, num, den)
    lo = max(1, int(np.searchsorted(cdf, alpha, side="right")))
    hi = int(np.searchsorted(cdf, 1.0 - alpha, side="left")) + 1
    return lo, min(hi, n), hi > n


def percentile_interval(
    counts: np.ndarray, values: np.ndarray, num: int, den: int, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Order-statistic interval of the num/den latency percentile of every histogram row (seconds).

    ``counts`` are latency histograms over ``values`` (a step table's
    ``latency.counts`` and the run's ``hist.values``).  Returns (lo, hi, open_top): NaN for empty groups; ``open_top`` marks a
    top that is the group's slowest request (too few requests above the
    percentile to close the interval).
    """
    counts = np.atleast_2d(counts)
    values = np.asarray(values, dtype=np.float64)
    lo, hi = np.full(len(counts), np.nan), np.full(len(counts), np.nan)
    open_top = np.zeros(len(counts), bool)
    for g, row in enumerate(counts):
        n = int(row.sum())
        if n == 0:
            continue
        r_lo, r_hi, open_top[g] = order_statistic_ranks(n, num, den, confidence)
        cum = np.cumsum(row)
        lo[g], hi[g] = values[np.searchsorted(cum, [r_lo, r_hi])]
    return lo, hi, open_top


def step_table(
    steps: Steps,
    latency: LatencyStats,
    cpu: CpuSamples | None,
    errors: np.ndarray | None,
    *,
    rates: tuple[dict, ...] | None = None,
    step_cpu_s: np.ndarray | None = None,
) -> StepTable:
    """Build the per-step table from a run's step spans, per-step latency and CPU samples.

    ``rates`` (an open-loop ramp's rate steps, :attr:`headroom.model.RunMeta.step_rates`)
    adds each step's intended and sent rate and whether it fell behind its schedule.
    ``step_cpu_s`` (``headroom ramp``'s ``step_cpu_s``: the server's CPU seconds read at
    each step's launch and end) gives each step's CPU per request exactly, instead of
    from the samples that overlap the step (NaN entries fall back to the samples).
    """
    n = len(steps)
    conc = np.array([np.nan if c is None else float(c) for c in steps.concurrency], dtype=np.float64)
    duration = (steps.end_ns - steps.start_ns) / NS
    requests = steps.requests.astype(np.int64)
    failed = np.zeros(n, np.int64) if errors is None else np.asarray(errors, np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        valid = (requests >= 2) & (duration > 0)
        good = np.where(valid, requests / np.where(duration > 0, duration, 1.0), np.nan)
        completed = np.where(valid, (requests + failed) / np.where(duration > 0, duration, 1.0), np.nan)
        little = good * latency.mean_s / conc
    if cpu is not None:
        cpu_pct = _cpu_pct(cpu, steps.start_ns, duration)
        cores = cpu.cores
    else:
        cpu_pct, cores = np.full(n, np.nan), 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        cpu_req = cpu_pct / 100.0 * cores / good
        if step_cpu_s is not None and cpu is not None:
            exact = np.asarray(step_cpu_s, np.float64)
            use = np.isfinite(exact) & valid
            cpu_req = np.where(use, exact / np.where(requests > 0, requests, 1), cpu_req)
    short = (duration < MIN_STEP_S) | (requests < MIN_STEP_REQUESTS)
    return StepTable(
        index=np.arange(n),
        concurrency=conc,
        duration_s=duration,
        requests=requests,
        errors=None if errors is None else failed,
        rps=completed,
        goodput_rps=good,
        latency=latency,
        cpu_pct=cpu_pct,
        cpu_s_per_req=cpu_req,
        little=little,
        short=short,
        cpu_cores=cores,
        **_rate_columns(rates, n),
    )


def _cpu_pct(cpu: CpuSamples, start_ns: np.ndarray, duration: np.ndarray) -> np.ndarray:
    """Each step's mean CPU %: a scraped counter's (Prometheus) from its whole intervals inside
    the step (:func:`headroom.telemetry.model.cpu_inner`), other samples overlap-weighted."""
    from .telemetry.model import cpu_inner, is_scraped

    if is_scraped(cpu):
        return cpu_inner(cpu, start_ns, duration)
    return cpu_over(cpu, start_ns, duration)


def _rate_columns(rates: tuple[dict, ...] | None, n: int) -> dict:
    """The rate-step fields of a step table (empty for a closed loop, or rates of other steps)."""
    if rates is None or len(rates) != n:
        return {}

    def col(key):
        return np.array([np.nan if r.get(key) is None else float(r[key]) for r in rates], np.float64)

    return {
        "intended_rps": col("intended_rps"),
        "sent_rps": col("sent_rps"),
        "dropped": tuple(r.get("dropped") for r in rates),
        "fell_behind": tuple(r.get("fell_behind") for r in rates),
    }
