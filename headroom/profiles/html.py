"""HTML of step profiles: a report section and the notebook display (``_repr_html_``).

Everything is escaped; no JavaScript.  Figures are PNG, inlined as data URIs,
so the fragment stands alone in a report or a notebook.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from html import escape

from .diff import FunctionChange, ProfileDiff
from .steps import ProfileSet
from .text import levels_text


def _us(seconds: float, sign: bool = False) -> str:
    return f"{seconds * 1e6:+.1f}" if sign else f"{seconds * 1e6:.1f}"


def headline(d: ProfileDiff) -> str:
    """One sentence: which function changed, by how many microseconds per request, at which load."""
    changed = d.changed
    if not changed:
        return (
            f"No function's CPU per request changed beyond the sampling uncertainty "
            f"(concurrency {levels_text(d.levels)})."
        )
    r = changed[0]
    verb = "grew" if r.change > 0 else "shrank"
    return (
        f"{r.function} {verb} by {abs(r.change) * 1e6:.1f} us per request "
        f"({_us(r.baseline)} to {_us(r.candidate)} us, interval {_us(r.low, True)} to {_us(r.high, True)}): "
        f"{r.load_text()}."
    )


def _row(r: FunctionChange) -> str:
    cls = "same" if r.within_uncertainty else ("up" if r.change > 0 else "down")
    levels = r.load_text()
    return (
        f'<tr class="{cls}"><td>{escape(r.function)}</td><td>{_us(r.baseline)}</td><td>{_us(r.candidate)}</td>'
        f"<td><b>{_us(r.change, True)}</b></td><td>{_us(r.low, True)} .. {_us(r.high, True)}</td>"
        f"<td>{'within noise' if r.within_uncertainty else 'changed'}</td><td>{escape(levels)}</td></tr>"
    )


STYLE = (
    "<style>.hr-prof table{border-collapse:collapse;font-size:12px}"
    ".hr-prof td,.hr-prof th{padding:2px 8px;text-align:right;border-bottom:1px solid #ddd}"
    ".hr-prof td:first-child,.hr-prof th:first-child{text-align:left;font-family:monospace}"
    ".hr-prof tr.up td{color:#a02020}.hr-prof tr.down td{color:#207020}.hr-prof tr.same td{color:#777}"
    ".hr-prof .headline{font-size:16px;font-weight:bold;margin:6px 0}</style>"
)


def diff_table(d: ProfileDiff, n: int = 10) -> str:
    head = (
        "<tr><th>function (cumulative)</th><th>baseline us/req</th><th>candidate us/req</th>"
        f"<th>change</th><th>{d.confidence:.0%} interval</th><th></th><th>change by load (us/req)</th></tr>"
    )
    return f"<table>{head}{''.join(_row(r) for r in d.cum[:n])}</table>"


def diff_html(d: ProfileDiff) -> str:
    notes = "".join(f"<li>{escape(x)}</li>" for x in d.notes)
    return (
        f'{STYLE}<div class="hr-prof"><div class="headline">{escape(headline(d))}</div>'
        f"{diff_table(d)}<ul>{notes}</ul></div>"
    )


def profile_set_html(ps: ProfileSet, n: int = 5) -> str:
    rows = []
    for s in ps.steps:
        top = ", ".join(f"{escape(t['function'])} {_us(t['cum_cpu_s_per_request'])}" for t in s.top(n))
        share = "" if s.cpu_share is None else f"{s.cpu_share:.0%}"
        rows.append(
            f"<tr><td>{s.step}</td><td>{s.concurrency}</td><td>{s.profile.samples:,}</td>"
            f"<td>{_us(s.cpu_s_per_request)}</td><td>{share}</td><td style='text-align:left'>{top}</td></tr>"
        )
    warn = "".join(f"<li>{escape(w)}</li>" for w in ps.warnings)
    return (
        f'{STYLE}<div class="hr-prof"><b>CPU profiles of {escape(ps.label)}</b>: {len(ps.steps)} step(s)'
        "<table><tr><th>step</th><th>concurrency</th><th>samples</th><th>CPU us/req</th>"
        f"<th>profile / measured CPU</th><th>top functions (cum us/req)</th></tr>{''.join(rows)}</table>"
        f"<ul>{warn}</ul></div>"
    )


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def report_section(d: ProfileDiff, baseline: Sequence[ProfileSet], candidate: Sequence[ProfileSet]) -> str:
    """The report's profile section: headline, diff bars, stacked CPU per request of both sides, table."""
    import matplotlib.pyplot as plt

    from .plot import chosen_functions, cpu_per_request, diff_bars

    funcs = chosen_functions(d, [*baseline, *candidate])
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    top = 0.0
    for ax, ps, side in zip(axes, (baseline[0], candidate[0]), ("baseline", "candidate")):
        cpu_per_request(ps, functions=funcs, title=f"{side}: {ps.label}", legend=False, ax=ax)
        top = max(top, ax.get_ylim()[1])
    for ax in axes:
        ax.set_ylim(0, top)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8, frameon=False)
    fig.subplots_adjust(bottom=0.25)
    stacked = _png(fig)
    plt.close(fig)
    ax = diff_bars(d)
    bars = _png(ax.figure)
    plt.close(ax.figure)
    notes = "".join(f"<li>{escape(x)}</li>" for x in d.notes)
    return (
        f'{STYLE}<section class="hr-prof"><h2>Where the CPU went</h2>'
        f'<div class="headline">{escape(headline(d))}</div>'
        f'<img alt="change of CPU per request per function" src="data:image/png;base64,{bars}">'
        f'<img alt="CPU per request by concurrency" src="data:image/png;base64,{stacked}">'
        f"{diff_table(d)}<ul>{notes}</ul></section>"
    )


def comparison_section(comparison, summaries: Sequence) -> str:
    """The report's profile section for ``headroom report``: '' when the runs have no step profiles.

    ``summaries``: the baseline's and the candidate's Summary (or Run, or folder), in that order.
    """
    from .steps import load

    d = getattr(comparison, "profile_diff", None)
    if d is None or len(summaries) < 2:
        return ""
    sets = [load(s) for s in summaries[:2]]
    if not sets[0].steps or not sets[1].steps:
        return ""
    return report_section(d, [sets[0]], [sets[1]])
