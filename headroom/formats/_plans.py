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
* :class:`TablePlan`: any other format, through its whole-table steps on
  the spooled columns (memory: about 25 bytes a request).
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
    def __init__(self, scan, source: str):
        self.scan, self.source = scan, source

    def assign(self, c: dict) -> np.ndarray:
        return np.zeros(len(c["start_ns"]), np.int64)

    def found(self) -> Found:
        return Found(["all"], source=self.source, warnings=list(self.scan.warnings))


class TablePlan:
    """The format's whole-table reader on the spooled columns: its step of every row, in row order."""

    def __init__(self, scan, raw):
        from . import finish_rows

        table = scan.side.get("table")
        if table is None:
            rows = Batch(raw.column("start_ns"), raw.column("latency_s"), raw.column("status"),
                         raw.column("ok"), raw.column("key"), raw.column("line"))  # fmt: skip
            table = finish_rows(scan, rows)
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


def _ends(c: dict) -> np.ndarray:
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
            st, ends = c["start_ns"], _ends(c)
            rb.add(st, level_of(c), ends)
            t_min = int(st.min()) if t_min is None else min(t_min, int(st.min()))
            e = int(ends.max())
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


class CutPlan:
    """``--steps``: steps of a duration (``10s``) or cut at times (``0,10,20``: s since the first start)."""

    def __init__(self, raw, steps: str):
        self.text = steps
        t0 = min(int(c["start_ns"].min()) for c in raw.chunks(("start_ns",)))
        self.t0 = t0
        text = steps.strip()
        self.cuts = self.width = None
        if "," in text:
            try:
                bounds = sorted({float(x) for x in text.split(",") if x.strip()})
            except ValueError:
                raise HeadroomError(
                    f"bad --steps {short(steps, 60)}: expected a duration (10s) or times in s (0,10,20)"
                ) from None
            if any(not np.isfinite(b) or b < 0 for b in bounds):
                raise HeadroomError(f"bad --steps {short(steps, 60)}: times must be finite and >= 0")
            self.cuts = np.asarray(bounds[1:] if bounds and bounds[0] == 0 else bounds)
        else:
            self.width = parse_duration(text)
        raw_ids = [np.unique(self._raw(c)) for c in raw.chunks(("start_ns",))]
        self.uniq = np.unique(np.concatenate(raw_ids))
        if self.width is not None and self.uniq.max() > 100_000:
            raise HeadroomError(f"--steps {short(steps, 60)}: more than 100,000 steps over this run")

    def _raw(self, c: dict) -> np.ndarray:
        rel = (c["start_ns"] - self.t0) / 1e9
        if self.cuts is not None:
            return np.searchsorted(self.cuts, rel, side="right")
        return np.floor(rel / self.width).astype(np.int64)

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


def plan_for(scan, raw, settings, have: dict):
    """The step plan of a spooled file: its format's, or ``--steps`` over it."""
    from . import FORMATS

    make = FORMATS[scan.fmt].plan
    if not have["key"]:
        scan.key_kind = None
    if make is None or "table" in scan.side:
        reader = TablePlan(scan, raw)
    else:
        reader = make(scan, raw)
    if settings.steps:
        return _Cut(CutPlan(raw, settings.steps), reader)
    return reader


# --------------------------------------------------------------------------
# the formats' plans (the same steps as their whole-table readers)


class _Counted:
    """A level plan after a counting pass: whether it found steps, and its notes."""

    def __init__(self, raw, level_of, check=None):
        self.plan = LevelPlan(raw, level_of, check=check)
        for c in raw.chunks(COLS):
            self.plan.assign(c)
        self.notes = self.plan.steps.notes()
        self.looks_open = self.plan.steps.looks_open
        self.held = bool(self.plan.steps.levels)
        self.plan.steps.reset()


class JMeterPlan:
    """JMeter: the held ``allThreads`` levels; none held: one step per level; no column: one step."""

    def __init__(self, scan, raw):
        from ._checks import fail

        self.scan, self.notes = scan, ()
        if scan.key_kind != "level":
            self.plan = OneStep(scan, "")
            self.names, self.conc = ["all"], None
            self.src = "no allThreads column (jmeter.save.saveservice.thread_counts=true adds it): one step"
            return

        def check(c):
            bad = c["key"] <= 0
            if bad.any():
                i = int(np.argmax(bad))
                raise fail(scan.path, int(c["line"][i]), f"bad allThreads {int(c['key'][i])} (must be > 0)")

        key = lambda c: c["key"]  # noqa: E731
        counted = _Counted(raw, key, check)
        self.notes = counted.notes
        if counted.held:
            self.plan = counted.plan
            lv = self.plan.steps.levels
            self.names = [f"concurrency {float(v):g}" for v in lv]
            self.conc = [int(v) for v in lv]
            self.src = f"allThreads, held levels ({len(lv)} steps)"
        else:
            self.plan = UniquePlan(raw, key)
            self.names = [f"concurrency {int(v)}" for v in self.plan.levels]
            self.conc = [int(v) for v in self.plan.levels]
            self.src = f"allThreads ({len(self.names)} levels, none held: one step each)"

    def assign(self, c: dict) -> np.ndarray:
        return self.plan.assign(c)

    def found(self) -> Found:
        w = list(self.scan.warnings) + [f"{self.scan.path}: {n}" for n in self.notes]
        return Found(self.names, self.conc, None, self.src, w)


