"""The error budget: each decision metric's share of 1 - confidence, and the weighted Holm procedure.

"Changed at all" is tested for every decision metric; a weighted Holm
procedure (a closed test of weighted Bonferroni tests) keeps the chance of
any false "changed" within ``alpha``.  The starting shares are chosen to
**maximise the worst-case power** over the kinds of regression a release
can have, each of the threshold's size:

* CPU-led: the cost of a request rises (CPU per request moves);
* throughput-led and latency-led: the server gets slower; in a closed loop
  throughput and p50 at matched concurrency are one measurement seen twice
  (Little's law), so either shows both kinds, and only the one with more
  power needs budget; in an open loop throughput is the rate and only
  latency shows it;
* tail-led: the tail percentile moves alone.

Each kind's power for a change of the threshold's size, at the standard
error the design plans (:func:`planned_se`), is taken relative to the power
the whole budget would give it (a kind the design barely sees, such as a
10 % change of p99 in one recording, would otherwise take the whole budget
for a power of a few per cent); the common fraction is raised by bisection
until the shares use the budget (maximin: the worst-protected kind of
regression is as protected as the budget allows).  Every decision metric keeps at least
:data:`WEIGHT_FLOOR` of the budget, so that a metric the design gives little
power still shows a huge change; the error rate keeps a fixed share.  The
weights depend on the design only (the planned standard errors), never on
this comparison's data: weights that follow an estimated noise give a low
estimate both more weight and a smaller p-value, which broke the family's
error rate (11 % of synthetic A/A comparisons with noise learned from 6 runs).
"""

from __future__ import annotations

import math

from ..stats import norm_cdf, z_quantile

#: the error rate's fixed share; the others are computed (these are the shares of one run a side with
#: CPU, kept for readers of older comparisons that stored no weights)
WEIGHTS = {"cpu_s_per_req": 0.8, "paired_plateau_rps": 0.08, "p50_s": 0.05, "tail": 0.05, "error_rate": 0.02}
#: every decision metric keeps at least this share of the budget
WEIGHT_FLOOR = 0.05


def planned_se(key: str, pairs: int, design, runs: tuple[int, int]) -> tuple[float, float]:
    """(standard error, df) of a metric's change planned from the design and the reference noise:
    the pairs of interleaved recordings at the default pair noise, or the run-level defaults for a
    shared machine with the runs per side (and their repeats' df)."""
    if key == "rps_at_objective":  # the capacity at the objective: planned as the throughput's change
        key = "paired_plateau_rps"
    if design.paired:
        from .across_load import planned_se as paired_se

        return paired_se(key, pairs, len(design.recordings), design.levels)
    from ..noise import default

    d = default(key)
    return d.sd * math.sqrt(1.0 / runs[0] + 1.0 / runs[1]), d.df + runs[0] + runs[1] - 2


def kinds(keys: list[str], closed_loop: bool) -> list[list[str]]:
    """The kinds of regression (CPU-led, throughput-led, latency-led, tail-led), each as the tested
    metrics that show it."""
    tail = [k for k in keys if k not in ("cpu_s_per_req", "paired_plateau_rps", "p50_s", "rps_at_objective")]
    # a closed loop: Little's law ties them at matched load; p50 first (on a tie it is chosen): it is
    # judged at every matched level, plateau throughput of runs recorded apart only at the saturated ones;
    # the capacity at the objective shows a throughput-led regression too (issue 39)
    both = ["p50_s", "paired_plateau_rps"]
    throughput = (both if closed_loop else ["paired_plateau_rps"]) + ["rps_at_objective"]
    latency = both if closed_loop else ["p50_s"]
    out = [["cpu_s_per_req"], throughput, latency, tail]
    return [[k for k in g if k in keys] for g in out if any(k in keys for k in g)]


def _power(share: float, se: float, delta: float, alpha: float) -> float:
    """Power of a two-sided test at ``alpha * share`` for a log change ``delta`` (normal approximation)."""
    if se <= 0:
        return 1.0
    return norm_cdf(delta / se - z_quantile(1.0 - alpha * share / 2.0))


def _share_for(power: float, se: float, delta: float, alpha: float) -> float:
    """The smallest share w with Phi(delta/se - z(1 - alpha w / 2)) >= power (inf: unreachable)."""
    if se <= 0:
        return 0.0
    reach = delta / se - z_quantile(power)
    if reach <= 0:
        return math.inf
    return 2.0 * (1.0 - norm_cdf(reach)) / alpha


def _shares(ratio: float, planned: dict, groups: list[list[str]], delta: float, alpha: float) -> dict:
    """Per metric the share that gives every kind of regression ``ratio`` of the power the whole budget
    would give it, through its cheapest metric."""
    full = {k: _power(1.0, planned[k][0], delta, alpha) for k in planned}
    need = {k: _share_for(ratio * full[k], planned[k][0], delta, alpha) for k in planned}
    chosen = {min(g, key=lambda k: need[k]) for g in groups}
    return {k: (need[k] if k in chosen else 0.0) for k in planned}


def power_weights(
    planned: dict[str, tuple[float, float]],
    has_error: bool,
    threshold: float,
    alpha: float,
    closed_loop: bool = True,
) -> dict[str, float]:
    """Starting weights of the Holm procedure: maximin power over the kinds of regression (module doc).

    ``planned``: per ratio metric the (standard error, df) its change would
    have under the design in force at the reference noise (:func:`planned_se`).
    """
    keys = list(planned)
    err = WEIGHTS["error_rate"] if has_error else 0.0
    if not keys:
        return {"error_rate": 1.0} if has_error else {}
    budget = 1.0 - err - WEIGHT_FLOOR * len(keys)
    delta = math.log1p(threshold)
    groups = kinds(keys, closed_loop)
    lo, hi = 0.0, 1.0
    for _ in range(60):  # the largest common share of each kind's full-budget power the budget buys
        mid = (lo + hi) / 2
        if sum(_shares(mid, planned, groups, delta, alpha).values()) <= budget:
            lo = mid
        else:
            hi = mid
    extra = _shares(lo, planned, groups, delta, alpha)
    spare = max(0.0, budget - sum(extra.values()))  # unspent: shared evenly
    out = {k: WEIGHT_FLOOR + extra[k] + spare / len(keys) for k in keys}
    if has_error:
        out["error_rate"] = err
    return out


def weighted_holm(pvalues: dict[str, float], weights: dict[str, float], alpha: float) -> dict[str, tuple]:
    """Weighted Holm: {key: (rejected, local alpha)}; a rejected metric's weight passes to the rest.

    At each step the metric with the smallest p / weight is rejected when
    p <= alpha x weight / (sum of the remaining weights); the first that is
    not stops the procedure.  This is a closed test of weighted Bonferroni
    tests, so the chance of any false "changed" stays below ``alpha``.
    """
    active = {k: weights[k] for k in pvalues if weights.get(k, 0) > 0}
    out: dict[str, tuple] = {}
    while active:
        total = sum(active.values())
        k = min(active, key=lambda j: pvalues[j] / active[j])
        a = alpha * active[k] / total
        if pvalues[k] > a:
            break
        out[k] = (True, a)
        del active[k]
    total = sum(active.values())
    for k, w in active.items():
        out[k] = (False, alpha * w / total)
    return out
