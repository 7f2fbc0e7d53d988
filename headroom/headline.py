"""The comparison's answer in plain words: one sentence per question a reader asks first.

1. Did capacity change, and by how much (and, with an objective, what
throughput each side carries at it)?  2. At what CPU cost per request?
3. How sure is that (the verdict and its exit code)?  4. What to do next, when
it is not decided.  Every figure is named as the verdict's table names it
(*plateau throughput (paired)*, *CPU per request*: means over the matched
steps), never by a word another table uses for another figure (the summary's
*modelled capacity (USL)*, *CPU per request (whole run)*).  The terminal, the JSON (``headline``) and the report show
the same sentences; they are built here from a :class:`~headroom.compare.Comparison`
and nothing else, so they cannot disagree with its numbers.
"""

from __future__ import annotations

THROUGHPUT = "paired_plateau_rps"
CPU = "cpu_s_per_req"


def _pct(v: float) -> str:  # one decimal, as the metric table prints it
    return f"{abs(v) * 100:.1f} %"


def _signed(v: float) -> str:
    return f"{v * 100:+.1f} %"


def _metric(c, key: str):
    return next((m for m in c.metrics if m.key == key), None)


def _rps(v) -> str:
    return f"{v:,.0f} req/s"


def _us(v) -> str:
    return f"{v * 1e6:,.1f} us"


def _interval(m) -> str:
    """The metric's interval with its own confidence (a Holm or closed-test level, not the page's 95 %)."""
    from .compare.wording import two_sided

    return f"{_signed(m.ci[0])} to {_signed(m.ci[1])}{two_sided(m)}" if m.ci else "no interval"


def objective_clause(c) -> str:
    """The capacity at the objective when compare judged it (issue 39): a clause of the capacity sentence."""
    m = next((x for x in c.metrics if x.key == "rps_at_objective" and x.decides), None)
    if m is None or m.change is None or m.baseline is None or m.candidate is None or c.objective is None:
        return ""
    moved = f"{_rps(m.baseline)} to {_rps(m.candidate)}"
    if m.decision in ("worse", "better"):
        way = "fell" if m.change < 0 else "rose"
        return f"; at {c.objective} it {way} by {_pct(m.change)} ({moved}), beyond the noise ({_interval(m)})"
    if m.decision == "same":
        return f"; at {c.objective} it did not change by {m.threshold:.0%} or more ({_signed(m.change)}: {moved})"
    return f"; at {c.objective}: {_signed(m.change)} ({moved}), not shown beyond the noise ({_interval(m)})"


def capacity_sentence(c) -> str:
    """Did capacity change: the throughput the two runs sustain at matched load (the paired plateau
    throughput, or in an interleaved recording the throughput of the paired levels), and by how much;
    with the capacity at the objective when compare judges it."""
    return _capacity_sentence(c)[:-1] + objective_clause(c) + "."


def _capacity_sentence(c) -> str:
    m = _metric(c, THROUGHPUT)
    if m is None or m.change is None or m.baseline is None or m.candidate is None:
        why = f" ({m.note})" if m is not None and m.note else ""
        name = m.name if m is not None else "Plateau throughput (paired)"
        return f"{_cap(name)}: not judged{why}."
    name = _cap(m.name)
    moved = f"{_rps(m.baseline)} to {_rps(m.candidate)}"
    verb = {"worse": "fell", "better": "rose"}.get(m.decision)
    said = _at_level(m, m.decision, verb, f"{moved} at matched load") if verb else None
    if said:
        return said
    if m.decision == "worse":
        return (
            f"{name} fell by {_pct(m.change)} ({moved} at matched load), beyond the noise ({_interval(m)})."
        )
    if m.decision == "better":
        return (
            f"{name} rose by {_pct(m.change)} ({moved} at matched load), beyond the noise ({_interval(m)})."
        )
    if m.decision == "same":
        return f"{name} did not change by {m.threshold:.0%} or more ({_signed(m.change)}: {moved} at matched load)."
    noise = "of the level pairs" if c.design == "interleaved steps" else "between runs"
    return (
        f"{name}: {_signed(m.change)} ({moved} at matched load), not shown beyond the noise {noise} "
        f"(interval {_interval(m)})."
    )


def _beyond_at(m, decision: str):
    """The level whose own change decided the metric (the decision stage names it), or None."""
    return m.decided_level() if decision in ("worse", "better") and hasattr(m, "decided_level") else None


def _at_level(m, decision: str, verb: str, moved: str) -> str | None:
    """'Throughput fell by 60.9 % at c=1, beyond the noise there (-17.9 % on average: ...)'."""
    if not getattr(m, "levels", None) or m.ci is None:
        return None
    lc = _beyond_at(m, decision)
    if lc is None and not (m.ci[0] <= 0.0 <= m.ci[1]):  # the average decided: said as such
        return None
    if lc is None:  # the line across load is beyond the noise, not the average nor one level
        lo, hi = m.levels[0], m.levels[-1]
        up = (decision == "worse") == (m.better == "lower")  # the decided direction of the change
        top = max(m.levels, key=lambda x: x.change if up else -x.change)
        return (
            f"{_cap(m.name)} {verb} across load, beyond the noise: {_signed(top.change)} at {top.where()} "
            f"on the line in log load ({_signed(lo.change)} at {lo.where()} to {_signed(hi.change)} at "
            f"{hi.where()}); on average over the levels {_signed(m.change)} ({moved}; interval {_interval(m)})."
        )
    return (
        f"{_cap(m.name)} {verb} by {_pct(lc.raw)} at {lc.where()}, beyond the noise there "
        f"({_signed(lc.raw_ci[0])} to {_signed(lc.raw_ci[1])}, every level at once); on average over "
        f"the levels {_signed(m.change)} ({moved})."
    )


