"""Plain-text tables for the terminal and CI logs."""

from __future__ import annotations

import math

from .model import PERCENTILES
from .summary import Summary


def _f(v, fmt: str, dash: str = "-") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return dash
    return format(v, fmt)


def _ms(v) -> str:
    return _f(None if v is None else v * 1e3, ".2f")


def _table(header: list[str], rows: list[list[str]], align: str) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    out = []
    for r in [header, *rows]:
        cells = [c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(r, widths, align)]
        out.append("  " + "  ".join(cells).rstrip())
    return out


def format_summary(s: Summary) -> str:
    """The human-readable report of ``headroom summary``."""
    run, steps, bins, cap = s.run, s.steps, s.bins, s.capacity
    lines = [f"headroom summary: {run.label}", f"  source: {run.meta.source} ({run.format})"]
    has = steps.requests > 0
    t0 = int(steps.start_ns[has].min()) if has.any() else 0
    dur = (int(steps.end_ns[has].max()) - t0) / 1e9 if has.any() else 0.0
    lines.append(
        f"  requests: {int(steps.requests.sum()) + run.errors:,} ({s.buckets.kept:,} kept, {run.errors:,} errors)"
        f" over {dur:.1f} s in {len(steps)} steps; throughput in {s.buckets.bucket_s:g} s buckets"
    )
    if s.overlap is None:
        lines.append("  CPU: no cpuStats file")
    else:
        per = f", {run.cpu.per_cpu.shape[1]} CPUs" if run.cpu.per_cpu is not None else ""
        lines.append(
            f"  CPU: {s.overlap.samples} samples{per} cover {s.overlap.overlap_s:.1f} s of the "
            f"{s.overlap.load_s:.1f} s load window; 100 % = {run.cpu.cores:g} core(s)"
        )
    lines += ["", "steps"]
    rows = []
    for k in range(len(steps)):
        rows.append(
            [
                str(k),
                _f(steps.concurrency[k], "d"),
                _f((int(steps.start_ns[k]) - t0) / 1e9 if steps.requests[k] else None, ".3f"),
                _f(
                    (int(steps.end_ns[k]) - int(steps.start_ns[k])) / 1e9 if steps.requests[k] else None,
                    ".3f",
                ),
                f"{int(steps.requests[k]):,}",
                _f(steps.rps[k], ",.0f"),
                _ms(s.step_latency.pct["p50"][k]),
                _ms(s.step_latency.pct["p99"][k]),
                _ms(s.step_latency.max_s[k]),
            ]
        )
    lines += _table(
        ["step", "conc", "start s", "dur s", "requests", "req/s", "p50 ms", "p99 ms", "max ms"],
        rows,
        "rrrrrrrrr",
    )
    lines += [
        "",
        "throughput bins (latency in ms; ~ marks a percentile with fewer than 10 requests above it)",
    ]
    lat = bins.latency
    rows = []
    for i in range(len(bins)):
        n = int(lat.requests[i])
        row = [
            f"{bins.rps_lo[i]:,.0f}-{bins.rps_hi[i]:,.0f}",
            _f(bins.rps[i], ",.0f"),
            str(int(bins.buckets[i])),
            f"{n:,}",
            _ms(lat.mean_s[i]),
        ]
        for name, _, _ in PERCENTILES:
            v = _ms(lat.pct[name][i])
            row.append(("~" + v) if n and lat.thin[name][i] else v)
        row += [_ms(lat.max_s[i]), _f(bins.cpu_pct[i], ".1f"), _f(bins.cpu_s_per_req[i] * 1e6, ".1f")]
        rows.append(row)
    pnames = [p[0].replace("p995", "p99.5").replace("p999", "p99.9") for p in PERCENTILES]
    lines += _table(
        ["req/s bin", "req/s", "buckets", "requests", "mean", *pnames, "max", "cpu %", "cpu us/req"],
        rows,
        "l" + "r" * (5 + len(pnames) + 3),
    )
    lines += ["", "capacity"]
    kv = []
    if cap.max_rps is not None:
        conc = steps.concurrency[cap.max_rps_step]
        kv.append(
            (
                "max sustained throughput",
                f"{cap.max_rps:,.0f} req/s (step {cap.max_rps_step}"
                + (f", concurrency {conc})" if conc is not None else ")"),
            )
        )
    if cap.objective is not None:
        if cap.rps_at_objective is None:
            kv.append((f"throughput at {cap.objective}", f"none: {cap.objective_status}"))
        else:
            prefix = ">= " if cap.objective_status.startswith("held") else ""
            cpu = cap.cpu_at_objective
            kv.append(
                (
                    f"throughput at {cap.objective}",
                    f"{prefix}{cap.rps_at_objective:,.0f} req/s ({cap.objective_status})"
                    + (f"; CPU there {cpu:.1f} %" if cpu is not None else ""),
                )
            )
    k = cap.knee
    if k is None:
        kv.append(("knee", "not fitted: fewer than 4 bins with enough requests"))
    else:
        where = f"{k.knee_rps:,.0f} req/s" if k.knee_rps is not None else "beyond the measured load"
        cpu = cap.cpu_at_knee
        kv.append(("knee", where + (f"; CPU there {cpu:.1f} %" if cpu is not None else "")))
        kv.append(
            (
                f"  fit of {k.metric}",
                f"{k.model}: L0 {k.l0_s * 1e3:.3g} ms, Xmax {k.xmax_rps:,.0f} req/s, k {k.k:.2g}, "
                f"R2(log) {k.r2_log:.2f} on {k.points} bins",
            )
        )
    if cap.rps_at_cpu_target is not None:
        kv.append(
            (
                f"throughput at {cap.cpu_target_pct:g} % CPU",
                f"{cap.rps_at_cpu_target:,.0f} req/s"
                + (" (extrapolated beyond the measured CPU)" if cap.cpu_target_extrapolated else ""),
            )
        )
    elif run.cpu is not None:
        kv.append((f"throughput at {cap.cpu_target_pct:g} % CPU", "unknown (CPU does not rise with load)"))
    if cap.cpu_s_per_req is not None:
        kv.append(("CPU per request", f"{cap.cpu_s_per_req * 1e6:.1f} us"))
    if cap.max_useful_rps is not None:
        kv.append(("max useful throughput", f"{cap.max_useful_rps:,.0f} req/s"))
    if cap.current_load_rps is not None:
        kv.append(
            (
                f"headroom at {cap.current_load_rps:,.0f} req/s",
                _f(cap.headroom_pct, ".1f") + " %" if cap.headroom_pct is not None else "unknown",
            )
        )
    if cap.target_load_rps is not None:
        kv.append((f"instances for {cap.target_load_rps:,.0f} req/s", _f(cap.instances, "d")))
    w = max(len(a) for a, _ in kv) if kv else 0
    lines += [f"  {a.ljust(w)}  {b}" for a, b in kv]
    return "\n".join(lines) + "\n"


