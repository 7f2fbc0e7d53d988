"""Runs whose server stopped answering under load: where, and what that means for a comparison.

A release that crashes or hangs at some load is the worst regression there is,
not a broken test.  ``headroom ramp`` keeps the step in which the server
stopped answering (its responses and its failed requests) and writes
``stopped: {step, concurrency or rate, by, reason, requests, errors,
error_kinds}`` into metadata.yml (``by: server``; ``by: generator`` when the
load generator failed, which says nothing about the server).  Older
recordings said only ``stopped_early: "step K (concurrency C): no response
recorded ..."`` with ``planned_concurrency``; those are read too.  A run from
anywhere else stopped answering when its last step failed for the most
part (:data:`ERROR_JUMP` of its requests) and it has fewer steps than a run
of the other side (in a comparison) or than its plan, the steps before it
having answered (a run alone: :func:`run_stop`).

When no request of the dying step got a response, hey and oha leave no row
for it and the recorder writes no section; :func:`with_dying_step` gives the
run that step back (no request, its failed ones), so that the step table,
the JSON, the report and the history show it as a step like the others,
whether the server died in step 1, mid-step or at a step's first request.

:func:`stops` finds the stop of every run; :func:`stop_verdict` turns the
stops of both sides into a verdict (regressed when the candidate stopped
at a lower level than any baseline run, improved in the reverse case) and one
reason line naming the level and what the other side served there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

#: a last step with at least this share of failed requests is a stop (runs without ``stopped``)
ERROR_JUMP = 0.5

_LEGACY = re.compile(r"step (\d+) \((concurrency (\d+)|([0-9.]+) req/s)\): no response recorded")


@dataclass(frozen=True)
class Stop:
    """Where one run stopped answering."""

    label: str
    level: float  # the concurrency (or rate, req/s) of the step in which it stopped
    open_loop: bool
    step: int  # 1-based step number of the ramp
    requests: int | None  # requests of that step, failed ones included; None: unknown
    errors: int | None  # failed requests of that step; None: unknown
    kinds: dict | None  # failed requests by kind
    source: str  # "metadata", "stopped_early" (older recordings) or "errors" (a last step that failed)
    kept: bool = False  # the step in which it stopped is the run's last step (it got responses)

    def where(self) -> str:
        return level_text(self.level, self.open_loop)

    def what(self) -> str:
        """What happened in that step: ``all 35,255 requests failed (35,246 connection refused, ...)``."""
        kinds = ""
        if self.kinds:
            kinds = " (" + ", ".join(f"{n:,} {k}" for k, n in self.kinds.items()) + ")"
        if self.errors is None:
            if self.kept:
                return "its failed requests not counted by the load generator"
            return "no response recorded, failed requests not counted"
        if self.requests is None or self.errors >= self.requests:
            return f"all {self.errors:,} requests failed{kinds}"
        return f"{self.errors:,} of {self.requests:,} requests failed{kinds}"

    def to_dict(self) -> dict:
        return {
            "run": self.label,
            "level": self.level,
            "unit": "req/s" if self.open_loop else "concurrency",
            "step": self.step,
            "requests": self.requests,
            "errors": self.errors,
            "error_kinds": self.kinds,
            "source": self.source,
        }


def server_stop(fields: dict) -> dict | None:
    """headroom ramp's ``stopped`` block when the server (not the load generator) stopped answering."""
    st = fields.get("stopped")
    if not isinstance(st, dict) or st.get("by") != "server":
        return None
    level = st.get("rate" if "rate" in st else "concurrency")
    if not isinstance(level, (int, float)) or isinstance(level, bool):
        return None
    return st


@dataclass(frozen=True)
class DyingStep:
    """The step in which the server stopped answering, when the run has no rows for it: no request of
    that step got a response and the recorder wrote no section (hey, oha: failed requests have no row)."""

    level: float
    open_loop: bool
    errors: int  # its failed requests (every request of the step)
    after_ns: int  # where the step sits on the time axis: the end of the step before it (0: none)
    #: the run has the step already, empty: a server that answered nothing at all leaves a request
    #: file with only a header (one section, no row)
    present: bool = False


