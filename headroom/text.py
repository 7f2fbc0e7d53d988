"""Plain-text tables for the terminal and CI logs."""

from __future__ import annotations

import math

from ._fmt import big_pct, change_text
from ._fmt import table as _table
from .compare import wording
from .reading import CPU_NOT_SPLIT
from .scalability import MIN_R2
from .summary import Summary, format_name

#: steps are numbered from 1 wherever a person reads them (tables, sentences, profiles and their file
#: names, the recorder's messages); the JSON's ``index``, ``peak_step`` and ``plateau_steps`` are
#: positions from 0
STEP_BASE = 1


def _f(v, fmt: str, dash: str = "-") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return dash
    return format(v, fmt)


def _ms(v) -> str:
    return _f(None if v is None else v * 1e3, ".2f")


def _rps(v) -> str:
    return "-" if v is None else f"{v:,.0f} req/s"


def _interval(ci, fmt=",.0f") -> str:
    return "" if not ci else f" [{format(ci[0], fmt)} to {format(ci[1], fmt)}]"


def _conc(v) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:g}"


def _load_of(t, k: int) -> str:
    """A step's load in words: ``concurrency 8``, an open loop's ``intended rate 4,000 req/s``, or
    ``concurrency -`` when the run says neither."""
    rate = t.intended_rps[k] if t.intended_rps is not None else math.nan
    if not math.isfinite(t.concurrency[k]) and math.isfinite(rate):
        return f"intended rate {rate:,.0f} req/s"
    return f"concurrency {_conc(t.concurrency[k])}"


def _ranges(idx) -> str:
    """Step numbers as ranges: 3, 5-9."""
    out, run = [], []
    for i in idx:
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def side_label(label: str, side: str) -> str:
    """``label (baseline)``, unless run_labels already told the side apart that way."""
    return label if label.endswith(f"({side})") else f"{label} ({side})"


def run_labels(runs) -> list[str]:
    """Run labels, made distinct when runs share one (same metadata ``sha``).

    Shared labels get the run's folder or file name when those differ,
    else "baseline"/"candidate" for two runs, else "run 1", "run 2"...
    Tables, legends and headers all use these.
    """
    import os

    labels = [s.label for s in runs]
    if len(set(labels)) == len(labels):
        return labels
    paths = [os.path.normpath(str(s.run.meta.source)) for s in runs]
    names = [os.path.basename(p) for p in paths]
    if len(set(names)) < len(names):  # perfResults.csv.gz in two folders: name the folders
        names = [os.path.basename(os.path.dirname(p)) for p in paths]
    if len(set(names)) == len(names) and all(names):
        tags = names
    elif len(runs) == 2:
        tags = ["baseline", "candidate"]
    else:
        tags = [f"run {i + 1}" for i in range(len(runs))]
    return [lb if labels.count(lb) == 1 else f"{lb} ({tag})" for lb, tag in zip(labels, tags)]


def capacity_rows(s: Summary) -> list[tuple[str, str]]:
    """The capacity figures as (name, value) rows: the same text in the terminal, HTML and notebooks."""
    cap, t = s.capacity, s.table
    cores = f"100 % = {t.cpu_cores:g} core(s)"
    rows = []
    rows += _model_rows(s)
    if cap.plateau_rps is not None:
        steps = _ranges([k + STEP_BASE for k in cap.plateau_steps])
        rows.append(("plateau throughput", f"{_rps(cap.plateau_rps)} (median of saturated steps {steps})"))
    if cap.peak_step is not None:
        rows.append(
            (
                "peak step",
                f"{_rps(cap.peak_step_rps)} (step {cap.peak_step + STEP_BASE}, {_load_of(t, cap.peak_step)}; "
                "information: the noisiest figure)",
            )
        )
    if cap.objective is not None:
        rows.append((f"throughput at {cap.objective}", objective_text(cap, search_loads(s))))
    rows.append((f"throughput at {cap.cpu_target_pct:g} % CPU", cpu_target_text(cap, cores)))
    if cap.cpu_s_per_req is not None:
        rows.append(("CPU per request (whole run)", f"{cap.cpu_s_per_req * 1e6:.1f} us ({cores})"))
    if cap.max_useful_rps is not None:
        src = "throughput at the objective" if cap.objective is not None else "the knee"
        bound = ">= " if cap.objective is not None and cap.at_objective.lower_bound else ""
        rows.append(("max useful throughput", f"{bound}{_rps(cap.max_useful_rps)} ({src})"))
    elif cap.objective is None and cap.model is not None and not cap.model.trusted:
        rows.append(("max useful throughput", "unknown: no objective, and no knee from a poor fit"))
    if cap.current_load_rps is not None:
        hr = "unknown" if cap.headroom_pct is None else f"{cap.headroom_pct:.1f} %"
        rows.append((f"headroom at {cap.current_load_rps:,.0f} req/s", hr))
    if cap.target_load_rps is not None:
        rows.append((f"instances for {cap.target_load_rps:,.0f} req/s", _f(cap.instances, "d")))
    return _bounded(s, rows)


