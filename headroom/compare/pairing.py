"""Pairing: which baseline step is compared with which candidate step.

A ramp is an experiment whose independent variable is the load: steps are
paired by concurrency (exactly; runs with slightly different plans by the
nearest level within 15 %, or refused with one line saying why).  A level
recorded several times in one run (``headroom ramp --ab --interleave steps
--pairs-per-level N``) gives N pairs, replicate j of every run with replicate j
of the others.  Runs without known concurrency pair step k with step k.
"""

from __future__ import annotations

import numpy as np

from ..model import HeadroomError
from ..steps import StepTable

#: runs with different concurrency plans pair their levels within this relative distance
NEAREST = 0.15


def levels(t: StepTable) -> dict[float, list[int]]:
    """Usable steps by concurrency (by index when unknown), in step order; a repeated level lists
    every step at it (its replicates)."""
    keys = t.concurrency if t.known_concurrency else t.index.astype(np.float64)
    out: dict[float, list[int]] = {}
    for i in np.flatnonzero(t.usable):
        out.setdefault(float(keys[i]), []).append(int(i))
    return out


def failed_levels(t: StepTable) -> set[float]:
    """Levels of steps with no successful request and failed ones (a server answering only 5xx, a
    step in which it died): run, never usable, but their failures count in the error rate."""
    if t.errors is None:
        return set()
    keys = t.concurrency if t.known_concurrency else t.index.astype(np.float64)
    return {float(keys[i]) for i in np.flatnonzero((t.requests == 0) & (t.errors > 0))}


def _ran(t: StepTable) -> np.ndarray:
    """Steps that sent requests (answered or failed)."""
    return (t.requests + (t.errors if t.errors is not None else 0)) > 0


def ran_steps(t: StepTable, common: set[float]) -> list[int]:
    """Steps of a run at the given levels that sent requests (usable, too short, or all failed)."""
    keys = t.concurrency if t.known_concurrency else t.index.astype(np.float64)
    return [int(i) for i in np.flatnonzero(_ran(t)) if float(keys[i]) in common]


def error_levels(sides) -> set[float]:
    """Levels every run sent requests at: where the error rate is compared (a step too short to
    pair, or failing every request, still counts its failures)."""
    out = None
    for t in (s.table for side in sides for s in side):
        keys = t.concurrency if t.known_concurrency else t.index.astype(np.float64)
        ran = {float(keys[i]) for i in np.flatnonzero(_ran(t))}
        out = ran if out is None else out & ran
    return out or set()


def load_of(t: StepTable, i: int) -> float:
    """The load of step ``i`` as the model across load sees it: concurrency, else the planned rate,
    else the step's position (1-based)."""
    if t.known_concurrency:
        return float(t.concurrency[i])
    if t.intended_rps is not None and np.isfinite(t.intended_rps[i]) and t.intended_rps[i] > 0:
        return float(t.intended_rps[i])
    return float(i + 1)


def _replicated(common: list[float], lvs: list[dict], nb: int, known: bool) -> list[tuple]:
    """(load, baseline steps, candidate steps) for every replicate of every common level."""
    out = []
    for c in common:
        reps = min(len(lv[c]) for lv in lvs)
        for j in range(reps):
            out.append(
                (c if known else None, tuple(lv[c][j] for lv in lvs[:nb]), tuple(lv[c][j] for lv in lvs[nb:]))
            )
    return out


