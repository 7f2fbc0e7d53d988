"""One call from a loaded run to every table and number, and its JSON document."""

from __future__ import annotations

import dataclasses
import datetime as _dt
from dataclasses import dataclass

import numpy as np

from ._json import number
from .aggregate import Buckets, CpuOverlap, Steps, cpu_overlap, per_bucket, steps_table
from .binning import (
    Bins,
    BucketHist,
    LatencyStats,
    bucket_hist,
    by_throughput,
    encode_latency,
    step_stats,
)
from .capacity import Capacity, capacity
from .crossing import run_dispersion
from .model import (
    PERCENTILES,
    SCHEMA_VERSION,
    HeadroomError,
    Objective,
    Run,
    extra_percentiles,
    parse_duration,
    parse_objective,
    render_html,
)
from .steps import StepTable, step_table
from .stopped import dying_step, server_stop, with_dying_step
from .telemetry import telemetry_of
from .telemetry.steps import StepMemory, step_memory


@dataclass(frozen=True, eq=False)
class Summary:
    """Everything ``headroom summary`` reports for one run.

    ``table`` is the per-step table (the unit of analysis: capacity and
    comparisons come from it); ``buckets``, ``hist`` and ``bins`` are the
    time-bucket and throughput-bin views the headroom plot draws.

    Units, here and in every field below: latencies in **seconds** (names
    ending ``_s``, and ``latency.pct["p99"]`` etc.; the CLI, tables and
    plots show ms), throughput in requests per second (``rps``), CPU in
    percent busy (``_pct``; 100 % = ``table.cpu_cores`` cores), CPU cost in
    CPU seconds per request (``cpu_s_per_req``).
    """

    run: Run
    steps: Steps
    step_latency: LatencyStats
    table: StepTable
    buckets: Buckets
    hist: BucketHist
    bins: Bins
    overlap: CpuOverlap | None
    capacity: Capacity
    warnings: tuple[str, ...]
    #: resident memory and Go GC per step (:class:`headroom.telemetry.steps.StepMemory`), None without
    memory: StepMemory | None = None
    #: the load generator as the ceiling (:class:`headroom.generator_limit.GeneratorLimit`), None when not
    generator: object | None = None
    #: every request name's steps (:class:`headroom.endpoint_view.Endpoints`), None when the requests
    #: carry no names
    endpoints: object | None = None

    @property
    def label(self) -> str:
        return self.run.label

    def __repr__(self) -> str:
        cap = self.capacity
        fig = f"{cap.capacity_rps:,.0f} req/s" if cap.capacity_rps else "no model"
        return (
            f"<Summary {self.label!r}: {len(self.table)} steps, "
            f"{int(self.table.requests.sum()):,} requests, capacity {fig}>"
        )

    def _repr_html_(self) -> str:
        return render_html("Summary", self)


def _objective(objective: Objective | str | None, run: Run) -> Objective | None:
    """The objective given (a string parsed), else a capacity search folder's own, else none."""
    if isinstance(objective, str):
        objective = parse_objective(objective) if objective.strip() else None
    if objective is None:  # a capacity search's folder: the objective it searched for
        from .search_view import search_objective

        searched = search_objective(run)
        objective = parse_objective(searched) if searched else None
    return objective


