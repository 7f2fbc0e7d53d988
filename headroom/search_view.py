"""A capacity search (``headroom ramp --find``) as its reader sees it: the answer first, then how sure
it is (the precision asked and reached), why it stopped, and its probes in load order.

A search folder is a run whose steps are probes in the order the search chose them; metadata.yml's
``search:`` block (:mod:`headroom.ramp.search`) says what was searched for and why it stopped.  The
answer itself is the summary's throughput at the objective (:mod:`headroom.crossing`), the same
figure ``headroom summary`` prints, so the words here never disagree with the tables.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

#: why a search stopped, in words (metadata.yml's ``stopped``)
STOPS = {
    "precision": "the precision asked was reached",
    "noise": "more probes would not reach the precision asked within the budget",
    "budget": "the time budget ran out",
    "held": "the objective held up to the highest load allowed",
    "limit": "the load generator reached its own limit",
    "broken": "the objective was broken already at the lowest load",
    "probes": "the probe cap",
    "interrupted": "interrupted",
    "stopped early": "a step failed",
}


@dataclass(frozen=True)
class LoadProbes:
    """The probes at one load: how many, their percentile values (ms) and verdicts."""

    load: float
    values_ms: tuple[float, ...]
    verdicts: tuple[str, ...]

    def verdict_text(self) -> str:
        c = Counter(self.verdicts)
        return ", ".join(f"{n} {v}" if len(self.verdicts) > 1 else v for v, n in sorted(c.items()))


@dataclass(frozen=True)
class SearchView:
    objective: str
    load_key: str  # "concurrency" or "rate"
    probes: tuple[dict, ...]
    precision: float | None
    stopped: str | None
    reason: str | None
    elapsed_s: float | None
    budget_s: float | None
    budget: str | None  # "auto", "given" (None: recorded before budgets were auto)

    @property
    def percentile(self) -> str:
        return self.objective.split("<", 1)[0].strip()

    def by_load(self) -> list[LoadProbes]:
        """The probes grouped by load, lowest first (the steps run in probe order)."""
        ms = f"{self.percentile}_ms"
        groups: dict[float, list[dict]] = {}
        for p in self.probes:
            if p.get(self.load_key) is not None:
                groups.setdefault(float(p[self.load_key]), []).append(p)
        return [
            LoadProbes(
                x,
                tuple(float(p[ms]) for p in ps if p.get(ms) is not None),
                tuple(p.get("verdict", "") for p in ps),
            )
            for x, ps in sorted(groups.items())
        ]

    def load_text(self, x: float) -> str:
        return f"{x:,.0f} req/s" if self.load_key == "rate" else f"concurrency {x:g}"

    def stop_text(self) -> str:
        if self.stopped is None:
            return "not said"
        words = STOPS.get(self.stopped, self.stopped)
        return f"{self.stopped} ({words})" + (f": {self.reason}" if self.reason else "")


def search_of(run) -> SearchView | None:
    """The search block of a run folder recorded by ``headroom ramp --find``, or None."""
    fields = run.meta.fields if getattr(run, "meta", None) is not None else {}
    doc = fields.get("search") if isinstance(fields, dict) else None
    if not isinstance(doc, dict) or not isinstance(doc.get("probes"), list) or not doc.get("objective"):
        return None
    return SearchView(
        objective=str(doc["objective"]),
        load_key=str(doc.get("load") or "concurrency"),
        probes=tuple(p for p in doc["probes"] if isinstance(p, dict)),
        precision=_num(doc.get("precision")),
        stopped=doc.get("stopped"),
        reason=doc.get("reason"),
        elapsed_s=_num(doc.get("elapsed_s")),
        budget_s=_num(doc.get("budget_s")),
        budget=doc.get("budget"),
    )


def search_objective(run) -> str | None:
    """The objective a search folder was searched for (the default objective of its summary)."""
    v = search_of(run)
    return v.objective if v is not None else None


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def half_width(at) -> float | None:
    """The answer's interval as +- a share of it (the larger side), None when an end is open."""
    if at is None or at.rps is None or at.low is None or at.high is None or at.rps <= 0:
        return None
    return max(at.rps - at.low, at.high - at.rps) / at.rps


def answer_text(view: SearchView, at) -> str:
    """ "1,007 req/s at p99<=20ms (95 % interval 871 to 1,515 req/s; concurrency 9.9, 8.6 to 14.1)"."""
    if at is None:
        return f"no answer for {view.objective} (no usable probe)"
    if at.status == "held":
        return f"at least {at.rps:,.0f} req/s: {view.objective} held at every probe (a lower bound)"
    if at.status != "crossed":
        return f"none: {view.objective} was broken already at the lowest load probed"
    lo = "open" if at.low is None else f"{at.low:,.0f}"
    hi = "open" if at.high is None else f"{at.high:,.0f} req/s"
    where = ""
    if at.load is not None:
        llo = "open" if at.load_low is None else f"{at.load_low:.3g}"
        lhi = "open" if at.load_high is None else f"{at.load_high:.3g}"
        where = f"; {view.load_text(at.load).replace(f'{at.load:g}', f'{at.load:.3g}')}, {llo} to {lhi}"
    return f"{at.rps:,.0f} req/s at {view.objective} (95 % interval {lo} to {hi}{where})"


def precision_text(view: SearchView, at) -> str:
    asked = "not said" if view.precision is None else f"±{100 * view.precision:g} %"
    hw = half_width(at)
    reached = "an open interval" if hw is None else f"±{100 * hw:.1f} %"
    ok = (
        ""
        if hw is None or view.precision is None
        else (" (reached)" if hw <= view.precision + 1e-9 else " (not reached)")
    )
    return f"asked {asked}, reached {reached}{ok}"


def effort_text(view: SearchView) -> str:
    loads = len({p.get(view.load_key) for p in view.probes})
    t = f" in {view.elapsed_s:,.0f} s" if view.elapsed_s is not None else ""
    budget = ""
    if view.budget_s is not None:
        budget = f" (budget {view.budget_s:,.0f} s{', auto' if view.budget == 'auto' else ''})"
    return f"{len(view.probes)} probes at {loads} loads{t}{budget}"


def search_lines(s) -> list[str]:
    """The summary text's search block (empty for a run that is not a search)."""
    view = search_of(s.run)
    if view is None:
        return []
    at = s.capacity.at_objective
    rows = [
        ("answer", answer_text(view, at)),
        ("precision", precision_text(view, at)),
        ("stopped", view.stop_text()),
        ("probes", effort_text(view)),
    ]
    out = ["", f"capacity search (headroom ramp --find {view.objective}; steps are probes, in the order run)"]
    import textwrap

    for k, v in rows:  # within 100 columns, values wrapped under themselves
        out += textwrap.wrap(v, width=100, initial_indent=f"  {k:<10} ", subsequent_indent=" " * 13)
    name = view.percentile
    out.append(f"  {view.load_key:>12}  probes  {name + ' ms (each, or their range)':<28}  verdicts")
    for g in view.by_load():
        vals = ", ".join(f"{v:g}" for v in g.values_ms)
        if len(g.values_ms) > 5:  # many repeats of one load: their spread, not every value
            vals = f"{min(g.values_ms):g} to {max(g.values_ms):g}"
        load = f"{g.load:,.0f}" if view.load_key == "rate" else f"{g.load:g}"
        out.append(f"  {load:>12}  {len(g.values_ms):>6}  {vals:<28}  {g.verdict_text()}")
    return out