def pair_steps(base: list[StepTable], cand: list[StepTable]) -> tuple[list[tuple], str]:
    """Match steps across every run: [(concurrency, baseline steps, candidate steps)], and how.

    Raises HeadroomError when the concurrency plans cannot be matched.
    """
    tables = base + cand
    known = all(t.known_concurrency for t in tables)
    how = "by concurrency" if known else _index_pairing(tables)
    lvs = [levels(t) for t in tables]
    common = sorted(set.intersection(*(set(lv) for lv in lvs)))
    wanted = max(3, (min(len(lv) for lv in lvs) + 1) // 2)
    same_plan = all(set(lv) == set(lvs[0]) for lv in lvs)
    if len(common) >= wanted or not known or same_plan:
        return _replicated(common, lvs, len(base), known), how
    if len(tables) == 2:
        pairs = _nearest(lvs[0], lvs[1])
        if len(pairs) >= wanted:
            return pairs, "by nearest concurrency (the runs used different concurrency plans)"
    raise HeadroomError(_unmatched(tables, len(base), len(common), wanted))


def common_pairs(
    sides, why: str = "up to the level where a run stopped answering"
) -> tuple[list[tuple], str]:
    """Steps paired at the levels every run has usable (a run stopped answering, so the plans
    end at different levels, or failed every request at some levels); none when the runs share
    no level."""
    tables = [s.table for side in sides for s in side]
    known = all(t.known_concurrency for t in tables)
    lvs = [levels(t) for t in tables]
    common = sorted(set.intersection(*(set(lv) for lv in lvs)))
    how = "by concurrency" if known else "by step index (concurrency unknown: no ramp parameters in metadata)"
    return _replicated(common, lvs, len(sides[0]), known), f"{how}, {why}"


def pairs_for(sides, side_stops) -> tuple[list[tuple], str]:
    """The step pairs; a run that stopped answering, or failed every request from some level on,
    pairs the levels every run has usable (its failures count in the error rate)."""
    try:
        return pair_steps([s.table for s in sides[0]], [s.table for s in sides[1]])
    except HeadroomError:
        if any(x is not None for row in side_stops for x in row):
            return common_pairs(sides)
        if any(failed_levels(s.table) for side in sides for s in side):
            return common_pairs(sides, "at the levels where every run had successful requests")
        raise  # plans that truly differ (recorded with other flags)


def _index_pairing(tables: list[StepTable]) -> str:
    """How steps without a concurrency are paired: a rate ramp's by its planned rates."""
    if not all(t.kind == "rate" for t in tables):
        return "by step index (concurrency unknown: no ramp parameters in metadata)"
    n = min(len(t.intended_rps) for t in tables)
    rates = [np.round(np.asarray(t.intended_rps[:n], float), 3) for t in tables]
    if all(np.array_equal(r, rates[0], equal_nan=True) for r in rates):
        return "by step index: open-loop rate ramps with the same planned rates"
    return "by step index: open-loop rate ramps whose planned rates differ (step k against step k)"


def _level_list(lv) -> str:
    lv = sorted(lv)
    return ", ".join(f"{c:g}" for c in lv[:8]) + (" ..." if len(lv) > 8 else "")


def side_name(side: str, i: int, n: int) -> str:
    return side if n == 1 else f"{side} {i + 1}"


def _unmatched(tables: list[StepTable], nb: int, shared: int, wanted: int) -> str:
    """Why the runs' steps cannot be paired, in one line: for every run, the levels another run
    compares on that it lacks, and why (its step there was too short to trust, had no throughput,
    or it ran no step at that level: a different plan)."""
    from ..steps import MIN_STEP_REQUESTS, MIN_STEP_S

    names = [side_name("baseline", i, nb) for i in range(nb)]
    names += [side_name("candidate", i, len(tables) - nb) for i in range(len(tables) - nb)]
    usable = [set(levels(t)) for t in tables]
    anyone = set().union(*usable)
    said, short_any, absent_any = [], False, False
    for name, t, lv in zip(names, tables, usable):
        ran = {float(c): i for i, c in enumerate(t.concurrency)}
        missing = anyone - lv
        failed = failed_levels(t) & missing
        short = {c for c in missing if c in ran and t.short[ran[c]]} - failed
        idle = {c for c in missing if c in ran} - short - failed
        absent = missing - set(ran)
        if absent:
            said.append(f"{name} has no step at concurrency {_level_list(absent)}")
        if short:
            note = "" if short_any else f" (under {MIN_STEP_S:g} s or {MIN_STEP_REQUESTS} requests)"
            said.append(f"{name} steps at concurrency {_level_list(short)} were dropped as too short{note}")
        if failed:
            n = sum(int(t.errors[ran[c]]) for c in failed)
            said.append(
                f"{name} steps at concurrency {_level_list(failed)} had no successful request (all {n:,} failed)"
            )
        if idle:
            said.append(f"{name} steps at concurrency {_level_list(idle)} had no throughput")
        short_any, absent_any = short_any or bool(short), absent_any or bool(absent)
    why = "; ".join(said)
    usable_in_all = f"only {shared} level(s) usable in every run, {wanted} needed"
    if absent_any:
        return (
            f"the runs' concurrency plans do not match ({usable_in_all}): {why}: "
            "record baseline and candidate with the same concurrency steps"
        )
    return (
        f"the runs ran the same concurrency levels, but {usable_in_all}: {why}: "
        "give those steps more time or requests"
    )


def _nearest(lb: dict[float, list[int]], lc: dict[float, list[int]]) -> list[tuple]:
    out, used = [], set()
    for c in sorted(lb):
        best = min((abs(k - c), k) for k in lc if k not in used) if len(used) < len(lc) else None
        if best is not None and best[0] <= NEAREST * c:
            used.add(best[1])
            reps = min(len(lb[c]), len(lc[best[1]]))
            out += [(c, (lb[c][j],), (lc[best[1]][j],)) for j in range(reps)]
    return out


def plateau_mask(sides, pairs: list[tuple]) -> np.ndarray:
    """Pairs at or above the lowest saturation concurrency of any run (top third without models)."""
    n90 = []
    for side in sides:
        for s in side:
            m = s.capacity.model
            if m is None:
                n90 = None
                break
            n90.append(m.n_at_fraction(0.9))
        if n90 is None:
            break
    if n90 is not None and pairs and pairs[0][0] is not None:
        mask = np.array([p[0] >= min(n90) - 1e-9 for p in pairs])
        if mask.sum() >= 3:
            return mask
    mask = np.zeros(len(pairs), bool)
    mask[-max(3, len(pairs) // 3) :] = True
    return mask
