"""Runs that do not measure the same thing, said before any verdict.

A comparison pairs the baseline's load steps with the candidate's and judges
the ratios; it cannot see that the two sides requested different URLs, were
driven by different load generators, followed different plans, or that one
side's file stops after a few steps.  Each of those makes a verdict about the
release meaningless (a Go server against nginx "improved" by +3621 %; an
8-step baseline against a file truncated to 3 steps passed as "no
regression"), so :func:`mismatch_warnings` names them, one line each, and the
terminal and the report show those lines first.

Every line starts with :data:`PREFIX`, so that a reader of a comparison's
warnings (text, html) can put them on the first screen.  What is compared
comes from the runs themselves (steps with requests, their levels and
durations) and from their metadata where it exists (``url``/``target``,
``engine``/``tool``, ``steps``); runs without metadata are compared on what
their files hold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import numpy as np

#: every mismatch warning starts with this
PREFIX = "runs do not match: "

#: a side with fewer than this share of the other side's load steps has "far fewer" steps
FEW_STEPS = 0.5

#: step durations (median per run) that differ by more than this factor follow different plans
DURATION_FACTOR = 1.5


@dataclass(frozen=True)
class _Shape:
    """What one run measured: its name, request target, generator and plan."""

    name: str
    url: str | None
    generator: str | None
    kind: str  # "concurrency" or "rate"
    levels: tuple[float, ...]  # level of every step with requests, in order (NaN: unknown)
    planned_steps: int | None  # the metadata's step count
    step_s: float | None  # median duration of the steps with requests
    ab_other: str | None  # the other side's URL when the run is one side of a recorded A/B job
    stopped: bool  # its server stopped answering under load (compare says so first, as a regression)


def _shape(s, name: str, most_steps: int) -> _Shape:
    from .stopped import run_stop

    stopped = run_stop(s, s.label, most_steps) is not None
    fields = s.run.meta.fields or {}
    t = s.table
    # a step ran when it sent requests, answered or failed (a server failing every request of a step
    # ran that step: its error rate is judged, not taken for a truncated file)
    errs = t.errors if t.errors is not None else np.zeros(len(t), dtype=np.int64)
    has = [k for k in range(len(t)) if t.requests[k] > 0 or errs[k] > 0]
    if t.kind == "rate" and t.intended_rps is not None:
        levels = tuple(float(t.intended_rps[k]) for k in has)
    else:
        levels = tuple(float(t.concurrency[k]) for k in has)
    planned = fields.get("steps")
    durations = sorted(float(t.duration_s[k]) for k in has if math.isfinite(t.duration_s[k]))
    ab = fields.get("ab") if isinstance(fields.get("ab"), dict) else {}
    return _Shape(
        name=name,
        url=_text(fields.get("url") or fields.get("target")),
        generator=_generator(fields, s.run.format),
        kind=t.kind,
        levels=levels,
        planned_steps=planned if isinstance(planned, int) and not isinstance(planned, bool) else None,
        step_s=durations[len(durations) // 2] if durations else None,
        ab_other=_text(ab.get("other_url")),
        stopped=stopped,
    )


def _text(v) -> str | None:
    return str(v).strip() or None if v is not None else None


def _generator(fields: dict, fmt: str) -> str | None:
    """The load generator: the engine headroom ramp drove, the metadata's tool, else the file format."""
    for key in ("engine", "tool"):
        v = _text(fields.get(key))
        if v:
            return v
    return fmt or None


def _requested(url: str) -> str:
    """The path and query of a URL: what is requested, wherever it is served."""
    u = urlsplit(url)
    return (u.path or "/") + (f"?{u.query}" if u.query else "")


def _levels_text(levels: tuple[float, ...], kind: str) -> str:
    known = [v for v in levels if math.isfinite(v)]
    if not known:
        return f"{len(levels)} steps, levels unknown"
    unit = " req/s" if kind == "rate" else ""
    shown = ", ".join(f"{v:g}" for v in known[:4]) + (f" ... {known[-1]:g}" if len(known) > 4 else "")
    return f"{len(levels)} steps at {shown}{unit}"


def _url_line(a: _Shape, b: _Shape) -> str | None:
    if not a.url or not b.url or a.url == b.url:
        return None
    pa, pb = _requested(a.url), _requested(b.url)
    if pa == pb and (a.ab_other == b.url or b.ab_other == a.url):
        return None  # the two sides of one A/B recording: two addresses by design, the same request
    what = "different requests" if pa != pb else "different addresses"
    return f"{what}: {a.name} requested {a.url}, {b.name} {b.url}"


def _generator_line(a: _Shape, b: _Shape) -> str | None:
    if not a.generator or not b.generator or a.generator == b.generator:
        return None
    return f"different load generators: {a.name} was driven by {a.generator!r}, {b.name} by {b.generator!r}"


