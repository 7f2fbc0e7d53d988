"""Figures of step profiles: data first, keyword options, ``ax=None``, the Axes returned.

* :func:`cpu_per_request` -- CPU per request against concurrency, stacked by
  a few functions (each sample goes to the chosen function nearest its root)
  and "other", for one run;
* :func:`diff_bars` -- where the CPU went: the change of CPU per request per
  function, a horizontal bar with its interval, within-uncertainty bars grey.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt

from .diff import ProfileDiff
from .steps import ProfileSet, grouped_per_request
from .text import levels_text

OTHER = "other"
PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3")


def chosen_functions(diff: ProfileDiff | None, sets: Sequence[ProfileSet] = (), n: int = 5) -> list[str]:
    """The functions to stack: the diff's largest changes beyond the uncertainty, else the top flat ones."""
    if diff is not None:
        picked = [r.function for r in diff.cum if not r.within_uncertainty][:n]
        if picked:
            return picked
    total: dict[str, float] = {}
    for ps in sets:
        for st in ps.steps:
            for t in st.top(n * 2, measure="flat"):
                total[t["function"]] = total.get(t["function"], 0.0) + t["flat_cpu_s_per_request"]
    return sorted(total, key=lambda f: -total[f])[:n]


def _short(name: str, width: int = 40) -> str:
    return name if len(name) <= width else "..." + name[-(width - 3) :]


def cpu_per_request(
    profiles: ProfileSet,
    *,
    functions: Sequence[str] | None = None,
    n: int = 5,
    ymax: float | None = None,
    title: str | None = None,
    legend: bool = True,
    ax=None,
):
    """Stacked CPU microseconds per request against concurrency (one bar per profiled step)."""
    ax = ax if ax is not None else plt.figure(figsize=(6, 3.6)).add_subplot()
    funcs = list(functions) if functions is not None else chosen_functions(None, [profiles], n)
    steps = [s for s in profiles.steps if s.requests_in_profile > 0]
    x = [s.concurrency if s.concurrency is not None else s.step for s in steps]
    parts = [grouped_per_request(s, funcs) for s in steps]
    width = 0.8 * (min(b - a for a, b in zip(x, x[1:])) if len(x) > 1 else 1)
    bottom = [0.0] * len(steps)
    for i, f in enumerate([*funcs, OTHER]):
        h = [p[f] * 1e6 for p in parts]
        color = "#c8c8c8" if f == OTHER else PALETTE[i % len(PALETTE)]
        ax.bar(x, h, width=width, bottom=bottom, color=color, label=_short(f), edgecolor="white", lw=0.5)
        bottom = [b + v for b, v in zip(bottom, h)]
    ax.set_xlabel("concurrency")
    ax.set_ylabel("CPU per request (us)")
    ax.set_ylim(0, ymax if ymax is not None else max(bottom, default=1) * 1.08 or 1)
    ax.set_title(title if title is not None else profiles.label, fontsize=10)
    if legend:
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, frameon=False)
    return ax


def diff_bars(diff: ProfileDiff, *, n: int = 10, ax=None):
    """Horizontal bars: change of cumulative CPU microseconds per request per function, with intervals."""
    rows = list(diff.cum[:n])[::-1]
    ax = ax if ax is not None else plt.figure(figsize=(7, 0.45 * max(len(rows), 2) + 1.2)).add_subplot()
    y = range(len(rows))
    change = [r.change * 1e6 for r in rows]
    err = [[(r.change - r.low) * 1e6 for r in rows], [(r.high - r.change) * 1e6 for r in rows]]
    colors = ["#b0b0b0" if r.within_uncertainty else ("#c44e52" if r.change > 0 else "#55a868") for r in rows]
    ax.barh(y, change, color=colors, xerr=err, ecolor="#333333", capsize=3, height=0.6)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(list(y), [_short(r.function, 44) for r in rows], fontsize=8)
    for k, r in enumerate(rows):
        ax.annotate(
            f"{r.change * 1e6:+.1f} us",
            (0, k),
            xytext=(4 if r.change >= 0 else -4, 8),
            textcoords="offset points",
            ha="left" if r.change >= 0 else "right",
            fontsize=7,
        )
    levels = levels_text(diff.levels)
    ax.set_xlabel(f"change of CPU per request (us), candidate - baseline; concurrency {levels}")
    ax.set_title(
        f"where the CPU went (bars: {diff.confidence:.0%} simultaneous interval; grey: within sampling noise)",
        fontsize=9,
    )
    return ax
