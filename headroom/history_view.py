"""How a release history is shown: terminal table, HTML table, trend plot.

Kept apart from :mod:`headroom.history` so that the statistics never import
matplotlib (the plot imports it when called).
"""

from __future__ import annotations

import html
import math

from .history import History
from .metrics import in_history

ALL = in_history()

_E = html.escape


def fmt(v, unit: str) -> str:
    """A metric value with its unit, compact."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if unit == "req/s":
        return f"{v:,.0f}"
    if unit == "s":
        return f"{v * 1e6:.1f} us" if v < 1e-3 else f"{v * 1e3:.2f} ms"
    if unit == "fraction":
        return f"{v * 100:.2f} %"
    if unit == "bytes":
        return f"{v / 2**20:,.1f} MiB"
    return f"{v:g}"


def _cols(h: History) -> list[tuple[str, str, str]]:
    """The metrics that have a value for some release: (key, short name, unit); the shown-only
    ones (memory) too, never marked as deciding."""
    return [(m.key, m.short, m.unit) for m in ALL if any(r.values.get(m.key) is not None for r in h.releases)]


def _mark(h: History) -> dict[tuple[int, str], str]:
    return {(c.index, c.metric): ("!" if c.direction == "regressed" else "+") for c in h.change_points}


def short_labels(labels: list[str], width: int = 32) -> list[str]:
    """Labels cut to ``width`` characters for the terminal, only as far as every label stays
    distinct: the end kept (versions, build numbers, -on/-off), else the middle cut out, else the
    start kept; the full labels when no cut keeps them apart."""
    if all(len(lb) <= width for lb in labels):
        return list(labels)
    head = (width - 1) // 2
    cuts = (
        lambda lb: "~" + lb[len(lb) - width + 1 :],
        lambda lb: lb[:head] + "~" + lb[len(lb) - (width - 1 - head) :],
        lambda lb: lb[: width - 1] + "~",
    )
    for cut in cuts:
        out = [lb if len(lb) <= width else cut(lb) for lb in labels]
        if len(set(out)) == len(set(labels)):
            return out
    return list(labels)


def _read_line(h: History) -> str:
    """How many runs were read and how many came from the cache (only when some did)."""
    runs = sum(len(r.paths) for r in h.releases)
    if h.runs_read >= runs:
        return f"{runs} run(s) read"
    return f"{h.runs_read} run(s) read, {runs - h.runs_read} from the cache"


def stop_text(r) -> str | None:
    """Where a release's server stopped answering (its lowest stop), or None: ``r4 at concurrency 1
    (step 1: all 1,200 requests failed (1,199 connection refused))``."""
    st = r.stopped
    if not st:
        return None
    from .stopped import Stop

    stop = Stop(
        st.get("run", r.label), float(st["level"]), st.get("unit") == "req/s", st.get("step") or 0,
        st.get("requests"), st.get("errors"), st.get("error_kinds"), st.get("source", ""),
    )  # fmt: skip
    return f"{r.label} at {stop.where()} (step {stop.step}: {stop.what()})"


def format_history(h: History) -> str:
    """The terminal report of ``headroom history``."""
    cols = _cols(h)
    marks = _mark(h)
    lines = [f"headroom history: {len(h.releases)} releases ({_read_line(h)})"]
    for r in h.releases:  # first: where a release's server stopped answering
        said = stop_text(r)
        if said:
            lines += _wrap_verdict(f"  STOPPED ANSWERING: {said}", indent="    ")
    lines += [
        f"  {h.note}; threshold {h.threshold:.0%}, noise floor {h.run_noise:.0%} per run",
        "",
    ]
    head = ["#", "release", *[c[1] for c in cols]]
    short = short_labels([r.label for r in h.releases])
    rows = []
    for r in h.releases:
        cells = []
        for k, _s, u in cols:
            v = fmt(r.values[k], u)
            if r.bound.get(k) and r.values[k] is not None:
                v = ">=" + v
            cells.append(v + marks.get((r.index, k), " "))
        rows.append([str(r.index), short[r.index], *cells])
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        lines.append(
            "  "
            + "  ".join(c.rjust(w) if i != 1 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
        )
    lines += [
        "",
        "change points (! regression, + improvement; the index is the first release after the change)",
    ]
    if not h.change_points:
        lines.append("  none")
    names = {m.key: m.name for m in ALL}
    units = {m.key: m.unit for m in ALL}
    for c in h.change_points:
        p = "" if c.pvalue is None else f", p={c.pvalue:.1g}"
        if c.metric == "stopped":  # the server stopped answering: a level, not a metric's change
            lines.append(f"  {c.index:>3} {short[c.index]}: {c.direction.upper()}: {c.source}")
            continue
        lines += _wrap_verdict(
            f"  {c.index:>3} {short[c.index]}: {names[c.metric]} {c.change * 100:+.1f}% "
            f"({fmt(c.before, units[c.metric])} -> {fmt(c.after, units[c.metric])}) {c.direction.upper()} "
            f"[{c.source}{p}]",
            indent="        ",
        )
    if h.latest is not None:
        short_note = "fewer than 5 releases, too short for change points (the latest is compared below)"
        if h.change_points:  # only where a release stopped answering
            lines.append(f"  and no others: {short_note}")
        else:
            lines[-1] = f"  none: {short_note}"
    for doubt in h.unconfirmed:
        lines += _wrap_verdict(f"    ? {doubt}", indent="      ")
    lines += ["", *_wrap_verdict(f"verdict: {h.verdict}")]
    return "\n".join(lines) + "\n"


def _wrap_verdict(line: str, indent: str = "  ") -> list[str]:
    import textwrap

    return textwrap.wrap(line, width=100, subsequent_indent=indent, break_on_hyphens=False)


class _Fragment(str):
    def _repr_html_(self) -> str:
        return str(self)


def history_table(h: History) -> _Fragment:
    """The releases as an HTML table, change points marked (escaped; no JavaScript)."""
    cols = _cols(h)
    marks = _mark(h)
    head = "".join(f"<th>{_E(s)}</th>" for _k, s, _u in cols)
    body = ""
    for r in h.releases:
        cells = ""
        for k, _s, u in cols:
            v = fmt(r.values[k], u)
            if r.bound.get(k) and r.values[k] is not None:
                v = "&ge; " + _E(v)
            else:
                v = _E(v)
            m = marks.get((r.index, k))
            cls = {"!": "worse", "+": "better"}.get(m, "")
            cells += f'<td class="{cls}">{v}{" " + m if m else ""}</td>'
        body += f"<tr><td>{r.index}</td><td>{_E(r.label)}</td>{cells}</tr>"
    names = {m.key: m.name for m in ALL}
    names["stopped"] = "stopped answering"
    cps = "".join(
        f"<li><b>{c.index}</b> {_E(c.label)}: {_E(names[c.metric])} "
        f"{'' if c.metric == 'stopped' else f'{c.change * 100:+.1f} % '}"
        f'<b class="{"worse" if c.direction == "regressed" else "better"}">{_E(c.direction)}</b> '
        f"<small>({_E(c.source)})</small></li>"
        for c in h.change_points
    )
    doubts = "".join(f"<li><small>{_E(d)}</small></li>" for d in h.unconfirmed)
    colour = "worse" if h.exit_code == 1 else ""
    stops = "".join(
        f'<p class="worse" style="color:#b00"><b>Stopped answering:</b> {_E(t)}</p>'
        for t in (stop_text(r) for r in h.releases)
        if t
    )
    return _Fragment(
        stops
        + f'<p style="font-size:17px"><b>Verdict</b> <span class="{colour}">(exit {h.exit_code})</span>: '
        f"{_E(h.verdict)}</p>"
        + f"<p>Change points (! regression, + improvement):</p><ul>{cps or '<li>none</li>'}{doubts}</ul>"
        + '<table class="headroom"><thead><tr><th>#</th><th>release</th>'
        + head
        + f"</tr></thead><tbody>{body}</tbody></table>"
    )


def trend(h: History, metric: str, *, ax=None):
    """One metric across releases: value, interval band, change points marked."""
    import matplotlib.pyplot as plt
    import numpy as np

    ax = ax if ax is not None else plt.figure(figsize=(10, 3)).add_subplot()
    name, unit = next((m.name, m.unit) for m in ALL if m.key == metric)
    v, lo, hi = h.series(metric)
    scale = {"s": 1e3, "fraction": 100.0, "bytes": 2.0**-20}.get(unit, 1.0)
    label = {"s": "ms", "fraction": "%", "bytes": "MiB"}.get(unit, unit)
    if unit == "s" and np.nanmedian(v) < 1e-3:
        scale, label = 1e6, "us"
    x = np.arange(len(v))
    ax.fill_between(x, lo * scale, hi * scale, color="C0", alpha=0.2, lw=0, label="interval")
    ax.plot(x, v * scale, "o-", color="C0", ms=4, label=name)
    for c in h.change_points:
        if c.metric == metric:
            color = "C3" if c.direction == "regressed" else "C2"
            ax.axvline(c.index - 0.5, color=color, ls="--", lw=1.2)
            ax.annotate(
                f"{c.change * 100:+.0f}%",
                (c.index - 0.5, 1.0),
                xycoords=("data", "axes fraction"),
                xytext=(3, -12),
                textcoords="offset points",
                color=color,
                fontsize=9,
            )
    ax.set_xticks(x)
    labels = [r.label if len(r.label) <= 24 else r.label[:23] + "…" for r in h.releases]
    tilt = len(x) > 8 or max(map(len, labels)) > 10
    ax.set_xticklabels(labels, rotation=30 if tilt else 0, ha="right" if tilt else "center", fontsize=8)
    ax.set_ylabel(f"{name}\n({label})", fontsize=9)
    ax.set_ylim(bottom=0)
    ax.set_xlim(-0.5, len(x) - 0.5)
    ax.grid(True, alpha=0.3)
    return ax
