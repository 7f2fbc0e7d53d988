"""Request tables of the format readers -> in-memory requests (steps, failed requests, wall-clock times).

Used by :func:`headroom.load_run` and, for the formats that are parsed
whole, by the reduction (:mod:`headroom.reading`).  Also the format
detection of a run's files and ``--steps``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .formats import FORMATS, detect, head_bytes, read_table, resolve, summary_only
from .formats._checks import (
    MIN_TIME_NS,
    all_failed,
    check_base,
    check_plausible,
    failed_codes,
    failed_warning,
    mtime_base,
)
from .formats._common import Table, check_values
from .formats._scan import BOM, bare_cr, short
from .formats.hey import anchor_warning
from .model import HeadroomError, Requests
from .runfolder import PERF_NAMES, RunFiles, step_concurrency_from_names

#: names of the streamed CSV family
CSV_FAMILY = ("throughputramp", "hey")


def detect_format(perf: Path, fmt: str | None) -> str:
    """The format of a request file: ``fmt`` (checked against the content) or detected."""
    head = head_bytes(perf)
    if bare_cr(head.lstrip(BOM)):
        raise HeadroomError(
            f"{perf}:1: lines end in a bare CR (old Mac line ends), so its rows run together: "
            f"convert it with `tr '\\r' '\\n' < FILE > FILE.new` and read that"
        )
    if fmt:
        return resolve(fmt, perf, head)
    if any(perf.name.endswith(n) for n in PERF_NAMES):
        # a throughputramp run file: its own reader names what is wrong with it
        data = head.lstrip(BOM)
        why = summary_only(data) if data.strip() else None
        if why:
            raise HeadroomError(f"{perf}: {why}")
        for f in FORMATS.values():
            if data.strip() and f.guess_can_open(data):
                return f.name
        return "throughputramp"
    return detect(perf, head)


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``--concurrency``: a stated plan, ``LOW:HIGH:STEP`` (``1:40:3`` -> 1, 4, ..., 40), ``LOW:HIGH``
    (step 1) or a list ``1,2,4,8``: the concurrency of every step, in step order."""
    t = text.strip()
    why = f"bad --concurrency {short(text, 40)}: expected LOW:HIGH:STEP (1:40:3) or a list (1,2,4,8)"
    try:
        if ":" in t:
            parts = [int(x) for x in t.split(":")]
            if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] < 1) or parts[1] < parts[0]:
                raise ValueError
            levels = tuple(range(parts[0], parts[1] + 1, parts[2] if len(parts) == 3 else 1))
        else:
            levels = tuple(int(x) for x in t.split(","))
    except ValueError:
        raise HeadroomError(why) from None
    if not levels or min(levels) < 1 or len(levels) > 100_000:
        raise HeadroomError(why + " of whole numbers >= 1")
    return levels


def stated_concurrency(source: str, plan: tuple[int, ...], n_steps: int, found, rates, warnings: list):
    """The concurrency of every step from ``--concurrency``, checked against the steps found."""
    if len(plan) != n_steps:
        raise HeadroomError(
            f"{source}: --concurrency states {len(plan)} levels, but the run has {n_steps} steps "
            "(one level per step, in step order)"
        )
    if rates is not None:
        raise HeadroomError(
            f"{source}: --concurrency is for closed-loop ramps; this run's steps are request rates (open loop)"
        )
    if found is not None and any(c is not None and c != p for c, p in zip(found, plan)):
        warnings.append(
            f"{source}: --concurrency {','.join(map(str, plan))} replaces the file's own "
            f"{','.join('?' if c is None else str(c) for c in found)}"
        )
    return tuple(plan)


def steps_option(t: Table, steps: str) -> None:
    """``--steps``: cut the run into steps of a duration (``10s``) or at times (``0,10,20``: s since the first start)."""
    if not len(t.start_ns):
        return
    from .formats._plans import step_of_time, steps_cuts

    rel = (t.start_ns - int(t.start_ns.min())) / 1e9
    cuts, width = steps_cuts(steps)
    step = step_of_time(rel, cuts, width)
    if width is not None and step.max() > 100_000:
        raise HeadroomError(f"--steps {short(steps, 60)}: more than 100,000 steps over this run")
    uniq, inv = np.unique(step, return_inverse=True)
    t.step = inv.astype(np.int64)
    t.step_names = [f"step {k + 1}" for k in range(len(uniq))]
    t.step_concurrency = None
    t.step_rates = None
    t.steps_source = f"--steps {steps}"


