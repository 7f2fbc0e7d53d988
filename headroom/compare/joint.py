"""The joint test of interleaved recordings: every decision metric at once, under sign flips of whole levels.

When nothing changed, A and B of one load level are exchangeable: the
level's paired log ratios are as likely negated, for **every metric at
once** (throughput, latencies and CPU per request are measured on the same
steps).  Flipping the sign of whole levels (of every recording) therefore
draws the joint null distribution of all the metrics' tests, with their
correlation (at saturation CPU per request, throughput and latency move
together) and with whatever the machine did to single levels (a burst of
foreign load that fell unevenly on A and B moves the level of every metric,
and under a flip it stays as large: one level's jump cannot pass for a
change).

* Each metric's statistic is its model's own p-value of "no change at any
  level" (:mod:`headroom.compare.across_load`: the line's F test, or the
  levels' own means), recomputed under every flip pattern with the noise
  re-estimated from the flipped levels (pure error and successive
  differences; learned noise pooled as in the fit).
* Its **marginal flip p-value** is the share of patterns whose statistic is
  at least as extreme as the observed one: exact whatever the noise's shape
  (all 2^L patterns of L levels when at most :data:`ENUMERATE` units, else
  :data:`DRAWS` seeded draws with the observed pattern among them).
* **Westfall and Young's step-down min-p** then holds the family-wise error:
  the smallest marginal p-value is compared with the distribution of the
  smallest marginal p over the metrics still in play, pattern by pattern;
  a rejected metric leaves the family and the next is judged against the
  rest.  No share of the error budget is fixed in advance: the correlation
  of the metrics is paid for once, and power goes to whichever metric moved.

The capacity at the objective and the error rate have no flip version here
(the capacity is read from each side's crossing; the error rate is a count):
they keep fixed shares (:data:`CAPACITY_SHARE`, :data:`ERROR_SHARE`), and
the three blocks form one closed test of weighted Bonferroni tests (a
rejected block's share passes to the others), so the family's error stays
within ``alpha``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .across_load import (
    MIN_DF,
    POOL_P,
    PRIOR_DF,
    SD_FLOOR,
    Cells,
    PairNoise,
    _ar1,
    _trim_factor,
    default_pair_sd,
    own_noise,
    shrunk_rho,
)

#: all 2^L sign patterns up to this many units (recording x level); beyond, DRAWS seeded draws
ENUMERATE = 14
DRAWS = 4999
SEED = 4801
#: sign flips judge the lines only when their smallest p can reach this share of alpha (11 levels: 2/2048);
#: with fewer levels the lines' parametric F tests take the block's share, Bonferroni
FLIP_FLOOR = 0.1
#: fixed shares of the blocks without a flip version
ERROR_SHARE = 0.02
CAPACITY_SHARE = 0.05
#: the levels' own means (a change at one level that the line through all levels dilutes: a slower
#: handler at light load) share this, equally over the metrics tested there; their key's prefix
LEVEL_SHARE = 0.45
LEVEL_PREFIX = "levels:"


@dataclass(frozen=True)
class Member:
    """One metric of the flip block: its cells, learned noise and out key."""

    key: str  # out key (paired_plateau_rps, p50_s, p99_s, cpu_s_per_req)
    cells: Cells
    learned: PairNoise | None = None


def patterns(units: int, seed: int = SEED) -> np.ndarray:
    """(P, units) signs: every pattern when few, else the observed (all +1) and DRAWS seeded draws."""
    if units <= ENUMERATE:
        return 1.0 - 2.0 * ((np.arange(2**units)[:, None] >> np.arange(units)[None, :]) & 1)
    rng = np.random.default_rng(seed)
    draws = rng.choice(np.array([-1.0, 1.0]), size=(DRAWS, units))
    return np.vstack([np.ones(units), draws])


def _successive(cells: Cells, m: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Per pattern the trimmed sum of squared successive differences (as :func:`across_load.successive`),
    and the pattern-free count and df."""
    n = cells.n
    ss = np.zeros(m.shape[0])
    nd = df = 0.0
    for r in np.unique(cells.recording):
        idx = np.flatnonzero(cells.recording == r)
        if len(idx) < 2:
            continue
        w = np.diff(m[:, idx], axis=1) / np.sqrt(1.0 / n[idx][:-1] + 1.0 / n[idx][1:])
        w2 = w * w
        k = w.shape[1]
        if k >= 4:
            ss += (w2.sum(axis=1) - w2.max(axis=1)) / _trim_factor(k)
            nd += k - 1
            df += 2.0 * (k - 1) / 3.0
        else:
            ss += w2.sum(axis=1)
            nd += k
            df += 2.0 * k / 3.0
    return ss, nd, df