def _cap(name: str) -> str:
    return name[:1].upper() + name[1:]


def objective_sentence(c) -> str | None:
    """With an objective: the throughput each side carries at it (None without one, or unknown)."""
    if c.objective is None:
        return None
    m = _metric(c, "rps_at_objective")
    if m is None or m.baseline is None or m.candidate is None:
        why = f" ({m.note})" if m is not None and m.note else ""
        return f"At {c.objective}: the throughput each side carries is unknown{why}."
    if m.decides and m.change is not None:  # judged: the capacity sentence says it (objective_clause)
        return None
    held = ""
    if "held the objective at every step" in m.note:  # which side: the note names it
        who = m.note.split("; ")[-1].split(" held the objective")[0]
        held = f"; {who} held it at every step: a lower bound"
    return (
        f"At {c.objective}: {_rps(m.baseline)} to {_rps(m.candidate)} (throughput at the objective; "
        f"shown, not judged{held})."
    )


def cpu_sentence(c) -> str:
    """The CPU cost of a request: the cause of most capacity changes, and the most precise figure."""
    m = _metric(c, CPU)
    if m is not None and m.change is None and m.note:  # measured, but this comparison cannot judge it
        return f"CPU cost per request: not judged ({m.note})."
    if m is None or m.change is None or m.baseline is None or m.candidate is None:
        return (
            "CPU cost per request: unknown (the runs carry no CPU of the server; record it with "
            "headroom ramp --cpu-pid PID or --prometheus URL)."
        )
    moved = f"{_us(m.baseline)} to {_us(m.candidate)}"
    where = "geometric mean over the matched steps"
    verb = {"worse": "rose", "better": "fell"}.get(m.decision)
    said = _at_level(m, m.decision, verb, f"{moved}, {where}") if verb else None
    if said:
        return said
    if m.decision in ("worse", "better"):
        way = "more" if m.change > 0 else "less"
        return (
            f"Each request costs {_pct(m.change)} {way} CPU (CPU per request {moved}, {where}), beyond the "
            f"noise ({_interval(m)})."
        )
    if m.decision == "same":
        return (
            f"CPU per request did not change by {m.threshold:.0%} or more ({_signed(m.change)}: {moved}, "
            f"{where})."
        )
    return f"CPU per request {_signed(m.change)} ({moved}, {where}), within the noise ({_interval(m)})."


_SURE = {
    "regressed": "REGRESSED (exit 1)",
    "improved": "IMPROVED (exit 0)",
    "no change": "NO CHANGE (exit 0)",
    "no regression": "NO REGRESSION (exit 0)",
    "inconclusive": "INCONCLUSIVE (exit 3)",
}


def sureness_sentence(c) -> str:
    """How sure: the verdict, its exit code, and the error the gate allows."""
    risk = 1.0 - c.confidence
    if c.verdict in ("regressed", "improved"):
        return (
            f"{_SURE[c.verdict]}: {c.reason}; the chance that any metric is called changed by noise alone "
            f"is at most {risk:.0%}."
        )
    if c.verdict in ("no regression", "no change"):
        return f"{_SURE[c.verdict]}: {c.reason}."
    reason = c.reason.split("; about ")[0]  # the runs that would decide are the next sentence
    return f"{_SURE.get(c.verdict, c.verdict.upper())}: not decided; {reason}."


def next_sentence(c) -> str | None:
    """What to do next when the gate did not decide (None when it did)."""
    if c.verdict != "inconclusive":
        return None
    if c.reason.startswith("the runs do not measure the same thing"):
        return (
            "Next: record both sides with the same plan, request path and load generator, each to its "
            "planned end; or judge these runs anyway with --accept-mismatch."
        )
    interleaved = c.design == "interleaved steps"
    if c.runs_needed:
        what, how = (
            ("interleaved recordings", "--interleave steps --repeats N")
            if interleaved
            else ("interleaved runs per side", "--repeats N")
        )
        return (
            f"Next: about {c.runs_needed} {what} would most likely decide; record them with "
            f"headroom ramp --ab URL_A URL_B {how}."
        )
    if interleaved:  # the design already decides what it can: more of it, or longer steps
        return (
            "Next: record more interleaved recordings (headroom ramp --ab URL_A URL_B --interleave steps "
            "--until-decided --max-repeats 6), or longer steps (--step-duration) or more pairs a level "
            "(--pairs-per-level)."
        )
    return (
        "Next: record A and B alternating at every load step (headroom ramp --ab URL_A URL_B "
        "--interleave steps), or learn the machine's noise from A/A runs (--noise-from)."
    )


def headline(c) -> list[str]:
    """The answer, one sentence per question (3 to 5 sentences): the verdict first, then capacity, with
    an objective the throughput at it, CPU per request, and what to do next when it is not decided."""
    obj = objective_sentence(c)
    # the answer first (the verdict and its exit code), then the figures it rests on
    out = [sureness_sentence(c), capacity_sentence(c), *([obj] if obj else []), cpu_sentence(c)]
    nxt = next_sentence(c)
    return out + ([nxt] if nxt else [])