def _check_table(t: Table, path: Path) -> None:
    """Values, relative offsets and plausibility per step, naming the line."""
    n = len(t.start_ns)
    if n == 0:
        raise HeadroomError(f"{path}: no requests (the file has a header but no data rows)")
    check_values(path, t)

    def line_of(rows):
        return lambda i: None if t.line is None else int(t.line[rows[i]])

    shift = MIN_TIME_NS if t.relative else 0
    step0 = t.step if t.step is not None else np.zeros(n, np.int64)
    for k in np.unique(step0):
        rows = np.flatnonzero(step0 == k)
        check_plausible(path, t.start_ns[rows] + shift, t.latency_s[rows], line_of(rows))


def _failed(t: Table):
    if t.ok is not None:
        return ~t.ok
    if t.status is not None:
        return (t.status < 200) | (t.status > 299)
    return None


def table_to_requests(t: Table, path: Path, base_time_ns: int | None, steps: str | None):
    """(Requests, step errors, error codes, warnings, step concurrency, step rates) from a reader's table."""
    warnings = list(t.warnings)
    _check_table(t, path)
    if steps:
        steps_option(t, steps)
    n = len(t.start_ns)
    step = t.step if t.step is not None else np.zeros(n, np.int64)
    n_steps = max(len(t.step_names), int(step.max()) + 1 if n else 1)
    order = np.argsort(step, kind="stable")
    start, lat = t.start_ns[order], t.latency_s[order]
    counts = np.bincount(step, minlength=n_steps)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    step_errors, error_codes = None, {}
    failed = _failed(t)
    if failed is not None:
        failed = failed[order]
        cum = np.concatenate([[0], np.cumsum(failed.astype(np.int64))])
        step_errors = (cum[offsets[1:]] - cum[offsets[:-1]]).astype(np.int64)
        errors = int(failed.sum())
        if errors:
            codes = t.status[order][failed] if t.status is not None else np.full(errors, -1, np.int64)
            error_codes = failed_codes(codes)
            if errors == n:
                raise all_failed(path, n, error_codes)
            warnings.append(failed_warning(path, errors, n, error_codes))
            keep = ~failed
            kept = np.where(counts == 0, 0, np.add.reduceat(keep.astype(np.int64), offsets[:-1]))
            offsets = np.concatenate([[0], np.cumsum(kept)]).astype(np.int64)
            start, lat = start[keep], lat[keep]
    if t.relative:
        # anchored on every request (failed ones too), as the generator's own clock ran
        start = _anchor_all(path, t, start, base_time_ns, warnings)
    if len(t.step_names) <= 1 and not steps:
        warnings.append(f"{path}: one step ({t.steps_source}); --steps DURATION or --steps T1,T2,... cuts it")
    conc = tuple(t.step_concurrency) if t.step_concurrency is not None else None
    rates = tuple(t.step_rates) if t.step_rates is not None else None
    return Requests(start, lat, offsets), step_errors, error_codes, warnings, conc, rates


def _anchor_all(path, t: Table, start, base_time_ns, warnings):
    """Anchor the kept rows; the run's length is that of all its rows (failed ones too)."""
    if base_time_ns is None:
        end_rel = int(np.max(t.start_ns + np.rint(t.latency_s * 1e9).astype(np.int64)))
        base_time_ns = mtime_base(path, end_rel)
        warnings.append(anchor_warning(path, "relative start times"))
    check_base(path, base_time_ns, warnings)
    return start + np.int64(base_time_ns)


def read_step_files(files: RunFiles, fmt_option: str | None) -> tuple[Table, str]:
    """One request table from a folder of one file per step: relative times placed one after another."""
    tables, fmt = [], None
    for f in files.steps:
        name = detect_format(f, fmt_option)
        if name in CSV_FAMILY:
            raise csv_family_folder(f)
        if fmt is not None and name != fmt:
            raise HeadroomError(f"{f}: {name}, but {files.steps[0].name} is {fmt}: one format per folder")
        fmt = name
        tables.append(read_table(f, name))
    return _join_tables(files, tables, fmt), fmt


