"""HTML fragments for notebooks and reports: headers and tables.

Every string that comes from input files (labels, metadata, paths,
warnings) is escaped here; nothing from a file reaches the HTML unescaped.
Objects returned have ``_repr_html_`` so that Jupyter renders them.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from .model import PERCENTILES, percentile_label
from .summary import Summary

_E = html.escape


class Fragment(str):
    """An HTML string that Jupyter displays as HTML."""

    def _repr_html_(self) -> str:
        return str(self)

    def __repr__(self) -> str:  # the text fallback: not the markup
        return f"<HTML fragment, {len(self):,} characters: display it in a notebook>"

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))


def _num(v, fmt: str, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "&ndash;"
    return _E(format(v, fmt) + unit)


def _errors_unknown(run) -> bool:
    fields = run.meta.fields if run.meta is not None else {}
    return not run.errors_known or ("errors" in fields and fields["errors"] is None)


def _errors_caption(s) -> str:
    """What '?' in the errors column means, only when the run's errors are unknown."""
    from .text import unknown_errors_why

    return f"errors '?' = unknown ({_E(unknown_errors_why(s.run))}); " if s.table.errors is None else ""


def header(
    title: str,
    summaries: Sequence[Summary],
    parameters: dict | None = None,
    version: str = "",
    *,
    sides: Sequence[Sequence[Summary]] | None = None,
) -> Fragment:
    """The report's title block: title and run labels (the parameters and version: :func:`parameters`,
    at the end of the report; the two arguments are accepted and not shown here).

    An empty ``title`` gives "Capacity report: LABEL" for one run and
    "Capacity comparison: BASELINE vs CANDIDATE" for two.  ``sides``: every
    run of the baseline and of the candidate when a side has more than one
    (``summaries`` are then the first of each, the runs the figures show).
    """
    labels = _labels(summaries)  # two runs sharing a label are told apart (by folder)
    shown = _E(title)
    if not title:
        from .text import side_label

        named = [side_label(lb, r) for lb, r in zip(labels, ("baseline", "candidate"))]
        if len(summaries) == 2:
            title = f"Capacity comparison: {named[0]} vs {named[1]}"
            shown = f"Capacity comparison: {_nowrap(named[0])} vs {_nowrap(named[1])}"
        else:
            title = "Capacity report: " + ", ".join(labels)
            shown = "Capacity report: " + ", ".join(_nowrap(lb) for lb in labels)
    roles = ["baseline", "candidate"] if len(summaries) == 2 else ["run"] * len(summaries)
    runs = "".join(
        f"<li><b>{_E(role)}</b>: {_E(label)} <small>({_E(s.run.meta.source)})</small>"
        + (
            f"<br><small>{_E(str(s.run.meta.fields.get('description')))}</small>"
            if s.run.meta.fields.get("description")
            else ""
        )
        + "</li>"
        for role, s, label in zip(roles, summaries, labels)
    )
    more = _more_runs(sides) if sides is not None else ""
    # a run whose load generator set the ceiling: said first (a comparison's headline says it for two)
    gen = "" if len(summaries) == 2 else generator_box(summaries) + search_box(summaries)
    return Fragment(f"<h1>{shown}</h1>{_stop_banner(summaries, roles, labels)}{gen}<ul>{runs}</ul>{more}")


def search_box(summaries: Sequence[Summary]) -> str:
    """A capacity search's answer first (headroom ramp --find): the throughput at its objective with its
    interval, the precision asked and reached, why it stopped, and the probes in load order."""
    from .search_view import answer_text, effort_text, precision_text, search_of

    out = []
    for s in summaries:
        view = search_of(s.run)
        if view is None:
            continue
        at = s.capacity.at_objective
        rows = "".join(
            f"<tr><td style='text-align:right'>{_E(f'{g.load:,.0f}' if view.load_key == 'rate' else f'{g.load:g}')}</td>"
            f"<td style='text-align:right'>{len(g.values_ms)}</td>"
            f"<td>{_E(', '.join(f'{v:g}' for v in g.values_ms) if len(g.values_ms) <= 5 else f'{min(g.values_ms):g} to {max(g.values_ms):g}')}</td>"
            f"<td>{_E(g.verdict_text())}</td></tr>"
            for g in view.by_load()
        )
        out.append(
            '<div class="search" style="border:1px solid #8aa;padding:0.4em 0.8em;margin:0.6em 0">'
            f"<p style='font-size:1.1em'><b>Capacity search</b>: {_E(answer_text(view, at))}</p>"
            f"<p>Precision {_E(precision_text(view, at))}. Stopped: {_E(view.stop_text())}. "
            f"{_E(effort_text(view))}; the steps below are the probes in the order they ran.</p>"
            f"<details><summary>The probes by {_E(view.load_key)}</summary><table><thead><tr>"
            f"<th>{_E(view.load_key)}</th><th>probes</th><th>{_E(view.percentile)} ms</th><th>verdicts</th>"
            f"</tr></thead><tbody>{rows}</tbody></table>"
            "<p><small>holds / breaks / unsure: the probe's own 95 % interval of the percentile lies "
            "below the objective, above it, or across it.</small></p></details></div>"
        )
    return "".join(out)


