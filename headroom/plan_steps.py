"""Steps whose bounds are given, not inferred from a level column.

:mod:`headroom.levels` finds the held levels in what a closed-loop tool
writes per request; the steps here come from outside the requests' levels:

* **one group per rate** (:func:`steps_from_groups`, :func:`group_steps`):
  an open-loop ramp made of separate runs, a vegeta attack or an oha file
  per rate, the rate read from its name (:func:`rate_from_name`);
* **a stated plan** (:func:`steps_from_plan`): consecutive windows of the
  planned durations, for a file that does not carry its plan (k6
  ``ramping-arrival-rate`` stages, Gatling ``constantUsersPerSec`` steps, a
  hey ramp).

Each rate step says whether the generator *fell behind* its schedule (it
sent less than planned, or the tool dropped iterations): its latencies are
then understated (coordinated omission).  Numpy only, like ``levels``.
"""

from __future__ import annotations

import numpy as np

from .levels import BEHIND_TOLERANCE, NS_PER_S, Step, StepInference


def _count(srt: np.ndarray, lo: int, hi: int) -> int:
    """Requests with start in (lo, hi]."""
    return int(np.searchsorted(srt, hi, side="right") - np.searchsorted(srt, lo, side="right"))


def rate_from_name(name: str) -> float | None:
    """The request rate a step's name states, e.g. ``rate250`` or ``q-1000`` -> 250.0, 1000.0.

    For vegeta attack names and oha file names; None when the name holds no number.
    """
    import re

    nums = re.findall(r"\d+(?:\.\d+)?", name)
    return float(nums[-1]) if nums else None


def _behind(
    intended: float | None, sent: float, dropped: int | None, planned_n: float, tolerance: float
) -> bool | None:
    """Fell behind: dropped more than ``tolerance`` of the planned work, or sent too slowly."""
    if dropped is not None and dropped > tolerance * planned_n:
        return True
    if intended is None or not np.isfinite(intended):
        return None if dropped is None else False
    return bool(sent < intended * (1.0 - tolerance))


def steps_from_groups(
    start_ns: np.ndarray,
    group: np.ndarray,
    *,
    intended_rps: list[float | None] | None = None,
    tolerance: float = BEHIND_TOLERANCE,
    source: str = "one group per rate",
) -> StepInference:
    """Rate steps of an open-loop ramp made of separate runs (vegeta attacks, oha files).

    Parameters
    ----------
    start_ns : ndarray of int64
        Request starts (any order).
    group : ndarray of int
        Run of every request, codes 0 .. G-1 (e.g. the attack name's code).
    intended_rps : list, optional
        Planned rate of every group code (None: unknown), e.g. from
        :func:`rate_from_name`.
    tolerance : float
        A step fell behind when it sent less than ``(1 - tolerance)`` of plan.
    source : str
        Where the groups came from, for the description.

    Returns
    -------
    StepInference
        One step per group in order of first request.  ``sent_rps`` is
        requests / (last start - first start), vegeta's "rate"; the step's
        ``end_ns`` is its last request's start.
    """
    st = np.asarray(start_ns, np.int64)
    g = np.asarray(group, np.int64)
    ng = int(g.max()) + 1 if len(g) else 0
    first = np.full(ng, np.iinfo(np.int64).max)
    last = np.full(ng, np.iinfo(np.int64).min)
    np.minimum.at(first, g, st)
    np.maximum.at(last, g, st)
    n = np.bincount(g, minlength=ng)
    present = np.flatnonzero(n > 0)
    order = present[np.argsort(first[present], kind="stable")]
    rank = np.full(ng, -1, np.int64)
    rank[order] = np.arange(len(order))
    want = None
    if intended_rps is not None:
        want = [intended_rps[c] if c < len(intended_rps) else None for c in order]
    inf = group_steps(
        first[order], last[order], n[order], intended_rps=want, tolerance=tolerance, source=source
    )
    if intended_rps is None:
        inf = StepInference(inf.kind, inf.steps, inf.step_id, 0, source,
                            inf.notes + ("intended rates unknown: no 'fell behind' verdict",))  # fmt: skip
    return StepInference("rate", inf.steps, rank[g], 0, source, inf.notes)