#: a rate in a file name: ``oha-q250``, ``rate-1000``, ``rps_50`` (oha -q, vegeta -rate)
_RATE_NAME = re.compile(r"(?:^|[^a-z])(?:qps|q|rate|rps)[-_]?(\d+(?:\.\d+)?)(?![\d.]*[a-z])")


def file_rates(files: RunFiles, first, last, n, warnings: list) -> list[dict] | None:
    """Rate steps of a folder of one file per rate (``oha -q R``): every file name states its rate.

    ``first``, ``last``, ``n``: every file's first and last start and its rows
    (failed ones too), as :func:`headroom.levels.steps_from_groups` takes
    them from the rows: steps in order of first request.
    """
    from .levels import StepInference, group_steps, reader_steps

    want = []
    for f in files.steps:
        m = _RATE_NAME.search(f.name.split(".")[0].lower())
        if not m:
            return None
        want.append(float(m[1]))
    first, last, n = (np.asarray(x, np.int64) for x in (first, last, n))
    present = np.flatnonzero(n > 0)
    order = present[np.argsort(first[present], kind="stable")]
    source = "one file per rate"
    inf = group_steps(
        first[order], last[order], n[order], intended_rps=[want[c] for c in order], source=source
    )
    inf = StepInference("rate", inf.steps, np.arange(len(order)), 0, source, inf.notes)
    warnings += [f"{files.perf.parent}: {x}" for x in inf.notes]
    rs = reader_steps(inf, names=[f.name for f in files.steps])
    return None if rs is None else rs.rates


def relative_files_warning(files: RunFiles) -> str:
    """The warning of a folder of files with relative times placed one after another."""
    return (
        f"{files.perf.parent}: {len(files.steps)} files with relative times are read as one ramp, each step "
        "starting when the previous one ended: the spacing between them is unknown"
    )


def csv_family_folder(path: Path) -> HeadroomError:
    """hey or throughputramp files given as one file per step."""
    return HeadroomError(
        f"{path}: a folder of one file per step is read for vegeta, k6, JMeter, Gatling and oha files; "
        "append hey runs to one file instead (each with its header)"
    )


def _join_tables(files: RunFiles, tables: list[Table], fmt: str) -> Table:
    starts, lats, status, ok, warnings = [], [], [], [], []
    shift = 0
    for t in tables:
        st = t.start_ns
        if t.relative:
            st = st + np.int64(shift)
            shift = int(np.max(st + np.rint(t.latency_s * 1e9).astype(np.int64))) if len(st) else shift
        starts.append(st)
        lats.append(t.latency_s)
        status.append(t.status if t.status is not None else np.full(len(st), -1, np.int64))
        if t.ok is not None:
            ok.append(t.ok)
        elif t.status is not None:
            ok.append((t.status >= 200) & (t.status <= 299))
        else:
            ok = None
        warnings += t.warnings
    relative = tables[0].relative
    if relative and len(tables) > 1:
        warnings.append(relative_files_warning(files))
    conc = step_concurrency_from_names(files.steps)
    step = np.repeat(np.arange(len(tables)), [len(t.start_ns) for t in tables])
    start = np.concatenate(starts)
    spans = [(int(x.min()), int(x.max())) if len(x) else (0, 0) for x in starts]
    rates = None if conc else file_rates(files, *zip(*spans), [len(x) for x in starts], warnings)
    return Table(
        fmt=fmt,
        fidelity=tables[0].fidelity,
        start_ns=start,
        latency_s=np.concatenate(lats),
        status=np.concatenate(status) if any(t.status is not None for t in tables) else None,
        ok=np.concatenate(ok) if ok is not None else None,
        step=step,
        step_names=[f.name for f in files.steps],
        step_concurrency=conc,
        step_rates=rates,
        steps_source=f"one file per step ({len(tables)} files)"
        + ("; concurrency from the file names" if conc else "")
        + ("; intended rates from the file names" if rates else ""),
        relative=relative,
        line=None,
        warnings=warnings,
    )