def dying_step(run) -> DyingStep | None:
    """The step :func:`with_dying_step` adds: metadata ``stopped`` (by the server) names step
    ``n + 1`` of a run of ``n`` steps, with a count of its failed requests."""
    fields = run.meta.fields if run.meta is not None else {}
    st = server_stop(fields)
    n = run.n_steps
    empty = n == 1 and run.n_requests == 0 and _int(st.get("step")) == 1 if st is not None else False
    if st is None or (_int(st.get("step")) != n + 1 and not empty):
        return None
    errors = _int(st.get("errors"))
    if errors is None:
        return None
    ol = "rate" in st
    after = 0
    if run.requests is not None and len(run.requests):
        r = run.requests
        after = int((r.start_ns + np.rint(r.latency_s * 1e9).astype(np.int64)).max())
    elif run.reduced is not None and len(run.reduced.steps):
        after = int(run.reduced.steps.end_ns.max())
    return DyingStep(float(st["rate" if ol else "concurrency"]), ol, errors, after, empty)


def with_dying_step(run, dying: DyingStep):
    """The run with one more step, ``dying``: no request, ``dying.errors`` failed ones.  Every view
    of the run (the step table, the JSON, the report, the history) then shows the step in which the
    server stopped answering, as a step with its failures, whatever the moment of the death."""
    import dataclasses

    n = run.n_steps
    if dying.present:  # the run's only step, empty: its failed requests
        return dataclasses.replace(run, step_errors=np.array([dying.errors], np.int64))
    meta = run.meta
    conc = None
    if not dying.open_loop:
        conc = tuple(meta.concurrency(k) for k in range(n)) + (int(dying.level),)
    rates = meta.step_rates
    if rates is not None and len(rates) == n:
        rates = (
            *rates,
            {"intended_rps": dying.level, "sent_rps": None, "dropped": None, "fell_behind": None},
        )
    meta = dataclasses.replace(meta, step_concurrency=conc if conc is not None else meta.step_concurrency,
                               step_rates=rates)  # fmt: skip
    errs = np.zeros(n, np.int64) if run.step_errors is None else np.asarray(run.step_errors, np.int64)
    out = {"meta": meta, "step_errors": np.append(errs, dying.errors)}
    if run.requests is not None:
        r = run.requests
        offsets = np.append(r.step_offsets, r.step_offsets[-1]).astype(np.int64)
        out["requests"] = dataclasses.replace(r, step_offsets=offsets)
    else:
        red = run.reduced
        st = red.steps
        steps = dataclasses.replace(
            st,
            index=np.arange(n + 1),
            concurrency=[*st.concurrency, None if dying.open_loop else int(dying.level)],
            start_ns=np.append(st.start_ns, dying.after_ns).astype(np.int64),
            end_ns=np.append(st.end_ns, dying.after_ns).astype(np.int64),
            requests=np.append(st.requests, 0).astype(np.int64),
            rps=np.append(st.rps, np.nan),
        )
        out["reduced"] = dataclasses.replace(red, steps=steps)
    return dataclasses.replace(run, **out)


def level_text(level: float, open_loop: bool) -> str:
    return f"{level:g} req/s" if open_loop else f"concurrency {level:g}"


def _fields(s) -> dict:
    return s.run.meta.fields if s.run.meta is not None else {}


