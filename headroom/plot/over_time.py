"""Figures over the run's time and against throughput: throughput, CPU, latency, memory."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.ticker import FuncFormatter, MaxNLocator

from ..binning import bucket_percentiles
from ..summary import Summary
from ..text import run_labels
from ._base import (
    _NS,
    _STYLE,
    _TITLE_Y,
    _ax,
    _colors,
    _latency_axis,
    _legend_below,
    _load_start_ns,
    _objective_line,
    _pname,
    _runs,
)


def _step_breaks(s: Summary, values: np.ndarray):
    """x (s since load start) and y arrays drawing each bucket as a flat segment,
    broken (NaN) between steps so gaps stay gaps."""
    b = s.buckets
    t0 = _load_start_ns(s)
    xs, ys = [], []
    for i in range(len(b)):
        if i and b.step[i] != b.step[i - 1]:
            xs.append(np.nan)
            ys.append(np.nan)
        a = (b.start_ns[i] - t0) / _NS
        xs += [a, a + b.length_s[i]]
        ys += [values[i], values[i]]
    return np.array(xs), np.array(ys)


def _step_marks(s: Summary) -> list[tuple[float, float, float | None]]:
    """(start, middle) in seconds since load start and the concurrency of every step with requests."""
    t0 = _load_start_ns(s)
    st = s.steps
    out = []
    for k in range(len(st)):
        if st.requests[k] == 0:
            continue
        a = (st.start_ns[k] - t0) / _NS
        c = st.concurrency[k]
        out.append((a, a + (st.end_ns[k] - st.start_ns[k]) / _NS / 2, c))
    return out


def _end_s(runs: list[Summary]) -> float:
    ends = []
    for s in runs:
        has = s.steps.requests > 0
        if has.any():  # a run that got no response at all has no span
            ends.append((int(s.steps.end_ns[has].max()) - _load_start_ns(s)) / _NS)
    return max(ends, default=1.0)


def _mark_steps(ax, runs: list[Summary], labels: list[str], colors: list[str]) -> None:
    """Step starts as grey lines and each step's concurrency above the Axes (8 pt).

    When the runs' steps coincide (same concurrency, starts within a quarter
    of a step), one row of labels serves all; otherwise every run gets its
    own row in its colour.  Labels that would run into their neighbour are
    skipped (every other one, every third...), never overprinted.
    """
    marks = [_step_marks(s) for s in runs]
    same = all(
        len(m) == len(marks[0])
        and all(
            c == c0 and abs(a - a0) <= 0.25 * max(m0 - a0, 1e-9) * 2
            for (a, _, c), (a0, m0, c0) in zip(m, marks[0])
        )
        for m in marks
    )
    rows = [marks[0]] if same else marks
    x0, x1 = ax.get_xlim()
    fig = ax.figure
    width_pt = ax.get_position().width * fig.get_figwidth() * 72
    for r, (row, color) in enumerate(zip(rows, ["0.35"] if same else colors)):
        for a, _, _ in row:
            ax.axvline(a, color=color if not same else "0.85", lw=0.8, zorder=0, alpha=1 if same else 0.35)
        last_right = -np.inf
        for _a, mid, c in row:
            if c is None or not np.isfinite(c):
                continue
            text = f"c={c:g}"
            w = (len(text) * 0.6 * 8 + 4) / width_pt * (x1 - x0)  # label width in data units, 8 pt font
            if mid - w / 2 < last_right:
                continue
            last_right = mid + w / 2
            ax.annotate(
                text,
                (mid, 1.0),
                xycoords=("data", "axes fraction"),
                xytext=(0, 2 + 11 * r),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=8,
                color=color,
            )
    if not same:
        ax.annotate(
            "concurrency per step: " + ", ".join(labels),
            (0, 1.0),
            xycoords="axes fraction",
            xytext=(0, 4 + 11 * len(rows)),
            textcoords="offset points",
            fontsize=8,
            color="0.35",
        )


def throughput_over_time(summaries: Summary | Sequence[Summary], *, steps: bool = True, ax=None):
    """Throughput of every time bucket against seconds since load start.

    Each bucket is a flat segment; gaps between steps stay gaps and an empty
    bucket shows as zero.  Step starts are marked, with their concurrency
    (every run's, when the runs' steps differ).
    """
    runs = _runs(summaries)
    labels = run_labels(runs)
    colors = _colors(len(runs))
    ax = _ax(ax)
    for s, color, label in zip(runs, colors, labels):
        x, y = _step_breaks(s, s.buckets.rps)
        ax.plot(x, y, color=color, lw=1.5, label=label)
    ax.set_xlim(0, _end_s(runs) * 1.01)
    ax.set_ylim(bottom=0)
    if steps:
        _mark_steps(ax, runs, labels, colors)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("seconds since load start")
    ax.set_ylabel(f"throughput (requests/s,\n{runs[0].buckets.bucket_s:g} s buckets)")
    ax.grid(True, alpha=0.3)
    _legend_below(ax, ncol=len(runs))
    return ax


def cpu_over_time(summaries: Summary | Sequence[Summary], *, per_cpu: bool = True, ax=None):
    """CPU busy % against seconds since load start (the throughput plot's time axis).

    Each sample covers the interval since the previous one (drawn as a step);
    a gap in sampling stays a gap.  Per-CPU lines are drawn thin when present.
    A run without CPU samples is named in the legend.
    """
    runs = _runs(summaries)
    labels = run_labels(runs)
    ax = _ax(ax)
    top = 100.0
    cores = {s.run.cpu.cores for s in runs if s.run.cpu is not None and len(s.run.cpu)}
    for s, color, label in zip(runs, _colors(len(runs)), labels):
        cpu = s.run.cpu
        if cpu is None or len(cpu) == 0:
            ax.plot([], [], " ", label=f"{label}: no CPU samples")
            continue
        t = (cpu.time_ns - _load_start_ns(s)) / _NS
        gap = np.diff(t) > 1.5 * np.median(np.diff(t)) if len(t) > 2 else np.zeros(max(len(t) - 1, 0), bool)
        cut = np.flatnonzero(gap) + 1

        def broken(v, t=t, cut=cut):
            return np.insert(t.astype(float), cut, np.nan), np.insert(v.astype(float), cut, np.nan)

        if per_cpu and cpu.per_cpu is not None:
            for j in range(cpu.per_cpu.shape[1]):
                ax.plot(*broken(cpu.per_cpu[:, j]), drawstyle="steps-pre", color=color, lw=0.6, alpha=0.5)
        name = f"{label} (mean of {cpu.per_cpu.shape[1]} CPUs)" if cpu.per_cpu is not None else label
        if len(cores) > 1:
            name += f", 100 % = {cpu.cores:g} core(s)"
        ax.plot(*broken(cpu.pct), drawstyle="steps-pre", color=color, lw=1.6, label=name)
        top = max(top, float(np.nanmax(cpu.pct)) * 1.05)
        has = s.steps.requests > 0
        end = (s.steps.end_ns[has].max() - _load_start_ns(s)) / _NS
        ax.axvspan(0, end, color=color, alpha=0.06, lw=0)
    ax.set_ylim(0, top)
    if not cores:
        ax.set_xlim(0, _end_s(runs) * 1.01)
        ax.text(0.5, 0.5, "no CPU samples", transform=ax.transAxes, ha="center", color="0.5")
    ax.set_xlabel("seconds since load start")
    ax.set_ylabel("CPU busy (%" + (f", 100 % = {cores.pop():g} core(s))" if len(cores) == 1 else ")"))
    ax.grid(True, alpha=0.3)
    _legend_below(ax, ncol=len(runs))
    return ax


def cpu_vs_throughput(summaries: Summary | Sequence[Summary], *, per_request: bool = False, ax=None):
    """CPU of each load step (or CPU microseconds per request) against its throughput, and the CPU target.

    A run without CPU samples is named in the legend; with none at all the
    Axes say "no CPU samples" and show no scale.
    """
    runs = _runs(summaries)
    labels = run_labels(runs)
    ax = _ax(ax)
    drawn = False
    missing = []
    for s, color, label in zip(runs, _colors(len(runs)), labels):
        t = s.table
        o = [i for i in t.order() if np.isfinite(t.cpu_pct[i]) and t.usable[i]]
        if not o:
            missing.append(label)
            continue
        drawn = True
        y = t.cpu_s_per_req[o] * 1e6 if per_request else t.cpu_pct[o]
        ax.plot(t.goodput_rps[o], y, "o-", color=color, label=f"{label} (steps)")
        x_cpu = s.capacity.rps_at_cpu_target
        if not per_request and x_cpu is not None:
            ax.axvline(
                x_cpu, color=color, ls=":", lw=1, label=f"{label} at the CPU target: {x_cpu:,.0f} req/s"
            )
    if not drawn:
        ax.text(0.5, 0.5, "no CPU samples", transform=ax.transAxes, ha="center", color="0.5")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title("CPU per request" if per_request else "CPU against throughput", fontsize=10, y=_TITLE_Y)
        return ax
    for label in missing:
        ax.plot([], [], " ", label=f"{label}: no CPU samples")
    cores = runs[0].table.cpu_cores
    if not per_request:
        target = runs[0].capacity.cpu_target_pct
        ax.axhline(target, color="0.3", ls="--", lw=1, label=f"CPU target {target:g} %")
        ax.set_ylabel(f"CPU busy (%, 100 % = {cores:g} core(s))")
        ax.set_ylim(0, max(ax.get_ylim()[1], target * 1.1))
    else:
        ax.set_ylabel("CPU per request of each step (us)")
        ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.set_xlabel("throughput (requests/s)")
    ax.grid(True, alpha=0.3)
    _legend_below(ax, ncol=1)
    return ax


def latency_over_time(
    summaries: Summary | Sequence[Summary],
    *,
    percentiles: Sequence[str] = ("p50", "p99"),
    log_latency: bool = False,
    objective: bool = True,
    ax=None,
):
    """Latency percentiles of every time bucket against seconds since load start, and the objective."""
    from matplotlib.lines import Line2D

    runs = _runs(summaries)
    labels = run_labels(runs)
    colors = _colors(len(runs))
    ax = _ax(ax)
    for s, color, label in zip(runs, colors, labels):
        bp = bucket_percentiles(s.buckets, s.hist, tuple(percentiles))
        for p in percentiles:
            x, y = _step_breaks(s, bp[p] * 1e3)
            ax.plot(x, y, _STYLE.get(p, "-"), color=color, lw=1.3, label=f"{label} {_pname(p)}")
    ax.set_xlim(0, _end_s(runs) * 1.01)
    _latency_axis(ax, log=log_latency)
    if objective:  # after the scale: its room above the data is set on the final axis
        _objective_line(ax, runs)
    _mark_steps(ax, runs, labels, colors)
    ax.set_xlabel("seconds since load start")
    ax.set_ylabel("latency (ms" + (", log scale)" if log_latency else ")"))
    ax.grid(True, alpha=0.3)
    handles = [Line2D([], [], color=c, lw=2) for c in colors]
    texts = list(labels)
    for p in percentiles:
        handles.append(Line2D([], [], color="0.35", ls=_STYLE.get(p, "-")))
        texts.append(f"{_pname(p)} of each time bucket")
    for ln in ax.get_lines():
        if ln.get_label().startswith("objective"):
            handles.append(Line2D([], [], color="0.3", ls="--", lw=1))
            texts.append(ln.get_label())
    _legend_below(ax, ncol=min(len(texts), 4), handles=handles, labels=texts)
    return ax


_MIB = 2**20


def memory_over_time(summaries: Summary | Sequence[Summary], *, heap: bool = True, ax=None):
    """The server's resident memory (MiB) against seconds since load start; the Go heap in use dashed.

    Each sample covers the interval before it (a step line); a missing sample
    stays a gap.  A run without memory telemetry is named in the legend.
    """
    from ..telemetry import telemetry_of

    runs = _runs(summaries)
    labels = run_labels(runs)
    ax = _ax(ax)
    drawn, top = False, 0.0
    for s, color, label in zip(runs, _colors(len(runs)), labels):
        tel = telemetry_of(s.run)
        rss = tel.get("rss_bytes") if tel is not None else None
        if rss is None or len(rss) == 0:
            ax.plot([], [], " ", label=f"{label}: no memory samples")
            continue
        for key, style, name in (("rss_bytes", "-", "RSS"), ("heap_inuse_bytes", "--", "Go heap in use")):
            ser = tel.get(key)
            if ser is None or (key != "rss_bytes" and not heap):
                continue
            t = (ser.end_ns - _load_start_ns(s)) / _NS
            v = ser.values / _MIB
            # a hole between samples (more than half an interval: not the scrapes' jitter) stays a gap
            hole = ser.start_ns[1:] - ser.end_ns[:-1]
            cut = np.flatnonzero(hole > 0.5 * np.median(ser.end_ns - ser.start_ns)) + 1
            ax.plot(np.insert(t, cut, np.nan), np.insert(v, cut, np.nan), style, drawstyle="steps-pre",
                    color=color, lw=1.6 if key == "rss_bytes" else 1.0, label=f"{label}: {name}")  # fmt: skip
            drawn = True
            top = max(top, float(np.nanmax(v)) if np.isfinite(v).any() else 0.0)
        has = s.steps.requests > 0
        ax.axvspan(0, (s.steps.end_ns[has].max() - _load_start_ns(s)) / _NS, color=color, alpha=0.06, lw=0)
    ax.set_xlim(left=0)
    # every line below the top edge (a flat line at the data's maximum hid under the frame)
    ax.set_ylim(bottom=0, top=top * 1.08 if top > 0 else None)
    if not drawn:
        _no_memory(ax)
    ax.set_xlabel("seconds since load start")
    ax.set_ylabel("server memory (MiB)")
    ax.grid(True, alpha=0.3)
    _legend_below(ax, ncol=1)  # two panels side by side: one column each
    return ax


def _no_memory(ax) -> None:
    """Empty memory axes: say so, and show no scale (it would number an empty range)."""
    ax.text(0.5, 0.5, "no memory samples", transform=ax.transAxes, ha="center", color="0.5")
    ax.set_xticks([])
    ax.set_yticks([])


def memory_vs_throughput(summaries: Summary | Sequence[Summary], *, ax=None):
    """Each load step's median resident memory (MiB; the bar reaches the step's maximum) against
    its throughput."""
    runs = _runs(summaries)
    labels = run_labels(runs)
    ax = _ax(ax)
    drawn, top, right = False, 0.0, 0.0
    for s, color, label in zip(runs, _colors(len(runs)), labels):
        m = s.memory
        if m is None:
            ax.plot([], [], " ", label=f"{label}: no memory samples")
            continue
        x = s.table.goodput_rps
        y = m.rss_bytes / _MIB
        up = np.clip(m.rss_max_bytes / _MIB - y, 0, None)
        ok = np.isfinite(x) & np.isfinite(y)
        ax.errorbar(x[ok], y[ok], yerr=[np.zeros(int(ok.sum())), up[ok]], fmt="o-", color=color, ms=4,
                    capsize=2, lw=1.4, label=f"{label}: median RSS per step (bar: max)")  # fmt: skip
        drawn = drawn or bool(ok.any())
        if ok.any():
            top = max(top, float(np.max(y[ok] + up[ok])))
            right = max(right, float(np.max(x[ok])))
    ax.set_xlim(left=0, right=right * 1.05 if right > 0 else None)
    ax.set_ylim(bottom=0, top=top * 1.08 if top > 0 else None)
    if not drawn:
        _no_memory(ax)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("throughput (requests/s, per load step)")
    ax.set_ylabel("server resident memory (MiB)")
    ax.grid(True, alpha=0.3)
    _legend_below(ax, ncol=1)  # two panels side by side: one column each
    return ax