def analyze(
    run: Run,
    *,
    objective: Objective | str | None = None,
    bucket_s: float | str = 1.0,
    bins: int | None = None,
    bin_width: float | None = None,
    cpu_target_pct: float = 70.0,
    current_load_rps: float | None = None,
    target_load_rps: float | None = None,
) -> Summary:
    """Run the whole analysis of one run.

    Parameters
    ----------
    run
        A run from :func:`headroom.load_run`.
    objective
        Latency objective: ``"p99<=20ms"`` (what ``--objective`` takes) or
        ``parse_objective("p99<=20ms")``; by default a search folder's
        (``headroom ramp --find``) own objective, else none.
    bucket_s
        Width of the time buckets throughput is counted in: seconds, or a
        duration such as ``"500ms"`` (what ``--bucket`` takes).
    bins, bin_width
        Number of equal throughput bins, or their width in req/s (default:
        round-numbered bins, about ten).
    cpu_target_pct, current_load_rps, target_load_rps
        See :func:`headroom.capacity.capacity`.
    """
    objective = _objective(objective, run)
    if isinstance(bucket_s, str):
        bucket_s = parse_duration(bucket_s)
    dying = dying_step(run)
    recorded = run.n_steps - (dying is not None and dying.present)  # steps in the metadata's lists
    if dying is not None:  # the server stopped answering in a step that got no response: a step too
        run = with_dying_step(run, dying)
    run, steps, buckets, hist, overlap, warnings = _time_view(run, bucket_s)
    extra = extra_percentiles(objective)
    step_lat = step_stats(hist, buckets, len(steps), extra=extra)
    cores = run.cpu.cores if run.cpu else 1.0
    b = by_throughput(buckets, hist, bins=bins, width=bin_width, cpu_cores=cores, extra=extra)
    table = step_table(
        steps,
        step_lat,
        run.cpu,
        _with_rowless(run, recorded, len(steps)),
        rates=_rates(run, recorded, len(steps)),
        step_cpu_s=_step_cpu(run, recorded, len(steps)),
    )
    warnings += _step_warnings(steps, table, overlap)
    phi, _ = run_dispersion(hist, buckets, table, objective)
    cap = capacity(
        table,
        objective=objective,
        cpu_target_pct=cpu_target_pct,
        current_load_rps=current_load_rps,
        target_load_rps=target_load_rps,
        phi=phi,
    )
    memory = step_memory(telemetry_of(run), steps.start_ns, steps.end_ns, table.goodput_rps)
    if memory is not None and table is not None:
        warnings += _memory_warnings(memory, steps.requests)
    from .generator_limit import generator_limit

    gen = generator_limit(run, table)
    if gen is not None:  # said first among the warnings too (compare and the report show them)
        warnings.insert(0, gen.sentence())
    from .endpoint_view import endpoint_table

    eps = endpoint_table(run, objective, steps)
    return Summary(
        run, steps, step_lat, table, buckets, hist, b, overlap, cap, tuple(warnings), memory, gen, eps
    )


def _memory_warnings(m: StepMemory, requests) -> list[str]:
    miss = [int(k) + 1 for k in np.flatnonzero((np.asarray(requests) > 0) & ~np.isfinite(m.rss_bytes))]
    if not miss:
        return []
    return [f"{m.source}: no memory sample in step(s) {', '.join(map(str, miss[:10]))}: shown as missing"]


def format_name(fmt: str) -> str:
    """A reader's format as ``--format`` spells it (e.g. hey's start-time CSV is ``hey``)."""
    from .formats import ALIASES

    return ALIASES.get(fmt) or fmt


def _meta_list(run: Run, key: str, recorded: int, n: int):
    """A per-step list of headroom ramp's metadata (one entry per recorded step), padded with None for
    the step in which the server stopped answering when the run has it (``n = recorded + 1``); None
    when it does not fit the run."""
    v = run.meta.fields.get(key) if run.meta is not None else None
    if not isinstance(v, list) or len(v) != recorded:
        return None
    return v + [None] * (n - recorded)


def _rates(run: Run, recorded: int, n: int) -> tuple[dict, ...] | None:
    """Rate steps: the format's, else an open-loop ``headroom ramp`` run's planned ``rates`` (what was
    sent and whether it kept up are not in its metadata: unknown)."""
    if run.meta.step_rates is not None or run.meta.fields.get("mode") != "open-loop":
        return run.meta.step_rates
    v = _meta_list(run, "rates", recorded, n)
    st = server_stop(run.meta.fields)
    if v is None or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v[:recorded]):
        return None
    if n > recorded:
        if st is None or "rate" not in st:
            return None
        v[recorded:] = [st["rate"]]
    return tuple(
        {"intended_rps": float(x), "sent_rps": None, "dropped": None, "fell_behind": None} for x in v
    )


def _with_rowless(run: Run, recorded: int, n: int) -> np.ndarray | None:
    """The run's failed rows per step plus the failed requests ``headroom ramp`` counted that have no
    row (connection refused, reset, timeout: ``step_rowless_errors``, or for older recordings
    ``step_errors`` minus ``step_non2xx``), when the metadata gives them for every step.  None
    (unknown) when there is no status column or the metadata says ``errors: null``: one truth per
    run, so no table shows 0 where the comparison says unknown."""
    errs = run.step_errors
    fields = run.meta.fields if run.meta is not None else {}
    if "errors" in fields and fields["errors"] is None:
        return None  # the recorder could not count every failure (hey -z keeps no transport errors)
    v = fields.get("step_rowless_errors")
    if v is None:
        e, nx = fields.get("step_errors"), fields.get("step_non2xx")
        if isinstance(e, list) and isinstance(nx, list) and len(e) == len(nx) and None not in e:
            v = [a - b if isinstance(a, int) and isinstance(b, int) else None for a, b in zip(e, nx)]
    if isinstance(v, list) and len(v) == recorded:
        v = v + [0] * (n - recorded)  # the dying step's failures are in step_errors already
    if errs is None or not isinstance(v, list) or len(v) != n:
        return errs
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
        return errs
    return np.asarray(errs, np.int64) + np.asarray(v, np.int64)