def _open_loop(fields: dict) -> bool:
    return fields.get("mode") == "open-loop"


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def run_stop(s, label: str, others_levels: int | None = None) -> Stop | None:
    """The stop of one analysed run (a :class:`headroom.summary.Summary`), or None.

    From headroom ramp's metadata when it has ``stopped`` (or an older
    ``stopped_early``; a headroom ramp run without them answered to the
    end).  For a run of another tool, from its errors and its plan: its last
    step failed for the most part (:data:`ERROR_JUMP` of its requests), and
    either the steps before it did not (the failures jumped there: alone
    and in a comparison alike), its failures got no response (status 0,
    where the file tells status codes: a server answering 5xx has not
    stopped answering, its error rate is judged), and it ran no more steps
    than its plan when the metadata gives one (``planned_concurrency`` or
    ``planned_rates``); or, in a comparison (``others_levels``: the most
    steps a run of the other side has), it has fewer steps than that.
    """
    f = _fields(s)
    st = f.get("stopped")
    if isinstance(st, dict):
        if server_stop(f) is None:
            return None  # the load generator failed: nothing said about the server
        ol = "rate" in st
        kinds = st.get("error_kinds") if isinstance(st.get("error_kinds"), dict) else None
        return Stop(
            label, float(st["rate" if ol else "concurrency"]), ol, _int(st.get("step")) or 0,
            _int(st.get("requests")), _int(st.get("errors")), kinds, "metadata", bool(st.get("step_kept")),
        )  # fmt: skip
    se = f.get("stopped_early")
    if isinstance(se, str):
        m = _LEGACY.search(se)
        if m:
            ol = m[3] is None
            return Stop(label, float(m[3] or m[4]), ol, int(m[1]), None, None, None, "stopped_early")
        return None
    t = s.table
    n = len(t.requests)
    if n == 0 or t.errors is None or not _failed_most(t, n - 1):
        return None
    if str(f.get("tool", "")).startswith("headroom ramp"):
        return None  # the recorder saw the server answer after every step (5xx): no stop
    fewer = others_levels is not None and n < others_levels
    if not (fewer or _jumped(s, f, n)):
        return None
    err, req = int(t.errors[-1]), int(t.requests[-1])
    level = float(_keys(s)[-1])
    return Stop(label, level, _open_loop(f) or t.kind == "rate", n, req + err, err, None, "errors", True)


def _jumped(s, f: dict, n: int) -> bool:
    """The last of ``n`` steps failed without responses where the steps before answered, within the plan."""
    t = s.table
    if any(_failed_most(t, k) for k in range(n - 1)):
        return False  # it failed so all along: a broken target, not a server that stopped
    codes = getattr(s.run, "error_codes", None) or {}
    if codes and codes.get(0, 0) < ERROR_JUMP * int(t.errors[-1]):
        return False  # its failures were answered (5xx): the error rate's to judge
    plan = f.get("planned_rates" if _open_loop(f) else "planned_concurrency")
    return not (isinstance(plan, list) and len(plan) <= n)


def _failed_most(t, k: int) -> bool:
    err, req = int(t.errors[k]), int(t.requests[k])
    return err + req > 0 and err / (err + req) >= ERROR_JUMP


def stops(sides, labels: list[str]) -> list[list[Stop | None]]:
    """The stop of every run of both sides (None: it did not stop answering)."""
    out, k = [], 0
    for i, side in enumerate(sides):
        most = max(len(s.table.requests) for s in sides[1 - i])
        row = []
        for s in side:
            row.append(run_stop(s, labels[k], most))
            k += 1
        out.append(row)
    return out


def first(side_stops: list[Stop | None]) -> Stop | None:
    """The lowest stop of a side's runs (one run falling over is enough)."""
    got = [s for s in side_stops if s is not None]
    return min(got, key=lambda s: s.level) if got else None


def _keys(s) -> np.ndarray:
    """A run's step levels: concurrency, else an open loop's rates (headroom ramp's ``rates``, or the
    intended rate of the format's rate steps), else the step number."""
    t = s.table
    if t.known_concurrency:
        return t.concurrency
    rates = _fields(s).get("rates")
    if isinstance(rates, list) and len(rates) == len(t.requests):
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in rates):
            return np.asarray(rates, np.float64)
    rate = getattr(t, "intended_rps", None)
    if rate is not None and np.all(np.isfinite(rate)):
        return rate
    return (t.index + 1).astype(np.float64)