class GatlingPlan:
    """Gatling: held levels of active users (USER records); an open model: the whole-table reader."""

    def __init__(self, scan, raw):
        from ..levels import gatling_active_users

        self.scan, self.notes, self.fallback = scan, (), None
        us, ue = scan.side.get("user_start_ms"), scan.side.get("user_end_ms")
        if us is None or not len(us):
            self.plan, self.names, self.src = OneStep(scan, ""), ["all"], "no USER records: one step"
            return
        ue = ue if ue is not None else np.zeros(0, np.int64)
        level = lambda c: gatling_active_users(us, ue, c["start_ns"] // 1_000_000)  # noqa: E731
        counted = _Counted(raw, level)
        if counted.looks_open:  # rate steps from the users' arrivals: the whole-table reader
            self.fallback = TablePlan(scan, raw)
            return
        self.notes = counted.notes
        src = "active users around each request (USER START/END records)"
        if counted.held:
            self.plan = counted.plan
            lv = self.plan.steps.levels
            self.names = [f"concurrency {float(v):g}" for v in lv]
            self.conc = [int(v) for v in lv]
            self.src = f"{src}, {len(lv)} steps"
        else:
            self.plan, self.names, self.src = OneStep(scan, ""), ["all"], "no level held: one step"

    def assign(self, c: dict) -> np.ndarray:
        return (self.fallback or self.plan).assign(c)

    def found(self) -> Found:
        if self.fallback is not None:
            return self.fallback.found()
        w = list(self.scan.warnings) + [f"{self.scan.path}: {n}" for n in self.notes]
        return Found(self.names, getattr(self, "conc", None), None, self.src, w)


class VegetaPlan:
    """vegeta: one step per attack, in order of first request; rates from the attack names."""

    def __init__(self, scan, raw):
        self.scan = scan
        self.plan = GroupPlan(raw, scan.labels)

    def assign(self, c: dict) -> np.ndarray:
        return self.plan.assign(c)

    def found(self) -> Found:
        from ..levels import group_steps, rate_from_name, reader_steps

        g, names = self.plan, self.plan.names
        src = f"the attack name ({len(names)} attacks)" if len(names) > 1 else "one attack: one step"
        w, rates = list(self.scan.warnings), None
        want = [rate_from_name(n) for n in names]
        if any(x is not None for x in want):
            o = g.order
            inf = group_steps(g.first[o], g.last[o], g.n[o], intended_rps=want, source="the attack names")
            w += [f"{self.scan.path}: {x}" for x in inf.notes]
            rs = reader_steps(inf, names=names)
            rates = None if rs is None else rs.rates
        return Found(names, None, rates, src, w)


class K6Plan:
    """k6: one step per scenario; else the held VU levels (``vus`` samples); else the whole-table
    reader (rate steps from requests and ``dropped_iterations``); else one step."""

    def __init__(self, scan, raw):
        from ..levels import SampledLevels

        self.scan, self.extra, self.fallback = scan, [], None
        z = (np.zeros(0, np.int64), np.zeros(0))
        vus_t, vus_v = scan.side.get("vus", z)
        drop_t, drop_v = scan.side.get("dropped", z)
        dropped = len(drop_t) and int(np.clip(np.nan_to_num(np.rint(drop_v)), 0, 1 << 20).sum())
        if scan.key_kind == "label" and len(scan.labels) > 1:
            self._scenarios(raw, vus_t, vus_v)
        elif not len(vus_t) and not len(drop_t):
            name = sorted(scan.labels or [""])[0]
            self.plan, self.names, self.conc = OneStep(scan, ""), [name or "all"], None
            self.src = "one scenario and no vus samples: one step"
        elif not len(vus_t) or dropped:
            self.fallback = TablePlan(scan, raw)
        else:
            sl = SampledLevels(vus_t, vus_v)
            sl.refine(sum(sl.interval_counts(c["start_ns"]) for c in raw.chunks(("start_ns",))))
            counted = _Counted(raw, lambda c: sl.at(c["start_ns"]))
            lv = np.diff(np.asarray(counted.plan.steps.levels, np.float64))
            turns = int((np.sign(lv[1:]) * np.sign(lv[:-1]) < 0).sum()) if len(lv) > 1 else 0
            if turns >= 2 or counted.looks_open:
                self.fallback = TablePlan(scan, raw)
                return
            self.extra = [f"{scan.path}: {x}" for x in counted.notes]
            if counted.held:
                self.plan = counted.plan
                levels = self.plan.steps.levels
                self.names = [f"concurrency {float(v):g}" for v in levels]
                self.conc = [int(v) for v in levels]
                self.src = (
                    "the vus metric (held levels; sampled once a second, changes placed by the request rate)"
                )
            else:
                self.plan, self.names, self.conc, self.src = (
                    OneStep(scan, ""),
                    ["all"],
                    None,
                    "no level held: one step",
                )

    def _scenarios(self, raw, vus_t, vus_v) -> None:
        g = GroupPlan(raw, self.scan.labels)
        hi = np.full(len(g.n), np.iinfo(np.int64).min)
        for c in raw.chunks(COLS):
            np.maximum.at(hi, c["key"], _ends(c))
        o = np.argsort(vus_t, kind="stable")
        vus_t, vus_v = vus_t[o], vus_v[o]
        self.plan, self.names, self.conc = g, g.names, []
        for code in g.order:
            inside = vus_v[(vus_t > g.first[code]) & (vus_t < hi[code])]
            self.conc.append(int(np.median(inside)) if len(inside) else None)
        if any(c is None for c in self.conc):
            self.extra = [
                f"{self.scan.path}: some scenarios have no vus sample inside them: their concurrency is unknown"
            ]
        self.src = f"the scenario tag ({len(self.names)} scenarios)"

    def assign(self, c: dict) -> np.ndarray:
        return (self.fallback or self.plan).assign(c)

    def found(self) -> Found:
        if self.fallback is not None:
            return self.fallback.found()
        return Found(self.names, self.conc, None, self.src, list(self.scan.warnings) + self.extra)