def generator_box(summaries: Sequence[Summary]) -> str:
    """The runs whose load generator set the ceiling (:mod:`headroom.generator_limit`), as a red box."""
    limits = [f"{s.label}: {s.generator.sentence()}" for s in summaries if getattr(s, "generator", None)]
    return mismatch_box(limits)


def _nowrap(label: str) -> str:
    """A run label that the title's line breaks go around, not through (a browser breaks at the
    hyphens of nginx-1.22.1-keepalive); a label too long for one line may still wrap."""
    return f'<span style="white-space:nowrap">{_E(label)}</span>' if len(label) <= 48 else _E(label)


def _more_runs(sides: Sequence[Sequence[Summary]]) -> str:
    """The runs of a side beyond its first: all judged by the verdict, the first shown in the figures."""
    if all(len(side) == 1 for side in sides):
        return ""
    labels = _labels([s for side in sides for s in side])
    nb = len(sides[0])
    parts = []
    for role, names in (("baseline", labels[:nb]), ("candidate", labels[nb:])):
        parts.append(f"{role} {len(names)} run{'s' if len(names) > 1 else ''} ({_E(', '.join(names))})")
    return (
        f"<p><small>The verdict judges every run: {'; '.join(parts)}. The figures and tables below show "
        "the first run of each side.</small></p>"
    )


#: report parameters as the command line spells them, and how to show a value
_OPTIONS = {
    "objective": ("--objective", "latency objective"),
    "bucket": ("--bucket", "time bucket of the throughput counts"),
    "bins": ("--bins", "throughput bins"),
    "bin_width": ("--bin-width", "width of a throughput bin (req/s)"),
    "cpu_target": ("--cpu-target", "CPU busy % at which an instance is full"),
    "figure_format": ("--figure-format", "figure format"),
    "log_latency": ("--log-latency", "logarithmic latency axes"),
    "threshold": ("--threshold", "smallest change worth calling"),
    "confidence": ("--confidence", "confidence for all decision metrics together"),
    "error_threshold": ("--error-threshold", "rise of the error rate called a regression"),
    "noise_from": ("--noise-from", "between-run noise learned from"),
}


