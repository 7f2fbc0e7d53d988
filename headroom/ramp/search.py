"""``headroom ramp --find OBJECTIVE``: search for the capacity at a latency objective.

Instead of a fixed ramp, each next load is chosen from the steps so far:

1. **Grow**: the first probe runs at the range's low end (``--concurrency LOW:HIGH``,
   default 1:1000; ``--rate LOW:HIGH`` for an open loop); each next probe at
   twice the load, until the fitted percentile breaks the objective.  A first
   probe that already breaks it ends the search (exit 2, one line naming it).
2. **Bisect**: a probe halfway between the two loads around the crossing,
   while they are more than one unit (and more than half the precision)
   apart.
3. **Repeat**: the load that limits the wider end of the interval is probed
   again (the lowest load not yet surely within the objective below the
   crossing, or the highest not yet surely beyond it above), until the
   interval of the throughput at the objective lies within ``--precision``
   (default 5 %) of the estimate, or ``--budget`` (default 5 min) would be
   exceeded by another probe.

Each probe is a normal step (CPU, profiles, telemetry as in any ramp) of one
run folder that every command reads; the steps are in probe order, not load
order.  After every probe the folder is read back with :func:`headroom.io.reduce_run`
and :func:`headroom.analyze`, so the search decides with exactly the
estimate and interval (:mod:`headroom.crossing`) that ``headroom summary``
prints for the folder.  metadata.yml's ``search`` block holds the probes in
order (load, percentile and its interval, holds/breaks/unsure, throughput),
the estimate and its interval, and why the search stopped.

The search stops at the generator's own limit: a closed-loop probe whose
generator used 90 % or more of the CPU it may use, or an open-loop probe that
sent under 90 % of its rate while the objective held, is the highest load
the generator can drive; the search probes nothing above it and, when the
objective still held there, says so (the capacity is then at least that).

``--ab URL_A URL_B --interleave steps --find``: both builds at the same loads,
A and B alternating at every probe (AB, then BA); each next load is chosen
for the side whose interval is wider.  ``a-01`` and ``b-01`` are the two
halves of one interleaved recording, compared level by level
(:mod:`headroom.compare.capacity` for the change in capacity).
"""

from __future__ import annotations

import math
import re
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..model import HeadroomError, Objective, parse_duration, parse_objective
from ..stats import z_quantile
from .recorder import Recorder, _Signals, prepare_output

DEFAULT_PRECISION = 0.05
#: the default budget: AUTO_SHARE of the time a dense ramp of the searched range would take (every load
#: from the range's low end to the first one past the estimate, one step each of the probes' length),
#: at most AUTO_CAP_S; until the first estimate, AUTO_CAP_S
DEFAULT_BUDGET = "auto"
AUTO_SHARE = 0.5
AUTO_CAP_S = 300.0
#: ... and at least this long: a crossing at a concurrency of 3 or 4 (a dense ramp of 5 steps is then as
#: quick as any search) still gets the probes that close its interval
AUTO_MIN_S = 15.0
#: an open loop's dense ramp: rate steps of the range's low end to 1.1 x the estimate, at most this many
AUTO_RATE_STEPS = 30
#: a dense ramp's step costs its duration and about this much more (measured here: 32 steps of 2 s of
#: hey took 72 s, 2.25 s a step)
STEP_OVERHEAD_S = 0.25
#: a probe's length when --step-duration is not given (a ramp's steps: 3 s); the growth probes, far
#: below the crossing where one probe's verdict is clear, run GROW_SHARE of it (at least GROW_MIN_S)
DEFAULT_PROBE = "2s"
GROW_SHARE = 0.5
GROW_MIN_S = 1.0
DEFAULT_RANGE = "1:1000"
GROWTH = 2.0
#: an upper end not yet surely beyond the objective: the next probe this much above the top load
STRETCH = 1.25
MAX_PROBES = 200
#: a closed-loop generator at this share of the CPU it may use is at its limit (as the recorder's warning)
GENERATOR_LIMIT = 0.9
#: an open-loop probe that sent less than this share of its rate, the objective holding, is the generator's limit
SENT_LIMIT = 0.9


