"""Step plans: how the spooled rows of a file get their steps, pass by pass, in bounded memory.

A plan reads the spool (:class:`headroom.spool.Spool`) as often as it needs
(finding held levels takes one pass), then gives the step of every row of
each chunk in order (``assign``) and finally says what the steps are
(``found``): names, concurrency or rates, where they came from, and the
reader's warnings.  The plans give the same steps as the whole-table
readers (:mod:`headroom.levels` on the whole arrays).

* :class:`LevelPlan`: held levels of a level per row (JMeter ``allThreads``,
  Gatling active users), the runs built batch by batch;
* :class:`GroupPlan`: one step per label (vegeta attacks), in order of first
  request, with the rate each attack sent;
* :class:`CutPlan`: ``--steps`` (a duration or times);
* :class:`TablePlan`: steps that need the whole run at once (k6 and Gatling
  open models), on the spooled columns (memory: about 25 bytes a request).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model import HeadroomError, parse_duration
from ._batch import Batch
from ._scan import short

COLS = ("start_ns", "latency_s", "key", "line")


@dataclass
class Found:
    """The steps a plan found, and the reader's warnings (each naming the file)."""

    names: list[str]
    concurrency: list | None = None
    rates: list | None = None
    source: str = ""
    warnings: list[str] = field(default_factory=list)


class OneStep:
    """Every row in one step (a file without steps of its own)."""

    def __init__(self, scan, source: str):
        self.scan, self.source = scan, source

    def assign(self, c: dict) -> np.ndarray:
        return np.zeros(len(c["start_ns"]), np.int64)

    def found(self) -> Found:
        return Found(["all"], source=self.source, warnings=list(self.scan.warnings))


class TablePlan:
    """Steps that need the whole run at once (an open model's arrivals): ``finish(scan, rows)`` on all
    the spooled columns (memory: about 25 bytes a request) gives every row's step, in row order."""

    def __init__(self, scan, raw, finish):
        rows = Batch(raw.column("start_ns"), raw.column("latency_s"), raw.column("status"),
                     raw.column("ok"), raw.column("key"), raw.column("line"))  # fmt: skip
        table = finish(scan, rows)
        n = len(table.start_ns)
        if n != raw.n:
            raise RuntimeError(f"{scan.path}: the table has {n} rows, the spool {raw.n}")
        self.step = table.step if table.step is not None else np.zeros(n, np.int64)
        self.table, self.pos = table, 0

    def assign(self, c: dict) -> np.ndarray:
        m = len(c["start_ns"])
        out = self.step[self.pos : self.pos + m]
        self.pos += m
        return out

    def found(self) -> Found:
        t = self.table
        return Found(list(t.step_names), t.step_concurrency, t.step_rates, t.steps_source, list(t.warnings))


def ends(c: dict) -> np.ndarray:
    return c["start_ns"] + np.rint(c["latency_s"] * 1e9).astype(np.int64)


class LevelPlan:
    """Held levels (:class:`headroom.levels.LevelSteps`) of a level per row given by ``level_of(chunk)``."""

    def __init__(self, raw, level_of, *, transients: str = "next", check=None):
        from ..levels import MAX_GAP_S, MIN_DWELL_S, NS_PER_S, LevelSteps, RunBuilder, _runs

        self.level_of = level_of
        rb, t_min, t_end = RunBuilder(), None, None
        for c in raw.chunks(COLS):
            if check is not None:
                check(c)
            st, end = c["start_ns"], ends(c)
            rb.add(st, level_of(c), end)
            t_min = int(st.min()) if t_min is None else min(t_min, int(st.min()))
            e = int(end.max())
            t_end = e if t_end is None else max(t_end, e)
        if rb.exact:
            runs = rb.finish(t_end)
        else:  # rows far out of start order: sort the whole run (memory: its starts and levels)
            st = raw.column("start_ns")
            lv = np.concatenate([level_of(c) for c in raw.chunks(COLS)])
            o = np.argsort(st, kind="stable")
            r = _runs(st[o], lv[o], t_end)
            runs = (r[0], r[1], r[2], r[4])
        dwell = min(MIN_DWELL_S, 0.1 * (t_end - t_min) / NS_PER_S)
        self.steps = LevelSteps(runs, t_min, min_dwell_s=dwell, max_gap_s=MAX_GAP_S, transients=transients)

    def assign(self, c: dict) -> np.ndarray:
        return self.steps.assign(c["start_ns"], self.level_of(c))


class UniquePlan:
    """One step per level, in increasing order (levels seen but none held)."""

    def __init__(self, raw, level_of):
        vals = [np.unique(level_of(c)) for c in raw.chunks(COLS)]
        self.levels = np.unique(np.concatenate(vals)) if vals else np.zeros(0, np.int64)
        self.level_of = level_of

    def assign(self, c: dict) -> np.ndarray:
        return np.searchsorted(self.levels, self.level_of(c)).astype(np.int64)


