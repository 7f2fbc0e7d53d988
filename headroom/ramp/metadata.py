"""metadata.yml of a ``headroom ramp`` run: what was run, per-step results, CPU summaries."""

from __future__ import annotations

import os
import time

from .._version import __version__

HOST_FILE = "hostCpuStats.csv"
#: warn when other processes used more than this share of the machine during the load
FOREIGN_WARN_PCT = 10.0

_prefix_cache: dict[int, str] = {}


def rfc3339_ns(ns: int) -> str:
    """UTC nanoseconds as RFC 3339 with 9 fractional digits: 2026-11-23T10:00:00.123456789Z."""
    s, f = divmod(ns, 1_000_000_000)
    pre = _prefix_cache.get(s)
    if pre is None:
        if len(_prefix_cache) > 100_000:
            _prefix_cache.clear()
        pre = _prefix_cache[s] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s))
    return f"{pre}.{f:09d}Z"


def levels_words(low: int, high: int, step: int | None, levels: list[int]) -> str:
    """``1..40 step 3``, or the list of a stated plan."""
    return f"{low}..{high} step {step}" if step is not None else ",".join(str(x) for x in levels)


def _description(rec) -> str:
    what = (
        f"open loop at {levels_words(rec.low, rec.high, rec.step, rec.levels)} req/s"
        if rec.open_loop
        else f"closed loop at concurrency {levels_words(rec.low, rec.high, rec.step, rec.levels)}"
    )
    each = (
        f", {rec.requests_per_step} requests per step"
        if rec.requests_per_step
        else f", {rec.step_duration:g} s steps"
    )
    return f"headroom ramp: {rec.engine.name} {what}{each}, {rec.url}"


def _levels(rec) -> dict:
    levels_done = [s.rate if rec.open_loop else s.concurrency for s in rec.steps]
    if rec.open_loop:
        m = {
            "lower_rate": rec.low,
            "upper_rate": int(max(levels_done)) if levels_done else rec.high,
            "rate_step": rec.step,
            "rates": [int(x) for x in levels_done],
            "max_workers": rec.max_workers,
        }
    else:
        m = {
            "lower_concurrency": rec.low,
            "upper_concurrency": max(levels_done) if levels_done else rec.high,
            "concurrency_step": rec.step,
            "concurrency": levels_done,
        }
    if levels_done != rec.levels:
        m["planned_" + ("rates" if rec.open_loop else "concurrency")] = rec.levels
    return m


def _cpu(rec) -> dict:
    return {
        "cpu_source": (
            f"CPU time (user+system, psutil) of PID(s) {', '.join(map(str, rec.pids))} and their "
            "children, percent of all the machine's cores"
            if rec.pids
            else "whole machine, psutil.cpu_percent per CPU (one percentage column per CPU)"
        ),
        "cpu_pids": rec.pids or None,
        "cpu_interval_s": rec.cpu_interval,
        "cpu_cores": rec.sampler.n_cpus if rec.sampler is not None else (os.cpu_count() or 1),
        "generator_cpu": generator_summary(rec),
        "foreign_cpu": foreign_summary(rec),
    }


def build(rec) -> dict:
    """metadata.yml of the recorder ``rec`` as it stands (written after every step)."""
    m: dict = {
        **_what(rec),
        **_levels(rec),
        **_per_step(rec),
        **_errors(rec.steps),
        **_time(rec),
        **_cpu(rec),
        "host": rec.host,
        "headroom_affinity": rec.affinity,
        "warnings": rec.warnings or None,
    }
    m.update(rec.extra_metadata)
    optional = (
        "requests_per_step",
        "step_requested",
        "errors_note",
        "step_error_kinds",
        "stopped",
        "warnings",
        "cpu_pids",
        "max_workers",
    )
    return {k: v for k, v in m.items() if v is not None or k not in optional}


def _what(rec) -> dict:
    """What was driven and with what: the run's identity, the URL, the engine."""
    return {
        "label": rec.label,
        "sha": rec.release or rec.label,
        "description": rec.args.description or _description(rec),
        "tool": f"headroom ramp {__version__}",
        "url": rec.url,
        "engine": rec.engine.name,
        "engine_version": rec.engine_version,
        "engine_path": rec.engine.path,
        "engine_args": list(rec.args.engine_arg),
        "mode": "open-loop" if rec.open_loop else "closed-loop",
    }


def _per_step(rec) -> dict:
    """The steps as recorded: their length, counts, throughput, times and the server's CPU."""
    steps = rec.steps
    m = {
        "step_duration_s": None if rec.requests_per_step else rec.step_duration,
        "requests_per_step": rec.requests_per_step,
        "request_timeout_s": rec.request_timeout,
        "steps": len(steps),
        "step_requests": [s.requests for s in steps],
        "step_requested": [s.requested for s in steps] if rec.requests_per_step else None,
        "step_errors": [s.errors for s in steps],
        "step_non2xx": [s.non2xx for s in steps],
        "step_throughput_rps": [round(s.throughput, 1) for s in steps],
        "step_start_times": [rfc3339_ns(s.launch_ns) for s in steps],
        "step_end_times": [rfc3339_ns(s.end_ns) for s in steps],
        "step_cpu_s": [None if s.cpu_s is None else round(s.cpu_s, 4) for s in steps],
    }
    if any(
        s.sched is not None for s in steps
    ):  # the server's threads (Linux schedstat): on a CPU, and waiting
        m["step_sched_run_s"] = [None if s.sched is None else round(s.sched[0], 4) for s in steps]
        m["step_sched_wait_s"] = [None if s.sched is None else round(s.sched[1], 4) for s in steps]
    return m


