"""The report's per-endpoint section and the endpoints' HTML tables (runs whose requests carry names).

Answer first: in a comparison, one sentence naming what regressed (or that no endpoint did), then the
verdict table (every endpoint's p50, tail and error rate: baseline, candidate, change, interval, call),
then small multiples of the headroom plot, one panel per endpoint (:func:`headroom.plot.endpoints.endpoint_grid`).
A single run's section gives the overview table (requests, share, errors, percentiles at the heaviest
step, throughput at the objective) and the same panels.
"""

from __future__ import annotations

import base64
import html

from .html import Fragment, _table

_E = html.escape


def _ms(v: float) -> str:
    return "-" if v != v else f"{v * 1e3:.2f}"


def endpoints_table(eps) -> Fragment:
    """One row per endpoint of one run (:class:`headroom.endpoint_view.Endpoints`)."""
    from .endpoint_text import _heaviest, _objective_cell

    total = max(sum(e.total for e in eps), 1)
    head = ["endpoint", "requests", "share", "errors", "p50 (ms)", "p99 (ms)", "at concurrency"]
    if eps.objective is not None:
        head.append(f"req/s at {_E(str(eps.objective))}")
    rows = []
    for e in eps:
        k = _heaviest(e)
        row = [_E(e.name or '""'), f"{int(e.requests.sum()):,}", f"{e.total / total:.1%}", f"{int(e.errors.sum()):,}",
               _ms(float(e.latency.pct["p50"][k])) if k is not None else "-",
               _ms(float(e.latency.pct["p99"][k])) if k is not None else "-",
               f"{float(e.concurrency[k]):g}" if k is not None else "-"]  # fmt: skip
        if eps.objective is not None:
            row.append(_E(_objective_cell(e)))
        rows.append(row)
    return Fragment(_table(head, rows))


_CALL = {
    "regressed": "REGRESSED",
    "improved": "improved",
    "no change shown": "no change shown",
    "not judged": "not judged",
}


def verdict_table(c) -> Fragment:
    """Every endpoint's metrics in a comparison: baseline, candidate, change, interval and the call."""
    from .endpoint_text import _change, _value

    rows = []
    for e in c.endpoints:
        for i, m in enumerate(e.metrics):
            iv = f"{m.interval[0]:+.1%} to {m.interval[1]:+.1%}" if m.interval else ""
            call = _CALL[m.call] + (f": {_E(m.why)}" if m.call == "not judged" else "")
            style = ' style="color:#b00020;font-weight:bold"' if m.call == "regressed" else ""
            rows.append([
                f"<b>{_E(e.name)}</b>" if i == 0 else "", f"{e.share:.0%}" if i == 0 else "", _E(m.label),
                _value(m, m.baseline), _value(m, m.candidate), _change(m), iv, f"<span{style}>{call}</span>",
            ])  # fmt: skip
    head = ["endpoint", "share", "metric", "baseline", "candidate", "change", "interval", "call"]
    return Fragment(_table(head, rows, wrap=(7,)))


def _answer(c) -> str:
    from .compare.endpoints import _surest, sentence

    bad = sorted((e for e in c.endpoints if e.verdict == "regressed"), key=lambda e: -_surest(e.worst()))
    if bad:  # the surest regression first, as the verdict names it
        also = f" Also regressed: {'; '.join(_E(sentence(e)) for e in bad[1:])}." if bad[1:] else ""
        return f"Regressed most surely: {_E(sentence(bad[0]))}.{also}"
    judged = [e for e in c.endpoints if e.verdict != "not judged"]
    better = [e.name for e in c.endpoints if e.verdict == "improved"]
    text = f"No endpoint regressed ({len(judged)} of {len(c.endpoints)} judged on latency)."
    return text + (f" Improved: {_E(', '.join(better))}." if better else "")


def _figure(summaries, comparison, fmt: str, tail: str) -> str:
    import matplotlib.pyplot as plt

    from .plot.endpoints import endpoint_grid
    from .plot.images import REPORT_RC, image_bytes

    with plt.rc_context(REPORT_RC):
        axes = endpoint_grid(summaries, comparison=comparison, tail=tail)
        fig = axes.flat[0].figure
        try:
            data = image_bytes(fig, fmt=fmt)
        finally:
            plt.close(fig)
    if fmt == "svg":
        return f'<div class="figure">{data}</div>'
    src = f"data:image/png;base64,{base64.b64encode(data).decode()}"
    return (
        f'<img alt="latency against throughput per endpoint" style="max-width:100%;height:auto" src="{src}">'
    )


def _tail(objective) -> str:
    return objective.name if objective is not None and objective.q is not None else "p99"


def comparison_section(c, summaries, *, fmt: str = "png") -> Fragment:
    """The comparison report's per-endpoint section: '' unless both runs carry two or more names."""
    if not getattr(c, "endpoints", None):
        return Fragment("")
    read = (
        "<p><b>How to read it.</b> Each endpoint (request name) judged on its own requests at matched "
        "load: per unit (an A/B step pair of an interleaved recording, else a matched level) the "
        "candidate's exact percentile over the baseline's; the change is their geometric mean, tested by "
        "sign flips of the units; the error rate by the exact binomial test. Holm holds the chance that "
        f"any endpoint or metric is called changed by noise alone at {1 - c.confidence:.0%}; a call also "
        f"needs the change beyond the threshold ({c.threshold:.0%}, errors {c.error_threshold * 100:g} "
        "points). CPU per request is the whole server's, in the verdict above. Below, one headroom "
        "plot per endpoint: its own throughput against its p50 (dashed) and tail (solid).</p>"
    )
    parts = ["<h2>Which endpoint</h2>", f"<p><b>{_answer(c)}</b></p>", verdict_table(c), read,
             _figure(summaries[:2], c, fmt, _tail(c.objective))]  # fmt: skip
    return Fragment("".join(parts))


def run_section(s, *, fmt: str = "png") -> Fragment:
    """The run report's per-endpoint section: '' unless the run's requests carry two or more names."""
    eps = getattr(s, "endpoints", None)
    if eps is None or len(eps) < 2:
        return Fragment("")
    top = eps.endpoints[0]
    lead = f"{len(eps)} endpoints; the most requested, {_E(top.name)}, has {top.total / max(sum(e.total for e in eps), 1):.0%} of the requests."
    read = (
        "<p><b>How to read it.</b> One row per request name: its successful requests, its share of all "
        "requests, its failed requests, its exact p50 and p99 at the heaviest step, and where its own p99 "
        "(or the objective's percentile) crosses the objective, its own throughput there. Below, one headroom "
        "plot per endpoint (its own req/s against its p50, dashed, and tail, solid).</p>"
    )
    return Fragment("".join(["<h2>Endpoints</h2>", f"<p><b>{lead}</b></p>", endpoints_table(eps), read,
                             _figure([s], None, fmt, _tail(eps.objective))]))  # fmt: skip
