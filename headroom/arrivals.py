"""Rate steps of an open-loop ramp found from its arrivals alone, without the plan.

k6's ``ramping-arrival-rate`` and Gatling's ``constantUsersPerSec`` write
when work arrived (and k6 what it dropped), not the rate it was meant to
hold.  The rate's levels are found from the arrivals: per whole-second bin
(k6, whose stages begin whole seconds after its first arrival) or by binary
segmentation of the arrivals on their Poisson likelihood, each change moved
to the event that begins the new rate (Gatling, whose first users start
late while its JVM warms up); a level held long enough is a step
(:func:`headroom.levels.steps_from_levels`).  :func:`idle_share` tells a
Gatling open model from a closed one.
"""

from __future__ import annotations

import numpy as np

from .levels import BEHIND_TOLERANCE, NS_PER_S, Step, StepInference, steps_from_levels
from .plan_steps import _behind, _count

#: open models: rate changes are placed on bins of 1/FINE of the rate bin (0.1 s)
FINE = 10
#: a split of the arrivals' rate must gain this many times log(bins) in Poisson likelihood
SPLIT_PENALTY = 1.5
#: a share of time with no user active above this is an open model's (idle_share)
OPEN_IDLE_SHARE = 0.25


def _rate_levels(per_bin: np.ndarray, rel_tol: float) -> np.ndarray:
    """Cluster per-bin counts: sorted values join a cluster while within ``rel_tol`` of its first."""
    vals = np.unique(per_bin)
    cid = np.zeros(len(vals), np.int64)
    first = vals[0] if len(vals) else 0
    for i in range(1, len(vals)):
        new = vals[i] > first * (1 + rel_tol) + 1
        cid[i] = cid[i - 1] + new
        first = vals[i] if new else first
    med = np.array([np.median(vals[cid == c]) for c in range(int(cid[-1]) + 1)]) if len(vals) else vals
    return med[cid[np.searchsorted(vals, per_bin)]]