def _step_cpu(run: Run, recorded: int, n: int) -> np.ndarray | None:
    """``step_cpu_s`` of headroom ramp's metadata (one value per step), when it fits the run."""
    v = _meta_list(run, "step_cpu_s", recorded, n)
    if v is None:
        return None
    if not all(x is None or (isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0) for x in v):
        return None
    return np.array([np.nan if x is None else float(x) for x in v], np.float64)


def _time_view(run: Run, bucket_s: float):
    """Steps, time buckets and their latency histograms, CPU aligned (dropped when it does not overlap).

    Returns (run, steps, buckets, hist, overlap, warnings).
    """
    if run.requests is None:
        steps, buckets, hist = run.reduced
        if abs(buckets.bucket_s - bucket_s) > 1e-12:
            raise HeadroomError(
                f"{run.meta.source}: this run was reduced with {buckets.bucket_s:g} s buckets; "
                f"read it again (reduce_run) with bucket_s={bucket_s:g}"
            )
    else:
        steps = steps_table(run)
    warnings = list(run.warnings)
    if not (steps.requests > 0).any() and run.cpu is not None:  # no response at all: no load window
        warnings.append(f"{run.cpu.source}: no request got a response, so no load window: CPU left out")
        run = dataclasses.replace(run, cpu=None)
    overlap = cpu_overlap(run.cpu, steps)
    if overlap is not None and overlap.overlap_s <= 0:
        warnings.append(
            f"{run.cpu.source}: CPU samples do not overlap the load window "
            "(clocks of different machines, or the wrong file?); the CPU overlay is left out"
        )
        run = dataclasses.replace(run, cpu=None)
        overlap = None
    if run.requests is None:
        if run.cpu is None and np.isfinite(buckets.cpu_pct).any():
            buckets = dataclasses.replace(buckets, cpu_pct=np.full(len(buckets), np.nan))
    else:
        buckets = per_bucket(run, bucket_s=bucket_s, steps=steps)
        codes = encode_latency(run.requests.latency_s)
        hist = bucket_hist(buckets, run.requests.latency_s, codes, run.requests.step_offsets)
    if len(buckets) < 2 and not _died(run, steps):
        has = steps.requests > 0
        dur = (int(steps.end_ns[has].max()) - int(steps.start_ns[has].min())) / 1e9 if has.any() else 0.0
        raise HeadroomError(
            f"{run.meta.source}: only {len(buckets)} time bucket(s) of load ({dur:.2f} s, "
            f"{int(steps.requests.sum())} requests): a throughput curve needs at least 2 "
            f"(try a smaller --bucket, e.g. --bucket {max(dur / 4, 0.001) * 1e3:.0f}ms)"
        )
    return run, steps, buckets, hist, overlap, warnings


def _died(run: Run, steps: Steps) -> bool:
    """Whether the run ended because its server stopped answering (headroom ramp's ``stopped``, or a
    last step that failed for the most part): then one time bucket, or none, is what it served, and
    the run is judged, not refused."""
    from .stopped import ERROR_JUMP

    if server_stop(run.meta.fields) is not None:
        return True
    if run.step_errors is None or not len(steps):
        return False
    err = int(np.asarray(run.step_errors)[-1])
    total = err + int(steps.requests[-1])
    return total > 0 and err >= ERROR_JUMP * total


def _step_warnings(steps: Steps, table: StepTable, overlap: CpuOverlap | None) -> list[str]:
    """Warnings about CPU coverage and about steps too short to use."""
    out = []
    if overlap is not None and overlap.overlap_s < 0.9 * overlap.load_s:
        out.append(
            f"CPU samples cover only {overlap.overlap_s:.1f} s of the {overlap.load_s:.1f} s load window"
        )
    failed = table.errors if table.errors is not None else np.zeros(len(table), np.int64)
    none_ok = [int(k) + 1 for k in steps.index if steps.requests[k] == 0 and failed[k] > 0]  # from 1
    short = [int(k) + 1 for k in steps.index if steps.requests[k] < 2 and int(k) + 1 not in none_ok]
    if short:
        out.append(f"steps {short} have fewer than 2 requests and no throughput; left out of the bins")
    if none_ok:
        out.append(f"steps {none_ok} have no successful request (all failed): no throughput or latency")
    short = [int(k) + 1 for k in table.index if table.short[k] and table.requests[k] >= 2]
    if short:
        out.append(
            f"steps {short} are too short to trust (< 0.5 s or < 50 requests): shown, "
            "left out of the model and the comparison"
        )
    return out