@dataclass(frozen=True)
class FindOptions:
    """What ``--find`` searches for, and within what."""

    objective: Objective
    precision: float
    budget_s: float | None  # None: auto (DEFAULT_BUDGET)
    low: int
    high: int
    open_loop: bool

    @property
    def load_key(self) -> str:
        return "rate" if self.open_loop else "concurrency"


def _precision(text: str | None) -> float:
    if text is None:
        return DEFAULT_PRECISION
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise HeadroomError(f"bad --precision {text!r}: expected a fraction such as 0.05 or 5%") from None
    if not 0.001 <= v <= 0.5:
        raise HeadroomError(f"bad --precision {text!r}: must lie between 0.1% and 50%")
    return v


def _budget(text: str) -> float | None:
    """Seconds of ``--budget``: a duration (``90s``, ``1500ms``) or minutes (``5m``, ``2.5m``); None for
    ``auto`` (the default: half a dense ramp's time, once the first estimate says how far it would go)."""
    if text.strip().lower() == "auto":
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*m(?:in)?\s*", text)
    try:
        v = float(m[1]) * 60 if m else parse_duration(text)
    except HeadroomError:
        raise HeadroomError(
            f"bad --budget {text!r}: expected auto or a duration such as 5m, 90s or 1500ms"
        ) from None
    if v <= 0:
        raise HeadroomError(f"bad --budget {text!r}: must be positive")
    return v


def find_options(args) -> FindOptions | None:
    """The search's options from parsed arguments (None without ``--find``); exit 2 on a bad one."""
    if not getattr(args, "find", None):
        for opt, v in (("--precision", args.precision), ("--budget", args.budget)):
            if v is not None:
                raise HeadroomError(f"{opt} is for --find")
        return None
    try:
        obj = parse_objective(args.find)
    except HeadroomError as e:
        raise HeadroomError(f"--find: {e}") from None
    if obj.q is None:
        raise HeadroomError(
            f"--find {args.find!r}: give a percentile objective (p99<=5ms): a mean has no order-statistic interval"
        )
    budget = _budget(args.budget or DEFAULT_BUDGET)
    if args.requests_per_step is not None:
        raise HeadroomError("--find runs every probe for --step-duration: --requests-per-step is not for it")
    open_loop = args.rate is not None
    spec = args.rate if open_loop else (args.concurrency or DEFAULT_RANGE)
    opt = "--rate" if open_loop else "--concurrency"
    m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", spec)
    if not m:
        raise HeadroomError(f"bad {opt} {spec!r} for --find: give the search's range LOW:HIGH, e.g. 1:200")
    low, high = int(m[1]), int(m[2])
    if low < 1:
        raise HeadroomError(f"bad {opt} {spec!r}: LOW must be at least 1")
    if high < 2 * low:
        raise HeadroomError(f"bad {opt} {spec!r} for --find: HIGH must be at least twice LOW")
    return FindOptions(obj, _precision(args.precision), budget, low, high, open_loop)


# --------------------------------------------------------------------------
# one side's search


@dataclass(frozen=True)
class Next:
    """The search's next move: a load to probe and why, or None and why it stops."""

    load: int | None
    why: str  # grow, bisect, repeat, lower, stretch; or the stop: precision, held, limit, broken, probes
    reason: str = ""


