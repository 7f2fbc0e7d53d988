"""The change across load: each metric's paired log ratio as a smooth function of log load.

An interleaved recording (``headroom ramp --ab --interleave steps``) runs
baseline (A) and candidate (B) seconds apart at every load level, usually
several times per level (``--pairs-per-level``, ABBA at one level, BAAB at
the next).  Every pair gives a paired log ratio ``d = log(B) - log(A)`` of
each metric.  With ``x = log(load)`` (concurrency, or the planned rate of an
open loop), recording ``r``, level ``k`` and pair ``j``::

    d_rkj = f(x_k) + u_rk + e_rkj

``f`` is the change, a line in ``x`` (a constant with at most 2 levels): a
slower handler matters at light load, contention at heavy load, and most
real changes move steadily with load.  (A quadratic was tried: on simulated
recordings at the measured noise it lost power for constant, fading and
crossing changes alike, and a shape the line misses stays in the level
residuals, which only widens the intervals.)
``u`` is what the machine did to one level beyond that (a burst of foreign
load that fell unevenly on A and B), ``e`` the noise of one pair.

**Noise, measured apart from the change.**

* *Pure error*: the spread of a level's pairs around their own mean (df:
  pairs less levels).  The pairs of one level share its change, whatever
  the change's shape, so nothing of the change can enter it.
* *Level residuals*: the spread of the level means around the fitted ``f``
  (df: levels less the polynomial's terms); it holds ``u`` as well.
* When the level residuals show no more noise than the pure error predicts
  (F test, p > 0.25: Bancroft's rule for pooling a lack-of-fit term), the
  two are pooled; otherwise the level residuals alone are the noise of a
  level mean.  Without replicates only the level residuals exist.
* Neighbouring levels' residuals may correlate (a burst spanning two
  levels): the lag-1 correlation is measured on the residuals *after* the
  fitted change (a change that grows with load is not read as
  correlation), corrected for the bias fitted residuals have, shrunk towards
  :data:`RHO_PRIOR` with the weight of :data:`RHO_PRIOR_WEIGHT` neighbour
  pairs and clipped to [0, 0.8]; the covariance of a recording's level means
  is AR(1) with it, and the level residuals' df shrink by its inflation.
* A prior: earlier interleaved A/A recordings (``--noise-from``) pool
  their noise by degrees of freedom; a recording with fewer than
  :data:`MIN_DF` of its own takes the metric's default pair noise
  (:data:`DEFAULT_PAIR_SD`, measured on real recordings at about 70 % foreign
  load) with :data:`PRIOR_DF` df, so that a short recording does not rest on
  1-2 df.

**Tests.**

* "No change at any level": the Wald F test that both coefficients of ``f``
  are 0 (2 numerator df).  Under no change every level's mean
  is 0, so the test is valid whatever shape a change would have.
* Without replicates (one pair per level), also a sign-consistency test: all
  of K levels on one side has probability 2 x 2^-K under no change; the two
  p-values are combined by Bonferroni.
* The change at every level, ``f(x_k)``, with Scheffe's simultaneous band:
  "p50 +240 % at c=1" is judged with every level at once, consistently with
  the F test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

#: the polynomial's degree (with 3 or more distinct levels): a line in log load
DEGREE_MAX = 1
#: Bancroft's rule: the level residuals are pooled with the pure error unless their F test has p <= this
POOL_P = 0.25
#: the lag-1 correlation of neighbouring levels' residuals is shrunk towards RHO_PRIOR with the weight of
#: RHO_PRIOR_WEIGHT neighbour pairs, and clipped to [0, RHO_MAX]
RHO_PRIOR = 0.0
RHO_PRIOR_WEIGHT = 10.0
RHO_MAX = 0.8
#: one pair per level (AB at one level, BA at the next) puts each side's steps of neighbouring levels
#: next to each other in time (A B | B A | A B): a burst of foreign load over "B | B" moves two
#: neighbouring levels the same way.  The old one-pair sets measured +0.25 on average (-0.15 to +0.57,
#: data/calibration/interleaved go-aa, aa): the prior of a recording without replicates
RHO_PRIOR_SINGLE = 0.25
RHO_PRIOR_SINGLE_WEIGHT = 20.0
#: a pair's log ratio is never taken as known better than this (1 %): latencies are recorded to 0.1 ms by
#: some generators and CPU time to the kernel's 10 ms tick
SD_FLOOR = 0.01
#: with fewer own degrees of freedom than this (and nothing learned), the default pair noise joins in
MIN_DF = 8
PRIOR_DF = 4.0
#: sd of one pair's log ratio, per metric: the default prior and what the error budget is planned with.
#: Measured on the dev-* interleaved recordings at about 70 % foreign load (data/calibration/interleaved)
DEFAULT_PAIR_SD = {"plateau_rps": 0.40, "p50_s": 0.35, "p90_s": 0.50, "p99_s": 0.70, "cpu_s_per_req": 0.12}


def default_pair_sd(key: str) -> float:
    """The default pair noise of a metric (another percentile: p99's from p90 up, else p50's)."""
    from ..noise import canonical

    k = canonical(key)
    if k in DEFAULT_PAIR_SD:
        return DEFAULT_PAIR_SD[k]
    try:
        pct = float(k[1:].removesuffix("_s"))
    except ValueError:
        pct = 50.0
    return DEFAULT_PAIR_SD["p99_s" if pct >= 90 else "p50_s"]


def degree_for(n_levels: int) -> int:
    """The polynomial's degree for ``n_levels`` distinct levels."""
    return 0 if n_levels <= 2 else DEGREE_MAX