def pattern_pvalues(member: Member, signs: np.ndarray) -> np.ndarray:
    """The metric's p-value of "no change at any level" under every sign pattern of its cells
    (``signs``: (P, cells)); row 0 all +1 is the observed p-value of the model's test."""
    from scipy.special import fdtrc

    cells, learned = member.cells, member.learned
    parts = own_noise(cells)
    q, z = parts["q"], parts["z"]
    n = cells.n
    m = signs * cells.means[None, :]
    beta = (n[None, :] * m) @ z
    ss_pe, df_pe = parts["ss_pe"], parts["df_pe"]
    if learned is not None:
        rho = shrunk_rho(learned.rho_sum, learned.lag_pairs, df_pe > 0)
    else:
        rho = shrunk_rho(0.0, 0.0, df_pe > 0)
    ss_d, nd, df_d = _successive(cells, m)
    v_d = ss_d / nd / max(1.0 - rho, 0.2) if nd > 0 else np.zeros(len(m))
    if df_pe > 0 and df_d > 0 and ss_pe > 0:
        pool = fdtrc(df_d, df_pe, v_d / (ss_pe / df_pe)) > POOL_P
    else:
        pool = np.full(len(m), df_pe > 0)
    ss = np.where(pool, ss_pe + v_d * df_d, v_d * df_d)
    df = np.where(pool, df_pe + df_d, df_d)
    if learned is not None and learned.df > 0:
        ss, df = ss + learned.ss, df + learned.df
    else:
        few = df < MIN_DF
        sd = default_pair_sd(member.key)
        ss, df = np.where(few, ss + sd * sd * PRIOR_DF, ss), np.where(few, df + PRIOR_DF, df)
    var = np.maximum(ss / np.maximum(df, 1e-12), SD_FLOOR**2)
    d_half = 1.0 / np.sqrt(n)
    wz = n[:, None] * z
    c0 = wz.T @ (_ar1(cells, rho) * d_half[:, None] * d_half[None, :]) @ wz
    wald = np.einsum("pi,ij,pj->p", beta, np.linalg.pinv(c0), beta) / var / (q + 1)
    p_f = np.where(wald > 0, fdtrc(q + 1, df, np.maximum(wald, 0.0)), 1.0)
    return np.minimum(1.0, p_f)


def marginal(p: np.ndarray) -> np.ndarray:
    """Each pattern's marginal flip p-value: the share of patterns whose p is as small or smaller."""
    order = np.sort(p)
    return np.searchsorted(order, p * (1 + 1e-9), side="right") / len(p)