def served(side, level: float) -> tuple[float, float | None, float | None] | None:
    """What a side's runs served at ``level`` (or, when none ran it, the highest level below):
    (level, goodput req/s, p99 s) as geometric means over the runs that have it; None when no
    run has a usable step at or below it."""
    best = None
    for s in side:
        t = s.table
        keys = _keys(s)
        ok = np.flatnonzero(t.usable & (keys <= level + 1e-9))
        if len(ok):
            c = float(keys[ok[-1]])
            best = c if best is None else max(best, c)
    if best is None:
        return None
    rps, p99 = [], []
    for s in side:
        t = s.table
        keys = _keys(s)
        hit = np.flatnonzero(t.usable & (np.abs(keys - best) < 1e-9))
        if len(hit):
            i = int(hit[0])
            rps.append(float(t.goodput_rps[i]))
            p99.append(float(t.latency.pct["p99"][i]))
    g = lambda v: float(np.exp(np.mean(np.log(v)))) if v and all(x > 0 for x in v) else None  # noqa: E731
    return best, g(rps), g(p99)


def reached(side, level: float) -> bool:
    """Whether every run of a side has a usable step at ``level`` or above."""
    for s in side:
        t = s.table
        keys = _keys(s)
        if not np.any(t.usable & (keys >= level - 1e-9)):
            return False
    return True


def _served_text(name: str, side, stop: Stop) -> str:
    got = served(side, stop.level)
    if got is None:
        return f"the {name} has no usable step at or below that level"
    lvl, rps, p99 = got
    fig = []
    if rps is not None:
        fig.append(f"{rps:,.0f} req/s")
    if p99 is not None and np.isfinite(p99):
        fig.append(f"p99 {_ms(p99)}")
    figs = ", ".join(fig) or "no usable figures"
    if abs(lvl - stop.level) < 1e-9:
        return f"the {name} served {figs} there"
    ran = any(np.any(np.abs(_keys(s) - stop.level) < 1e-9) for s in side)
    why = (
        f"the {name}'s step at that level is too short to trust or has no success"
        if ran
        else f"the {name} was not run at that level (the recording ended there)"
    )
    return f"{why}; at {level_text(lvl, stop.open_loop)} it served {figs}"


def _ms(s: float) -> str:
    ms = s * 1e3
    return f"{ms:.3g} ms" if ms < 100 else f"{ms:,.0f} ms"


def stop_verdict(sides, side_stops: list[list[Stop | None]]) -> tuple[str, str] | None:
    """(verdict, reason) when one side stopped answering at a lower level than the other; None when
    neither did, or both at the same level (then the matched steps decide alone)."""
    sb, sc = first(side_stops[0]), first(side_stops[1])
    if sc is not None and (sb is None or sc.level < sb.level):
        n = len(side_stops[1])
        who = "the candidate" if n == 1 else f"candidate run {sc.label}"
        return "regressed", (
            f"{who} stopped answering at {sc.where()} (step {sc.step}: {sc.what()}); "
            + _served_text("baseline", sides[0], sc)
        )
    if sb is not None and (sc is None or sb.level < sc.level):
        n = len(side_stops[0])
        who = "the baseline" if n == 1 else f"baseline run {sb.label}"
        if not reached(sides[1], sb.level):
            return None  # the candidate was not run that far: it is not known to take that load
        said = _served_text("candidate", sides[1], sb)
        if said.startswith("the candidate served"):
            said = "it" + said[len("the candidate") :]
        return "improved", (
            f"{who} stopped answering at {sb.where()} (step {sb.step}: {sb.what()}); the candidate did not: {said}"
        )
    return None


def stop_note(side_stops: list[list[Stop | None]]) -> str | None:
    """A note for stops the verdict does not rest on (both sides stopped at the same level)."""
    sb, sc = first(side_stops[0]), first(side_stops[1])
    if sb is not None and sc is not None and sb.level == sc.level:
        return f"both sides stopped answering at {sb.where()}: the comparison rests on the steps below it"
    return None