@dataclass(frozen=True)
class Cells:
    """The paired log ratios of one metric, grouped into cells of (recording, level)."""

    recording: np.ndarray  # int per cell
    load: np.ndarray  # float per cell, > 0
    values: tuple[np.ndarray, ...]  # finite log ratios per cell (at least one each)
    kind: str = "concurrency"  # what the load is: "concurrency", "rate" (req/s) or "step" (position)
    #: (grid in s, loads) of the levels whose every pair lies within a few quanta of zero on both sides
    #: (a percentile on a coarse grid: rounding, not change, at those levels), or None
    coarse: tuple | None = None

    @classmethod
    def build(
        cls, recording: Sequence[int], load: Sequence[float], d: Sequence[float], kind: str = "concurrency"
    ) -> Cells:
        """From one entry per pair (NaN pairs dropped), grouped by (recording, load)."""
        groups: dict[tuple[int, float], list[float]] = {}
        for r, x, v in zip(recording, load, d):
            if np.isfinite(v) and x > 0:
                groups.setdefault((int(r), float(x)), []).append(float(v))
        keys = sorted(groups)
        return cls(
            np.array([k[0] for k in keys], np.int64),
            np.array([k[1] for k in keys], np.float64),
            tuple(np.array(groups[k]) for k in keys),
            kind,
        )

    @property
    def n(self) -> np.ndarray:
        return np.array([len(v) for v in self.values], np.float64)

    @property
    def means(self) -> np.ndarray:
        return np.array([v.mean() for v in self.values])

    @property
    def pairs(self) -> int:
        return int(sum(len(v) for v in self.values))


@dataclass(frozen=True)
class PairNoise:
    """The noise of a level mean, per pair (poolable): variance times df, df, and the lag-1 correlation."""

    ss: float  # s^2 * df
    df: float
    rho_sum: float  # bias-corrected lag-1 correlation times its neighbour pairs
    lag_pairs: float
    source: str

    @property
    def sd(self) -> float:
        return math.sqrt(self.ss / self.df) if self.df > 0 else math.nan

    @property
    def rho_hat(self) -> float | None:
        return self.rho_sum / self.lag_pairs if self.lag_pairs > 0 else None

    def pooled_with(self, other: PairNoise | None) -> PairNoise:
        if other is None or other.df <= 0:
            return self
        return PairNoise(
            self.ss + other.ss,
            self.df + other.df,
            self.rho_sum + other.rho_sum,
            self.lag_pairs + other.lag_pairs,
            f"{self.source} + {other.source}",
        )