def group_steps(
    first,
    last,
    n,
    *,
    intended_rps=None,
    tolerance: float = BEHIND_TOLERANCE,
    source: str = "one group per rate",
) -> StepInference:
    """Rate steps of groups already in order of first request: their first and last start and count.

    The core of :func:`steps_from_groups`, for a reader that counted its
    groups batch by batch; ``step_id`` is the group's position.
    """
    steps, late = [], []
    for k in range(len(first)):
        span_s = (int(last[k]) - int(first[k])) / NS_PER_S
        sent = int(n[k]) / span_s if span_s > 0 else float("nan")
        want = intended_rps[k] if intended_rps is not None and k < len(intended_rps) else None
        behind = _behind(want, sent, None, 0.0, tolerance)
        if behind:
            late.append(f"{want:g}/s sent {sent:.1f}/s")
        steps.append(
            Step(
                level=float("nan") if want is None else float(want),
                start_ns=int(first[k]),
                end_ns=int(last[k]),
                n_requests=int(n[k]),
                intended_rps=want,
                sent_rps=sent,
                fell_behind=behind,
            )  # fmt: skip
        )
    notes = []
    if late:
        notes.append("fell behind schedule (latency understated, coordinated omission): " + "; ".join(late))
    return StepInference("rate", tuple(steps), np.arange(len(steps), dtype=np.int64), 0, source, tuple(notes))


def steps_from_plan(
    start_ns: np.ndarray,
    durations_s: list[float],
    levels: list[float],
    *,
    kind: str = "concurrency",
    t0_ns: int | None = None,
    arrivals_ns: np.ndarray | None = None,
    dropped_ns: np.ndarray | None = None,
    tolerance: float = BEHIND_TOLERANCE,
    source: str = "the stated plan",
) -> StepInference:
    """Steps from a stated plan: consecutive windows of ``durations_s`` from ``t0_ns``.

    For a file that does not carry its plan (k6 ``ramping-arrival-rate``
    stages, Gatling ``constantUsersPerSec`` steps, a hey ramp): step ``k``
    holds the requests started in ``[t0 + sum(d[:k]), t0 + sum(d[:k+1]))``;
    requests before or after the plan get step id -1.

    Parameters
    ----------
    start_ns : ndarray of int64
        Request starts (any order).
    durations_s, levels : list of float
        Planned duration and level (concurrency, or req/s when
        ``kind="rate"``) of every step.
    kind : {"concurrency", "rate"}
    t0_ns : int, optional
        Start of the plan (default: the first request's start).
    arrivals_ns : ndarray of int64, optional
        For rates: the times the generator started work (Gatling ``USER
        START``, k6 iterations); default the request starts.
    dropped_ns : ndarray of int64, optional
        For rates: times of the iterations the tool says it dropped (k6
        ``dropped_iterations`` samples); None: the file cannot say.
    tolerance : float
        A rate step fell behind when it dropped more than ``tolerance`` of its
        planned work or started less than ``(1 - tolerance)`` of plan; every
        dropped iteration is counted in ``Step.dropped`` either way.
    source : str
        Where the plan came from, for the description.

    Returns
    -------
    StepInference
    """
    if kind not in ("concurrency", "rate"):
        raise ValueError(f"kind must be 'concurrency' or 'rate', not {kind!r}")
    if len(durations_s) != len(levels) or not len(levels):
        raise ValueError("durations_s and levels must be non-empty and of the same length")
    st = np.asarray(start_ns, np.int64)
    t0 = int(st.min()) if t0_ns is None else int(t0_ns)
    edges = t0 + np.concatenate(([0], np.cumsum(np.rint(np.asarray(durations_s) * NS_PER_S)))).astype(
        np.int64
    )
    k = np.searchsorted(edges, st, side="right") - 1
    sid = np.where((k >= 0) & (k < len(levels)), k, -1)
    counts = np.bincount(sid[sid >= 0], minlength=len(levels))
    arr = st if arrivals_ns is None else np.sort(np.asarray(arrivals_ns, np.int64))
    arr = np.sort(arr)
    steps, late = [], []
    for j, lvl in enumerate(levels):
        a, b = int(edges[j]), int(edges[j + 1])
        step = Step(level=float(lvl), start_ns=a, end_ns=b, n_requests=int(counts[j]))
        if kind == "rate":
            sent = _count(arr, a - 1, b - 1) / ((b - a) / NS_PER_S)
            dropped = None if dropped_ns is None else _count(np.sort(np.asarray(dropped_ns)), a - 1, b - 1)
            behind = _behind(float(lvl), sent, dropped, float(lvl) * (b - a) / NS_PER_S, tolerance)
            if behind:
                late.append(f"{lvl:g}/s sent {sent:.1f}/s" + (f", {dropped} dropped" if dropped else ""))
            step = Step(float(lvl), a, b, int(counts[j]), float(lvl), sent, dropped, behind)
        steps.append(step)
    n_out = int((sid < 0).sum())
    notes = []
    if n_out:
        notes.append(f"left out {n_out} of {len(st)} requests started outside the plan's windows")
    if late:
        notes.append("fell behind schedule (latency understated, coordinated omission): " + "; ".join(late))
    return StepInference(kind, tuple(steps), sid.astype(np.int64), n_out, source, tuple(notes))