#: the rows a generator-limited run reports as lower bounds (throughputs the generator could not pass)
_THROUGHPUT_ROWS = ("modelled capacity (USL)", "plateau throughput", "peak step", "max useful throughput")


def _bounded(s: Summary, rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A run whose load generator set the ceiling (headroom.generator_limit): each throughput row marked
    as a lower bound, row by row, not only in the box above the table."""
    if getattr(s, "generator", None) is None:
        return rows
    out = []
    for name, value in rows:
        if name in _THROUGHPUT_ROWS and (value[:1].isdigit() or value.startswith(">= ")):
            value = f">= {value.removeprefix('>= ')}; a lower bound: the generator's limit, not the server's"
        out.append((name, value))
    return out


def _model_rows(s: Summary) -> list[tuple[str, str]]:
    """Capacity, knee and fit of the USL model; no headline figure from a poor fit."""
    cap, t, m = s.capacity, s.table, s.capacity.model
    if m is None and t.kind == "rate":
        why = "the steps are request rates (an open-loop ramp); the USL model needs concurrency steps"
        return [("modelled capacity (USL)", f"no model: {why}")]
    if m is None:
        why = (
            "concurrency unknown (not in the file, no ramp parameters in metadata): state it with "
            "--concurrency 1:40:3 or --concurrency 1,2,4,8"
            if not t.known_concurrency
            else "fewer than 3 usable steps"
        )
        return [("modelled capacity (USL)", f"no model: {why}")]
    fit = (
        f"lambda {m.lambda_rps:,.0f} req/s, sigma {m.sigma:.3g}, kappa {m.kappa:.3g}, "
        f"R2(log) {m.r2_log:.2f} on {m.points} steps"
    )
    if not m.trusted:
        why = f"none: the model fits poorly (R2(log) {m.r2_log:.2f} < {MIN_R2:g}); read the steps instead"
        return [("modelled capacity (USL)", why), ("knee (USL, max power)", why), ("  model fit", fit)]
    ci = _interval(m.ci.get("capacity_rps"))
    if m.peak_reached:
        rows = [
            (
                "modelled capacity (USL)",
                f"{_rps(m.capacity_rps)}{ci} at concurrency {m.peak_concurrency:.0f} (the peak)",
            )
        ]
    else:
        rows = [
            (
                "modelled capacity (USL)",
                f">= {_rps(m.capacity_rps)}{ci}: still rising at concurrency {m.n_hi:g} (a lower bound)",
            )
        ]
    if m.knee_rps is not None:
        cpu = f"; CPU there {cap.cpu_at_knee:.1f} %" if cap.cpu_at_knee is not None else ""
        knee = f"{_rps(m.knee_rps)}{_interval(m.ci.get('knee_rps'))} {m.knee_note}{cpu}"
        rows.append(("knee (USL, max power)", knee))
    else:
        rows.append(("knee (USL, max power)", m.knee_note))
    return [*rows, ("  model fit", fit)]


def search_loads(s: Summary):
    """Each step's load when the run is a capacity search (steps in probe order), else None."""
    from .search_view import search_of

    if search_of(s.run) is None:
        return None
    t = s.table
    return t.intended_rps if t.intended_rps is not None else t.concurrency


def _between(c, loads) -> str:
    """Between which steps the crossing lies; a search's (steps in probe order): between which loads."""
    if loads is None:
        return f"between steps {c.steps[0] + STEP_BASE} and {c.steps[1] + STEP_BASE}"
    a, b = sorted((float(loads[c.steps[0]]), float(loads[c.steps[1]])))
    return f"between the probes at {a:g} and {b:g}"


def objective_text(cap, loads=None) -> str:
    """The throughput at the objective in words; ``loads``: each step's load when the steps are a
    search's probes (the crossing then lies between two loads, not two neighbouring steps)."""
    c = cap.at_objective
    if c.status == "crossed":
        cpu = f"; CPU there {cap.cpu_at_objective:.1f} %" if cap.cpu_at_objective is not None else ""
        band = ""
        if c.low is not None or c.high is not None:  # issue 39: its 95 % interval (an open end: "open")
            band = f", 95 % interval {'open' if c.low is None else _rps(c.low)} to {'open' if c.high is None else _rps(c.high)}"
        kind = (c.interval or {}).get("load")
        where = (
            f"at {'' if kind == 'rate' else kind + ' '}{c.load:.3g}{' req/s' if kind == 'rate' else ''}, "
            if c.load is not None and kind
            else ""
        )
        return f"{_rps(c.rps)}{band} (broken {where}{_between(c, loads)}){cpu}"
    if c.status == "held":
        return f">= {_rps(c.rps)} (held at every step: a lower bound)"
    if c.status == "at lowest step":
        return "none: already broken at the lowest step"
    return "unknown: no usable step"


def cpu_target_text(cap, cores: str) -> str:
    c = cap.at_cpu_target
    if c.status == "crossed":
        return f"{_rps(c.rps)} (between steps {c.steps[0] + STEP_BASE} and {c.steps[1] + STEP_BASE}; {cores})"
    if c.status == "not reached":
        return f"not reached: highest CPU measured {cap.cpu_max_pct:.1f} % ({cores})"
    if c.status == "at lowest step":
        return f"exceeded already at the lowest step ({cores})"
    return "unknown: no CPU data"


def unknown_errors_why(run) -> str:
    """Why a run's error count is unknown, in a few words."""
    if run.errors_known:
        return "transport errors not recorded"
    from .formats import FORMATS
    from .summary import format_name

    reader = FORMATS.get(format_name(run.format))
    return reader.errors_unknown if reader is not None else "no status column"


def _step_rows(s: Summary) -> list[list[str]]:
    t, steps = s.table, s.steps
    has = steps.requests > 0
    t0 = int(steps.start_ns[has].min()) if has.any() else 0
    rows = []
    for k in range(len(t)):
        lat = t.latency
        rows.append(
            [
                str(k + STEP_BASE),
                _conc(t.concurrency[k]) if t.kind == "concurrency" else _f(t.intended_rps[k], ",.0f"),
                _f((int(steps.start_ns[k]) - t0) / 1e9 if steps.requests[k] else None, ".1f"),
                _f(t.duration_s[k] if steps.requests[k] else None, ".2f"),
                f"{int(t.requests[k]):,}",
                "?" if t.errors is None else f"{int(t.errors[k]):,}",
                _f(t.goodput_rps[k], ",.0f"),
                _ms(lat.pct["p50"][k]),
                _ms(lat.pct["p99"][k]),
                _ms(lat.max_s[k]),
                _f(t.cpu_pct[k], ".1f"),
                _f(t.cpu_s_per_req[k] * 1e6, ".1f"),
                ",".join(t.flags(k)),
            ]
        )
    return rows


def _bins_lines(s: Summary) -> list[str]:
    """The throughput-bin table of ``headroom summary`` (bins without requests left out, counted)."""
    lines = [
        "",
        f"throughput bins of {s.buckets.bucket_s:g} s buckets (latency in ms; ~: fewer than 10 requests above it)",
    ]
    bins = s.bins
    lat = bins.latency
    rows = []
    shown = ("p50", "p90", "p99", "p999")
    empty = 0
    for i in range(len(bins)):
        n = int(lat.requests[i])
        if n == 0:  # a bin no time bucket fell in: a row of dashes says nothing
            empty += 1
            continue
        row = [
            f"{bins.rps_lo[i]:,.0f}-{bins.rps_hi[i]:,.0f}",
            _f(bins.rps[i], ",.0f"),
            f"{n:,}",
            _ms(lat.mean_s[i]),
        ]
        for name in shown:
            v = _ms(lat.pct[name][i])
            row.append(("~" + v) if n and lat.thin[name][i] else v)
        row += [_ms(lat.max_s[i]), _f(bins.cpu_pct[i], ".1f")]
        rows.append(row)
    lines += _table(
        ["req/s bin", "req/s", "requests", "mean", "p50", "p90", "p99", "p99.9", "max", "cpu %"],
        rows,
        "lrrrrrrrrr",
    )
    if empty:
        lines.append(f"  ({empty} bin(s) without requests left out)")
    return lines


def stop_lines(s: Summary) -> list[str]:
    """``STOPPED ANSWERING at ...``: first in a summary, when the server stopped answering."""
    from .stopped import run_stop

    st = run_stop(s, s.label)
    if st is None:
        return []
    return _wrap(
        f"  STOPPED ANSWERING at {st.where()} (step {st.step} of the ramp: {st.what()}); the ramp ends there",
        indent="    ",
    )


def source_tool(run) -> str:
    """What made the run: the format, and the engine headroom ramp drove when it is another name
    (a Locust run is written in the hey-like CSV of headroom ramp: 'locust via headroom ramp')."""
    fmt = format_name(run.format)
    fields = run.meta.fields if run.meta is not None else {}
    engine = fields.get("engine") if isinstance(fields, dict) else None
    if isinstance(engine, str) and engine and engine != fmt:
        return f"{engine} via headroom ramp, {fmt} format"
    return fmt


def format_summary(s: Summary, *, endpoints: bool = False) -> str:
    """The human-readable report of ``headroom summary`` (fits 100 columns); ``endpoints``: every
    request name's step table too (the overview of the names is there whenever the run has names)."""
    run, t = s.run, s.table
    steps = s.steps
    lines = [f"headroom summary: {run.label}"]
    gen = getattr(s, "generator", None)
    if gen is not None:  # the generator, not the server, set the ceiling: said before any figure
        lines += _wrap(f"  ! {gen.sentence()}", indent="    ")
    lines += stop_lines(s)
    lines.append(f"  source: {run.meta.source} ({source_tool(run)})")
    has = steps.requests > 0
    dur = (int(steps.end_ns[has].max()) - int(steps.start_ns[has].min())) / 1e9 if has.any() else 0.0
    errs = (
        f"errors unknown ({unknown_errors_why(run)})"
        if t.errors is None
        else f"{int(t.errors.sum()):,} errors"
    )
    lines += _wrap(
        f"  requests: {int(t.requests.sum()):,} successful, {errs}, over {dur:.1f} s in {len(t)} steps",
        indent="    ",
    )
    if s.overlap is None and any(CPU_NOT_SPLIT in w for w in run.warnings):
        lines.append(f"  CPU: not shown for one endpoint (--name): {CPU_NOT_SPLIT}")
    elif s.overlap is None:
        lines.append("  CPU: no cpuStats file")
    else:
        per = f", {run.cpu.per_cpu.shape[1]} CPUs" if run.cpu.per_cpu is not None else ""
        lines.append(
            f"  CPU: {s.overlap.samples} samples{per} cover {s.overlap.overlap_s:.1f} s of the "
            f"{s.overlap.load_s:.1f} s load window; 100 % = {run.cpu.cores:g} core(s)"
            + (f"; from {run.cpu.source}" if "prometheus" in run.cpu.source else "")
        )
    from .search_view import search_lines

    lines += search_lines(s)
    lines += ["", "steps (latency in ms; flags: short = too short to trust, client-paced = Little's law)"]
    if t.kind == "rate":
        lines += [
            "  rate steps (open loop): rate = intended req/s; fell behind = the generator missed its",
            "  schedule, so the latency is understated (coordinated omission)",
        ]
    lines += _table(
        [
            "step",
            "conc" if t.kind == "concurrency" else "rate",
            "at s",
            "dur s",
            "requests",
            "errors",
            "req/s",
            "p50",
            "p99",
            "max",
            "cpu %",
            "us/req",
            "flags",
        ],
        _step_rows(s),
        "rrrrrrrrrrrrl",
    )
    lines += memory_lines(s)
    from .endpoint_text import endpoint_lines

    lines += endpoint_lines(s.endpoints, steps=endpoints)
    lines += _bins_lines(s)
    lines += ["", "capacity (from the steps; [interval] from a bootstrap of the model's residuals)"]
    kv = capacity_rows(s)
    w = max(len(a) for a, _ in kv) if kv else 0
    for a, b in kv:  # values wrap under themselves, within 100 columns
        first, *rest = _wrap(b, width=100 - (w + 4), indent="")
        lines.append(f"  {a.ljust(w)}  {first}")
        lines += [" " * (w + 4) + r for r in rest]
    return "\n".join(lines) + "\n"


def _metric_value(v, unit: str, key: str = "") -> str:
    """A compared value in one unit per metric: latency in ms, CPU per request in us."""
    if v is None:
        return "-"
    if unit == "s":
        return f"{v * 1e6:.1f} us" if key.startswith("cpu") else f"{v * 1e3:.3f} ms"
    if unit == "req/s":
        return f"{v:,.0f} req/s"
    if unit == "%":
        return f"{v * 100:.3f} %"
    return f"{v:g} {unit}"


_MARK = {
    "worse": "WORSE",
    "better": "better",
    "same": "~ same",
    "unclear": "? unclear",
    "not judged": "-",
    "shown": "",
}


def _noise_rows(c) -> list[str]:
    """Each decision metric's between-run noise, its df and source, and the smallest change it detects."""
    lines: list[str] = []
    if c.design == "interleaved steps":
        lines += [
            "",
            "noise of a pair (log ratio sd), and the smallest change each metric detects (80 % power)",
        ]
    else:
        lines += ["", "between-run noise per run, and the smallest change each metric detects (80 % power)"]
    rows = [
        [m.name, f"{m.noise.sd:.1%}", _df(m.noise.df), big_pct(m.mdc), _short_source(m.noise.source)]
        for m in c.metrics
        if m.decides and m.noise is not None
    ]
    lines += _table(["metric", "noise", "df", "detects", "from"], rows, "lrrrl")
    return lines


def _pair_lines(c) -> list[str]:
    """The step pairs side by side."""
    lines: list[str] = []
    if c.design == "interleaved steps":
        lines += ["", "step pairs (latency in ms; * = saturated step; throughput judged at every level)"]
    else:
        lines += ["", "step pairs (latency in ms; * = saturated step, used for plateau throughput)"]
    rows = []
    for p in c.pairs:
        b, k = p.baseline, p.candidate
        rows.append(
            [
                ("*" if p.plateau else " ") + _conc(p.concurrency),
                _f(b["rps"], ",.0f"),
                _f(k["rps"], ",.0f"),
                _pct(p.change("rps")),
                _ms(b["p99_s"]),
                _ms(k["p99_s"]),
                _pct(p.change("p99_s")),
                _pct(p.change("cpu_s_per_req")),
                "?" if b["errors"] is None else str(b["errors"]),
                "?" if k["errors"] is None else str(k["errors"]),
            ]
        )
    for st in getattr(c, "stopped", None) or []:
        cand = st.label in c.candidate_labels
        gone = "stopped"
        rows.append(
            [
                "x" + (f"{st.level:g}/s" if st.open_loop else f"{st.level:g}"),
                *(["-", gone] if cand else [gone, "-"]),
                "",
                "",
                "",
                "",
                "",
                *(
                    ["", "?" if st.errors is None else f"{st.errors:,}"]
                    if cand
                    else ["?" if st.errors is None else f"{st.errors:,}", ""]
                ),
            ]
        )
    if getattr(c, "stopped", None):
        lines.append("x = the level where a run stopped answering (its failed requests in err)")
    lines += _table(
        [
            "conc",
            "base req/s",
            "cand req/s",
            "change",
            "base p99",
            "cand p99",
            "change",
            "cpu/req",
            "base err",
            "cand err",
        ],
        rows,
        "rrrrrrrrrr",
    )
    return lines


def _stop_line(c, st) -> str:
    side = "candidate" if st.label in c.candidate_labels else "baseline"
    return f"STOPPED ANSWERING: {side} {st.label} at {st.where()} (step {st.step}: {st.what()})"


def format_comparison(c) -> str:
    """The benchstat-like table of ``headroom compare``."""
    base = ", ".join(c.baseline_labels)
    cand = ", ".join(c.candidate_labels)
    primary = next((m.name for m in c.metrics if m.key == c.primary), c.primary)
    from .headline import headline, next_sentence
    from .mismatch import first

    lines = [
        *_wrap(f"headroom compare: {side_label(base, 'baseline')} vs {side_label(cand, 'candidate')}"),
        # runs that do not measure the same thing: said before anything is concluded from them
        *(line for w in first(c.warnings) for line in _wrap(f"  ! WARNING: {w}", indent="    ")),
        *(line for sentence in headline(c) for line in _wrap(f"  > {sentence}", indent="    ")),
        *_wrap(
            f"  steps paired {c.pairing}; threshold {c.threshold:.0%} (errors {c.error_threshold * 100:g} points)",
            indent="    ",
        ),
        *_wrap(
            f"  {_design_words(c)}, {_family_words(c)}; primary: {primary}"
            if c.primary
            else f"  intervals: {c.confidence:.0%} for all decision metrics together (a schema 2 comparison)",
            indent="    ",
        ),
        *_wrap(f"  {c.noise.describe()}", indent="    "),
        *(line for note in c.notes[2:] for line in _wrap(f"  {note}", indent="    ")),
        *(
            line
            for st in getattr(c, "stopped", None) or []
            for line in _wrap(f"  {_stop_line(c, st)}", indent="    ")
        ),
        "",
    ]
    rows = []
    for m in c.metrics:
        rows.append(
            [
                m.name,
                _metric_value(m.baseline, m.unit, m.key),
                _metric_value(m.candidate, m.unit, m.key),
                change_text(m),
                interval_text(m),
                _MARK[m.decision] if m.decides else "info",
            ]
        )
    lines += _table(["metric", "baseline", "candidate", "change", "interval", ""], rows, "lrrrll")
    from .endpoint_text import comparison_lines

    lines += comparison_lines(c)
    lines += across_load_lines(c)
    lines += _noise_rows(c)
    lines += _pair_lines(c)
    lines += ["", *_wrap(f"verdict: {c.verdict.upper()}: {c.reason}")]
    nxt = next_sentence(c)
    if nxt:
        lines += _wrap(nxt[0].lower() + nxt[1:])
    why: dict[str, list[str]] = {}
    for m in c.metrics:
        if m.decides and m.decision == "not judged":
            why.setdefault(m.note, []).append(m.name)
    for note, names in why.items():
        lines += _wrap(f"not judged: {', '.join(names)}: {note}")
    return "\n".join(lines) + "\n"


def _design_words(c) -> str:
    if c.design == "interleaved steps":
        return "tests of the change across load of interleaved recordings"
    return "run-level tests"


def _family_words(c) -> str:
    """How the family's error was held: the joint sign-flip test (interleaved) or weighted Holm."""
    if c.design == "interleaved steps":
        return (
            f"one closed test at {c.confidence:.0%} for all decision metrics together (their lines under "
            f"sign flips of whole levels, step-down min-p; the levels' own means, the capacity at the "
            f"objective and the error rate at fixed shares; each metric's level as a share: {_weights_text(c)})"
        )
    return (
        f"weighted Holm at {c.confidence:.0%} for all decision metrics together "
        f"(shares of the error budget, maximin over the kinds of regression: {_weights_text(c)})"
    )


def _weights_text(c) -> str:
    names = {m.key: m.name for m in c.metrics}
    w = sorted(c.weights.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{names.get(k, k)} {v:.2f}" for k, v in w)


def _short_source(source: str) -> str:
    """A noise source in a few words, for a table cell."""
    if source.endswith("(interleaved steps)") or "interleaved recording" in source:
        head = "level pairs (interleaved)"
        return head + (" + earlier A/A recordings" if "earlier interleaved" in source else "")
    if source.startswith("default"):
        head = "default (shared CI machine)"
    elif source.startswith("learned from the history"):
        head = "history JSON"
    elif source.startswith("learned"):
        head = "learned (--noise-from)"
    else:
        head = "repeat runs"
    if "+ the spread between" in source:
        head += " + repeats"
    return head + (", widened to the steps" if "widened" in source else "")


def _wrap(line: str, width: int = 100, indent: str = "  ") -> list[str]:
    """A long line wrapped to ``width`` columns, continuation lines indented."""
    import textwrap

    return textwrap.wrap(line, width=width, subsequent_indent=indent, break_on_hyphens=False) or [""]


def _pct(v) -> str:
    return "-" if v is None else f"{v * 100:+.1f}%"


def interval_text(m) -> str:
    if m.ci is None:
        return ""
    if m.key == "error_rate":
        return f"[{m.ci[0] * 100:+.2f}, {m.ci[1] * 100:+.2f}] pt"
    return f"[{big_pct(m.ci[0], '+.1%')}, {big_pct(m.ci[1], '+.1%')}]"


def _df(df: float) -> str:
    """Degrees of freedom for a reader: whole numbers as such, effective ones to one decimal."""
    if not math.isfinite(df) or df >= 100:
        return f"{df:.0f}" if math.isfinite(df) else "inf"
    return f"{df:.0f}" if abs(df - round(df)) < 1e-9 else f"{df:.1f}"


def memory_lines(s: Summary) -> list[str]:
    """The per-step memory and GC table of a summary (nothing without memory telemetry)."""
    m = s.memory
    if m is None:
        return []
    t = s.table
    gc = m.has_gc
    head = ["step", "conc", "RSS MiB", "RSS max MiB"] + (["heap MiB", "GC %", "alloc KiB/req"] if gc else [])
    rows = []
    for k in range(len(t)):
        row = [
            str(k + STEP_BASE),
            _conc(t.concurrency[k]),
            _f(m.rss_bytes[k] / 2**20, ",.1f"),
            _f(m.rss_max_bytes[k] / 2**20, ",.1f"),
        ]
        if gc:
            row += [_f(m.heap_inuse_bytes[k] / 2**20, ",.1f"), _f(m.gc_cpu_share[k] * 100, ".2f"),
                    _f(m.alloc_bytes_per_req[k] / 1024, ",.2f")]  # fmt: skip
        rows.append(row)
    note = "; GC % = share of wall time in GC pauses" if gc else ""
    title = f"server memory per step (median and max of the samples in the step{note}); from {m.source}"
    return ["", *_wrap(title, indent="  "), *_table(head, rows, "r" * len(head))]


def format_memory_comparison(m) -> str:
    """Memory at matched concurrency (a :class:`headroom.telemetry.steps.MemoryComparison`): shown, not judged."""
    if m is None:
        return ""
    noise = "" if m.noise != m.noise else f", step-to-step spread +-{m.noise:.1%}"
    rows = [[_conc(k), _f(a / 2**20, ",.1f"), _f(b / 2**20, ",.1f"), _f((r - 1) * 100, "+.1f")]
            for k, a, b, r in zip(m.steps, m.baseline_bytes, m.candidate_bytes, m.ratio)]  # fmt: skip
    lines = ["", f"server memory at matched concurrency (shown, not judged): RSS x{m.median_ratio:.3f} "
             f"(median of {len(m.steps)} steps{noise})"]  # fmt: skip
    lines += _table(["conc", "base RSS MiB", "cand RSS MiB", "change %"], rows, "rrrr")
    return "\n".join(lines) + "\n"


def across_load_lines(c) -> list[str]:
    """The across-load table as terminal lines (empty when the design has no levels)."""
    got = wording.across_load_rows(c)
    if got is None:
        return []
    head, rows = got
    return [
        "",
        "change across load: " + wording.ACROSS_LOAD_NOTE,
        *_table(head, rows, "rr" + "r" * (len(head) - 2)),
    ]