class SideSearch:
    """The probes of one run folder and the fit they give (read back from the folder)."""

    def __init__(self, rec: Recorder, opts: FindOptions):
        self.rec = rec
        self.opts = opts
        self.probes: list[dict] = []
        self.limit: int | None = None  # the generator's limit: nothing is probed above it
        self.summary = None
        self.fit = None  # headroom.crossing.ObjectiveCrossing of the folder's steps
        self.points = None  # headroom.crossing.Probes: the steps the fit stands on
        self.full_s = rec.step_duration  # a probe's length (--step-duration); growth probes are shorter
        self.stopped: str | None = None
        self.reason = ""

    def probe_s(self, why: str) -> float:
        """The next probe's length: growth probes (far below the crossing: one probe's verdict is clear)
        GROW_SHARE of the step duration, at least GROW_MIN_S; the full length where a profile is taken
        per step (its sampling needs it) and for every probe that places the crossing."""
        if why in ("start", "grow") and not self.rec.profile_opts.any:
            return max(GROW_MIN_S, min(self.full_s, GROW_SHARE * self.full_s))
        return self.full_s

    def analyse(self) -> None:
        """Read the folder as every command does and fit the curve (the same numbers as summary's)."""
        from ..crossing import crossing, curve, probes_of, run_dispersion
        from ..io import reduce_run
        from ..summary import analyze

        try:
            s = analyze(reduce_run(str(self.rec.out)), objective=self.opts.objective)
        except HeadroomError:  # one short probe so far: fewer than two 1 s time buckets of load
            bucket = max(0.1, self.rec.step_duration / 4)
            run = reduce_run(str(self.rec.out), bucket_s=bucket)
            s = analyze(run, objective=self.opts.objective, bucket_s=bucket)
        self.summary = s
        phi, _ = run_dispersion(s.hist, s.buckets, s.table, self.opts.objective)
        p = probes_of(s.table, self.opts.objective, phi=phi)
        self.phi = phi
        self.points = p
        self.fit = (
            None
            if p is None or len(p.load) == 0
            else crossing(curve(p, self.opts.objective.bound_s), self.opts.objective.bound_s)
        )

    def note_probe(self, load: int, why: str) -> dict:
        """The record of the last step as a probe (after :meth:`analyse`)."""
        from ..crossing import percentile_interval

        obj, t, step = self.opts.objective, self.summary.table, self.rec.steps[-1]
        k = len(t) - 1
        lo, hi, _ = percentile_interval(t.latency, *obj.q, phi=self.phi)
        v = float(t.latency.pct[obj.name][k])
        verdict = "breaks" if lo[k] > obj.bound_s else "holds" if hi[k] <= obj.bound_s else "unsure"
        ms = f"{obj.name}_ms"
        doc = {
            "probe": len(self.probes) + 1,
            "step": k + 1,
            self.opts.load_key: load,
            "why": why,
            ms: _r(v * 1e3),
            f"{ms}_low": _r(lo[k] * 1e3),
            f"{ms}_high": _r(hi[k] * 1e3),
            "verdict": verdict,
            "rps": _r(float(t.goodput_rps[k]), 1),
            "generator_cpu_pct": round(step.generator_cpu_pct, 1),
        }
        self.probes.append(doc)
        self._check_limit(load, step, verdict)
        return doc

    def _check_limit(self, load: int, step, verdict: str) -> None:
        cap = 100.0 * len(self.rec.affinity)
        limited = None
        if not self.opts.open_loop and step.generator_cpu_pct >= GENERATOR_LIMIT * cap:
            limited = (
                f"{self.rec.engine.name} used {step.generator_cpu_pct:.0f}% CPU of the {cap:.0f}% it may use"
            )
        if self.opts.open_loop and verdict != "breaks" and step.throughput < SENT_LIMIT * load:
            limited = f"{self.rec.engine.name} sent {step.throughput:,.0f} req/s of the {load:,} asked"
        if limited and (self.limit is None or load < self.limit):
            self.limit = load
            self.limit_reason = f"at {self._load_text(load)} {limited}: the generator cannot drive more"

    def _load_text(self, load) -> str:
        return f"{load:,} req/s" if self.opts.open_loop else f"concurrency {load}"

    def propose(self) -> Next:
        """The next load to probe, or why the search stops (module docstring)."""
        x, o = self.fit, self.opts
        top = min(o.high, self.limit if self.limit is not None else o.high)
        if x is None:  # no usable step yet (too short or too few requests: fewer than 50): more load
            highest = max(p[o.load_key] for p in self.probes)
            if highest >= top:
                return Next(
                    None,
                    "held",
                    f"no usable probe up to the highest load allowed ({self._load_text(highest)})",
                )
            return Next(min(top, max(highest + 1, math.ceil(highest * GROWTH))), "grow")
        if len(self.probes) == 1 and self.probes[0]["verdict"] != "holds" and x.status == "at lowest step":
            return Next(None, "broken", self._first_broken())
        loads = x.curve.load
        if x.status == "at lowest step":
            if loads[0] > o.low:
                return Next(max(o.low, math.floor(loads[0] / GROWTH)), "lower")
            return Next(
                None,
                "broken",
                f"{o.objective} is broken already at the lowest load ({self._load_text(o.low)})",
            )
        if x.status == "held":
            if loads[-1] >= top:
                return self._held(loads[-1])
            return Next(min(top, max(int(loads[-1]) + 1, math.ceil(loads[-1] * GROWTH))), "grow")
        hw = x.half_width
        if hw is not None and hw <= o.precision:
            return Next(None, "precision", f"the interval lies within ±{100 * hw:.1f} % of the estimate")
        return self._narrow(top)

    def _first_broken(self) -> str:
        p, o = self.probes[0], self.opts
        ms = f"{o.objective.name}_ms"
        return (
            f"the objective {o.objective} is already broken at the first probe ({self._load_text(p[o.load_key])}: "
            f"{o.objective.name} {p[ms]:g} ms, 95 % interval {p[ms + '_low']:g}-{p[ms + '_high']:g} ms): "
            "give a lower --concurrency/--rate start or a looser objective"
        )

    def _held(self, highest) -> Next:
        if self.limit is not None and highest >= self.limit:
            return Next(
                None, "limit", f"{self.opts.objective} held up to the generator's limit: {self.limit_reason}"
            )
        return Next(
            None,
            "held",
            f"{self.opts.objective} held up to the highest load allowed ({self._load_text(int(highest))})",
        )

    def _narrow(self, top: int) -> Next:
        """Bisect the two loads around the crossing, else probe again where the wider end is decided."""
        import numpy as np

        x, o = self.fit, self.opts
        c = x.curve
        j0, j1 = x.between
        a, b = int(c.load[j0]), int(c.load[j1])
        if b - a > 1 and (b - a) / max(x.load, 1e-9) > o.precision / 2:
            return Next((a + b) // 2, "bisect")
        # the wider end in load (the crossing's position), open ends first
        low_gap = math.inf if x.load_low is None else (x.load - x.load_low) / x.load
        high_gap = math.inf if x.load_high is None else (x.load_high - x.load) / x.load
        z = z_quantile(1 - (1 - x.confidence) / 2)
        bound = o.objective.bound_s
        # the two loads around the estimate: the end between them narrows most where the se is larger
        wider = j0 if c.se[j0] >= c.se[j1] else j1
        if low_gap >= high_gap:
            sure = np.flatnonzero(np.exp(c.fit + z * c.se)[:j1] <= bound)
            if len(sure) == 0:
                lowest = int(c.load[0])
                return Next(
                    max(o.low, math.floor(lowest / GROWTH)) if lowest > o.low else lowest,
                    "lower" if lowest > o.low else "repeat",
                )
            k = int(sure[-1]) + 1
            return Next(int(c.load[wider if k == j1 else k]), "repeat")
        over = np.flatnonzero(np.exp(c.fit - z * c.se)[j1:] > bound)
        if len(over) == 0:
            highest = int(c.load[-1])
            if highest < top:
                return Next(min(top, max(highest + 1, math.ceil(highest * STRETCH))), "stretch")
            return Next(highest, "repeat")
        m = j1 + int(over[0]) - 1
        return Next(int(c.load[wider if m == j0 else m]), "repeat")

    def dense_steps(self) -> int | None:
        """Steps of a dense ramp from the range's low end to the first load past the estimate (every
        concurrency to ceil(estimate) + 1; an open loop's rates in steps of the low end to 1.1 x the
        estimate, at most AUTO_RATE_STEPS); None before an estimate."""
        x, o = self.fit, self.opts
        if x is None or x.status != "crossed" or x.load is None:
            return None
        if o.open_loop:
            return max(2, min(AUTO_RATE_STEPS, math.ceil((1.1 * x.load - o.low) / o.low) + 1))
        return max(2, math.ceil(x.load) + 1 - o.low + 1)

    def projected_half_width(self, load: int) -> float | None:
        """The interval's half-width after one more probe at ``load``, were it to land on the fitted
        curve with the sampling variance the probes there had (the between-step noise as measured)."""
        import numpy as np

        from ..crossing import Probes, crossing, curve

        p, c = self.points, self.fit.curve
        bound = self.opts.objective.bound_s
        at = p.load == load
        var = float(np.median(p.var[at] if at.any() else p.var))
        y = float(np.interp(load, c.load, c.fit))
        rps = math.log(c.rps_at(float(load))[0])
        more = Probes(np.append(p.load, float(load)), np.append(p.log_pct, y), np.append(p.var, var),
                      np.append(p.log_rps, rps), np.append(p.step, int(p.step.max()) + 1))  # fmt: skip
        return crossing(curve(more, bound), bound).half_width

    def noise_stop(self, load: int, clock: _Clock) -> Next | None:
        """Stop (why ``noise``) when reaching the precision asked would take more probes than the budget
        has left: by the 1/sqrt(n) law, a probe that narrows the interval by the factor r stands on
        n = r^2 / (1 - r^2) probes' worth, and +-P needs n ((hw / P)^2 - 1) more."""
        hw = self.fit.half_width if self.fit is not None else None
        if hw is None or hw <= self.opts.precision:
            return None
        hw1 = self.projected_half_width(load)
        if hw1 is None:
            return None
        r = min(hw1 / hw, 0.999)
        need = r * r / (1 - r * r) * ((hw / self.opts.precision) ** 2 - 1)
        left = clock.probes_left()
        if need <= left:
            return None
        return Next(
            None,
            "noise",
            f"at this machine's noise another probe would narrow the interval by {100 * (1 - r):.0f} %: "
            f"±{100 * self.opts.precision:g} % would take about {need:,.0f} more probes ({need * clock.each():,.0f} s), "
            f"{left} fit the budget; ±{100 * hw:.1f} % is the precision reached",
        )

    def estimate_doc(self) -> dict | None:
        """The estimate as ``headroom summary`` reports it for the folder (held: the plateau, a lower bound)."""
        if self.summary is None or self.summary.capacity.at_objective is None:
            return None
        a, x = self.summary.capacity.at_objective, self.fit
        key = self.opts.load_key
        return {
            "status": a.status,
            "rps": _r(a.rps, 1),
            "low": _r(a.low, 1),
            "high": _r(a.high, 1),
            key: _r(a.load, 3),
            f"{key}_low": _r(a.load_low, 3),
            f"{key}_high": _r(a.load_high, 3),
            "half_width": _r(x.half_width, 4) if x is not None else None,
            "confidence": x.confidence if x is not None else None,
            "phi": _r(self.phi, 3),
            "tau": _r(x.curve.tau, 4) if x is not None and x.curve else None,
            "tau_rps": _r(x.curve.tau_rps, 4) if x is not None and x.curve else None,
        }


def _r(v, nd: int = 4):
    return None if v is None or not math.isfinite(v) else round(float(v), nd)


# --------------------------------------------------------------------------
# the search block and the lines printed


def search_doc(side: SideSearch, clock: _Clock, done: bool) -> dict:
    o, started = side.opts, clock.start
    return {
        "objective": str(o.objective),
        "load": o.load_key,
        "range": [o.low, o.high],
        "precision": o.precision,
        "precision_reached": _r(side.fit.half_width, 4) if side.fit is not None else None,
        "budget_s": round(clock.budget_s, 1),
        "budget": "auto" if clock.auto else "given",
        "dense_ramp_s": None if clock.dense_s is None else round(clock.dense_s, 1),
        "method": "grow x2 until the fitted percentile breaks the objective, bisect, then repeat the loads "
        "that decide the interval's wider end (headroom/ramp/search.py; the fit: headroom/crossing.py)",
        "probes": side.probes,
        "estimate": side.estimate_doc(),
        "generator_limit": side.limit,
        "stopped": side.stopped if done else None,
        "reason": side.reason if done else None,
        "elapsed_s": round(time.monotonic() - started, 1),
    }


def _say(text: str, label: str = "") -> None:
    who = f" {label}" if label else ""
    print(f"headroom ramp --find{who}: {text}", file=sys.stderr, flush=True)


def probe_line(side: SideSearch, doc: dict) -> str:
    o = side.opts
    ms = f"{o.objective.name}_ms"
    x = side.fit
    est = ""
    if x is not None and x.status == "crossed":
        lo = "open" if x.low is None else f"{x.low:,.0f}"
        hi = "open" if x.high is None else f"{x.high:,.0f}"
        est = f"; capacity {x.rps:,.0f} req/s [{lo}, {hi}]"
    elif x is not None:
        est = f"; {x.status}"
    return (
        f"probe {doc['probe']} ({doc['why']}) at {side._load_text(doc[o.load_key])}: {o.objective.name} "
        f"{doc[ms]:g} ms [{doc[ms + '_low']:g}, {doc[ms + '_high']:g}] {doc['verdict']}, {doc['rps']:,.0f} req/s{est}"
    )


def result_line(side: SideSearch) -> str:
    x, o = side.fit, side.opts
    if x is None or x.status != "crossed":
        return f"{side.reason}"
    lo = "open" if x.low is None else f"{x.low:,.0f}"
    hi = "open" if x.high is None else f"{x.high:,.0f}"
    llo = "open" if x.load_low is None else f"{x.load_low:.1f}"
    lhi = "open" if x.load_high is None else f"{x.load_high:.1f}"
    return (
        f"capacity at {o.objective}: {x.rps:,.0f} req/s (95 % interval {lo} to {hi} req/s; {o.load_key} "
        f"{x.load:.1f} [{llo}, {lhi}]) after {len(side.probes)} probes; stopped: {side.reason}"
    )


def _foreign(rec: Recorder) -> str:
    f = rec.foreign_summary() or {}
    m = f.get("mean_percent")
    return "" if m is None else f"; foreign CPU {m:.0f} % of the machine during the probes"


# --------------------------------------------------------------------------
# driving the recorder


class _Clock:
    """The budget: another probe only when it fits (its expected length from the probes so far).

    An auto budget (``budget_s`` None) is :data:`AUTO_CAP_S` until :meth:`rebudget` ties it to the
    first estimate: :data:`AUTO_SHARE` of a dense ramp of the searched range (module docstring)."""

    def __init__(self, budget_s: float | None, step_s: float, sides: int = 1):
        self.start = time.monotonic()
        self.auto = budget_s is None
        self.budget_s = AUTO_CAP_S if budget_s is None else budget_s
        self.step_s = step_s
        self.sides = sides
        self.spent: list[float] = []
        self.dense_s: float | None = None

    def each(self) -> float:
        """A full probe's time so far (growth probes are shorter: they do not count)."""
        return sum(self.spent) / len(self.spent) if self.spent else self.step_s + 1.0

    def fits(self, probes: int = 1) -> bool:
        return time.monotonic() - self.start + probes * self.each() <= self.budget_s

    def probes_left(self) -> int:
        return max(0, math.floor((self.budget_s - (time.monotonic() - self.start)) / self.each()))

    def timed(self, seconds: float, full: bool = True) -> None:
        if full:
            self.spent.append(seconds)

    def rebudget(self, side: SideSearch) -> None:
        """An auto budget from the side's estimate: half the time of a dense ramp to past it, at least
        AUTO_MIN_S, at most AUTO_CAP_S."""
        n = side.dense_steps()
        if not self.auto or n is None:
            return
        self.dense_s = self.sides * n * (side.full_s + STEP_OVERHEAD_S)
        self.budget_s = min(AUTO_CAP_S, max(AUTO_MIN_S, AUTO_SHARE * self.dense_s))


def _budget_text(clock: _Clock) -> str:
    if clock.auto and clock.dense_s is not None:
        return f"the budget of {clock.budget_s:.0f} s (half the {clock.dense_s:.0f} s of a dense ramp to past the estimate)"
    return f"the budget of {clock.budget_s:g} s"


def _stop(side: SideSearch, nxt: Next) -> None:
    side.stopped, side.reason = nxt.why, nxt.reason


def _probe(side: SideSearch, load: int, why: str, tmp: Path, signals: _Signals) -> bool:
    """One probe of one side: the step, the folder read back, the probe noted; False when the ramp ended."""
    rec = side.rec
    rec.levels.append(load)
    rec.step_duration = side.probe_s(why)
    ok = rec.step_once(len(rec.levels) - 1, tmp, signals)
    if len(rec.steps) < len(rec.levels):  # the step was dropped (generator failed, overran, interrupted)
        return False
    side.analyse()
    doc = side.note_probe(load, why)
    _say(probe_line(side, doc), rec.label if rec.extra_metadata.get("ab") else "")
    return ok


def run_find(args, opts: FindOptions) -> int:
    """``headroom ramp URL --find OBJECTIVE``: record the search into one run folder; the exit code."""
    from .recorder import check_url

    check_url(args.url)
    out = Path(args.output)
    args = _search_args(args, opts)
    rec = Recorder(args, out)
    if out.is_dir() and any(out.iterdir()) and not args.force:
        raise HeadroomError(f"{out}: folder exists and is not empty (use --force to write into it)")
    rec.setup()
    prepare_output(out, args.force)
    side = _side(rec, opts)
    signals = _Signals()
    signals.install()
    clock = _Clock(opts.budget_s, rec.step_duration)
    _say(
        f"{opts.objective} against {rec.url} with {rec.engine.name}: {opts.load_key} from {opts.low} (at most "
        f"{opts.high}), {rec.step_duration:g} s probes, until the interval is within ±{100 * opts.precision:g} %, "
        f"more probes would not narrow it in time, or {_budget_said(opts)}; writing {out}"
    )
    rec.begin()
    failed = False
    try:
        with tempfile.TemporaryDirectory(prefix="headroom-find-") as tmpname:
            nxt = Next(opts.low, "start")
            while True:
                t0 = time.monotonic()
                if not _probe(side, nxt.load, nxt.why, Path(tmpname), signals):
                    failed = True
                    break
                clock.timed(time.monotonic() - t0, full=side.probe_s(nxt.why) >= side.full_s)
                nxt = _next(side, clock, signals)
                rec.extra_metadata["search"] = search_doc(side, clock, nxt.load is None)
                rec.write_metadata()
                if nxt.load is None:
                    break
    finally:
        signals.restore()
        if side.stopped is None:
            side.stopped = "interrupted" if signals.signum is not None else "stopped early"
            side.reason = rec.stopped_early or "interrupted"
        rec.extra_metadata["search"] = search_doc(side, clock, True)
        rec.end(signals)
    rc = rec.finish(signals)
    _say(result_line(side) + _foreign(rec))
    if side.stopped == "broken" and len(side.probes) == 1:
        print(f"headroom: error: {side.reason}", file=sys.stderr)
        return 2
    return rc if (failed or rc != 0) else 0


def _budget_said(opts: FindOptions) -> str:
    if opts.budget_s is None:
        return f"half a dense ramp's time has passed (at most {AUTO_CAP_S:g} s)"
    return f"{opts.budget_s:g} s have passed"


def _next(side: SideSearch, clock: _Clock, signals: _Signals) -> Next:
    """The side's proposal, unless the budget, the probe cap or Ctrl-C stops the search first."""
    nxt = side.propose()
    if nxt.load is None:
        _stop(side, nxt)
        return nxt
    clock.rebudget(side)
    if nxt.why == "repeat" and not signals.stop:
        nxt = side.noise_stop(nxt.load, clock) or nxt
    if nxt.load is not None and signals.stop:
        nxt = Next(None, "interrupted", "interrupted (Ctrl-C)")
    elif nxt.load is not None and len(side.probes) >= MAX_PROBES:
        nxt = Next(None, "probes", f"{MAX_PROBES} probes")
    elif nxt.load is not None and not clock.fits():
        hw = side.fit.half_width if side.fit is not None else None
        where = f" (the interval within ±{100 * hw:.1f} %)" if hw is not None else ""
        nxt = Next(None, "budget", f"{_budget_text(clock)} would be exceeded by another probe{where}")
    if nxt.load is None:
        _stop(side, nxt)
    return nxt


def _side(rec: Recorder, opts: FindOptions) -> SideSearch:
    rec.levels = []  # chosen probe by probe
    rec.low, rec.step = opts.low, None
    rec.high = opts.high
    return SideSearch(rec, opts)


def _search_args(args, opts: FindOptions):
    """A copy of the arguments the recorder validates: the range as a one-step plan, a description."""
    import copy

    a = copy.copy(args)
    a.step_duration = args.step_duration or DEFAULT_PROBE
    ends = f"{opts.low}:{opts.high}:{opts.high - opts.low}"  # the range's two ends: the recorder checks them
    if opts.open_loop:
        a.rate = ends
    else:
        a.concurrency = ends
    if not a.description:
        a.description = (
            f"headroom ramp --find {opts.objective}: {opts.load_key} chosen probe by probe from {opts.low} "
            f"(at most {opts.high}), {a.step_duration} probes"
        )
    return a


def interrupted_code(signals: _Signals) -> int:
    return 143 if signals.signum == signal.SIGTERM else 130