def _plan_lines(a: _Shape, b: _Shape) -> list[str]:
    out = []
    if a.kind != b.kind:
        words = {"concurrency": "concurrency steps (closed loop)", "rate": "request-rate steps (open loop)"}
        out.append(f"different plans: {a.name} ran {words[a.kind]}, {b.name} {words[b.kind]}")
        return out
    la, lb = set(v for v in a.levels if math.isfinite(v)), set(v for v in b.levels if math.isfinite(v))
    if la and lb and la != lb and not (la <= lb or lb <= la):
        out.append(
            f"different plans: {a.name} ran {_levels_text(a.levels, a.kind)}, "
            f"{b.name} {_levels_text(b.levels, b.kind)}; they share {len(la & lb)} of them"
        )
    if a.step_s and b.step_s and max(a.step_s, b.step_s) > DURATION_FACTOR * min(a.step_s, b.step_s):
        out.append(
            f"different step durations: {a.name} {a.step_s:.3g} s a step, {b.name} {b.step_s:.3g} s "
            "(the steps' warm-up and noise differ)"
        )
    return out


def _steps_line(a: _Shape, b: _Shape, plans_differ: bool) -> str | None:
    """A side with fewer load steps than the other: far fewer always said, a few fewer unless the
    plans already differ (then the plan line says it)."""
    na, nb = len(a.levels), len(b.levels)
    if na == nb:
        return None
    few, many = (a, b) if na < nb else (b, a)
    if few.stopped:
        return None  # its server stopped answering: the comparison says that first, as a regression
    top = [v for v in few.levels if math.isfinite(v)]
    stops = f", stopping at {top[-1]:g}" if top else ""
    planned = f"; its own metadata plans {few.planned_steps}" if _truncated(few) else ""
    if len(few.levels) < FEW_STEPS * len(many.levels):
        return (
            f"{few.name} has far fewer load steps than {many.name} ({len(few.levels)} against "
            f"{len(many.levels)}{stops}{planned}): a truncated file or a run that ended early; the verdict "
            f"rests on {len(few.levels)} levels only"
        )
    if plans_differ and not planned:
        return None
    return f"different numbers of load steps: {a.name} {na}, {b.name} {nb}{planned}"


def _truncated(s: _Shape) -> bool:
    return s.planned_steps is not None and len(s.levels) < s.planned_steps


def _truncated_line(s: _Shape) -> str:
    """A run whose file holds fewer steps than its own metadata planned."""
    return (
        f"{s.name} holds {len(s.levels)} load steps with requests, its metadata plans {s.planned_steps}: "
        "the file is truncated, or the run ended early"
    )


def _pair_lines(a: _Shape, b: _Shape) -> list[str]:
    plans = _plan_lines(a, b)
    lines = [_url_line(a, b), _generator_line(a, b), *plans, _steps_line(a, b, bool(plans))]
    return [ln for ln in lines if ln]


def mismatch_warnings(baseline_summaries: Sequence, candidate_summaries: Sequence) -> list[str]:
    """One line per way the compared runs do not measure the same thing (none when they match).

    Every run is checked against the first baseline run (so repeats within a
    side are checked too): request URL (two addresses of one A/B recording are
    expected; another path or query is not), load generator, plan (closed
    against open loop, levels neither side contains of the other, step
    durations more than 1.5x apart), number of load steps (a side with fewer
    than half the other's steps said as such), and a run holding fewer steps
    than its own metadata plans.  Each line starts with :data:`PREFIX`.

    Parameters
    ----------
    baseline_summaries, candidate_summaries
        :class:`headroom.summary.Summary` objects (or one each), baseline first.
    """
    from .summary import Summary

    sides = [
        [baseline_summaries] if isinstance(baseline_summaries, Summary) else list(baseline_summaries),
        [candidate_summaries] if isinstance(candidate_summaries, Summary) else list(candidate_summaries),
    ]
    if not sides[0] or not sides[1]:
        return []
    most = max(len(s.table.requests) for side in sides for s in side)
    shapes = [
        _shape(s, _name(role, s, i, len(side)), most)
        for role, side in zip(("baseline", "candidate"), sides)
        for i, s in enumerate(side)
    ]
    ref, others = shapes[0], shapes[1:]
    lines = [ln for other in others for ln in _pair_lines(ref, other)]
    said = " ".join(lines)
    # a truncated run the step-count lines have not named already (e.g. both sides equally short)
    lines += [_truncated_line(s) for s in shapes if _truncated(s) and not s.stopped and f"{s.name} has far fewer" not in said
              and f"metadata plans {s.planned_steps}" not in said]  # fmt: skip
    return [PREFIX + ln for ln in dict.fromkeys(lines)]


def _name(role: str, s, i: int, n: int) -> str:
    """``the baseline (label)``; ``baseline run 2 (label)`` for one of several."""
    who = f"the {role}" if n == 1 else f"{role} run {i + 1}"
    return f"{who} ({s.label})"


def with_mismatches(comparison, baseline_summaries, candidate_summaries):
    """The comparison with the mismatch warnings first among its warnings (each once)."""
    from dataclasses import replace

    found = mismatch_warnings(baseline_summaries, candidate_summaries)
    if not found:
        return comparison
    return replace(comparison, warnings=list(dict.fromkeys([*found, *comparison.warnings])))


#: a run whose load generator set the ceiling (headroom.generator_limit): said first too
GENERATOR = "GENERATOR-LIMITED: "


def first(warnings: Sequence[str]) -> list[str]:
    """The mismatch and generator-limit warnings among ``warnings``, in order (what goes on the first
    screen)."""
    return [w for w in warnings if w.startswith(PREFIX) or GENERATOR in w]