def _basis(x: np.ndarray, w: np.ndarray, q: int) -> np.ndarray:
    """R such that Z = V R (V = [1, x, x^2][:, :q+1]) has weighted orthonormal columns: Z' W Z = I."""
    v = np.vander(x, q + 1, increasing=True)
    sw = np.sqrt(w)[:, None]
    _, r = np.linalg.qr(sw * v)
    return np.linalg.inv(r)


def _ar1(cells: Cells, rho: float) -> np.ndarray:
    """Correlation of the level means: rho^|distance in level order| within a recording."""
    pos = np.zeros(len(cells.load))
    for r in np.unique(cells.recording):
        idx = np.flatnonzero(cells.recording == r)
        pos[idx] = np.arange(len(idx))
    same = cells.recording[:, None] == cells.recording[None, :]
    return np.where(same, rho ** np.abs(pos[:, None] - pos[None, :]), 0.0)


def inflation(rho: float, k: float) -> float:
    """Variance of a mean of k AR(1) residuals with lag-1 correlation rho, over the independent value."""
    n = max(1, int(round(k)))
    if rho <= 0 or n < 2:
        return 1.0
    j = np.arange(1, n)
    return float(1.0 + 2.0 * np.sum((1.0 - j / n) * rho**j))


@dataclass(frozen=True)
class AcrossLoad:
    """A metric's change fitted across load, with its noise, tests and per-level estimates."""

    loads: np.ndarray  # distinct levels, ascending
    fitted: np.ndarray  # log change at each level
    se_fitted: np.ndarray
    raw: np.ndarray  # mean paired log ratio of each level (all recordings)
    level_pairs: np.ndarray  # pairs at each level
    average: float  # mean log change over the pairs (= over the levels when every level has as many)
    se_average: float
    df: float
    terms: int  # the polynomial's terms (degree + 1)
    p_f: float  # the F test of "no change at any level" (normal theory, shown)
    p_sign: float | None  # the sign-consistency test of the level means (no replicates, shown), else None
    p_flip: float  # the sign-flip randomization test of "no change at any level" (the tail's guard)
    noise: PairNoise
    rho: float
    pure_sd: float | None  # within-level pair noise, where replicates exist
    pure_df: float
    level_sd: float | None  # level means around the fit, per pair
    pooled: bool
    recordings: int
    pairs: int
    source: str  # where the noise came from (own, learned, default prior)
    kind: str = "concurrency"  # what the loads are (Cells.kind)
    tail: bool = False  # a tail percentile (p90 and up): judged by the F and the sign-flip test both
    key: str = ""

    own_var: float = 0.0  # per pair: the noise this comparison alone gives (its own, or with the default)
    own_df: float = 0.0
    coarse: tuple = ()  # loads whose own mean is rounding (Cells.coarse): no level decision there

    @property
    def judged_levels(self) -> np.ndarray:
        """Which levels may decide on their own (not made of rounding alone)."""
        return ~np.isin(self.loads, np.asarray(self.coarse, dtype=float))

    @property
    def level_noise(self) -> tuple[float, float]:
        """(variance of one pair, df) a level's own mean is judged with: the fit's noise, which the
        change's shape does not enter (pure error and successive differences), never below this
        comparison's own: noise learned from earlier A/A recordings (``--noise-from``) rests mostly on
        the pairs within a level, which share what the machine did to the level, so it must not narrow
        a level's interval (it raised false alarms at single levels of a busy machine)."""
        var = max(self.noise.ss / self.noise.df, SD_FLOOR**2)
        if self.own_df > 0 and self.own_var > var:
            return self.own_var, self.own_df
        return var, self.df

    @property
    def raw_se(self) -> np.ndarray:
        """Standard error of each level's own mean (its pairs over every recording)."""
        return np.sqrt(self.level_noise[0] / self.level_pairs)

    @property
    def p_levels(self) -> float:
        """The smallest level's two-sided t test of its own mean, Bonferroni over the levels: a change at
        one level (a slower handler at light load) that the line through all levels would dilute."""
        from ..stats import t_sf

        use = self.judged_levels
        if not use.any():
            return 1.0
        t = np.abs(self.raw[use]) / self.raw_se[use]
        df = self.level_noise[1]
        return float(min(1.0, int(use.sum()) * min(2.0 * t_sf(float(x), df) for x in t)))

    @property
    def pvalue(self) -> float:
        """The p-value of "no change at any level": the line's F test or the levels' own tests,
        Bonferroni over the two.  A tail percentile (p90 and up) stands on the slowest few requests of
        a step: it is judged by the line alone, with the larger of the F and the sign-flip test (one
        level's outlier must not pass for a change, and under sign flips it flips with its level)."""
        if self.tail:
            return max(self.p_f, self.p_flip)
        return min(1.0, 2.0 * min(self.p_f, self.p_levels))

    def level_band(self, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        """Bonferroni-simultaneous (1 - alpha) intervals of each level's own mean log change."""
        from ..stats import t_quantile

        q = t_quantile(1.0 - alpha / (2.0 * len(self.loads)), self.level_noise[1])
        return self.raw - q * self.raw_se, self.raw + q * self.raw_se

    def band(self, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        """Scheffe's simultaneous (1 - alpha) band of the log change at every level."""
        from scipy.special import fdtri

        mult = math.sqrt(self.terms * float(fdtri(self.terms, self.df, 1.0 - alpha)))
        return self.fitted - mult * self.se_fitted, self.fitted + mult * self.se_fitted

    def how(self) -> str:
        """One line: what the standard error and the test stand on."""
        shape = {1: "a constant", 2: "a line"}[self.terms] + " in log load"
        parts = [
            f"{self.pairs} pairs at {len(self.loads)} levels in {self.recordings} interleaved recording(s)"
        ]
        if self.pure_sd is not None:
            parts.append(f"pair noise within levels {self.pure_sd:.3f} (log)")
        if self.level_sd is not None:
            parts.append(
                f"level means around {shape} {self.level_sd:.3f} (not the noise: a curved change sits there)"
            )
        how = "pooled with the levels' own" if self.pooled else "the levels' own noise alone"
        parts.append(f"noise {self.noise.sd:.3f} ({how}; {self.source}), {self.df:.0f} df")
        parts.append(f"neighbouring-level correlation {self.rho:+.2f}")
        test = f"no change at any level: p = {self.pvalue:.2g} (line F test {self.p_f:.2g}, "
        test += f"sign-flip {self.p_flip:.2g})" if self.tail else f"levels' own means {self.p_levels:.2g})"
        return "; ".join(parts) + "; " + test


def own_noise(cells: Cells, degree: int | None = None, source: str = "this comparison's pairs") -> dict:
    """The fit's pieces from the pairs alone: basis, coefficients, residual sums, and the levels' own
    noise from successive differences."""
    n, m = cells.n, cells.means
    distinct = np.unique(cells.load)
    q = min(degree_for(len(distinct)) if degree is None else degree, max(0, len(distinct) - 1))
    x = np.log(cells.load)
    rinv = _basis(x, n, q)
    z = np.vander(x, q + 1, increasing=True) @ rinv
    beta = z.T @ (n * m)
    e = m - z @ beta
    ss_l, df_l = float(np.sum(n * e * e)), float(len(m) - (q + 1))
    ss_pe = float(sum(np.sum((v - v.mean()) ** 2) for v in cells.values))
    df_pe = float(sum(len(v) - 1 for v in cells.values))
    return dict(
        q=q, rinv=rinv, z=z, beta=beta, ss_l=ss_l, df_l=df_l, ss_pe=ss_pe, df_pe=df_pe, source=source,
        resid=e, **successive(cells),
    )  # fmt: skip


def successive(cells: Cells) -> dict:
    """The levels' own noise from the differences of neighbouring level means (von Neumann).

    A change that moves smoothly with load hardly moves the difference of two neighbouring levels,
    so the mean square of the differences measures the noise of a level mean whatever the change's
    shape (a line's residuals would take a curved change for noise).  Scaled to one pair
    (w = difference / sqrt(1/n_k + 1/n_k+1)), its expectation is v (1 - rho) for levels whose noise
    has lag-1 correlation rho; the differences' own lag-1 correlation is -(1 - rho) / 2, which
    gives rho.  The largest difference of each recording (of 4 or more) is left out and the rest
    scaled to stay unbiased (:func:`_trim_factor`): a change that is steep between two levels (a
    slower handler at light load) must not pass for noise.  Returns the variance's sum and count
    (``ss_d``, ``n_d``), its df (a mean square of successive differences is worth about 2/3 of as
    many independent squares) and rho's sums.
    """
    m, n = cells.means, cells.n
    ss = df = rho_sum = 0.0
    nd = nlag = 0
    for r in np.unique(cells.recording):
        idx = np.flatnonzero(cells.recording == r)  # cells are sorted by (recording, load)
        if len(idx) < 2:
            continue
        w = np.diff(m[idx]) / np.sqrt(1.0 / n[idx][:-1] + 1.0 / n[idx][1:])
        keep = np.ones(len(w), bool)
        if len(w) >= 4:
            keep[int(np.argmax(w * w))] = False
        ss += float(w[keep] @ w[keep]) / _trim_factor(len(w)) if len(w) >= 4 else float(w @ w)
        nd += int(keep.sum())
        df += 2.0 * keep.sum() / 3.0
        if len(w) >= 3 and float(w @ w) > 0:  # rho from every difference: E[r] = -(1 - rho)(k - 1) / 2k
            k = len(w)
            r_w = (float(w[:-1] @ w[1:]) / (k - 1)) / (float(w @ w) / k) * k / (k - 1)
            rho_sum += (1.0 + 2.0 * r_w) * (k - 1)
            nlag += k - 1
    return {"ss_d": ss, "n_d": nd, "df_d": df, "rho_sum": rho_sum, "lag_pairs": float(nlag)}


def _trim_factor(n: int) -> float:
    """E[mean of the n-1 smallest of n chi-square(1) values]: the trimmed mean square's bias."""
    from scipy.special import erf

    x = np.linspace(0.0, 60.0, 60001)
    e_max = float(np.trapezoid(1.0 - erf(np.sqrt(x / 2.0)) ** n, x))
    return (n - e_max) / (n - 1)


def _noise(parts: dict, rho: float, levels: float) -> tuple[PairNoise, bool]:
    """The per-pair noise of a level mean: the pure error, pooled with the levels' own noise (from
    successive differences, corrected for rho) unless that shows more noise (Bancroft's rule)."""
    from scipy.special import fdtrc

    ss_pe, df_pe = parts["ss_pe"], parts["df_pe"]
    df_d = parts["df_d"]
    v_d = parts["ss_d"] / parts["n_d"] / max(1.0 - rho, 0.2) if parts["n_d"] > 0 else 0.0
    src = parts["source"]
    if df_d <= 0 and df_pe <= 0:
        return PairNoise(0.0, 0.0, parts["rho_sum"], parts["lag_pairs"], src), True
    if df_pe > 0 and (df_d <= 0 or ss_pe <= 0 or fdtrc(df_d, df_pe, v_d / (ss_pe / df_pe)) > POOL_P):
        ss, df = ss_pe + v_d * df_d, df_pe + df_d
        return PairNoise(ss, df, parts["rho_sum"], parts["lag_pairs"], src), True
    return PairNoise(v_d * df_d, df_d, parts["rho_sum"], parts["lag_pairs"], src), False


def shrunk_rho(rho_sum: float, lag_pairs: float, replicated: bool = True) -> float:
    """The lag-1 correlation used: measured (bias-corrected), shrunk towards its prior (RHO_PRIOR, or
    RHO_PRIOR_SINGLE without replicates), clipped to [0, RHO_MAX]."""
    prior, weight = (
        (RHO_PRIOR, RHO_PRIOR_WEIGHT) if replicated else (RHO_PRIOR_SINGLE, RHO_PRIOR_SINGLE_WEIGHT)
    )
    raw = rho_sum / lag_pairs if lag_pairs > 0 else prior
    w = lag_pairs if lag_pairs > 0 else 0.0
    return float(min(RHO_MAX, max(0.0, (w * raw + weight * prior) / (w + weight))))


def fit(
    cells: Cells, key: str, learned: PairNoise | None = None, degree: int | None = None
) -> AcrossLoad | None:
    """The change of metric ``key`` across load from its cells; None with fewer than 3 pairs or 2 cells."""
    if cells.pairs < 3 or len(cells.values) < 2:
        return None
    parts = own_noise(cells, degree)
    # the correlation of neighbouring levels is the design's (or learned from A/A recordings), never
    # this comparison's own: any estimate from its levels reads a curved change as correlation
    rho = shrunk_rho(learned.rho_sum, learned.lag_pairs, parts["df_pe"] > 0) if learned is not None else (
        shrunk_rho(0.0, 0.0, parts["df_pe"] > 0))  # fmt: skip
    recs = len(np.unique(cells.recording))
    own, pooled = _noise(parts, rho, len(cells.values) / recs)
    noise, source = _with_prior(own, learned, key)
    if noise.df <= 0:
        return None
    plain, _ = _with_prior(own, None, key)  # what the comparison alone would use (the plain compare's)
    return replace(
        _assemble(cells, parts, noise, rho, pooled, source, key),
        own_var=plain.ss / plain.df if plain.df > 0 else 0.0,
        own_df=plain.df,
        coarse=cells.coarse[1] if cells.coarse else (),
    )


def _with_prior(own: PairNoise, learned: PairNoise | None, key: str) -> tuple[PairNoise, str]:
    if learned is not None and learned.df > 0:
        return own.pooled_with(learned), "pooled with earlier interleaved A/A recordings"
    if own.df < MIN_DF:
        sd = default_pair_sd(key)
        prior = PairNoise(sd * sd * PRIOR_DF, PRIOR_DF, 0.0, 0.0, "the default pair noise")
        return own.pooled_with(prior), f"with the default pair noise {sd:.2f} ({PRIOR_DF:g} df): few own df"
    return own, "this recording's own pairs"


def is_tail(key: str) -> bool:
    """A latency percentile from p90 up."""
    try:
        return key.startswith("p") and key.endswith("_s") and float(key[1:-2]) >= 90
    except ValueError:
        return False


def _assemble(
    cells: Cells, parts: dict, noise: PairNoise, rho: float, pooled: bool, source: str, key: str
) -> AcrossLoad:
    from scipy.special import fdtrc

    n, z, beta, q = cells.n, parts["z"], parts["beta"], parts["q"]
    var = max(noise.ss / noise.df, SD_FLOOR**2)
    d_half = 1.0 / np.sqrt(n)
    sigma_m = var * _ar1(cells, rho) * d_half[:, None] * d_half[None, :]
    wz = n[:, None] * z
    cov = wz.T @ sigma_m @ wz
    loads = np.unique(cells.load)
    zl = np.vander(np.log(loads), q + 1, increasing=True) @ parts["rinv"]
    fitted = zl @ beta
    se_f = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", zl, cov, zl), 0.0))
    a = (n @ z) / n.sum()  # the pairs' mean of the basis: the average change is a' beta
    wald = float(beta @ np.linalg.pinv(cov) @ beta) / (q + 1)
    p_f = float(fdtrc(q + 1, noise.df, wald)) if wald > 0 else 1.0
    raw = np.array(
        [np.concatenate([v for v, x in zip(cells.values, cells.load) if x == c]).mean() for c in loads]
    )
    level_pairs = np.array([sum(len(v) for v, x in zip(cells.values, cells.load) if x == c) for c in loads])
    return AcrossLoad(
        loads=loads, fitted=fitted, se_fitted=se_f, raw=raw, level_pairs=level_pairs,
        average=float(a @ beta), se_average=float(math.sqrt(max(a @ cov @ a, 0.0))), df=noise.df,
        terms=q + 1, p_f=min(1.0, p_f), p_sign=None if parts["df_pe"] > 0 else sign_test(cells.means),
        p_flip=flip_test(cells, z, by_level=not pooled and parts["df_pe"] > 0),
        noise=noise, rho=rho,
        pure_sd=math.sqrt(parts["ss_pe"] / parts["df_pe"]) if parts["df_pe"] > 0 else None,
        pure_df=parts["df_pe"], key=key,
        level_sd=math.sqrt(parts["ss_l"] / parts["df_l"]) if parts["df_l"] > 0 else None,
        pooled=pooled, recordings=len(np.unique(cells.recording)), pairs=cells.pairs, source=source,
        kind=cells.kind, tail=is_tail(key),
    )  # fmt: skip


#: sign flips drawn for the randomization test (all 2^N patterns when N pairs give at most this many)
FLIPS = 9999
FLIP_SEED = 37


def flip_test(cells: Cells, z: np.ndarray, by_level: bool = False) -> float:
    """The sign-flip randomization p-value of "no change at any level".

    When nothing changed, A and B of a pair are exchangeable, so every pair's log ratio is as likely
    negative as positive: the statistic, the part of the pairs' sum of squares the fitted line
    explains (d' H d, H the pairs' hat matrix; the sum of squares itself does not move under sign
    flips, so this is the F statistic's order), is compared with its value under sign flips of the
    pairs (``by_level``: of whole levels, when the pairs of a level are not independent).  Exact
    whatever the shape of the noise (a p99 outlier at one level flips with it), all 2^N patterns
    when few, else FLIPS seeded draws.
    """
    d = np.concatenate(cells.values)
    rows = np.repeat(np.arange(len(cells.values)), [len(v) for v in cells.values])
    x = z[rows]  # the basis at every pair
    h = x @ np.linalg.pinv(x.T @ x) @ x.T
    q_obs = float(d @ h @ d)
    if by_level:  # one sign per level: d' H d with d = S d_cells over the level blocks
        blocks = np.zeros((len(d), len(cells.values)))
        blocks[np.arange(len(d)), rows] = 1.0
        h = (blocks * d[:, None]).T @ h @ (blocks * d[:, None])
        d = np.ones(len(cells.values))
    n = len(d)
    if 2**n <= FLIPS + 1:
        signs = 1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1)
    else:
        rng = np.random.default_rng(FLIP_SEED)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(FLIPS, n))
        signs = np.vstack([np.ones(n), signs])  # the observed pattern is one of the draws
    sd = signs * d
    q = np.einsum("ij,jk,ik->i", sd, h, sd)
    return float(np.mean(q >= q_obs * (1 - 1e-12)))


