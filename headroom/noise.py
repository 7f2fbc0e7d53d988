"""Between-run noise of each decision metric: defaults, learned from earlier runs, or from repeats.

Two runs of one build differ by more than any single run can show: the
host's state during the whole run (other jobs, frequency, cache) moves every
step of it together.  A comparison therefore judges the *run-level* value of
each metric (the mean of the log values over the matched steps it uses) and
needs the spread of that value between runs of one unchanged build, per
metric, with its degrees of freedom:

* **learned** (``--noise-from``): earlier runs of one unchanged build (the
  project's own A/A runs or unchanged commits), or a ``headroom history``
  JSON, which stores the release-to-release noise between change points;
* **repeats**: the spread between the runs of each side (``--baseline A1 A2
  A3``), pooled with what was learned (or with the default);
* **default**: per-metric values measured on real ramps of one unchanged
  nginx build recorded on a loaded 2-core machine (``data/calibration/aa``,
  see the README): what a shared CI machine does when nothing else is known.

Throughput and latency are far noisier between runs on a shared machine
than the CPU cost of a request (other jobs take CPU time from the server,
which slows it down, but not what each request costs), so every metric has
its own value.  The interval of a change then uses Student's t with the
noise estimate's degrees of freedom, never a normal quantile.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .metrics import noise_defaults
from .model import HeadroomError

#: metric key -> (sd of a run's log mean between runs of one build, degrees of freedom).
#: The larger of two measurements on shared 2-core machines: 38 unchanged runs in
#: data/calibration (21 % throughput, 14 % p50, 31 % p90, 26 % p99, 4.6 % CPU per
#: request) and 19 interleaved runs on another (27 %, 27 %, -, 27 %, 6 %); docs/ci.md.
DEFAULTS = noise_defaults()  # {key: (sd, df)}, declared with each metric in headroom/metrics.py
DEFAULT_SOURCE = (
    "default for a shared CI machine (measured on 12 real runs of one build, data/calibration/aa)"
)

#: lag-1 correlation of step residuals within a run (measured: +0.28 to +0.49)
STEP_CORRELATION = 0.4


@dataclass(frozen=True)
class NoiseEstimate:
    """Between-run noise of one metric: sd of a run's log value, its degrees of freedom, and where from."""

    sd: float
    df: float
    source: str

    def __repr__(self) -> str:
        return f"<NoiseEstimate {self.sd:.1%} per run, {self.df:g} df, {self.source}>"


def canonical(key: str) -> str:
    """The noise key of a metric: the comparison's paired plateau shares the plateau's noise."""
    return "plateau_rps" if key == "paired_plateau_rps" else key


def default(key: str) -> NoiseEstimate:
    """The default noise of a metric (a percentile not in the table takes p99's from p90 up, else p50's)."""
    key = canonical(key)
    if key not in DEFAULTS:
        key = "p99_s" if _pct_of(key) >= 90 else "p50_s"
    sd, df = DEFAULTS[key]
    return NoiseEstimate(sd, df, DEFAULT_SOURCE)


def _pct_of(key: str) -> float:
    try:
        return float(key[1:].removesuffix("_s"))
    except ValueError:
        return 50.0


@dataclass(frozen=True)
class LearnedNoise:
    """Sums of squares of run-level log values around their group means, per metric (poolable)."""

    ss: dict  # key -> sum of squares
    df: dict  # key -> degrees of freedom
    source: str

    def estimate(self, key: str) -> NoiseEstimate | None:
        key = canonical(key)
        df = self.df.get(key, 0)
        if df <= 0:
            return None
        return NoiseEstimate(math.sqrt(self.ss[key] / df), df, self.source)


def pooled(parts: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(sum of squares, df) of several groups pooled: plain sums."""
    return float(sum(p[0] for p in parts)), float(sum(p[1] for p in parts))


def spread(values: np.ndarray) -> tuple[float, float]:
    """(sum of squares around the mean, df) of one group of run-level log values."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) < 2:
        return 0.0, 0.0
    return float(np.sum((v - v.mean()) ** 2)), float(len(v) - 1)


def combine(
    key: str, learned: LearnedNoise | None, repeats: tuple[float, float] | None
) -> tuple[NoiseEstimate, str]:
    """The noise a comparison uses for one metric, and a short word for where it came from.

    Learned noise and the spread between repeat runs are pooled (their sums
    of squares and degrees of freedom add).  Without learned noise the
    default stands in for it, also beside repeats: three runs per side give
    only 4 degrees of freedom, and on real shared machines (runs recorded
    back to back look alike) their spread alone let 7 % of A/A comparisons
    through; pooled with the default it does not.
    """
    parts, names = [], []
    key = canonical(key)
    if learned is not None and learned.df.get(key, 0) > 0:
        parts.append((learned.ss[key], learned.df[key]))
        names.append(learned.source)
        how = "learned"
    else:
        d = default(key)
        parts.append((d.sd * d.sd * d.df, d.df))
        names.append(d.source)
        how = "default"
    if repeats is not None and repeats[1] > 0:
        parts.append(repeats)
        names.append("the spread between this comparison's repeat runs")
        how = how if how == "learned" else "repeats"
    ss, df = pooled(parts)
    return NoiseEstimate(math.sqrt(ss / df), df, " + ".join(names)), how


def within_run_se(d: np.ndarray) -> float:
    """Standard error of the mean of per-pair log differences, widened for correlated steps.

    Steps of one run are not independent replicates: their residuals are
    positively correlated (lag 1 about +0.4), which makes the variance of a
    mean (1 + rho) / (1 - rho) times the independent value.
    """
    n = len(d)
    if n < 2:
        return math.inf
    rho = STEP_CORRELATION
    return float(np.std(d, ddof=1)) / math.sqrt(n) * math.sqrt((1 + rho) / (1 - rho))


def load_history_noise(path: str | Path) -> LearnedNoise:
    """The release-to-release noise a ``headroom history --json`` file stored, per metric."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise HeadroomError(f"{p}: not a readable history JSON ({e.__class__.__name__})") from None
    if not isinstance(doc, dict) or doc.get("kind") != "history":
        raise HeadroomError(
            f'{p}: not a history JSON (no "kind": "history"): give run folders or a file '
            "written by 'headroom history --json'"
        )
    noise = doc.get("noise")
    if not isinstance(noise, dict) or not noise:
        raise HeadroomError(
            f"{p}: this history JSON stores no noise (written by an older headroom: "
            "run 'headroom history --json' again)"
        )
    ss, df = {}, {}
    for key, v in noise.items():
        try:
            sd, d = float(v["sd"]), float(v["df"])
        except (TypeError, KeyError, ValueError):
            raise HeadroomError(f'{p}: noise of {key!r} is not {{"sd": number, "df": number}}') from None
        if d > 0 and math.isfinite(sd) and sd >= 0:
            ss[key], df[key] = sd * sd * d, d
    runs = len(doc.get("runs") or [])
    return LearnedNoise(ss, df, f"learned from the history of {runs} releases ({p.name})")
