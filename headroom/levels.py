"""Load steps inferred from what load generators really write.

A ramp is a series of held load levels.  Closed-loop tools write the level
per request (JMeter ``allThreads``/``grpThreads``), per second (k6 ``vus``)
or as user start/end records (Gatling ``USER START``/``END``); none of them
holds a level exactly: threads start over a few hundred ms, all stop at once
at the end (the count walks down through every lower level), Gatling logs a
user's START a few ms after its first request and leaves ms gaps between one
user's END and the next user's START.  The rule used here:

* a **step** is a level that is *held*: its requests cover at least
  ``min_dwell_s`` of time, and the level occupies at least half of the span
  it is seen in.  Short visits to another level inside a held span
  (``max_gap_s``) do not break the step: a level interrupted by a transient
  is still one step, and the requests of the interruption belong to it;
* everything else is a **transient** (thread start-up between two levels,
  the shut-down walk at the end): its requests get step id -1 and are
  counted in the result's notes, or, with ``transients="next"``, are
  counted in the step that follows them (the start-up of its level);
* a planned level is found once; a level held twice at different times
  (a ramp up and down) is two steps.

Open-loop tools (a request *rate* is planned, not a concurrency) are read
with :func:`headroom.plan_steps.steps_from_groups` (vegeta attacks, oha
files: one group per rate), :func:`headroom.arrivals.steps_from_arrivals`
(k6 ``ramping-arrival-rate``, Gatling ``constantUsersPerSec``: levels of
arrivals + dropped work per second, no plan needed) or
:func:`headroom.plan_steps.steps_from_plan` (the planned durations and
rates, stated by the user).  Each rate
step says whether the generator *fell behind* its schedule (it sent less than
planned or k6 dropped iterations): its latencies are then understated
(coordinated omission).

Everything is numpy on arrays a reader already has: int64 nanoseconds since
the epoch for times, integer levels.  No plotting or statistics imports.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

NS_PER_S = 1_000_000_000

#: default minimum time a level must be held to be a step
MIN_DWELL_S = 1.0
#: default longest visit to other levels that does not end a step
MAX_GAP_S = 0.25
#: default share of a rate below plan that counts as falling behind
BEHIND_TOLERANCE = 0.05


@dataclass(frozen=True)
class Step:
    """One held load step.

    ``level`` is the concurrency (clients, threads, VUs, users) of a closed
    loop or the intended rate (req/s) of an open loop.  ``start_ns`` is the
    first request's start; ``end_ns`` is where the next level begins (the
    last step: its last request's end, or start when ends are unknown).
    For rate steps: ``sent_rps`` is the rate the generator started requests
    (or arrivals) at, ``dropped`` the iterations the tool says it dropped
    (None: the file cannot say), ``fell_behind`` whether the step missed its
    schedule (None: the intended rate is unknown).
    """

    level: float
    start_ns: int
    end_ns: int
    n_requests: int
    intended_rps: float | None = None
    sent_rps: float | None = None
    dropped: int | None = None
    fell_behind: bool | None = None

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / NS_PER_S

    @property
    def rps(self) -> float:
        """Requests started per second over the step (0 for a zero-length step)."""
        d = self.duration_s
        return self.n_requests / d if d > 0 else 0.0

    def __repr__(self) -> str:
        extra = ""
        if self.intended_rps is not None or self.sent_rps is not None:
            behind = {None: "?", True: "yes", False: "no"}[self.fell_behind]
            extra = f", sent {self.sent_rps:.1f}/s, behind {behind}"
        return f"Step(level {self.level:g}, {self.duration_s:.2f} s, {self.n_requests} req{extra})"


@dataclass(frozen=True, eq=False)
class StepInference:
    """The steps of one run and the step of every request.

    ``step_id[i]`` is the index in ``steps`` of request ``i`` (input order),
    -1 for a request left out as a transient.  ``notes`` say in words what
    was left out or assigned, and why.
    """

    kind: str  # "concurrency" or "rate"
    steps: tuple[Step, ...]
    step_id: np.ndarray
    n_transient: int
    source: str
    notes: tuple[str, ...] = ()
    #: over 20 % of the requests at levels never held: probably an open-loop (rate) ramp
    looks_open: bool = False

    @property
    def levels(self) -> tuple[float, ...]:
        return tuple(s.level for s in self.steps)

    def indices(self, k: int) -> np.ndarray:
        """Input positions of the requests of step ``k``."""
        return np.flatnonzero(self.step_id == k)

    def __repr__(self) -> str:
        lv = ", ".join(f"{v:g}" for v in self.levels)
        return (
            f"StepInference({self.kind}: {len(self.steps)} steps [{lv}], "
            f"{self.n_transient} transient requests, from {self.source})"
        )


def _runs(t: np.ndarray, lv: np.ndarray, t_end: int):
    """Runs of equal level in start order: (level, t0, t1, first index, count)."""
    b = np.flatnonzero(lv[1:] != lv[:-1]) + 1
    i0 = np.concatenate(([0], b))
    i1 = np.concatenate((b, [len(t)]))
    t0 = t[i0]
    t1 = np.concatenate((t[b], [max(int(t_end), int(t[-1]) + 1)]))  # the last request inside
    return lv[i0], t0, t1, i0, i1 - i0


def _clusters(r_lv, r_t0, r_t1, r_n, max_gap_ns: int):
    """Group the runs of each level whose gaps are at most ``max_gap_ns``.

    Returns per cluster: level, span start, span end, time occupied, requests,
    and the cluster id of every run.
    """
    order = np.lexsort((r_t0, r_lv))
    lv, t0, t1 = r_lv[order], r_t0[order], r_t1[order]
    new = np.ones(len(order), bool)
    new[1:] = (lv[1:] != lv[:-1]) | (t0[1:] - t1[:-1] > max_gap_ns)
    cid_sorted = np.cumsum(new) - 1
    cid = np.empty(len(order), np.int64)
    cid[order] = cid_sorted
    nc = int(cid_sorted[-1]) + 1 if len(order) else 0
    starts = np.flatnonzero(new)
    c_lv = lv[starts]
    c_t0 = np.minimum.reduceat(t0, starts) if nc else t0[:0]
    c_t1 = np.maximum.reduceat(t1, starts) if nc else t1[:0]
    c_occ = np.bincount(cid_sorted, weights=(t1 - t0).astype(np.float64), minlength=nc)
    c_n = np.bincount(cid, weights=r_n, minlength=nc).astype(np.int64)
    return c_lv, c_t0, c_t1, c_occ, c_n, cid


def _held_spans(c_lv, c_t0, c_t1, c_occ, min_dwell_ns: float):
    """Held clusters in time order, overlaps cut, same-level neighbours merged."""
    span = np.maximum(c_t1 - c_t0, 1)
    held = np.flatnonzero((c_occ >= min_dwell_ns) & (c_occ >= 0.5 * span))
    held = held[np.argsort(c_t0[held], kind="stable")]
    out: list[list] = []  # [level, t0, t1]
    for c in held:
        lv, t0, t1 = c_lv[c], int(c_t0[c]), int(c_t1[c])
        if out and out[-1][0] == lv:
            out[-1][2] = max(out[-1][2], t1)  # same level again after a transient: one step
            continue
        if out and t0 < out[-1][2]:
            if t1 <= out[-1][2]:
                continue  # inside the previous step: a flicker, not a step
            out[-1][2] = t0  # cut the earlier step where this one begins
        out.append([lv, t0, t1])
    return [s for s in out if s[2] > s[1]]


def _assign(t: np.ndarray, s_t0: np.ndarray, s_t1: np.ndarray, transients: str) -> np.ndarray:
    """Step of each (sorted) start time: the step whose span holds it, else -1 or the next step."""
    k = np.searchsorted(s_t0, t, side="right") - 1
    inside = (k >= 0) & (t < s_t1[np.maximum(k, 0)])
    if transients == "next":
        # a start-up belongs to the level being started; the shut-down after the last step to it
        return np.where(inside, k, np.minimum(k + 1, len(s_t0) - 1))
    return np.where(inside, k, -1)


def _transient_note(vals, counts, n: int, mode: str) -> str | None:
    """Say how many requests were outside every held level, at which levels (sorted), and where they went."""
    total = int(np.sum(counts)) if len(counts) else 0
    if not total:
        return None
    shown = ", ".join(f"{v:g}: {c}" for v, c in list(zip(vals, counts))[:12])
    more = f", ... ({len(vals)} levels)" if len(vals) > 12 else ""
    where = "left out" if mode == "drop" else "counted in the step that follows them (the last step: in it)"
    return (
        f"{total} of {n} requests ({100 * total / n:.2f} %) started while the "
        f"level was not held (start-up, shut-down): {where}; by level {shown}{more}"
    )


class RunBuilder:
    """Runs of equal level in start order, built from batches in file order in bounded memory.

    Files are written in about completion order, so a row is final once
    every newer batch starts later than it: rows more than ``margin`` (one
    second plus twice the longest latency seen, when ``end`` is given)
    before a new batch's first start are settled; the rest wait.  The runs
    equal those of the whole file sorted by start (ties in file order)
    unless a batch holds a start earlier than rows already settled (a
    request far longer than any before it): then ``exact`` is False and
    the caller sorts the whole run instead.
    """

    def __init__(self, margin_ns: int = 1_000_000_000):
        self._t = np.zeros(0, np.int64)
        self._lv = np.zeros(0, np.int64)
        self._runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (level, t0, n) per emit
        self.last_t: int | None = None
        self.exact = True
        self.margin_ns = margin_ns
        self._max_lat = 0

    def add(self, t: np.ndarray, lv: np.ndarray, end: np.ndarray | None = None) -> None:
        if not len(t):
            return
        t = np.asarray(t, np.int64)
        if end is not None:
            self._max_lat = max(self._max_lat, int(np.max(end - t)))
        w = int(t.min())
        if self.last_t is not None and w < self.last_t:
            self.exact = False
        settle = w - self.margin_ns - 2 * self._max_lat
        pt, pl = self._t, self._lv
        if settle <= w:
            # every new row starts at w or later: the waiting rows before ``settle`` are settled as they
            # are (sorted), and only the rest is sorted with the batch (each row sorted once, not twice)
            k = int(np.searchsorted(pt, settle, side="left"))
            self._emit(pt[:k], pl[:k])
            pt, pl = pt[k:], pl[k:]
        tt = np.concatenate([pt, t])
        ll = np.concatenate([pl, np.asarray(lv)]) if len(pl) else np.asarray(lv)
        o = np.argsort(tt, kind="stable")
        tt, ll = np.take(tt, o), np.take(ll, o)
        cut = int(np.searchsorted(tt, settle, side="left"))
        self._emit(tt[:cut], ll[:cut])
        self._t, self._lv = tt[cut:], ll[cut:]

    def _emit(self, t: np.ndarray, lv: np.ndarray) -> None:
        if not len(t):
            return
        b = np.flatnonzero(lv[1:] != lv[:-1]) + 1
        i0 = np.concatenate(([0], b))
        n = np.diff(np.concatenate((i0, [len(t)]))).astype(np.int64)
        r_lv, r_t0 = lv[i0], t[i0]
        if self._runs and self._runs[-1][0][-1] == r_lv[0]:
            self._runs[-1][2][-1] += n[0]  # the open run goes on
            r_lv, r_t0, n = r_lv[1:], r_t0[1:], n[1:]
        if len(n):
            self._runs.append((r_lv, r_t0, n))
        self.last_t = int(t[-1])

    def finish(self, t_end: int):
        """(level, t0, t1, count) of every run; ``t_end``: the last response (ends the last run)."""
        self._emit(self._t, self._lv)
        self._t = self._t[:0]
        if not self._runs:
            z = np.zeros(0, np.int64)
            return z, z, z, z
        r_lv = np.concatenate([r[0] for r in self._runs])
        r_t0 = np.concatenate([r[1] for r in self._runs])
        r_n = np.concatenate([r[2] for r in self._runs])
        r_t1 = np.concatenate((r_t0[1:], [max(int(t_end), self.last_t + 1)]))
        return r_lv, r_t0, r_t1, r_n


class LevelSteps:
    """The held levels of a run (from its runs), and the step of its requests, batch by batch.

    :meth:`assign` gives the step of every request of a batch (any order,
    any split of the run into batches) and counts the requests per step and
    those outside every held level; :meth:`inference` then describes the
    steps.  :func:`steps_from_levels` is this on one batch.
    """

    def __init__(self, runs, t_first: int, *, min_dwell_s: float, max_gap_s: float, transients: str):
        if transients not in ("drop", "next"):
            raise ValueError(f"transients must be 'drop' or 'next', not {transients!r}")
        r_lv, r_t0, r_t1, r_n = runs
        c_lv, c_t0, c_t1, c_occ, _, _ = _clusters(r_lv, r_t0, r_t1, r_n, int(max_gap_s * NS_PER_S))
        spans = _held_spans(c_lv, c_t0, c_t1, c_occ, min_dwell_s * NS_PER_S)
        self.levels = [s[0] for s in spans]
        self.h_t0 = np.array([s[1] for s in spans], np.int64)
        self.h_t1 = np.array([s[2] for s in spans], np.int64)
        self.s_t0, self.s_t1 = self.h_t0, self.h_t1
        if transients == "next" and spans:
            # the steps tile the run: each starts where the one before ends
            self.s_t0 = np.concatenate(([t_first], self.h_t1[:-1]))
            self.s_t1 = np.concatenate((self.h_t1[:-1], [max(int(self.h_t1[-1]), int(r_t1[-1]))]))
        self.transients, self.min_dwell_s = transients, min_dwell_s
        self.counts = np.zeros(len(spans), np.int64)
        self._outside: dict = {}
        self.n = self.n_outside = self.n_transient = 0

    def assign(self, t: np.ndarray, lv: np.ndarray) -> np.ndarray:
        """Step of every request of a batch (-1: a transient left out); counts them."""
        t = np.asarray(t, np.int64)
        if len(self.levels):
            k = np.searchsorted(self.h_t0, t, side="right") - 1  # _assign's rule, the search done once
            inside = (k >= 0) & (t < self.h_t1[np.maximum(k, 0)])
            outside = ~inside
            if self.transients == "next":
                sid = np.where(inside, k, np.minimum(k + 1, len(self.h_t0) - 1))
            else:
                sid = np.where(inside, k, -1)
        else:
            sid, outside = np.full(len(t), -1, np.int64), np.ones(len(t), bool)
        self.counts += np.bincount(sid[sid >= 0], minlength=len(self.levels))
        vals, cnt = np.unique(np.asarray(lv)[outside], return_counts=True)
        for v, c in zip(vals.tolist(), cnt.tolist()):
            self._outside[v] = self._outside.get(v, 0) + c
        self.n += len(t)
        self.n_outside += int(outside.sum())
        self.n_transient += int((sid < 0).sum())
        return sid

    def reset(self) -> None:
        """Forget the requests counted so far (before a second pass)."""
        self.counts[:] = 0
        self._outside = {}
        self.n = self.n_outside = self.n_transient = 0

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(Step(float(v), int(self.s_t0[k]), int(self.s_t1[k]), int(self.counts[k]))
                     for k, v in enumerate(self.levels))  # fmt: skip

    @property
    def looks_open(self) -> bool:
        return bool(self.levels) and self.n_outside > 0.2 * self.n

    def notes(self) -> tuple[str, ...]:
        """What the reader should say about the steps: transients, levels held twice, no step, open loop."""
        vals = sorted(self._outside)
        notes = [_transient_note(vals, [self._outside[v] for v in vals], self.n, self.transients)]
        held = Counter(float(v) for v in self.levels)  # one count per level (list.count per level: quadratic)
        dup = sorted(v for v, k in held.items() if k > 1)
        if dup:
            notes.append(
                f"level(s) {', '.join(f'{v:g}' for v in dup)} held at two separate times: two steps each"
            )
        if not self.levels:
            notes.append(f"no level held for {self.min_dwell_s:g} s: no steps")
        elif self.looks_open:
            notes.append(
                "over 20 % of the requests at levels never held: an open-loop (rate) ramp? "
                "its steps come from the rates (arrivals.steps_from_arrivals, steps_from_plan)"
            )
        return tuple(x for x in notes if x)

    def inference(self, step_id: np.ndarray, source: str) -> StepInference:
        return StepInference("concurrency", self.steps, step_id, self.n_transient, source, self.notes(),
                             self.looks_open)  # fmt: skip


def steps_from_levels(
    start_ns: np.ndarray,
    level: np.ndarray,
    *,
    end_ns: np.ndarray | None = None,
    min_dwell_s: float = MIN_DWELL_S,
    max_gap_s: float = MAX_GAP_S,
    transients: str = "drop",
    source: str = "a level per request",
) -> StepInference:
    """Steps of a closed-loop ramp from the load level seen by every request.

    Parameters
    ----------
    start_ns : ndarray of int64
        Start of every request, ns since the epoch (any order).
    level : ndarray of int
        Concurrency when the request started: JMeter ``allThreads``, k6 VUs
        (:func:`levels_from_samples`), Gatling active users
        (:func:`gatling_active_users`).
    end_ns : ndarray of int64, optional
        End of every request; only used to end the last step at its last
        response rather than its last start.
    min_dwell_s : float
        Time a level must be held to be a step.
    max_gap_s : float
        Longest visit to other levels that does not split a held level.
    transients : {"drop", "next"}
        Requests outside every step: step id -1 (counted in the notes), or
        counted in the following step (the start-up of its level; the
        shut-down after the last step in the last step); with "next" the
        steps tile the run (each starts where the previous one ends) and
        every request has a step.
    source : str
        Where the levels came from, for the result's description.

    Returns
    -------
    StepInference
        Steps in time order, a step id per request (input order), notes.
    """
    if transients not in ("drop", "next"):
        raise ValueError(f"transients must be 'drop' or 'next', not {transients!r}")
    start_ns = np.asarray(start_ns, np.int64)
    level = np.asarray(level)
    n = len(start_ns)
    if n == 0:
        return StepInference("concurrency", (), np.zeros(0, np.int64), 0, source, ("no requests",))
    order = np.argsort(start_ns, kind="stable")
    t, lv = start_ns[order], level[order]
    t_end = int(np.max(end_ns)) if end_ns is not None and len(end_ns) else int(t[-1])
    r_lv, r_t0, r_t1, _, r_n = _runs(t, lv, t_end)
    ls = LevelSteps((r_lv, r_t0, r_t1, r_n), int(t[0]), min_dwell_s=min_dwell_s, max_gap_s=max_gap_s,
                    transients=transients)  # fmt: skip
    sid = np.empty(n, np.int64)
    sid[order] = ls.assign(t, lv)
    return ls.inference(sid, source)


def _sorted(x: np.ndarray) -> np.ndarray:
    """``x`` sorted (itself when it already is: the callers pass the same user times chunk after chunk)."""
    return x if len(x) < 2 or bool((x[1:] >= x[:-1]).all()) else np.sort(x)


def gatling_active_users(
    user_start_ms: np.ndarray,
    user_end_ms: np.ndarray,
    at_ms: np.ndarray,
    *,
    window_ms: int = 100,
    presorted: bool = False,
) -> np.ndarray:
    """Active Gatling users around each time of ``at_ms``, robust to how Gatling logs users.

    Gatling 3.x writes a user's ``USER START`` record when its first
    request is already under way (from the same ms to ~100 ms later), and
    in a closed model the next user starts a few ms after the previous
    one's ``END``: the plain count ``#START <= t - #END <= t`` at a
    request's start is often N - 1, N - 2 ... (at 16 users: anything from 0
    to 16).  That count is never above the true one (a late START only
    lowers it), so the level around ``t`` is its maximum over
    ``[t - window_ms, t + window_ms]``: once in a while every slot is
    between its START and END records.  A request up to ``window_ms`` before
    a step up sees the higher level; the step inference's dwell rule keeps
    such short stretches from becoming steps.

    Parameters
    ----------
    user_start_ms, user_end_ms : ndarray of int64 or int32
        Times of the ``USER ... START`` and ``USER ... END`` records (ms; int32: offsets from
        an origin ``at_ms`` is counted from too).
    at_ms : ndarray of int64
        Times to count at (request starts, ms), any order.
    window_ms : int
        Half-width of the window the maximum is taken over.
    presorted : bool
        The user times are sorted already (a caller counting chunk after chunk sorts them once).

    Returns
    -------
    ndarray of int64
        Active users around each time of ``at_ms`` (same order).
    """
    us, ue = (_ms(x) for x in (user_start_ms, user_end_ms))
    if not presorted:
        us, ue = _sorted(us), _sorted(ue)
    at = np.asarray(at_ms, np.int64)
    out = np.zeros(len(at), np.int64)
    if len(at) == 0:
        return out
    chunk_ms = 1 << 22  # grid of about 70 minutes per pass: bounded memory for any run length
    lo, hi = int(at.min()), int(at.max())
    if hi - lo <= chunk_ms:  # one grid holds them all: no sort
        g0 = lo - window_ms
        m = _sliding_max(_active_on_grid(us, ue, g0, hi + window_ms), 2 * window_ms + 1)
        return np.maximum(m[at - lo], 0)
    order = np.argsort(at, kind="stable")
    q = at[order]
    i = 0
    while i < len(q):
        j = int(np.searchsorted(q, q[i] + chunk_ms, side="right"))
        g0 = int(q[i]) - window_ms
        m = _sliding_max(_active_on_grid(us, ue, g0, int(q[j - 1]) + window_ms), 2 * window_ms + 1)
        out[order[i:j]] = m[q[i:j] - window_ms - g0]
        i = j
    return np.maximum(out, 0)


def _active_on_grid(us: np.ndarray, ue: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """``#START <= t - #END <= t`` for every ms ``t`` of ``[lo, hi]`` (sorted ``us``, ``ue``): counts of
    the records inside the grid added up (linear in the grid and the records, no search per ms)."""

    def at_or_before(x: np.ndarray) -> np.ndarray:
        # the bounds in x's own type: searchsorted would otherwise copy an int32 x to int64 each time
        if x.dtype == np.int32 and not (_I32.min <= lo and hi + 1 <= _I32.max):
            x = x.astype(np.int64)  # (a grid beyond int32 offsets: 24 days from their origin)
        a, b = np.searchsorted(x, np.array([lo, hi + 1], x.dtype))
        return int(a) + np.cumsum(np.bincount(x[a:b] - lo, minlength=hi - lo + 1))

    return at_or_before(us) - at_or_before(ue)


_I32 = np.iinfo(np.int32)


def _ms(x) -> np.ndarray:
    """Times in ms as integers: int32 (offsets, as Gatling's binary log keeps them) or int64, uncopied."""
    a = np.asarray(x)
    return a if a.dtype in (np.int32, np.int64) else a.astype(np.int64)


def _sliding_max(a: np.ndarray, w: int) -> np.ndarray:
    """``r[i] = max(a[i:i + w])`` for every full window, by doubling (O(n log w))."""
    r, span = a, 1
    while span * 2 <= w:
        r = np.maximum(r[:-span], r[span:])
        span *= 2
    rest = w - span
    if rest:
        r = np.maximum(r[:-rest], r[rest:])
    return r


def levels_from_samples(
    start_ns: np.ndarray, sample_ns: np.ndarray, sample_level: np.ndarray, *, refine: bool = True
) -> np.ndarray:
    """The level at each request from a level sampled now and then (k6's ``vus``, once a second).

    Each request gets the level of the latest sample at or before its start
    (the first sample's level before it).  A change between two samples
    ``T_a < T_b`` happened somewhere in between; with ``refine`` it is put
    where the request rate changes: with ``r_a`` and ``r_b`` the rates of
    the sampling intervals before ``T_a`` and after ``T_b`` and ``m`` the
    requests in ``(T_a, T_b]``, the change is at ``T_a + (m - r_b (T_b -
    T_a)) / (r_a - r_b)`` (clamped to the interval), or mid-way when the two
    rates differ by less than 10 % (a saturated server: the rate cannot tell).

    Parameters
    ----------
    start_ns : ndarray of int64
        Request starts (any order).
    sample_ns, sample_level : ndarray
        Times and values of the level samples (any order).
    refine : bool
        Place each change by the request rate rather than at the next sample.

    Returns
    -------
    ndarray of int64
        The level at every request (input order).
    """
    st = np.asarray(start_ns, np.int64)
    sl = SampledLevels(sample_ns, sample_level)
    if refine:
        sl.refine(sl.interval_counts(st))
    return sl.at(st)


class SampledLevels:
    """:func:`levels_from_samples` in parts: the samples, the counts that place each change, the levels.

    A reader that sees its requests batch by batch adds up
    :meth:`interval_counts` over the batches, calls :meth:`refine` once, then
    :meth:`at` per batch.
    """

    def __init__(self, sample_ns, sample_level):
        o = np.argsort(np.asarray(sample_ns, np.int64), kind="stable")
        self.ts = np.asarray(sample_ns, np.int64)[o]
        self.lv = np.rint(np.asarray(sample_level, np.float64)[o]).astype(np.int64)
        if len(self.ts) == 0:
            raise ValueError("no level samples")
        self.cuts: dict[int, int] = {}

    def interval_counts(self, start_ns: np.ndarray) -> np.ndarray:
        """Requests with start in ``(ts[j], ts[j + 1]]`` for every j (one more: after the last)."""
        j = np.searchsorted(self.ts, np.asarray(start_ns, np.int64), side="left") - 1
        return np.bincount(j[j >= 0], minlength=len(self.ts))

    def refine(self, counts: np.ndarray) -> None:
        """Place every change of level by the request rates around it (``counts``: all requests')."""
        ts, lv = self.ts, self.lv
        for a in np.flatnonzero(lv[1:] != lv[:-1]).tolist():
            b = a + 1
            m = int(counts[a])
            r_a = int(counts[a - 1]) / max(int(ts[a] - ts[a - 1]), 1) if a >= 1 else None
            r_b = int(counts[b]) / max(int(ts[b + 1] - ts[b]), 1) if b + 1 < len(ts) else None
            width = int(ts[b] - ts[a])
            cut = int(ts[a]) + width // 2
            if r_a is not None and r_b is not None and abs(r_a - r_b) > 0.1 * max(r_a, r_b):
                x = (m - r_b * width) / (r_a - r_b)
                cut = int(ts[a]) + int(min(max(x, 0.0), width))
            self.cuts[a] = cut

    def at(self, start_ns: np.ndarray) -> np.ndarray:
        """The level at each request start."""
        st = np.asarray(start_ns, np.int64)
        i = np.searchsorted(self.ts, st, side="right") - 1
        out = self.lv[np.maximum(i, 0)]
        if not self.cuts:
            return out
        cut_at = np.zeros(len(self.ts), np.int64)
        is_cut = np.zeros(len(self.ts), bool)
        cut_at[list(self.cuts)] = list(self.cuts.values())
        is_cut[list(self.cuts)] = True
        j = np.searchsorted(self.ts, st, side="left") - 1  # ts[j] < start <= ts[j + 1]
        m = np.flatnonzero((j >= 0) & (j < len(self.ts) - 1))
        m = m[is_cut[j[m]]]
        a = j[m]
        out[m] = np.where(st[m] < cut_at[a], self.lv[a], self.lv[a + 1])
        return out


# --------------------------------------------------------------------------
# for the format readers: one call from a reader's columns to its table's steps


@dataclass(frozen=True, eq=False)
class ReaderSteps:
    """What a format reader puts in its table: a step per request and what each step is.

    ``rates`` (rate steps only) holds per step ``intended_rps``, ``sent_rps``,
    ``dropped`` and ``fell_behind`` (None: unknown); ``notes`` are warnings
    for the reader to give, each without the file name.
    """

    step: np.ndarray
    names: list[str]
    concurrency: list[int | None] | None
    rates: list[dict] | None
    source: str
    notes: tuple[str, ...]


def dwell_for(start_ns: np.ndarray, end_ns: np.ndarray | None = None) -> float:
    """The dwell a level must be held for: ``MIN_DWELL_S``, or 10 % of a run shorter than 10 s."""
    if len(start_ns) == 0:
        return MIN_DWELL_S
    last = int(np.max(end_ns)) if end_ns is not None and len(end_ns) else int(np.max(start_ns))
    return min(MIN_DWELL_S, 0.1 * (last - int(np.min(start_ns))) / NS_PER_S)


def closed_loop(start_ns, level, *, end_ns=None, source: str) -> StepInference:
    """:func:`steps_from_levels` as the readers use it: transients counted in the next step."""
    return steps_from_levels(
        start_ns,
        level,
        end_ns=end_ns,
        min_dwell_s=dwell_for(start_ns, end_ns),
        transients="next",
        source=source,
    )


def rate_dict(s: Step) -> dict:
    """A rate step's schedule figures, for tables and JSON."""
    return {"intended_rps": s.intended_rps, "sent_rps": s.sent_rps, "dropped": s.dropped,
            "fell_behind": s.fell_behind}  # fmt: skip


def reader_steps(inf: StepInference, *, names: list[str] | None = None) -> ReaderSteps | None:
    """The table steps of an inference; None when it found no step (the reader falls back).

    Closed loop: names ``concurrency N`` and the concurrency of every step;
    rate steps: names ``N req/s`` (or ``names``), no concurrency, the
    schedule figures of every step and a warning for those that fell behind.
    """
    if not inf.steps or (inf.step_id < 0).all():
        return None
    if inf.kind == "concurrency":
        return ReaderSteps(inf.step_id, [f"concurrency {s.level:g}" for s in inf.steps],
                           [int(s.level) for s in inf.steps], None, inf.source, inf.notes)  # fmt: skip
    if names is None:
        names = [
            f"{s.level:.4g} req/s" if np.isfinite(s.level) else f"step {k + 1}"
            for k, s in enumerate(inf.steps)
        ]
    return ReaderSteps(
        inf.step_id, list(names), None, [rate_dict(s) for s in inf.steps], inf.source, inf.notes
    )