def parameters(params: dict, version: str) -> Fragment:
    """The report's settings as a small table (option, meaning, value) and the headroom version."""
    rows = []
    for key, value in params.items():
        option, meaning = _OPTIONS.get(key, (f"--{key.replace('_', '-')}", ""))
        shown = {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value
        rows.append([f"<code>{_E(option)}</code>", _E(meaning), _E(str(shown))])
    return Fragment(
        _table(["option", "meaning", "value"], rows, wrap=(1,))
        + f"<p><small>headroom {_E(version)}</small></p>"
    )


#: MIME type under which the comparison report's verdict travels in the executed notebook (read by
#: ``headroom report``, which prints it and, with ``--exit-code``, exits with its exit code)
VERDICT_MIME = "application/vnd.headroom.verdict+json"


class VerdictFragment(Fragment):
    """The headline as HTML, with the verdict and its exit code as JSON beside it (not exported)."""

    doc: dict = {}

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": str(self), VERDICT_MIME: dict(self.doc)}


def mismatch_box(warnings: Sequence[str]) -> str:
    """The runs' mismatches (:mod:`headroom.mismatch`) as a red box: the first thing a reader sees."""
    from .mismatch import GENERATOR, PREFIX, first

    found = first(warnings)
    if not found:
        return ""
    out = ""
    mism = [w for w in found if w.startswith(PREFIX)]
    if mism:
        items = "".join(f"<li>{_E(w.removeprefix(PREFIX))}</li>" for w in mism)
        out += (
            '<div class="mismatch"><b>These runs do not measure the same thing; read the verdict with '
            f"care:</b><ul>{items}</ul></div>"
        )
    gen = [w for w in found if GENERATOR in w]
    if gen:  # the load generator, not the server, set a run's ceiling
        items = "".join(f"<li>{_E(w.replace(GENERATOR, ''))}</li>" for w in gen)
        out += (
            '<div class="mismatch"><b>The load generator set the ceiling: the capacity figures are '
            f"lower bounds of the generator's, not the server's:</b><ul>{items}</ul></div>"
        )
    return out


def headline(c) -> VerdictFragment:
    """The comparison's answer, one sentence per question (:func:`headroom.headline.headline`),
    after the runs' mismatches; carries the verdict and exit code for ``headroom report``."""
    from .headline import headline as sentences

    colour = {"regressed": "worse", "improved": "better"}.get(c.verdict, "")
    said = sentences(c)
    items = "".join(f"<li>{_E(x)}</li>" for x in said)
    out = VerdictFragment(f'{mismatch_box(c.warnings)}<div class="headline {colour}"><ul>{items}</ul></div>')
    out.doc = {"verdict": c.verdict, "exit_code": c.exit_code, "reason": c.reason, "headline": said}
    return out


def _table(head: list[str], rows: list[list[str]], cls: str = "headroom", wrap: Sequence[int] = ()) -> str:
    """An HTML table; ``head`` and the cells are already-escaped HTML.

    Numbers never wrap (the stylesheet says so); the columns in ``wrap`` hold
    prose and may.
    """
    th = "".join(f"<th>{h}</th>" for h in head)
    td = lambda i, c: f'<td class="text">{c}</td>' if i in wrap else f"<td>{c}</td>"  # noqa: E731
    body = "".join("<tr>" + "".join(td(i, c) for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _labels(runs: Sequence[Summary]) -> list[str]:
    """Run labels, made distinct (roles, then folder names) when two runs share one."""
    from .text import run_labels

    return run_labels(runs)


def _stop_banner(summaries: Sequence[Summary], roles: list[str], labels: list[str]) -> str:
    """First thing in the report: which run's server stopped answering under load, and where."""
    from .stopped import run_stop

    out = []
    most = max(len(s.table.requests) for s in summaries)
    for s, role, label in zip(summaries, roles, labels):
        st = run_stop(s, label, most)
        if st is not None:
            out.append(
                f'<p class="worse" style="font-size:1.15em;color:#b00"><b>The {_E(role)} ({_E(label)}) stopped answering '
                f"at {_E(st.where())}</b> (step {st.step}: {_E(st.what())}); its ramp ends there. "
                "The headroom plot marks its last step with a red cross.</p>"
            )
    return "".join(out)


def _stop_caption(s: Summary) -> str:
    from .stopped import run_stop

    st = run_stop(s, s.label)
    if st is None:
        return ""
    kept = "the last row is that step" + ("" if st.kept else " (no request of it got a response)")
    return (
        f'<p class="worse"><b>Stopped answering at {_E(st.where())}</b> (step {st.step}: {_E(st.what())}); '
        f"{kept}; its failed requests are counted in errors.</p>"
    )


def capacity_table(summaries: Summary | Sequence[Summary], comparison=None) -> Fragment:
    """Capacity figures of one run, or of several side by side: the rows ``headroom summary`` prints.

    No change column: whether a difference matters is the comparison's
    verdict, not a colour on a point estimate.  With the ``comparison`` of the
    two runs, a line under the table says how the figures the verdict names
    alike differ from the table's (its paired plateau throughput and CPU per
    request are geometric means over the matched steps).
    """
    from .text import capacity_rows

    runs = [summaries] if isinstance(summaries, Summary) else list(summaries)
    per_run = [dict(capacity_rows(s)) for s in runs]
    names = list(dict.fromkeys(name for r in (capacity_rows(s) for s in runs) for name, _ in r))
    rows = [[f"<b>{_E(n.strip())}</b>"] + [_E(r.get(n, "-")) for r in per_run] for n in names]
    table = _table([""] + [_E(lb) for lb in _labels(runs)], rows, wrap=range(1, len(runs) + 1))
    return Fragment(table + (_differs_line(runs, comparison) if comparison is not None else ""))


def _differs_line(runs: Sequence[Summary], c) -> str:
    """How the verdict's plateau throughput (paired) and CPU per request differ from the table's."""

    def pair(key: str, fmt) -> str | None:
        m = next((m for m in c.metrics if m.key == key), None)
        if m is None or m.baseline is None or m.candidate is None:
            return None
        return f"{_E(m.name)} {fmt(m.baseline)} and {fmt(m.candidate)}"

    def us(v) -> str:
        return f"{v * 1e6:.1f} us"

    def rps(v) -> str:
        return f"{v:,.0f} req/s"

    said = [x for x in (pair("paired_plateau_rps", rps), pair("cpu_s_per_req", us)) if x]
    if not said:
        return ""
    return (
        "<p><small>The verdict above names other figures: "
        + "; ".join(said)
        + " are geometric means over the matched steps (every step weighs the same). This table's "
        "<i>plateau throughput</i> is the median of one run's saturated steps and its <i>CPU per request "
        "(whole run)</i> is all the run's CPU seconds over all its requests (busy steps weigh most), so the "
        "numbers differ.</small></p>"
    )


def bins_table(s: Summary, *, label: str | None = None) -> Fragment:
    """The throughput bins of one run: requests, latency percentiles (ms), CPU.

    ``label`` names the run in the caption (default its own label; a
    comparison passes ``text.run_labels``'s, so that two runs sharing a
    label are told apart).
    """
    lat = s.bins.latency
    names = [p[0] for p in PERCENTILES]
    head = "".join(f"<th>{percentile_label(n)}</th>" for n in names)
    body, empty = "", 0
    for i in range(len(s.bins)):
        n = int(lat.requests[i])
        if n == 0:  # no time bucket fell in this bin: a row of dashes says nothing
            empty += 1
            continue
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
        f"<p><b>{_E(label or s.label)}</b>: latency in ms; ~ marks a percentile with fewer than 10 requests above it</p>"
        '<table class="headroom"><thead><tr><th>req/s bin</th><th>req/s</th><th>requests</th><th>mean</th>'
        + head
        + "<th>max</th><th>CPU %</th></tr></thead><tbody>"
        + body
        + "</tbody></table>"
        + (f"<p><small>{empty} bin(s) without requests left out.</small></p>" if empty else "")
    )


def steps_table(s: Summary, *, label: str | None = None) -> Fragment:
    """The per-step table of one run, as ``headroom summary`` prints it (``label``: as in :func:`bins_table`)."""
    from .text import _step_rows

    level = (
        "concurrency" if s.table.kind == "concurrency" else "rate req/s"
    )  # a rate ramp's level is its rate
    head = ["step", level, "at s", "duration s", "requests", "errors", "req/s", "p50 ms", "p99 ms"]
    head += ["max ms", "CPU %", "CPU us/req", "flags"]
    rows = [[_E(c) for c in r] for r in _step_rows(s)]
    cores = f"; CPU: 100 % = {s.table.cpu_cores:g} core(s)" if s.run.cpu is not None else ""
    return Fragment(
        f"<p><b>{_E(label or s.label)}</b>: {_errors_caption(s)}flags: short = too short "
        f"to trust, client-paced = clients spent time outside requests (Little's law){cores}</p>"
        + _table(head, rows, wrap=(12,))
        + _stop_caption(s)
    )


def memory_table(s: Summary, *, label: str | None = None) -> Fragment:
    """The server's memory and GC per step (one row per quantity, one column per step), or a line
    saying the run has no memory telemetry."""
    from .text import _conc, _f

    m = s.memory
    name = _E(label or s.label)
    if m is None:
        return Fragment(
            f"<p>No memory telemetry for <b>{name}</b> (record with <code>--cpu-pid</code>, or read it from "
            "Prometheus with <code>--prometheus URL</code>: docs/telemetry.md).</p>"
        )
    head = ["", *(_E(_conc(c)) for c in s.table.concurrency)]
    rows = [
        ["RSS median MiB", *(_f(v / 2**20, ",.1f") for v in m.rss_bytes)],
        ["RSS max MiB", *(_f(v / 2**20, ",.1f") for v in m.rss_max_bytes)],
    ]
    if m.has_gc:
        rows += [
            ["Go heap in use MiB", *(_f(v / 2**20, ",.1f") for v in m.heap_inuse_bytes)],
            ["GC pause share %", *(_f(v * 100, ".2f") for v in m.gc_cpu_share)],
            ["allocated KiB/req", *(_f(v / 1024, ",.2f") for v in m.alloc_bytes_per_req)],
        ]
    return Fragment(
        f"<p>Memory of <b>{name}</b>: columns are the load steps by concurrency; medians and maxima of the samples "
        f"inside each step; from {_E(m.source)}</p>" + _table(head, [[_E(c) for c in r] for r in rows])
    )


def has_memory(summaries: Summary | Sequence[Summary]) -> bool:
    """Whether any run has memory telemetry (else the report shows no memory figure)."""
    runs = [summaries] if isinstance(summaries, Summary) else list(summaries)
    return any(s.memory is not None for s in runs)


MEMORY_HOW = (
    "<p><b>How to read it.</b> Left: the server's resident memory (RSS, solid) and, for a Go server, the "
    "heap in use (dashed), in MiB on the throughput plot's time axis; a missing sample stays a gap. Right: "
    "each load step's median RSS against its throughput, the bar reaching the step's maximum. Memory that "
    "climbs with throughput is buffers and garbage waiting for the collector (Go's GOGC trades it against "
    "GC CPU); memory that climbs with time at a fixed load is a leak. Where the server is a Go program the "
    "table adds the GC row: the share of wall time in GC pauses and the bytes allocated per request.</p>"
)


def memory_intro(summaries: Summary | Sequence[Summary]) -> Fragment:
    """How to read the memory figure, or one line saying no run has memory telemetry (and no figure)."""
    runs = [summaries] if isinstance(summaries, Summary) else list(summaries)
    if has_memory(runs):
        return Fragment(MEMORY_HOW)
    names = " or ".join(f"<b>{_E(lb)}</b>" for lb in _labels(runs))
    return Fragment(
        f"<p>No memory telemetry for {names}, so no memory figure: record it with "
        "<code>headroom ramp --cpu-pid PID</code>, or read it from Prometheus with "
        "<code>--prometheus URL</code> (docs/telemetry.md).</p>"
    )


def memory_tables(summaries: Summary | Sequence[Summary], labels: Sequence[str] | None = None) -> Fragment:
    """The memory tables of every run (and, for two runs, memory at matched concurrency); nothing
    when no run has memory telemetry (:func:`memory_intro` says so once)."""
    runs = [summaries] if isinstance(summaries, Summary) else list(summaries)
    if not has_memory(runs):
        return Fragment("")
    labels = list(labels) if labels is not None else _labels(runs)
    parts = [memory_comparison(runs)] if len(runs) == 2 else []
    parts += [memory_table(s, label=lb) for s, lb in zip(runs, labels)]
    return Fragment("".join(parts))


def memory_comparison(summaries: Sequence[Summary]) -> Fragment:
    """Resident memory of baseline and candidate at matched concurrency: shown beside the verdict, not judged."""
    from .telemetry.steps import compare_memory
    from .text import _conc, _f

    b, c = summaries[0], summaries[1]
    m = (
        None
        if b.memory is None or c.memory is None
        else compare_memory(b.memory, c.memory, b.table.concurrency, c.table.concurrency)
    )
    if m is None:
        return Fragment("<p>Memory: not compared (a run has no memory telemetry, or no step in common).</p>")
    noise = "" if m.noise != m.noise else f"; the ratio spreads by &plusmn;{m.noise:.1%} from step to step"
    rows = [[_E(_conc(k)), _f(a / 2**20, ",.1f"), _f(v / 2**20, ",.1f"), _f((r - 1) * 100, "+.1f")]
            for k, a, v, r in zip(m.steps, m.baseline_bytes, m.candidate_bytes, m.ratio)]  # fmt: skip
    return Fragment(
        f"<p>Memory at matched concurrency (shown, not judged): candidate RSS &times;{m.median_ratio:.3f} "
        f"the baseline's (median over {len(m.steps)} steps{noise}).</p>"
        + _table(["concurrency", "baseline RSS MiB", "candidate RSS MiB", "change %"], rows)
    )


#: MIME type under which the report's warnings travel in the executed notebook (read by ``report``).
WARNINGS_MIME = "application/vnd.headroom.warnings+json"


class WarningsFragment(Fragment):
    """The warnings list as HTML, with the warnings themselves as JSON beside it.

    ``headroom report`` reads the JSON out of the executed notebook to print
    the same warnings on the terminal; HTML export shows only the HTML.
    """

    warnings: tuple[str, ...] = ()

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": str(self), WARNINGS_MIME: {"warnings": list(self.warnings)}}


def warnings_list(summaries: Summary | Sequence[Summary], comparison=None) -> WarningsFragment:
    """Warnings raised while reading and analysing, or a line saying there were none.

    With a ``comparison``: its warnings (the runs' mismatches first, then what the
    verdict's design cannot see), then each run's own not already among them.
    """
    runs = [summaries] if isinstance(summaries, Summary) else list(summaries)
    texts = [f"{lb}: {w}" for s, lb in zip(runs, _labels(runs)) for w in s.warnings]
    if comparison is not None:
        own = {w for s in runs for w in s.warnings}
        texts = [w for w in comparison.warnings if w not in own] + texts
    items = "".join(f"<li>{_E(t)}</li>" for t in texts)
    out = WarningsFragment(f"<ul>{items}</ul>" if texts else "<p>No warnings.</p>")
    out.warnings = tuple(texts)
    return out


def verdict(c, line: bool = True) -> Fragment:
    """The comparison verdict, its metrics table, the step pairs and what was not judged.

    ``line=False`` leaves out the one-line verdict (the report shows :func:`headline` above it)."""
    from .compare.wording import design_sentence
    from .text import _metric_value, _short_source, big_pct, change_text, interval_text

    colour = {"regressed": "worse", "improved": "better"}.get(c.verdict, "")
    rows = []
    for m in c.metrics:
        # colour only what decided: a decision metric judged worse or better, never an information row
        cls = {"worse": "worse", "better": "better"}.get(m.decision, "") if m.decides else ""
        decision = m.decision if m.decides else "information"
        if m.decision == "not judged" or (not m.decides and m.note):
            decision += f": {m.note}"
        rows.append(
            [
                f"<b>{_E(m.name)}</b>",
                _E(_metric_value(m.baseline, m.unit, m.key)),
                _E(_metric_value(m.candidate, m.unit, m.key)),
                f'<span class="{cls}">{_E(change_text(m))}</span>',
                _E(interval_text(m)),
                ""
                if m.noise is None
                else f"{m.noise.sd:.1%} ({_df(m.noise.df)} df), {_E(_short_source(m.noise.source))}",
                _E(big_pct(m.mdc)) if m.mdc is not None else "",
                _E(decision),
            ]
        )
    noise = "noise of a pair" if c.design == "interleaved steps" else "noise per run"
    head = ["metric", "baseline", "candidate", "change", "interval", noise, "detects", "decision"]
    pair_head, pair_rows = _pair_table(c)
    notes = "".join(f"<li>{_E(n)}</li>" for n in c.notes)
    from .text import side_label

    names = (
        f"{_E(side_label(', '.join(c.baseline_labels), 'baseline'))} vs "
        f"{_E(side_label(', '.join(c.candidate_labels), 'candidate'))}"
    )
    not_judged = [m for m in c.metrics if m.decides and m.decision == "not judged"]
    why = "".join(f"<li><b>{_E(m.name)}</b>: {_E(m.note)}</li>" for m in not_judged)
    return Fragment(
        (
            f'<p><b>Verdict: <span class="{colour}">{_E(c.verdict.upper())}</span></b> &mdash; {_E(c.reason)}</p>'
            if line
            else ""
        )
        + f"<p><small>{names}</small></p>"
        + _table(head, rows, wrap=(5, 7))
        + f"<p><small>{_E(design_sentence(c))}; so each interval is at that wider level. "
        "<i>detects</i>: the smallest change found with 80 % power by this design. "
        "The verdict 'no regression' means the primary metric was shown not to be worse by the "
        "threshold (one-sided 95 %) and nothing was worse.</small></p>"
        + _across_load(c)
        + (f"<p><b>Not judged</b></p><ul>{why}</ul>" if why else "")
        + f"<p><small>threshold {c.threshold:.0%}; error rate threshold {c.error_threshold * 100:g} points"
        f"</small></p><ul class='notes'>{notes}</ul>"
        + "<p><b>Step pairs</b>: each baseline step beside the candidate's step at the same concurrency "
        + (
            "(* = saturated pair; in an interleaved recording throughput is judged at every level, and a "
            "level recorded twice gives two pairs). "
            if c.design == "interleaved steps"
            else "(* = saturated pair, used for the plateau throughput). "
        )
        + "<i>How to read it</i>: a change column is "
        "candidate / baseline &minus; 1 for that pair alone, and one pair carries one step's noise "
        "(10&ndash;30 % between runs of the same build is common); the verdict above judges the "
        "geometric mean over the pairs with its interval. Nothing here is coloured because no single pair "
        "decides. p99 in ms; CPU/request change from each step's CPU seconds per request; errors '?' = "
        "unknown (no status column).</p>" + _table(pair_head, pair_rows)
    )


def _across_load(c) -> str:
    """The change of every decision metric at every level (interleaved recordings), or nothing."""
    from .compare.wording import ACROSS_LOAD_NOTE, across_load_rows

    got = across_load_rows(c)
    if got is None:
        return ""
    head, rows = got
    body = [[_E(x) for x in r] for r in rows]
    return f"<p><b>Change across load</b>: {_E(ACROSS_LOAD_NOTE)}.</p>" + _table(head, body)


def run_table(run) -> Fragment:
    """A small table describing a loaded run (what ``Run._repr_html_`` shows)."""
    from .text import format_name, unknown_errors_why

    cpu = run.cpu
    rows = [
        ("label", _E(run.label)),
        ("source", _E(str(run.meta.source))),
        ("format", _E(format_name(run.format))),
        ("steps", f"{run.n_steps:,}"),
        ("requests", f"{run.n_requests:,} successful"),
        ("errors", f"unknown ({_E(unknown_errors_why(run))})" if _errors_unknown(run) else f"{run.errors:,}"),
        (
            "CPU samples",
            "none" if cpu is None else f"{len(cpu):,} ({_E(cpu.source)}; 100 % = {cpu.cores:g} core(s))",
        ),
        ("warnings", f"{len(run.warnings)}"),
    ]
    body = "".join(f"<tr><th>{k}</th><td style='text-align:left'>{v}</td></tr>" for k, v in rows)
    return Fragment(f'<table class="headroom"><tbody>{body}</tbody></table>')


def _df(df: float) -> str:
    """Degrees of freedom for a reader: whole numbers as such, effective ones to one decimal."""
    if not math.isfinite(df) or df >= 100:
        return f"{df:.0f}" if math.isfinite(df) else "inf"
    return f"{df:.0f}" if abs(df - round(df)) < 1e-9 else f"{df:.1f}"


def _pair_table(c) -> tuple[list[str], list[list[str]]]:
    """The step pairs' header and rows: each baseline step beside the candidate's at its level."""
    from .text import _conc

    pair_rows = []
    for p in c.pairs:
        b, k = p.baseline, p.candidate
        ms = lambda v: "&ndash;" if v is None else f"{v * 1e3:.2f}"  # noqa: E731
        pct = lambda v: "&ndash;" if v is None else f"{v * 100:+.1f} %"  # noqa: E731
        pair_rows.append(
            [
                _E(_conc(p.concurrency)) + (" *" if p.plateau else ""),
                _num(b["rps"], ",.0f"),
                _num(k["rps"], ",.0f"),
                pct(p.change("rps")),
                ms(b["p99_s"]),
                ms(k["p99_s"]),
                pct(p.change("p99_s")),
                pct(p.change("cpu_s_per_req")),
                "?" if b["errors"] is None else f"{b['errors']:,}",
                "?" if k["errors"] is None else f"{k['errors']:,}",
            ]
        )
    pair_head = ["concurrency", "baseline req/s", "candidate req/s", "change", "baseline p99 ms"]
    pair_head += ["candidate p99 ms", "change", "CPU/request change", "baseline errors", "candidate errors"]
    return pair_head, pair_rows