def _metric_value(v, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "s":
        if v < 1e-3:
            return f"{v * 1e6:.1f} us"
        return f"{v * 1e3:.3f} ms" if v < 1 else f"{v:.3f} s"
    if unit == "req/s":
        return f"{v:,.0f} req/s"
    return f"{v:g} {unit}"


_MARK = {
    "worse": "WORSE",
    "better": "better",
    "same": "~ same",
    "unclear": "? unclear",
    "not judged": "-",
    "shown": "",
}


def format_comparison(c) -> str:
    """The benchstat-like table of ``headroom compare``."""
    base = ", ".join(c.baseline_labels)
    cand = ", ".join(c.candidate_labels)
    n_dec = sum(1 for m in c.metrics if m.decides and m.decision != "not judged")
    lines = [
        f"headroom compare: {base} (baseline) vs {cand} (candidate)",
        f"  threshold {c.threshold * 100:g}%, {c.confidence * 100:g}% confidence over {n_dec} judged decision "
        f"metric(s) ({c.metric_confidence * 100:.2f}% each), {c.n_boot} resamples of >= {c.block_s:g} s blocks, "
        f"seed {c.seed}, {c.bucket_s:g} s buckets"
        + (f", objective {c.objective}" if c.objective is not None else ""),
        "",
    ]
    rows = []
    for m in c.metrics:
        delta = "-" if m.change is None else f"{m.change * 100:+.1f}%"
        ci = "" if m.ci is None else f"[{m.ci[0] * 100:+.1f}%, {m.ci[1] * 100:+.1f}%]"
        mark = _MARK[m.decision] + ("" if m.decides else (" (info)" if m.decision != "shown" else "info"))
        rows.append(
            [
                m.name,
                _metric_value(m.baseline, m.unit),
                _metric_value(m.candidate, m.unit),
                delta,
                ci,
                mark.strip(),
            ]
        )
    lines += _table(["metric", "baseline", "candidate", "delta", "interval", ""], rows, "lrrrll")
    lines += ["", f"throughput bins (>= {c.min_blocks} blocks of requests per side to compare)"]
    rows = []
    for b in c.bins:
        p99 = b.latency.get("p99")
        p99s = ""
        if p99 is not None and p99[2] is not None:
            p99s = f"p99 {p99[0] * 1e3:.2f} -> {p99[1] * 1e3:.2f} ms ({p99[2] * 100:+.1f}%)"
        rows.append(
            [
                f"{b.rps_lo:,.0f}-{b.rps_hi:,.0f}",
                f"{b.baseline_requests:,} / {b.baseline_blocks}",
                f"{b.candidate_requests:,} / {b.candidate_blocks}",
                b.status,
                p99s,
            ]
        )
    lines += _table(
        ["req/s bin", "baseline req / blocks", "candidate req / blocks", "status", ""], rows, "lrrll"
    )
    lines += ["", f"verdict: {c.verdict.upper()}: {c.reason}"]
    notes = list(c.notes)
    why: dict[str, list[str]] = {}
    for m in c.metrics:
        if m.decides and m.decision == "not judged":
            why.setdefault(m.note, []).append(m.name)
    notes += [f"not judged ({note}): {', '.join(names)}" for note, names in why.items()]
    lines += [f"note: {n}" for n in notes]
    return "\n".join(lines) + "\n"
