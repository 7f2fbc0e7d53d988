"""HTML fragments for notebooks and reports: headers and tables.

Every string that comes from input files (labels, metadata, paths,
warnings) is escaped here; nothing from a file reaches the HTML unescaped.
Objects returned have ``_repr_html_`` so that Jupyter renders them.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from .model import PERCENTILES
from .summary import Summary

_E = html.escape


class Fragment(str):
    """An HTML string that Jupyter displays as HTML."""

    def _repr_html_(self) -> str:
        return str(self)


def _num(v, fmt: str, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "&ndash;"
    return _E(format(v, fmt) + unit)


def header(title: str, summaries: Sequence[Summary], parameters: dict, version: str) -> Fragment:
    """The report's title block: title, run labels, parameters and tool version.

    An empty ``title`` gives "Capacity report: LABEL" for one run and
    "Capacity comparison: BASELINE vs CANDIDATE" for two.
    """
    if not title:
        if len(summaries) == 2:
            title = (
                f"Capacity comparison: {summaries[0].label} (baseline) vs {summaries[1].label} (candidate)"
            )
        else:
            title = "Capacity report: " + ", ".join(s.label for s in summaries)
    roles = ["baseline", "candidate"] if len(summaries) == 2 else ["run"] * len(summaries)
    runs = "".join(
        f"<li><b>{_E(role)}</b>: {_E(s.label)} <small>({_E(s.run.meta.source)})</small>"
        + (
            f"<br><small>{_E(str(s.run.meta.fields.get('description')))}</small>"
            if s.run.meta.fields.get("description")
            else ""
        )
        + "</li>"
        for role, s in zip(roles, summaries)
    )
    params = ", ".join(f"{_E(str(k))}={_E(repr(v))}" for k, v in parameters.items())
    return Fragment(
        f"<h1>{_E(title)}</h1><ul>{runs}</ul>"
        f"<p><small>parameters: {params}<br>headroom {_E(version)}</small></p>"
    )


def _capacity_rows(s: Summary) -> list[tuple[str, float | None, str, bool | None]]:
    """(name, value, format, higher_is_better or None) for the capacity table."""
    cap = s.capacity
    obj = f"throughput at {cap.objective}" if cap.objective else "throughput at objective"
    return [
        ("requests", float(s.buckets.kept), ",.0f", None),
        ("max sustained throughput (req/s)", cap.max_rps, ",.0f", True),
        (obj + " (req/s)", cap.rps_at_objective, ",.0f", True),
        ("knee (req/s)", cap.knee_rps, ",.0f", True),
        ("CPU at knee (%)", cap.cpu_at_knee, ".1f", False),
        (f"throughput at {cap.cpu_target_pct:g} % CPU (req/s)", cap.rps_at_cpu_target, ",.0f", True),
        (
            "CPU per request (us)",
            None if cap.cpu_s_per_req is None else cap.cpu_s_per_req * 1e6,
            ".1f",
            False,
        ),
        ("max useful throughput (req/s)", cap.max_useful_rps, ",.0f", True),
    ]


def capacity_table(summaries: Summary | Sequence[Summary]) -> Fragment:
    """Capacity numbers side by side; with two runs, the candidate's change in %."""
    runs = [summaries] if isinstance(summaries, Summary) else list(summaries)
    rows = [_capacity_rows(s) for s in runs]
    head = "".join(f"<th>{_E(s.label)}</th>" for s in runs)
    if len(runs) == 2:
        head += "<th>change</th>"
    body = ""
    for i, (name, _, fmt, better_up) in enumerate(rows[0]):
        vals = [r[i][1] for r in rows]
        cells = "".join(f"<td>{_num(v, fmt)}</td>" for v in vals)
        if len(runs) == 2:
            a, b = vals
            if a and b is not None and a != 0:
                d = 100.0 * (b - a) / a
                cls = ""
                if better_up is not None and d != 0:
                    cls = "better" if (d > 0) == better_up else "worse"
                cells += f'<td class="{cls}">{d:+.1f} %</td>'
            else:
                cells += "<td>&ndash;</td>"
        body += f"<tr><th>{_E(name)}</th>{cells}</tr>"
    notes = "".join(
        f"<li>{_E(s.label)}: objective {_E(s.capacity.objective_status)}"
        + (
            f"; knee fit: {_E(s.capacity.knee.note)} (R&sup2; log {s.capacity.knee.r2_log:.2f})"
            if s.capacity.knee
            else ""
        )
        + "</li>"
        for s in runs
    )
    return Fragment(
        '<table class="headroom"><thead><tr><th></th>'
        + head
        + "</tr></thead><tbody>"
        + body
        + "</tbody></table>"
        f"<ul class='notes'>{notes}</ul>"
    )


