"""Interleaved recordings: A and B alternating within every load level, compared level by level.

``headroom ramp --ab --interleave steps`` records baseline (A) and candidate
(B) in one job, alternating the sides within every concurrency level (AB at
one level, BA at the next).  The two steps of a level are seconds apart and
see the same host: the other jobs on a shared machine, its frequency, its
caches.  The paired log ratio of a level, ``log(B_k) - log(A_k)``, is then
free of the whole-run drift that makes two separate runs of one build differ
by 20-30 % in throughput, and the *levels* become the replicates:

* the change of a metric is the mean paired log ratio over the levels it
  uses (every matched level; the saturated ones for plateau throughput),
  pooled over recordings;
* its spread is measured from the pairs themselves: the residuals around
  each recording's mean, their variance and their lag-1 correlation between
  neighbouring levels (measured with the small-sample bias correction
  (K r + 1) / (K - 3), shrunk towards +0.45 by the number of residuals,
  clipped to [0, 0.8]), which inflates the variance of a mean of K
  correlated residuals by ``1 + 2 sum_j (1 - j/K) rho^j``;
* the degrees of freedom are the effective number of levels (K / that
  inflation) less one per recording;
* with several recordings the spread of the recordings' means is a second
  estimate, and the larger standard error is used (as a run-level test does);
* earlier interleaved A/A recordings (``--noise-from``) add their residual
  variance, pooled by degrees of freedom.

Two runs are partners when their metadata names the same job and recording
(``ab.design: interleaved steps``); a comparison whose every run has its
partner on the other side is judged this way, anything else by the
run-level test of :mod:`headroom.compare`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DESIGN = "interleaved steps"
RHO_MAX = 0.8
#: residual sd of a level pair's log ratio, measured on 16 real interleaved A/A recordings of nginx
#: beside a CPU hog (data/calibration/interleaved/aa, 160 df): what the Holm weights of an
#: interleaved comparison are planned with (never the comparison's own spread: weights that
#: follow the data's noise estimate let small estimates both weigh more and reject more)
DEFAULTS = {"plateau_rps": 0.46, "p50_s": 0.18, "p90_s": 0.52, "p99_s": 0.75, "cpu_s_per_req": 0.067}
#: the lag-1 correlation is shrunk towards this value with the weight of RHO_PRIOR_DF residuals:
#: one recording's 10 residuals say little about it.  Pooled over the real interleaved A/A
#: sets beside a CPU hog (data/calibration/interleaved aa, aa-2, go-aa; 80-160 df each) it is
#: -0.15 to +0.57 after the bias correction, +0.25 on average: +0.45 is on the safe side.
#: The weight is 4 recordings' worth: with 1 recording's (10) a hog burst over three
#: neighbouring levels read as a correlation of +0.7 and left 2 df, so a 2x change measured
#: at -0.75 +- 0.3 (log) stayed "unclear" (go-x2: 6 of 8 caught without the server's CPU;
#: 8 of 8 with 40, A/A false alarms 0 of 36 either way)
RHO_PRIOR = 0.45
RHO_PRIOR_DF = 40.0
#: a level pair's log ratio is never taken as known better than this (1 %): latencies are
#: recorded to 0.1 ms by some generators and CPU time to the kernel's 10 ms tick, so
#: identical pairs at every level say "below the resolution", not "no noise"
SD_FLOOR = 0.01


@dataclass(frozen=True)
class PairedNoise:
    """Residual variance of paired log ratios of one metric, with its df and lag-1 correlation."""

    ss: float  # sum of squared residuals around each recording's mean
    df: float  # residual degrees of freedom (pairs less recordings)
    lag_num: float  # sum of products of neighbouring residuals
    lag_den: float  # sum of squared residuals that have a neighbour
    levels: float  # mean number of levels per recording
    source: str = "the pairs of this comparison"

    def pooled_with(self, other: PairedNoise | None) -> PairedNoise:
        if other is None or other.df <= 0:
            return self
        n = self.df + other.df
        return PairedNoise(
            self.ss + other.ss,
            n,
            self.lag_num + other.lag_num,
            self.lag_den + other.lag_den,
            (self.levels * self.df + other.levels * other.df) / n if n else self.levels,
            f"{self.source} + {other.source}",
        )

    @property
    def rho(self) -> float:
        """Lag-1 correlation of neighbouring residuals: measured (bias-corrected: (K r + 1) / (K - 3)), shrunk
        towards RHO_PRIOR by the number of residuals, clipped to [0, RHO_MAX]."""
        k = max(self.levels, 4.0)
        # the lag-1 correlation of K mean-removed residuals is biased low by about (1 + 3 rho) / K
        raw = (self.lag_num / self.lag_den * k + 1.0) / (k - 3.0) if self.lag_den > 0 else RHO_PRIOR
        w = self.df if self.lag_den > 0 else 0.0
        return float(min(RHO_MAX, max(0.0, (w * raw + RHO_PRIOR_DF * RHO_PRIOR) / (w + RHO_PRIOR_DF))))

    @property
    def sd(self) -> float:
        return math.sqrt(self.ss / self.df) if self.df > 0 else math.nan


def partners(base_meta: Sequence[dict], cand_meta: Sequence[dict]) -> list[tuple[int, int]] | None:
    """[(baseline index, candidate index)] of the interleaved recordings, or None.

    Every run on both sides must be one half of an interleaved recording whose
    other half is on the other side; otherwise the comparison is not paired.
    """

    def key(meta: dict):
        ab = meta.get("ab") if isinstance(meta, dict) else None
        if not isinstance(ab, dict) or ab.get("design") != DESIGN:
            return None
        rec, job = ab.get("recording"), ab.get("job")
        if not isinstance(rec, int) or not isinstance(job, str):
            return None
        return job, rec

    kb, kc = [key(m) for m in base_meta], [key(m) for m in cand_meta]
    if any(k is None for k in kb + kc) or len(kb) != len(kc):
        return None
    if len(set(kb)) != len(kb) or set(kb) != set(kc):
        return None
    return [(i, kc.index(k)) for i, k in enumerate(kb)]


def inflation(rho: float, k: float) -> float:
    """Variance of a mean of k AR(1) residuals with lag-1 correlation rho, over the independent value."""
    n = max(1, int(round(k)))
    if rho <= 0 or n < 2:
        return 1.0
    j = np.arange(1, n)
    return float(1.0 + 2.0 * np.sum((1.0 - j / n) * rho**j))


def residual_noise(d: list[np.ndarray], source: str = "the pairs of this comparison") -> PairedNoise | None:
    """The residual spread of paired log ratios, ``d[r]`` the levels of recording r in level order.

    NaN levels are dropped (their neighbours are then not adjacent: no lag product across a gap).
    """
    ss = df = num = den = 0.0
    levels = []
    for x in d:
        x = np.asarray(x, np.float64)
        ok = np.isfinite(x)
        if ok.sum() < 2:
            continue
        e = np.where(ok, x - x[ok].mean(), np.nan)
        ss += float(np.nansum(e**2))
        df += float(ok.sum() - 1)
        both = ok[1:] & ok[:-1]
        num += float(np.sum(e[1:][both] * e[:-1][both]))
        den += float(np.sum(e[:-1][both] ** 2))
        levels.append(int(ok.sum()))
    if df <= 0:
        return None
    return PairedNoise(ss, df, num, den, float(np.mean(levels)), source)


@dataclass(frozen=True)
class PairedEstimate:
    """The mean paired log ratio of one metric, its standard error and degrees of freedom."""

    d: float
    se: float
    df: float
    pairs: int
    recordings: int
    noise: PairedNoise
    how: str  # one line: what the standard error stands on


def estimate(d: list[np.ndarray], learned: PairedNoise | None = None) -> PairedEstimate | None:
    """Mean paired log ratio over recordings ``d`` (one array of levels each), with its standard error.

    Fewer than 3 usable pairs in all: None.
    """
    arrays = [np.asarray(x, np.float64) for x in d]
    oks = [x[np.isfinite(x)] for x in arrays]
    n = sum(len(x) for x in oks)
    if n < 3:
        return None
    own = residual_noise(arrays)
    if own is None:
        return None
    noise = own.pooled_with(learned)
    d_mean = float(np.concatenate(oks).mean())
    vif = inflation(noise.rho, noise.levels)
    # each recording's mean has variance s^2 * vif / K_r; the pooled mean weighs them by K_r / N
    var = max(noise.ss / noise.df, SD_FLOOR**2) * vif * sum(len(x) for x in oks if len(x)) / n**2
    se = math.sqrt(var)
    r = sum(1 for x in oks if len(x))
    df = max(1.0, noise.df / vif)
    how = (
        f"{n} level pairs in {r} interleaved recording(s): residual sd {noise.sd:.3f} (log), "
        f"lag-1 correlation {noise.rho:+.2f} between neighbouring levels, {df:.0f} effective df"
    )
    if r >= 2:
        means = np.array([x.mean() for x in oks if len(x)])
        se_b = float(np.std(means, ddof=1) / math.sqrt(r))
        if se_b > se:
            se, df = se_b, float(r - 1)
            how += f"; widened to the spread between the {r} recordings' means ({r - 1} df)"
    return PairedEstimate(d_mean, se, df, n, r, noise, how)


def planned_se(key: str, pairs: int, recordings: int) -> tuple[float, float]:
    """(standard error, df) a metric's paired mean would have at the default pair noise and the
    prior correlation, for ``pairs`` level pairs in ``recordings`` recordings: the design's power."""
    from .noise import canonical

    k = canonical(key)
    if k not in DEFAULTS:
        k = "p99_s" if k.startswith("p") and k[1:3].isdigit() and int(k[1:3]) >= 90 else "p50_s"
    levels = max(1.0, pairs / max(1, recordings))
    vif = inflation(RHO_PRIOR, levels)
    return DEFAULTS[k] * math.sqrt(vif / max(1, pairs)), max(1.0, pairs / vif - recordings)
