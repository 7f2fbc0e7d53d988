"""Wording: the sentences, notes and warnings of a comparison, from its figures only.

Nothing here computes a figure; every number comes from the stages before
(the text and HTML renderings in :mod:`headroom.text` and :mod:`headroom.html`
and the opening sentences of :mod:`headroom.headline` read the same objects).
"""

from __future__ import annotations

import math
import os

import numpy as np

from .result import Metric


def pct(v: float) -> str:
    return f"{v * 100:+.1f}%"


def across_load(m: Metric) -> str:
    """Where a change is largest and how it moves across load: "+240.0% at c=1, +18.0% at c=31"."""
    if len(m.levels) < 2:
        return ""
    lo, hi = m.levels[0], m.levels[-1]
    text = f"{pct(lo.change)} at {lo.where()}, {pct(hi.change)} at {hi.where()}"
    top = m.largest(worse=True)
    if top is not None and top not in (lo, hi):
        text += f"; largest {pct(top.change)} at {top.where()}"
    return text


def describe(m: Metric, decision: str | None = None) -> str:
    """A short phrase quoting the evidence that decided: the level and its own change when one level
    did, the average and its interval when the average did (never the line's ends, which may point
    the other way)."""
    if m.change is None:
        return f"{m.name}: not judged ({m.note})"
    if m.key == "error_rate":
        s = f"{m.name} {m.change * 100:+.2f} points"
        return s + (f" ({m.ci[0] * 100:+.2f} to {m.ci[1] * 100:+.2f})" if m.ci else "")
    lc = m.decided_level() if decision in ("worse", "better") else None
    if lc is not None and lc.raw_ci is not None:
        return (
            f"{m.name} {pct(lc.raw)} at {lc.where()} (that level's own interval {pct(lc.raw_ci[0])} to "
            f"{pct(lc.raw_ci[1])}, beyond +-{m.threshold:.0%}); {pct(m.change)} on average over the levels"
        )
    s = f"{m.name} {pct(m.change)}"
    if m.ci and decision in ("worse", "better") and m.ci[0] <= 0.0 <= m.ci[1]:
        # the change across load was found by the test, its average alone is not clear of 0
        p = f", p = {m.pvalue:.2g}" if m.pvalue is not None else ""
        return (
            s
            + f" on average (the change across load beyond the noise{p}; the average's own interval {pct(m.ci[0])} to {pct(m.ci[1])}{two_sided(m)})"
        )
    s += f" (interval {pct(m.ci[0])} to {pct(m.ci[1])}{two_sided(m)})" if m.ci else ""
    return s


def two_sided(m: Metric) -> str:
    """', 99.1 % two-sided': an interval's confidence named beside it (the one-sided bounds of the
    verdict are at the family's confidence; a metric's interval is at its own level)."""
    if m.level is None or not math.isfinite(m.level):
        return ""
    return f", {100 * m.level:.3g} % two-sided"


def same_files(sides) -> list[str]:
    """A warning when the candidate is the baseline itself (the same files): nothing can change."""
    given = [[str(s.run.meta.source) for s in side] for side in sides]
    if sorted(map(os.path.realpath, given[0])) != sorted(map(os.path.realpath, given[1])):
        return []
    return [f"the baseline and the candidate are the same run(s) ({', '.join(given[0])}): every change is 0"]


def load_means(sides, key: str = "mean_percent") -> list[list[float | None]]:
    """Per run, the foreign CPU (or steal, ``steal_mean_percent``) headroom ramp recorded, % of the machine."""
    out = []
    for side in sides:
        vals = []
        for s in side:
            fc = s.run.meta.fields.get("foreign_cpu") if s.run.meta is not None else None
            v = fc.get(key) if isinstance(fc, dict) else None
            vals.append(float(v) if isinstance(v, (int, float)) else None)
        out.append(vals)
    return out


def load_notes(sides, paired: bool = False) -> list[str]:
    notes = []
    when = "during each side's steps" if paired else "during the runs"
    for key, what in (
        ("mean_percent", "CPU used by other processes"),
        ("steal_mean_percent", "CPU stolen by the host"),
    ):
        means = load_means(sides, key)
        if any(v is None for side in means for v in side):
            continue
        b, c = (", ".join(f"{v:.0f}" for v in side) for side in means)
        notes.append(f"{what} {when} (% of the machine): baseline {b}; candidate {c}")
    return notes