# --------------------------------------------------------------------------
# JSON


_num = number


def _iso(ns: int) -> str:
    s, frac = divmod(int(ns), 1_000_000_000)
    t = _dt.datetime.fromtimestamp(s, tz=_dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def _steps_doc(s: Summary) -> list[dict]:
    t, steps = s.table, s.steps
    lat = t.latency
    rate = t.error_rate
    out = []
    for k in range(len(t)):
        row = {
            "index": int(t.index[k]),
            "concurrency": None if not np.isfinite(t.concurrency[k]) else _num(t.concurrency[k]),
            "start": _iso(steps.start_ns[k]) if steps.requests[k] else None,
            "end": _iso(steps.end_ns[k]) if steps.requests[k] else None,
            "duration_s": _num(t.duration_s[k]),
            "requests": int(t.requests[k]),
            "errors": None if t.errors is None else int(t.errors[k]),
            "error_rate": None if rate is None else _num(rate[k]),
            "completed_rps": _num(t.rps[k]),
            "goodput_rps": _num(t.goodput_rps[k]),
            "mean_s": _num(lat.mean_s[k]),
        }
        for name in ("p50", "p90", "p99", "p999"):
            row[f"{name}_s"] = _num(lat.pct[name][k])
        row["max_s"] = _num(lat.max_s[k])
        row["cpu_pct"] = _num(t.cpu_pct[k])
        row["cpu_s_per_req"] = _num(t.cpu_s_per_req[k])
        row["little"] = _num(t.little[k])
        row["flags"] = t.flags(k)
        if s.memory is not None:
            m = s.memory
            row["rss_bytes"] = _num(m.rss_bytes[k])
            row["rss_max_bytes"] = _num(m.rss_max_bytes[k])
            row["heap_inuse_bytes"] = _num(m.heap_inuse_bytes[k])
            row["gc_cpu_share"] = _num(m.gc_cpu_share[k])
            row["alloc_bytes_per_req"] = _num(m.alloc_bytes_per_req[k])
        if t.intended_rps is not None:  # a rate step: what was planned, what was sent, whether it kept up
            row["kind"] = "rate"
            row["intended_rps"] = _num(t.intended_rps[k])
            row["sent_rps"] = _num(t.sent_rps[k])
            row["dropped"] = t.dropped[k]
            row["fell_behind"] = t.fell_behind[k]
        out.append(row)
    return out


def _bins_doc(s: Summary) -> list[dict]:
    bins = s.bins
    lat = bins.latency
    out = []
    for i in range(len(bins)):
        row = {
            "rps_lo": _num(bins.rps_lo[i]),
            "rps_hi": _num(bins.rps_hi[i]),
            "rps": _num(bins.rps[i]),
            "buckets": int(bins.buckets[i]),
            "requests": int(lat.requests[i]),
            "mean_s": _num(lat.mean_s[i]),
        }
        for name, _, _ in PERCENTILES:
            row[f"{name}_s"] = _num(lat.pct[name][i])
        row["max_s"] = _num(lat.max_s[i])
        row["thin"] = [f"{n}_s" for n, _, _ in PERCENTILES if lat.requests[i] and lat.thin[n][i]]
        row["cpu_pct"] = _num(bins.cpu_pct[i])
        row["cpu_s_per_req"] = _num(bins.cpu_s_per_req[i])
        out.append(row)
    return out


def _ci(v):
    return None if v is None else [_num(v[0]), _num(v[1])]


def _model_doc(m) -> dict | None:
    if m is None:
        return None
    return {
        "model": m.model,
        "lambda_rps": _num(m.lambda_rps),
        "sigma": _num(m.sigma),
        "kappa": _num(m.kappa),
        "peak_concurrency": _num(m.peak_concurrency),
        "peak_reached": m.peak_reached,
        "capacity_rps": _num(m.capacity_rps),
        "knee_concurrency": _num(m.knee_concurrency),
        "knee_rps": _num(m.knee_rps),
        "knee_note": m.knee_note,
        "r2_log": _num(m.r2_log),
        "points": m.points,
        "confidence": m.confidence,
        "ci": {k: _ci(v) for k, v in m.ci.items()},
    }


def _crossing_doc(c) -> dict | None:
    if c is None:
        return None
    doc = {
        "rps": _num(c.rps),
        "status": c.status,
        "between_steps": None if c.steps is None else list(c.steps),
    }
    if c.interval is not None:  # the objective's crossing: its interval (None: open at that end)
        doc.update(low=_num(c.low), high=_num(c.high), load=_num(c.load), load_low=_num(c.load_low))
        doc.update(load_high=_num(c.load_high), interval=c.interval)
    return doc


def capacity_doc(cap: Capacity) -> dict:
    """The capacity figures as a JSON-ready dict (the summary's ``capacity`` key)."""
    return {
        "capacity_rps": _num(cap.capacity_rps),
        "knee_rps": _num(cap.knee_rps),
        "plateau_rps": _num(cap.plateau_rps),
        "plateau_steps": list(cap.plateau_steps),
        "peak_step_rps": _num(cap.peak_step_rps),
        "peak_step": cap.peak_step,
        "model": _model_doc(cap.model),
        "objective": None if cap.objective is None else str(cap.objective),
        "at_objective": _crossing_doc(cap.at_objective),
        "cpu_target_pct": cap.cpu_target_pct,
        "at_cpu_target": _crossing_doc(cap.at_cpu_target),
        "cpu_max_pct": _num(cap.cpu_max_pct),
        "cpu_at_knee_pct": _num(cap.cpu_at_knee),
        "cpu_at_objective_pct": _num(cap.cpu_at_objective),
        "cpu_s_per_req": _num(cap.cpu_s_per_req),
        "max_useful_rps": _num(cap.max_useful_rps),
        "current_load_rps": _num(cap.current_load_rps),
        "headroom_pct": _num(cap.headroom_pct),
        "target_load_rps": _num(cap.target_load_rps),
        "instances": cap.instances,
    }


def to_json(s: Summary) -> dict:
    """The versioned JSON document of a summary (deterministic for the same input)."""
    run, steps = s.run, s.steps
    has = steps.requests > 0
    duration = (int(steps.end_ns[has].max()) - int(steps.start_ns[has].min())) / 1e9 if has.any() else 0.0
    kept = int(s.table.requests.sum())
    errors = None if s.table.errors is None else int(s.table.errors.sum())
    return {
        "schema": SCHEMA_VERSION,
        "kind": "summary",
        "label": run.label,
        "source": run.meta.source,
        "format": format_name(run.format),
        "requests": {
            "total": None if errors is None else kept + errors,
            "successful": kept,
            "errors": errors,
        },
        "duration_s": _num(duration),
        "bucket_s": s.buckets.bucket_s,
        "steps": _steps_doc(s),
        "bins": _bins_doc(s),
        "cpu": None
        if s.overlap is None
        else {
            "samples": s.overlap.samples,
            "overlap_s": _num(s.overlap.overlap_s),
            "load_s": _num(s.overlap.load_s),
            "per_cpu": None if run.cpu.per_cpu is None else int(run.cpu.per_cpu.shape[1]),
            "cores": run.cpu.cores,
            # where a scraped counter came from (a file's CPU is the run's own)
            **({"source": run.cpu.source} if "prometheus" in run.cpu.source else {}),
        },
        "memory": None if s.memory is None else {"source": s.memory.source, "has_gc": s.memory.has_gc},
        "capacity": {
            **capacity_doc(s.capacity),
            # added within the schema: who set the ceiling ("generator_limited": every figure is a
            # lower bound of the load generator's; "measured" otherwise)
            "status": "generator_limited" if s.generator is not None else "measured",
            "generator_limit": None if s.generator is None else s.generator.to_dict(),
        },
        "warnings": list(s.warnings),
        # added within the schema: where the server stopped answering (absent when it did not)
        **_stopped_doc(s),
        # added within the schema: CPU profiles per step (absent when the run has none)
        **_profiles_doc(s),
        # added within the schema: every request name's steps (absent when the requests carry no names)
        **_endpoints_doc(s),
    }


def _endpoints_doc(s: Summary) -> dict:
    from .endpoint_view import endpoints_doc

    return {} if s.endpoints is None else {"endpoints": endpoints_doc(s.endpoints)}


def _stopped_doc(s: Summary) -> dict:
    from .stopped import run_stop

    st = run_stop(s, s.label)
    return {} if st is None else {"stopped": st.to_dict()}


def _profiles_doc(s: Summary) -> dict:
    from .profiles.compare import summary_doc

    return summary_doc(s)
