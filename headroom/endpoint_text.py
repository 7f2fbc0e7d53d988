"""The terminal text of a run's endpoints (``headroom summary --endpoints``): answer first, then steps."""

from __future__ import annotations

import math

from ._fmt import change_text, table
from .endpoint_view import Endpoint, Endpoints


def _f(v, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def _ms(v) -> str:
    return _f(None if v is None else float(v) * 1e3, ".2f")


def _objective_cell(e: Endpoint) -> str:
    if e.objective_state == "crossed":
        return f"{e.objective_rps:,.0f} req/s"
    words = {"never crossed": "not crossed", "beyond at the first step": "beyond at step 1",
             "no successful request": "no successful request"}  # fmt: skip
    return words.get(e.objective_state, "-")


def _heaviest(e: Endpoint) -> int | None:
    """The step of the highest concurrency that has requests of this endpoint (the last such step)."""
    best = None
    for k in range(len(e.requests)):
        if e.requests[k] > 0 and (best is None or (e.concurrency[k] >= e.concurrency[best])):
            best = k
    return best


def overview_lines(eps: Endpoints) -> list[str]:
    """One row per endpoint: requests, share, errors, p50 and p99 at the heaviest step, and where its
    own latency crosses the objective (the answer, before any step table)."""
    total = max(sum(e.total for e in eps), 1)
    obj = eps.objective
    head = ["endpoint", "requests", "share", "errors", "p50 ms", "p99 ms", "at conc"]
    if obj is not None:
        head.append(f"req/s at {obj}")
    rows = []
    for e in eps:
        k = _heaviest(e)
        row = [
            e.name or '""',
            f"{int(e.requests.sum()):,}",
            f"{e.total / total:.1%}",
            f"{int(e.errors.sum()):,}",
            _ms(e.latency.pct["p50"][k]) if k is not None else "-",
            _ms(e.latency.pct["p99"][k]) if k is not None else "-",
            _f(float(e.concurrency[k]), "g") if k is not None else "-",
        ]
        if obj is not None:
            row.append(_objective_cell(e))
        rows.append(row)
    title = (
        f"endpoints ({len(eps)} request name{'s' if len(eps) != 1 else ''}; requests = successful, share of all requests; "
        "p50/p99 at the heaviest step)"
    )
    return ["", title, *table(head, rows, "lrrrrrr" + ("r" if obj is not None else ""))]


def step_lines(eps: Endpoints) -> list[str]:
    """Every endpoint's steps: requests, share of the step, errors, req/s and its exact percentiles."""
    out = []
    for e in eps:
        out += [
            "",
            f"endpoint {e.name or chr(34) * 2} by step (latency in ms; share = of the step's requests)",
        ]
        rows = []
        for k in range(len(e.requests)):
            if e.requests[k] == 0 and e.errors[k] == 0:
                continue
            lat = e.latency
            rows.append([
                str(k + 1), _f(float(e.concurrency[k]), "g"), f"{int(e.requests[k]):,}",
                _f(float(e.share[k]), ".1%"), f"{int(e.errors[k]):,}", _f(float(e.rps[k]), ",.0f"),
                _ms(lat.pct["p50"][k]), _ms(lat.pct["p90"][k]), _ms(lat.pct["p99"][k]), _ms(lat.max_s[k]),
            ])  # fmt: skip
        head = ["step", "conc", "requests", "share", "errors", "req/s", "p50", "p90", "p99", "max"]
        out += table(head, rows, "r" * len(head))
    return out


def endpoint_lines(eps: Endpoints | None, *, steps: bool) -> list[str]:
    """The endpoints' overview, and with ``steps`` every endpoint's step table; a hint when left out."""
    if eps is None or (len(eps) < 2 and not steps):  # one name: the run's own table says it all
        return []
    out = overview_lines(eps)
    if steps:
        out += step_lines(eps)
    else:
        out.append("  (--endpoints: every endpoint step by step)")
    return out


_CALL = {"regressed": "! REGRESSED", "improved": "+ improved", "no change shown": "= no change shown",
         "not judged": "not judged"}  # fmt: skip


def _change(m) -> str:
    return change_text(m)


def _value(m, v) -> str:
    if v is None:
        return "-"
    return f"{v:.2%}" if m.key == "error_rate" else f"{v * 1e3:.3f} ms"


def comparison_lines(c) -> list[str]:
    """Every endpoint's verdict and metrics (``headroom compare`` of runs whose requests carry names)."""
    eps = getattr(c, "endpoints", None) or []
    if not eps:
        return []
    level = next((m.level for e in eps for m in e.metrics if m.p is not None), None)
    units = max((m.units for e in eps for m in e.metrics if m.key != "error_rate"), default=0)
    lines = ["", *_wrap_plain(
        f"endpoints ({len(eps)} request names, judged at matched load: {units} units "
        f"({'A/B step pairs' if c.design == 'interleaved steps' else 'matched levels'}); Holm over every endpoint "
        f"and metric at {c.confidence:.0%}"
        + (f", intervals {level:.1%} two-sided" if level else "")
        + "; CPU per request is the whole server's)"
    )]  # fmt: skip
    rows = []
    for e in eps:
        for i, m in enumerate(e.metrics):
            iv = f"[{m.interval[0]:+.1%}, {m.interval[1]:+.1%}]" if m.interval else ""
            rows.append([
                e.name if i == 0 else "", f"{e.share:.0%}" if i == 0 else "", m.label, _value(m, m.baseline),
                _value(m, m.candidate), _change(m), iv, _CALL[m.call] if m.call != "not judged" else f"not judged: {m.why}",
            ])  # fmt: skip
    lines += table(["endpoint", "share", "metric", "baseline", "candidate", "change", "interval", ""], rows,
                   "lrlrrrll")  # fmt: skip
    return lines


def _wrap_plain(text: str, width: int = 100) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width=width, initial_indent="  ", subsequent_indent="    ")