class GroupPlan:
    """One step per label code, in order of each label's first request (vegeta attacks)."""

    def __init__(self, raw, labels: list[str]):
        g = max(len(labels), 1)
        self.first = np.full(g, np.iinfo(np.int64).max)
        self.last = np.full(g, np.iinfo(np.int64).min)
        self.n = np.zeros(g, np.int64)
        for c in raw.chunks(COLS):
            k, st = c["key"], c["start_ns"]
            np.minimum.at(self.first, k, st)
            np.maximum.at(self.last, k, st)
            self.n += np.bincount(k, minlength=g)
        present = np.flatnonzero(self.n > 0)
        self.order = present[np.argsort(self.first[present], kind="stable")]
        self.rank = np.full(g, -1, np.int64)
        self.rank[self.order] = np.arange(len(self.order))
        self.names = [labels[i] if i < len(labels) else "" for i in self.order]

    def assign(self, c: dict) -> np.ndarray:
        return self.rank[c["key"]]


def steps_cuts(steps: str) -> tuple[np.ndarray | None, float | None]:
    """``--steps``: (cut times in s, None) for ``0,10,20``, or (None, width in s) for a duration."""
    text = steps.strip()
    if "," not in text:
        return None, parse_duration(text)
    try:
        bounds = sorted({float(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise HeadroomError(
            f"bad --steps {short(steps, 60)}: expected a duration (10s) or times in s (0,10,20)"
        ) from None
    if any(not np.isfinite(b) or b < 0 for b in bounds):
        raise HeadroomError(f"bad --steps {short(steps, 60)}: times must be finite and >= 0")
    return np.asarray(bounds[1:] if bounds and bounds[0] == 0 else bounds), None


def step_of_time(rel_s: np.ndarray, cuts: np.ndarray | None, width: float | None) -> np.ndarray:
    """The (sparse) step number of times in s since the first start, for :func:`steps_cuts`."""
    if cuts is not None:
        return np.searchsorted(cuts, rel_s, side="right")
    return np.floor(rel_s / width).astype(np.int64)


class CutPlan:
    """``--steps``: steps of a duration (``10s``) or cut at times (``0,10,20``: s since the first start)."""

    def __init__(self, raw, steps: str):
        self.text = steps
        self.t0 = min(int(c["start_ns"].min()) for c in raw.chunks(("start_ns",)))
        self.cuts, self.width = steps_cuts(steps)
        raw_ids = [np.unique(self._raw(c)) for c in raw.chunks(("start_ns",))]
        self.uniq = np.unique(np.concatenate(raw_ids))
        if self.width is not None and self.uniq.max() > 100_000:
            raise HeadroomError(f"--steps {short(steps, 60)}: more than 100,000 steps over this run")

    def _raw(self, c: dict) -> np.ndarray:
        return step_of_time((c["start_ns"] - self.t0) / 1e9, self.cuts, self.width)

    def assign(self, c: dict) -> np.ndarray:
        return np.searchsorted(self.uniq, self._raw(c)).astype(np.int64)

    def found_over(self, reader: Found) -> Found:
        names = [f"step {k + 1}" for k in range(len(self.uniq))]
        return Found(names, None, None, f"--steps {self.text}", reader.warnings)


class _Cut:
    """``--steps`` over a reader's plan: the reader's warnings, the cut steps."""

    def __init__(self, cut: CutPlan, reader):
        self.cut, self.reader = cut, reader

    def assign(self, c: dict) -> np.ndarray:
        self.reader.assign(c)  # the reader's notes count every row, as on the whole table
        return self.cut.assign(c)

    def found(self) -> Found:
        return self.cut.found_over(self.reader.found())


def plan_for(scan, raw, settings, have: dict, reader):
    """The step plan of a spooled file: its reader's (:class:`~headroom.formats.Reader`), or ``--steps``
    over it."""
    if not have["key"]:
        scan.key_kind = None
    reader = reader.plan(scan, raw)
    if settings.steps:
        return _Cut(CutPlan(raw, settings.steps), reader)
    return reader


class CachedLevels:
    """``level_of(chunk)`` computed once per row: a level plan reads the spool three times (its runs,
    its notes, the steps), always the same rows in the same order, so the first pass keeps every
    row's level in a spool of its own (in memory up to the spools' budget, else on disk) and the later
    passes read them back instead of computing them again."""

    def __init__(self, raw, level_of):
        from ..spool import Spool

        self.level_of, self.n = level_of, raw.n
        self.kept = Spool({"level": np.int64})
        self.cursor, self.pos = None, 0

    def __call__(self, c: dict) -> np.ndarray:
        m = len(c["start_ns"])
        if self.kept.n < self.n:  # the first pass
            lv = np.asarray(self.level_of(c), np.int64)
            self.kept.append(level=lv)
            return lv
        from ..spool import Cursor

        if self.cursor is None or self.pos >= self.n:  # a new pass from the first row
            self.cursor, self.pos = Cursor(self.kept, ("level",)), 0
        self.pos += m
        return self.cursor.take(m)["level"]


class Counted:
    """A level plan after a counting pass: whether it found steps, and its notes."""

    def __init__(self, raw, level_of, check=None):
        self.plan = LevelPlan(raw, level_of, check=check)
        for c in raw.chunks(COLS):
            self.plan.assign(c)
        self.notes = self.plan.steps.notes()
        self.looks_open = self.plan.steps.looks_open
        self.held = bool(self.plan.steps.levels)
        self.plan.steps.reset()