def _poisson_ll(c: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Poisson log likelihood (up to constants) of ``c`` events over ``n`` bins at their own rate."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(c > 0, c * np.log(np.where(c > 0, c, 1) / np.maximum(n, 1)), 0.0)


def rate_segments(counts: np.ndarray, *, min_bins: int, penalty: float, max_segments: int = 400) -> list:
    """Segments ``[a, b)`` of constant rate in per-bin event counts, by binary segmentation on the
    Poisson likelihood: a segment is split where the split gains most, while that gain exceeds
    ``penalty`` and both sides keep ``min_bins`` bins."""
    cum = np.concatenate([[0.0], np.cumsum(counts, dtype=np.float64)])
    out, todo = [], [(0, len(counts))]
    while todo:
        a, b = todo.pop()
        if b - a < 2 * min_bins or len(out) + len(todo) >= max_segments:
            out.append((a, b))
            continue
        k = np.arange(a + min_bins, b - min_bins + 1)
        left, right = cum[k] - cum[a], cum[b] - cum[k]
        whole = _poisson_ll(np.array([cum[b] - cum[a]]), np.array([b - a]))[0]
        gain = _poisson_ll(left, k - a) + _poisson_ll(right, b - k) - whole
        i = int(np.argmax(gain))
        if gain[i] <= penalty:
            out.append((a, b))
            continue
        todo += [(a, int(k[i])), (int(k[i]), b)]
    return sorted(out)


def _merge_segments(segs: list, counts: np.ndarray, min_bins: int, rel_tol: float) -> list:
    """Neighbours within ``rel_tol`` of each other's rate joined; segments shorter than ``min_bins`` joined
    to the neighbour of the closer rate (the warm-up and catch-up of a generator, a rate change's bin)."""
    segs = [list(x) for x in segs]

    def rate(x):
        return float(counts[x[0] : x[1]].sum()) / (x[1] - x[0])

    def close(x, y):
        rx, ry = rate(x), rate(y)
        return abs(rx - ry) <= rel_tol * max(rx, ry)

    changed = True
    while changed and len(segs) > 1:
        changed = False
        for i in range(len(segs) - 1):
            if close(segs[i], segs[i + 1]):
                segs[i][1] = segs[i + 1][1]
                del segs[i + 1]
                changed = True
                break
        if changed:
            continue
        short = [i for i, x in enumerate(segs) if x[1] - x[0] < min_bins]
        if short:
            i = min(short, key=lambda j: segs[j][1] - segs[j][0])
            nb = [j for j in (i - 1, i + 1) if 0 <= j < len(segs)]
            j = min(nb, key=lambda j: abs(rate(segs[j]) - rate(segs[i])))
            lo, hi = min(i, j), max(i, j)
            segs[lo][1] = segs[hi][1]
            del segs[hi]
            changed = True
    return [tuple(x) for x in segs]


def _edge_ll(events: np.ndarray, lo: int, hi: int, at: np.ndarray) -> np.ndarray:
    """The two segments' Poisson log likelihood with the change at each time of ``at``."""
    n_left = np.searchsorted(events, at) - np.searchsorted(events, lo)
    n_right = np.searchsorted(events, hi) - np.searchsorted(events, at)
    return _poisson_ll(n_left.astype(float), (at - lo).astype(float)) + _poisson_ll(
        n_right.astype(float), (hi - at).astype(float)
    )


def _refined_edges(edges: list[int], events: np.ndarray, w: int) -> np.ndarray:
    """Every inner edge between two rate segments moved to the event time (within ``FINE // 2`` bins of
    ``w`` ns either side) where the two segments' Poisson likelihood is highest: a change placed to the
    event that begins the new rate, not to a fine bin's edge."""
    out = np.asarray(edges, np.int64).copy()
    reach = (FINE // 2) * w
    for i in range(1, len(out) - 1):
        lo, hi = int(out[i - 1]), int(out[i + 1])
        near = events[(events > max(lo, out[i] - reach)) & (events < min(hi, out[i] + reach))]
        if len(near):
            out[i] = near[int(np.argmax(_edge_ll(events, lo, hi, near)))]
    return out


def idle_share(u_start, u_end) -> float:
    """The share of the time from the first user's start to the last user's end with no user active
    (USER START/END records).  A closed model starts a user as another ends: its users are almost never
    all gone (under 8 % at one user on the real samples); an open model's are whenever arrivals are
    sparser than the requests are long (53-75 % on the real samples)."""
    us = np.asarray(u_start, np.int64)
    ue = np.asarray(u_end, np.int64)
    if len(us) < 2 or len(ue) == 0:
        return 0.0
    t = np.concatenate([us, ue])
    d = np.concatenate([np.ones(len(us), np.int64), -np.ones(len(ue), np.int64)])
    o = np.argsort(t, kind="stable")
    t, d = t[o], d[o]
    times, first = np.unique(t, return_index=True)
    active = np.cumsum(np.add.reduceat(d, first))
    span = int(times[-1]) - int(times[0])
    if span <= 0:
        return 0.0
    gaps = np.diff(times)
    return float(gaps[active[:-1] <= 0].sum()) / span


def _bin_levels(st, arr, drop, bin_s: float, rel_tol: float) -> np.ndarray:
    """Every request's level: the clustered intended rate of its ``bin_s`` bin from the first arrival."""
    t0, w = int(arr[0]), int(bin_s * NS_PER_S)
    nb = int((max(int(arr[-1]), int(st.max())) - t0) // w) + 1
    per_bin = np.bincount((arr - t0) // w, minlength=nb)[:nb].astype(np.float64)
    d = drop[(drop >= t0) & (drop < t0 + nb * w)]
    per_bin += np.bincount((d - t0) // w, minlength=nb)[:nb]
    rate = _rate_levels(per_bin / bin_s, rel_tol)
    return rate[np.clip((st - t0) // w, 0, nb - 1)]


def _segment_levels(st, arr, drop, bin_s: float, rel_tol: float, min_dwell_s: float) -> np.ndarray:
    """Every request's level: the rate of the constant-rate segment its start falls in (``edges="events"``)."""
    t0, w = int(arr[0]), max(int(bin_s * NS_PER_S) // FINE, 1)
    nb = int((max(int(arr[-1]), int(st.max())) - t0) // w) + 1
    per_bin = np.bincount((arr - t0) // w, minlength=nb)[:nb].astype(np.float64)
    d = drop[(drop >= t0) & (drop < t0 + nb * w)]
    per_bin += np.bincount((d - t0) // w, minlength=nb)[:nb]
    segs = rate_segments(per_bin, min_bins=max(FINE // 2, 1), penalty=SPLIT_PENALTY * np.log(max(nb, 2)))
    segs = _merge_segments(segs, per_bin, max(int(round(min_dwell_s * NS_PER_S / w)), 1), rel_tol)
    events = np.sort(np.concatenate([arr, d])) if len(d) else arr
    edges = _refined_edges([t0 + a * w for a, _ in segs] + [t0 + nb * w], events, w)
    seg = np.clip(np.searchsorted(edges, st, side="right") - 1, 0, len(segs) - 1)
    counts = np.diff(np.searchsorted(events, edges))
    return (counts / np.maximum(np.diff(edges) / NS_PER_S, 1e-9))[seg]


def steps_from_arrivals(
    start_ns: np.ndarray,
    *,
    arrivals_ns: np.ndarray | None = None,
    dropped_ns: np.ndarray | None = None,
    bin_s: float = 1.0,
    rel_tol: float = 0.1,
    min_dwell_s: float = 2.0,
    tolerance: float = BEHIND_TOLERANCE,
    transients: str = "drop",
    source: str = "arrivals per second",
    edges: str = "bins",
) -> StepInference:
    """Rate steps of an open-loop ramp found from its arrivals, without the plan.

    The intended work is the arrivals plus the work the tool says it dropped.
    ``edges="bins"``: its rate per ``bin_s`` bin from the first arrival; bins
    whose rates lie within ``rel_tol`` of each other form one level (right for
    a generator whose stages begin whole seconds after its first arrival, as
    k6's do).  ``edges="events"``: segments of constant rate found by binary
    segmentation on the Poisson likelihood over bins of ``bin_s / FINE``
    (:func:`rate_segments`), neighbours within ``rel_tol`` joined, segments
    shorter than ``min_dwell_s`` (a generator's warm-up and catch-up) joined to
    the closer neighbour, and every change moved to the event that begins the
    new rate (:func:`_refined_edges`): for a generator whose stages do not
    begin on a whole second from its first arrival (Gatling, whose first users
    start late while its JVM warms up).  A level held for ``min_dwell_s`` is a
    step (:func:`steps_from_levels`).  k6
    ``ramping-arrival-rate``: iteration starts and ``dropped_iterations``;
    Gatling ``constantUsersPerSec``: ``USER START`` times.  Without
    ``dropped_ns`` a generator that fell behind shows its achieved rate as
    the intended one: state the plan (:func:`headroom.plan_steps.steps_from_plan`) to judge it.

    Parameters
    ----------
    start_ns : ndarray of int64
        Request starts (any order).
    arrivals_ns, dropped_ns : ndarray of int64, optional
        Times work started (default: the request starts) and times of work
        dropped by the tool.
    bin_s, rel_tol, min_dwell_s, tolerance : float
        Bin width, level clustering tolerance, minimum hold of a step,
        share of plan missed that counts as falling behind.
    transients : {"drop", "next"}
        As in :func:`steps_from_levels`.
    source : str
        For the description.
    edges : {"bins", "events"}
        Where a rate change is placed (above).

    Returns
    -------
    StepInference
        ``kind="rate"``; ``level`` and ``intended_rps`` are the step's
        intended rate: (arrivals + dropped) / duration.
    """
    st = np.asarray(start_ns, np.int64)
    arr = np.sort(st if arrivals_ns is None else np.asarray(arrivals_ns, np.int64))
    drop = np.sort(np.zeros(0, np.int64) if dropped_ns is None else np.asarray(dropped_ns, np.int64))
    if edges == "bins":
        level = _bin_levels(st, arr, drop, bin_s, rel_tol)
    elif edges == "events":
        level = _segment_levels(st, arr, drop, bin_s, rel_tol, min_dwell_s)
    else:
        raise ValueError(f"edges must be 'bins' or 'events', not {edges!r}")
    inf = steps_from_levels(
        st, level, min_dwell_s=min_dwell_s, max_gap_s=0.0, transients=transients, source=source
    )
    steps, late = [], []
    for s in inf.steps:
        dur = (s.end_ns - s.start_ns) / NS_PER_S
        sent = _count(arr, s.start_ns - 1, s.end_ns - 1) / dur if dur > 0 else float("nan")
        dropped = None if dropped_ns is None else _count(drop, s.start_ns - 1, s.end_ns - 1)
        want = sent + (dropped or 0) / dur if dur > 0 else float("nan")
        # without dropped work the intended rate is the achieved one: no verdict
        behind = None if dropped is None else _behind(want, sent, dropped, want * dur, tolerance)
        if behind:
            late.append(f"{want:.1f}/s sent {sent:.1f}/s" + (f", {dropped} dropped" if dropped else ""))
        steps.append(Step(want, s.start_ns, s.end_ns, s.n_requests, want, sent, dropped, behind))
    notes = list(inf.notes)
    if late:
        notes.append("fell behind schedule (latency understated, coordinated omission): " + "; ".join(late))
    return StepInference("rate", tuple(steps), inf.step_id, inf.n_transient, source, tuple(notes))