def bins_table(s: Summary) -> Fragment:
    """The throughput bins of one run: requests, latency percentiles (ms), CPU."""
    lat = s.bins.latency
    names = [p[0] for p in PERCENTILES]
    head = "".join(f"<th>{n.replace('p995', 'p99.5').replace('p999', 'p99.9')}</th>" for n in names)
    body = ""
    for i in range(len(s.bins)):
        n = int(lat.requests[i])
        cells = [
            f"{s.bins.rps_lo[i]:,.0f}&ndash;{s.bins.rps_hi[i]:,.0f}",
            _num(s.bins.rps[i], ",.0f"),
            f"{n:,}",
            _num(lat.mean_s[i] * 1e3, ".2f"),
        ]
        for p in names:
            v = _num(lat.pct[p][i] * 1e3, ".2f")
            cells.append(f"<i title='fewer than 10 requests above'>~{v}</i>" if n and lat.thin[p][i] else v)
        cells += [_num(lat.max_s[i] * 1e3, ".2f"), _num(s.bins.cpu_pct[i], ".1f")]
        body += "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
    return Fragment(
        f"<p><b>{_E(s.label)}</b>: latency in ms; ~ marks a percentile with fewer than 10 requests above it</p>"
        '<table class="headroom"><thead><tr><th>req/s bin</th><th>req/s</th><th>requests</th><th>mean</th>'
        + head
        + "<th>max</th><th>CPU %</th></tr></thead><tbody>"
        + body
        + "</tbody></table>"
    )


def steps_table(s: Summary) -> Fragment:
    """The load steps of one run."""
    st, sl = s.steps, s.step_latency
    body = ""
    for k in range(len(st)):
        body += (
            f"<tr><td>{k}</td><td>{_num(st.concurrency[k], 'd')}</td><td>{int(st.requests[k]):,}</td>"
            f"<td>{_num((int(st.end_ns[k]) - int(st.start_ns[k])) / 1e9 if st.requests[k] else None, '.2f')}</td>"
            f"<td>{_num(st.rps[k], ',.0f')}</td><td>{_num(sl.pct['p50'][k] * 1e3, '.2f')}</td>"
            f"<td>{_num(sl.pct['p99'][k] * 1e3, '.2f')}</td></tr>"
        )
    return Fragment(
        f"<p><b>{_E(s.label)}</b></p>"
        '<table class="headroom"><thead><tr><th>step</th><th>concurrency</th><th>requests</th>'
        "<th>duration s</th><th>req/s</th><th>p50 ms</th><th>p99 ms</th></tr></thead><tbody>"
        + body
        + "</tbody></table>"
    )


def warnings_list(summaries: Summary | Sequence[Summary]) -> Fragment:
    """Warnings raised while reading and analysing, or a line saying there were none."""
    runs = [summaries] if isinstance(summaries, Summary) else list(summaries)
    items = [f"<li>{_E(s.label)}: {_E(w)}</li>" for s in runs for w in s.warnings]
    return Fragment(f"<ul>{''.join(items)}</ul>" if items else "<p>No warnings.</p>")


def verdict(c) -> Fragment:
    """The comparison verdict and its metrics table (from :func:`headroom.compare.compare_runs`)."""
    colour = {"regressed": "worse", "improved": "better"}.get(c.verdict, "")
    rows = ""
    for m in c.metrics:

        def val(v, unit=m.unit):
            if v is None:
                return "&ndash;"
            if unit == "s":
                return _E(f"{v * 1e6:.1f} us" if v < 1e-3 else f"{v * 1e3:.3f} ms")
            return _E(f"{v:,.0f} {unit}")

        change = "&ndash;" if m.change is None else f"{m.change * 100:+.1f} %"
        ci = "" if m.ci is None else f"{m.ci[0] * 100:+.1f} % to {m.ci[1] * 100:+.1f} %"
        cls = {"worse": "worse", "better": "better"}.get(m.decision, "")
        rows += (
            f"<tr><th>{_E(m.name)}</th><td>{val(m.baseline)}</td><td>{val(m.candidate)}</td>"
            f'<td class="{cls}">{change}</td><td>{ci}</td><td>{_E(m.decision)}{"" if m.decides else " (info)"}</td></tr>'
        )
    notes = "".join(f"<li>{_E(n)}</li>" for n in c.notes)
    return Fragment(
        f'<p><b>Verdict: <span class="{colour}">{_E(c.verdict.upper())}</span></b> &mdash; {_E(c.reason)}</p>'
        '<table class="headroom"><thead><tr><th>metric</th><th>baseline</th><th>candidate</th><th>change</th>'
        f"<th>interval ({c.confidence * 100:g} % for all decision metrics)</th><th>decision</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        f"<p><small>threshold {c.threshold * 100:g} %, {c.n_boot} bootstrap resamples of "
        f"&ge; {c.block_s:g} s blocks, seed {c.seed}</small></p><ul class='notes'>{notes}</ul>"
    )