def sign_test(means: np.ndarray) -> float | None:
    """Two-sided sign test that the level means are as often above 0 as below (ties dropped)."""
    from scipy.special import bdtr

    pos, neg = int(np.sum(means > 0)), int(np.sum(means < 0))
    k = pos + neg
    if k < 2:
        return None
    return float(min(1.0, 2.0 * bdtr(min(pos, neg), k, 0.5)))


def learned_noise(cells_by_recording: list[Cells], key: str, source: str) -> PairNoise | None:
    """The pooled noise of earlier interleaved A/A recordings (``--noise-from``), each fitted as a
    comparison would fit it."""
    total = None
    for cells in cells_by_recording:
        if cells.pairs < 3 or len(cells.values) < 2:
            continue
        parts = own_noise(cells, source=source)
        rho = shrunk_rho(parts["rho_sum"], parts["lag_pairs"], parts["df_pe"] > 0)
        noise, _ = _noise(parts, rho, len(cells.values))
        if noise.df > 0:
            total = noise if total is None else total.pooled_with(noise)
    if total is None:
        return None
    return PairNoise(total.ss, total.df, total.rho_sum, total.lag_pairs, source)


def planned_se(key: str, pairs: int, recordings: int, levels: int) -> tuple[float, float]:
    """(standard error, df) of a metric's average change at the default pair noise and the prior
    correlation, for ``pairs`` pairs at ``levels`` levels in ``recordings`` recordings: the design's power."""
    levels = max(1, levels)
    per_rec = max(1.0, levels / max(1, recordings))
    vif = inflation(RHO_PRIOR, per_rec)
    terms = degree_for(int(per_rec)) + 1
    df = max(1.0, pairs - levels + (levels - terms * recordings) / vif)
    return default_pair_sd(key) * math.sqrt(vif / max(1, pairs)), df