def flip_block(members: list[Member]) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Observed marginal flip p-values {key: p} and their joint null {key: (P,) marginal p}."""
    units = sorted({(int(r), float(x)) for mb in members for r, x in zip(mb.cells.recording, mb.cells.load)})
    index = {u: i for i, u in enumerate(units)}
    signs = patterns(len(units))
    obs, null = {}, {}
    for mb in members:
        cols = [index[(int(r), float(x))] for r, x in zip(mb.cells.recording, mb.cells.load)]
        p = pattern_pvalues(mb, signs[:, cols])
        q = marginal(p)
        # one pair a level (A B | B A puts a side's steps of two levels side by side, and neighbouring
        # levels correlate, which independent flips of the levels ignore): never below the line's own F
        # test, whose noise allows for that correlation; the larger of two valid p-values is valid, and
        # judged against the flip null it is conservative.  Two pairs a level: no such correlation
        floor = float(p[0]) if bool(np.all(mb.cells.n <= 1)) else 0.0
        obs[mb.key], null[mb.key] = max(float(q[0]), floor), q
    return obs, null


@dataclass(frozen=True)
class Judged:
    """A metric's part in the closed test: rejected or not, and the per-metric level it was judged at."""

    rejected: bool
    alpha: float  # the largest marginal p-value this metric could have been rejected with
    pvalue: float  # the marginal p-value (flip block) or the test's own


def closed_test(
    flip_obs: dict[str, float],
    flip_null: dict[str, np.ndarray],
    others: dict[str, tuple[float, float]],
    alpha: float,
) -> dict[str, Judged]:
    """The step-down closed test over the flip block (min-p) and the other metrics (fixed shares).

    ``others``: {key: (p-value, share)} of the metrics without a flip version.  The flip block's share
    is what is left of 1.  At each step every block still in play gets alpha x its share / the shares
    in play; the flip block rejects its smallest marginal p when the share of patterns whose smallest
    marginal p over its members still in play is at most that p stays within the block's alpha.
    """
    flip_share = max(0.0, 1.0 - sum(w for _, w in others.values())) if flip_obs else 0.0
    active_flip = set(flip_obs)
    active_other = {k for k in others if others[k][1] > 0}
    out: dict[str, Judged] = {}
    while True:
        total = (flip_share if active_flip else 0.0) + sum(others[k][1] for k in active_other)
        if total <= 0:
            break
        hit = None
        if active_flip:
            a_block = alpha * flip_share / total
            k = min(active_flip, key=lambda j: flip_obs[j])
            mins = np.min(np.vstack([flip_null[j] for j in sorted(active_flip)]), axis=0)
            if float(np.mean(mins <= flip_obs[k] * (1 + 1e-12))) <= a_block:
                hit = ("flip", k, _critical(mins, a_block))
        if hit is None:
            for k in sorted(active_other, key=lambda j: others[j][0] / others[j][1]):
                a = alpha * others[k][1] / total
                if others[k][0] <= a:
                    hit = ("other", k, a)
                    break
        if hit is None:
            break
        kind, k, a = hit
        out[k] = Judged(True, a, flip_obs[k] if kind == "flip" else others[k][0])
        (active_flip if kind == "flip" else active_other).discard(k)
    total = (flip_share if active_flip else 0.0) + sum(others[k][1] for k in active_other)
    if active_flip:
        mins = np.min(np.vstack([flip_null[j] for j in sorted(active_flip)]), axis=0)
        a = _critical(mins, alpha * flip_share / total) if total > 0 else 0.0
        for k in active_flip:
            out[k] = Judged(False, a, flip_obs[k])
    for k in active_other:
        out[k] = Judged(False, alpha * others[k][1] / total if total > 0 else 0.0, others[k][0])
    for k in others:
        out.setdefault(k, Judged(False, 0.0, others[k][0]))
    return out


def _critical(mins: np.ndarray, a: float) -> float:
    """The largest marginal p whose share of patterns with a smaller-or-equal minimum is within a:
    the per-metric level the block's min-p test amounts to (at least the smallest attainable p when
    even that is rejected)."""
    vals = np.unique(mins)
    ok = [v for v in vals if float(np.mean(mins <= v * (1 + 1e-12))) <= a]
    return float(ok[-1]) if ok else 0.0


def effective_share(a_local: float, alpha: float) -> float:
    """A per-metric level as a share of alpha (what the smallest detectable change is planned with)."""
    return min(1.0, max(a_local, 1e-6) / alpha) if alpha > 0 else math.nan
