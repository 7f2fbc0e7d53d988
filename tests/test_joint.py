"""The joint test of interleaved recordings (headroom/compare/joint.py), recomputed independently.

* the sign-flip p-value of a small planted recording, every pattern of its levels enumerated, each
  pattern's line F test written out with numpy least squares and scipy.stats;
* a level's own test: the levels' own means against the comparison's own noise, never narrowed by
  learned noise (issue 48: learned noise made one level of a busy machine decide the gate);
* the closed test: every intersection hypothesis of planted families tested by weighted Bonferroni
  over the blocks (min-p within the flip block), a metric rejected when every intersection holding it
  is; the step-down of joint.closed_test must reject exactly those.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from headroom.compare.across_load import Cells, PairNoise, fit
from headroom.compare.joint import Member, closed_test, flip_block

#: docs/ci.md: a recording with under 8 df of its own takes the default pair noise with 4 df
PRIOR = {"cpu_s_per_req": 0.12, "p50_s": 0.35}


def _trim(k: int, draws: int = 400_000) -> float:
    """E[mean of the k-1 smallest of k chi-square(1)], by simulation (the trimmed successive differences)."""
    x = np.sort(np.random.default_rng(7).chisquare(1, (draws, k)), axis=1)[:, :-1]
    return float(x.mean())


def _line_p(loads: list[float], pairs: list[list[float]], key: str, trim: float) -> float:
    """docs/ci.md's line F test of one recording, two pairs a level: pure error within levels, the
    levels' own noise from successive differences (largest left out, rescaled), pooled unless their F
    test has p <= 0.25, the default prior below 8 df; F of both coefficients of the line in log load."""
    d = np.array([v for vs in pairs for v in vs])
    x = np.array([math.log(c) for c, vs in zip(loads, pairs) for _ in vs])
    design = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(design, d, rcond=None)
    explained = float(np.sum((design @ coef) ** 2))
    ss_pe = sum(float(np.sum((np.array(vs) - np.mean(vs)) ** 2)) for vs in pairs)
    df_pe = sum(len(vs) - 1 for vs in pairs)
    means = [float(np.mean(vs)) for vs in pairs]
    w = [
        (b - a) / math.sqrt(1 / len(p0) + 1 / len(p1))
        for a, b, p0, p1 in zip(means, means[1:], pairs, pairs[1:])
    ]
    w.remove(max(w, key=abs))
    v_d, df_d = sum(v * v for v in w) / trim / len(w), 2 * len(w) / 3
    if sps.f.sf(v_d / (ss_pe / df_pe), df_d, df_pe) > 0.25:
        var, df = (ss_pe + v_d * df_d) / (df_pe + df_d), df_pe + df_d
    else:
        var, df = v_d, df_d
    if df < 8:
        var, df = (var * df + PRIOR[key] ** 2 * 4) / (df + 4), df + 4
    return float(sps.f.sf(explained / 2 / var, 2, df))


def _planted(shift: float, seed: int, levels: int = 6) -> tuple[list[float], list[list[float]]]:
    rng = np.random.default_rng(seed)
    loads = [float(2**k) for k in range(levels)]
    jump = rng.normal(0, 0.03, levels)  # what the machine did to each level, shared by its pairs
    pairs = [[shift + j + rng.normal(0, 0.05) for _ in range(2)] for j in jump]
    return loads, pairs


def _cells(loads, pairs) -> Cells:
    rec = [0 for vs in pairs for _ in vs]
    load = [c for c, vs in zip(loads, pairs) for _ in vs]
    return Cells.build(rec, load, [v for vs in pairs for v in vs])


@pytest.mark.parametrize("shift,seed", [(0.0, 1), (0.0, 2), (0.04, 3), (0.15, 4)])
def test_sign_flip_pvalue_of_a_small_recording_every_pattern_enumerated(shift, seed):
    loads, pairs = _planted(shift, seed)
    trim = _trim(len(loads) - 1)
    observed = _line_p(loads, pairs, "cpu_s_per_req", trim)
    null = []
    for signs in itertools.product((1.0, -1.0), repeat=len(loads)):
        null.append(
            _line_p(loads, [[s * v for v in vs] for s, vs in zip(signs, pairs)], "cpu_s_per_req", trim)
        )
    want = sum(p <= observed * (1 + 1e-9) for p in null) / len(null)
    obs, got_null = flip_block([Member("cpu_s_per_req", _cells(loads, pairs))])
    assert len(got_null["cpu_s_per_req"]) == 2 ** len(loads)
    assert obs["cpu_s_per_req"] == pytest.approx(want, abs=1e-12)
    # the model's own F test is the observed pattern's statistic
    m = fit(_cells(loads, pairs), "cpu_s_per_req")
    assert m.p_f == pytest.approx(observed, rel=2e-3)
    if shift >= 0.15:  # every level the same way, far beyond its noise: the most extreme pattern pair
        assert obs["cpu_s_per_req"] == pytest.approx(2 / 2 ** len(loads))


def test_a_level_is_judged_against_the_comparisons_own_noise_not_narrower_learned_noise():
    """One level jumps (+0.5 in log) in an otherwise unchanged recording; learned noise from pairs
    within levels (0.02 a pair, 200 df) would make it decide.  The level's test uses the noise the
    comparison alone gives (its own, with the default prior), recomputed here with scipy.stats.t."""
    loads, pairs = _planted(0.0, 11, levels=8)
    pairs[3] = [v + 0.5 for v in pairs[3]]
    cells = _cells(loads, pairs)
    learned = PairNoise(0.02**2 * 200, 200.0, 0.0, 0.0, "learned")
    plain, with_learned = fit(cells, "p50_s"), fit(cells, "p50_s", learned)
    assert with_learned.noise.sd < plain.noise.sd  # the learned noise does narrow the fit
    var, df = plain.noise.ss / plain.noise.df, plain.noise.df
    t = [abs(np.mean(vs)) / math.sqrt(var / len(vs)) for vs in pairs]
    want = min(1.0, len(loads) * min(2 * sps.t.sf(x, df) for x in t))
    assert plain.p_levels == pytest.approx(want, rel=1e-6)
    assert with_learned.p_levels == pytest.approx(want, rel=1e-6)  # not narrowed by the learned noise
    lo, hi = with_learned.level_band(0.05)
    q = sps.t.ppf(1 - 0.05 / (2 * len(loads)), df)
    assert hi[3] - lo[3] == pytest.approx(2 * q * math.sqrt(var / 2), rel=1e-6)


def _closed_by_enumeration(flip_obs, flip_null, others, alpha) -> set[str]:
    """Every intersection of the hypotheses tested by weighted Bonferroni over its blocks (the flip
    block's share is what the others leave; min-p within it); a hypothesis rejected when every
    intersection holding it is."""
    flip_share = 1.0 - sum(w for _, w in others.values())
    keys = list(flip_obs) + list(others)
    rejected_sets = set()
    for r in range(1, len(keys) + 1):
        for subset in itertools.combinations(keys, r):
            fl = [k for k in subset if k in flip_obs]
            ot = [k for k in subset if k in others]
            total = (flip_share if fl else 0.0) + sum(others[k][1] for k in ot)
            hit = any(others[k][0] <= alpha * others[k][1] / total for k in ot)
            if fl:
                mins = np.min([flip_null[k] for k in fl], axis=0)
                p = min(flip_obs[k] for k in fl)
                hit = hit or float(np.mean(mins <= p * (1 + 1e-12))) <= alpha * flip_share / total
            if hit:
                rejected_sets.add(frozenset(subset))
    out = set()
    for k in keys:
        holding = [
            frozenset(s) for r in range(1, len(keys) + 1) for s in itertools.combinations(keys, r) if k in s
        ]
        if all(s in rejected_sets for s in holding):
            out.add(k)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_step_down_rejects_what_the_closed_test_rejects(seed):
    rng = np.random.default_rng(100 + seed)
    patterns = 512
    base = rng.uniform(size=patterns)
    flip_null, flip_obs = {}, {}
    for k, rho in (("cpu", 0.2), ("rps", 0.9), ("p50", 0.9)):  # rps and p50 move together
        mix = np.where(rng.uniform(size=patterns) < rho, base, rng.uniform(size=patterns))
        ranks = np.argsort(np.argsort(mix)) + 1.0
        flip_null[k] = ranks / patterns  # marginal p-values: uniform on k / P
        flip_obs[k] = float(rng.choice([1 / patterns, 4 / patterns, 0.01, 0.015, 0.02, 0.03, 0.2]))
    others = {
        "levels:cpu": (float(rng.choice([1e-4, 0.004, 0.05])), 0.15),
        "levels:p50": (float(rng.choice([1e-5, 0.01, 0.3])), 0.15),
        "capacity": (float(rng.choice([1e-4, 0.002, 0.5])), 0.05),
        "errors": (float(rng.choice([1e-6, 0.5])), 0.02),
    }
    got = closed_test(flip_obs, flip_null, others, 0.05)
    assert {k for k, j in got.items() if j.rejected} == _closed_by_enumeration(
        flip_obs, flip_null, others, 0.05
    )