def _errors(steps) -> dict:
    """The requests and errors in all, and what the error counts mean for this generator."""
    unknown = any(s.errors is None for s in steps)
    return {
        "requests": sum(s.requests for s in steps),
        "step_rowless_errors": [s.rowless_errors for s in steps],
        "step_error_kinds": [s.error_kinds for s in steps] if any(s.error_kinds for s in steps) else None,
        "errors": None if unknown else sum(s.errors for s in steps),
        "errors_note": (
            "the generator's output told no count of its transport errors (connection refused, "
            "reset, timeout), which have no row: they are unknown (null); non-2xx responses are "
            "rows (step_non2xx)"
        )
        if unknown
        else "step_errors = non-2xx rows (step_non2xx) + failed requests without a row "
        "(step_rowless_errors: connection refused, reset, timeout, counted by the generator)",
    }


def _time(rec) -> dict:
    """How the rows' times were made, the run's span, and whether and why it ended early."""
    return {
        "row_order": "as the generator wrote them (hey: completion order)",
        "time_axis": "step launch time (time.time_ns() just before the generator starts) plus "
        "the generator's relative start offset"
        if rec.engine.name != "vegeta"
        else "vegeta's absolute request timestamps",
        "start_time": rfc3339_ns(rec.start_ns) if rec.start_ns else None,
        "end_time": rfc3339_ns(rec.end_ns) if rec.end_ns else None,
        "interrupted": rec.interrupted,
        "stopped_early": rec.stopped_early,
        "stopped": rec.stopped,
    }


def generator_summary(rec) -> dict:
    """``generator_cpu``: the load generator's own CPU per step."""
    pct = [round(s.generator_cpu_pct, 1) for s in rec.steps]
    return {
        "unit": "percent of one core (getrusage of the generator process per step)",
        "cores_available": len(rec.affinity),
        "affinity": rec.affinity,
        "per_step_percent": pct,
        "mean_percent": round(sum(pct) / len(pct), 1) if pct else None,
        "max_percent": max(pct) if pct else None,
        "saturated": bool(rec._saturation()),
        "samples_file": "generatorCpuStats.csv",
    }


def foreign_summary(rec) -> dict | None:
    """``foreign_cpu`` in metadata.yml: the machine's CPU used by other processes, per step."""
    from .cpu import overlap_mean

    if rec.sampler is None:
        return None
    rows = rec.sampler.host.rows
    steps = rec.steps
    per_step = [overlap_mean(rows, s.launch_ns, s.end_ns, "foreign_pct") for s in steps]
    steal = [overlap_mean(rows, s.launch_ns, s.end_ns, "steal_pct") for s in steps]
    # over the steps only: between them (pauses, or the other side's steps of an interleaved
    # A/B recording, whose load generator is not ours) the machine's load is not this run's
    mean = _step_weighted(per_step, steps)
    inside = [
        r.foreign_pct for r in rows if any(r.end_ns > s.launch_ns and r.start_ns < s.end_ns for s in steps)
    ]
    no_steal = any(v is None for v in steal) or not steps
    smean = None if no_steal else _step_weighted(steal, steps)

    def r1(v):
        return None if v is None else round(v, 1)

    out = {
        "unit": "percent of the whole machine (all cores = 100)",
        "per_step_percent": [r1(v) for v in per_step],
        "mean_percent": r1(mean),
        "max_percent": r1(max(inside)) if inside else None,
        "steal_per_step_percent": None if no_steal else [r1(v) for v in steal],
        "steal_mean_percent": r1(smean),
        "samples_file": HOST_FILE,
        "method": "busy CPU time of all CPUs (psutil.cpu_times, steal excluded) minus the CPU time of "
        "the sampled server processes"
        + (" (and the other side's server)" if rec.sampler.host.others is not None else "")
        + ", the load generator and headroom itself, per sample; below-zero samples written as 0",
    }
    if not rec.pids:
        out["note"] = "no --cpu-pid: the server is not separated, its CPU is inside the foreign share"
    return out


def _step_weighted(values: list, steps) -> float | None:
    """Mean of per-step values weighted by each step's length (steps without a value left out)."""
    num = den = 0.0
    for v, s in zip(values, steps):
        if v is not None:
            w = max(0, s.end_ns - s.launch_ns)
            num, den = num + w * v, den + w
    return num / den if den > 0 else None


def foreign_warning(rec) -> str | None:
    f = foreign_summary(rec)
    if not f or not rec.pids or f["mean_percent"] is None or f["mean_percent"] <= FOREIGN_WARN_PCT:
        return None
    return (
        f"other processes used {f['mean_percent']:.0f}% of the machine (max {f['max_percent']:.0f}%) "
        f"during the load: the run was made under foreign load ({HOST_FILE}, foreign_cpu in metadata.yml)"
    )


def write(rec) -> None:
    """Write metadata.yml atomically (a temporary file, then a rename)."""
    import yaml

    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(rec, data):
            return True

    text = "---\n" + yaml.dump(
        build(rec),
        Dumper=_NoAliases,
        sort_keys=False,
        default_flow_style=None,
        allow_unicode=False,
        width=100,
    )
    tmp = rec.out / ".metadata.yml.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, rec.out / "metadata.yml")
