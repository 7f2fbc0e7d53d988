"""The comparison's answer in plain words: one sentence per question a reader asks first.

1. Did capacity change, and by how much?  2. At what CPU cost per request?
3. How sure is that (the verdict and its exit code)?  4. What to do next, when
it is not decided.  The terminal, the JSON (``headline``) and the report show
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
    return f"{_signed(m.ci[0])} to {_signed(m.ci[1])}" if m.ci else "no interval"


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
    """Did capacity (the throughput the two runs sustain at matched load) change, and by how much;
    with the capacity at the objective when it is judged."""
    return _capacity_sentence(c)[:-1] + objective_clause(c) + "."


def _capacity_sentence(c) -> str:
    m = _metric(c, THROUGHPUT)
    if m is None or m.change is None or m.baseline is None or m.candidate is None:
        why = f" ({m.note})" if m is not None and m.note else ""
        return f"Capacity: not judged{why}."
    moved = f"{_rps(m.baseline)} to {_rps(m.candidate)}"
    if m.decision == "worse":
        return (
            f"Capacity fell by {_pct(m.change)} ({moved} at matched load), beyond the noise ({_interval(m)})."
        )
    if m.decision == "better":
        return (
            f"Capacity rose by {_pct(m.change)} ({moved} at matched load), beyond the noise ({_interval(m)})."
        )
    if m.decision == "same":
        return f"Capacity did not change by {m.threshold:.0%} or more ({_signed(m.change)}: {moved} at matched load)."
    return (
        f"Capacity: {_signed(m.change)} ({moved} at matched load), not shown beyond the noise between "
        f"runs (interval {_interval(m)})."
    )


def cpu_sentence(c) -> str:
    """The CPU cost of a request: the cause of most capacity changes, and the most precise figure."""
    m = _metric(c, CPU)
    if m is None or m.change is None or m.baseline is None or m.candidate is None:
        return (
            "CPU cost per request: unknown (the runs carry no CPU of the server; record it with "
            "headroom ramp --cpu-pid PID or --prometheus URL)."
        )
    moved = f"{_us(m.baseline)} to {_us(m.candidate)}"
    if m.decision in ("worse", "better"):
        way = "more" if m.change > 0 else "less"
        return f"Each request costs {_pct(m.change)} {way} CPU ({moved}), beyond the noise ({_interval(m)})."
    if m.decision == "same":
        return f"CPU per request did not change by {m.threshold:.0%} or more ({_signed(m.change)}: {moved})."
    return f"CPU per request {_signed(m.change)} ({moved}), within the noise ({_interval(m)})."


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
    return (
        "Next: record A and B alternating at every load step (headroom ramp --ab URL_A URL_B "
        "--interleave steps), or learn the machine's noise from A/A runs (--noise-from)."
    )


def headline(c) -> list[str]:
    """The answer, one sentence per question (3 or 4 sentences)."""
    out = [capacity_sentence(c), cpu_sentence(c), sureness_sentence(c)]
    nxt = next_sentence(c)
    return out + ([nxt] if nxt else [])