def load_warnings(sides, paired: bool = False) -> list[str]:
    means = load_means(sides)
    if any(v is None for side in means for v in side):
        return []
    mb, mc = float(np.mean(means[0])), float(np.mean(means[1]))
    if paired and abs(mc - mb) > 10:  # the sides alternated within every level: bursts fell unevenly
        return [
            f"foreign load fell unevenly on the sides of the interleaved recording ({mb:.0f} % baseline, "
            f"{mc:.0f} % candidate, of the machine): the spread of the level pairs carries it, so the "
            "intervals are wider; throughput and latency are hit more than CPU per request"
        ]
    if abs(mc - mb) > 10:
        more = "candidate" if mc > mb else "baseline"
        return [
            f"the {more} runs were recorded under more foreign load ({max(mb, mc):.0f} % vs {min(mb, mc):.0f} % "
            "of the machine used by other processes): throughput and latency are not comparable; "
            "CPU per request is much less affected"
        ]
    if max(mb, mc) > 25:
        what = "the recording was made" if paired else "the runs were recorded"
        return [f"{what} under heavy foreign load ({max(mb, mc):.0f} % of the machine)"]
    return []


def mdc_warnings(metrics: list[Metric], runs: tuple[int, int], paired: bool = False) -> list[str]:
    from .._fmt import big_pct

    big = [m for m in metrics if m.decides and m.mdc is not None and m.mdc > m.threshold]
    if not big:
        return []
    names = ", ".join(f"{m.name} {big_pct(m.mdc)}" for m in big)
    more = (
        f"more interleaved recordings (now {runs[0]}), more levels or pairs per level, or longer steps"
        if paired
        else f"more interleaved runs per side (now {runs[0]} + {runs[1]}), longer steps or --noise-from A/A runs"
    )
    return [
        f"with this design the smallest change found (80 % power) is: {names} (threshold "
        f"{big[0].threshold:.0%}); {more} bring it down"
    ]


def single_pair_note(metrics: list[Metric], paired: bool) -> list[str]:
    """Where an interleaved recording has one pair per level, what the noise estimate rests on."""
    if not paired:
        return []
    m = next((m for m in metrics if m.levels and m.test), None)
    if m is None or "sign test" not in m.test:
        return []
    return [
        "one A/B pair per level: the noise rests on the level means' spread around the fitted change "
        "alone (no pairs at the same level to measure it apart), and a sign test over the levels is added; "
        "record with --pairs-per-level 2 (the default) to measure it apart from the change"
    ]


def design_sentence(c) -> str:
    """How the changes were tested and the error budget shared, in one sentence (text and HTML)."""
    if c.design == "interleaved steps":
        return (
            "A and B alternated within every load level (interleaved recording): each decision metric's "
            "paired log ratios are fitted as a line in log load; one closed test keeps the chance of any "
            f"false call at {1 - c.confidence:.0%}: the lines of all metrics at once under sign flips of "
            "whole levels (Westfall and Young's step-down min-p: the metrics' correlation is paid for once, "
            "and a jump the machine made at one level flips with its level), the levels' own means "
            "against the comparison's own noise (a level decides only when its interval clears the "
            "threshold), the capacity at the objective and the error rate at fixed shares"
        )
    how = (
        "Each decision metric is one value per run (the mean over the matched steps), tested against "
        "its between-run noise with Student's t"
    )
    return (
        f"{how}; a weighted Holm procedure keeps the chance of any false call at {1 - c.confidence:.0%}, "
        "its budget shared to give CPU-, throughput-, latency- and tail-led regressions of the threshold's "
        "size the same share of the power each would have alone (maximin), each metric at its own level"
    )


def _level_cell(lc, m: Metric) -> str:
    """A level's own change, '!' when its simultaneous interval is clear of the threshold (the level
    could decide), '*' when it only excludes no change."""
    if lc.raw_ci is None:
        return f"{lc.raw * 100:+.0f}%"
    t = m.threshold or 0.0
    clear = lc.raw_ci[0] >= t or lc.raw_ci[1] <= -t / (1.0 + t)  # +t up, and the same in log down
    if clear:
        return f"{lc.raw * 100:+.0f}%!"
    beyond = lc.raw_ci[0] > 0 or lc.raw_ci[1] < 0
    return f"{lc.raw * 100:+.0f}%" + ("*" if beyond else "")


def across_load_rows(c) -> tuple[list[str], list[list[str]]] | None:
    """The change of every decision metric at every level (interleaved recordings): header and rows."""
    ms = [m for m in c.metrics if m.decides and m.levels]
    if not ms:
        return None
    head = ["level", "pairs"] + [m.name for m in ms]
    rows = []
    for lc in ms[0].levels:
        row = [lc.where(), str(lc.pairs)]
        for m in ms:
            same = [x for x in m.levels if x.load == lc.load]
            row.append(_level_cell(same[0], m) if same else "-")
        rows.append(row)
    rows.append(["fitted", ""] + [f"{pct(m.levels[0].change)} .. {pct(m.levels[-1].change)}" for m in ms])
    return head, rows


ACROSS_LOAD_NOTE = (
    "each level's own change (candidate / baseline - 1 of its pairs' geometric mean; ! = its interval, "
    "simultaneous over the levels, clear of the threshold: a level that may decide; * = clear of no change "
    "only); 'fitted': the line in log load at the lowest and highest level"
)
