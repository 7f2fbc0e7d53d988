"""Reading and writing runs: the public entry points, and the names other modules import from here.

The work lives in its own modules (see docs/formats.md): locating a run's
files, metadata and CPU in :mod:`headroom.runfolder`; one reader per input
format in :mod:`headroom.formats`; the streamed, mergeable reduction in
:mod:`headroom.reduce` and :mod:`headroom.reading`.  :func:`load_run` reads
a run whole into memory (every request, for notebooks and tests);
:func:`reduce_run` reads a run of any size into histograms.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import numpy as np

from .formats._checks import (  # noqa: F401 - public limits, documented here before
    CPU_TOLERANCE,
    MAX_OFFSET_S,
    MAX_TIME_NS,
    MIN_TIME_NS,
    SPAN_TOLERANCE_IQR,
    SPAN_TOLERANCE_S,
    add_codes,
)
from .formats._scan import Buffer as _Buffer  # noqa: F401 - kept for old imports
from .formats._scan import Progress as _Progress  # noqa: F401
from .formats._scan import short as _short
from .formats.hey import read_requests
from .model import HeadroomError, Requests, Run, RunMeta
from .reading import ReadSettings, TableSource, align, reduce_run
from .reduce import LatencyHist, ReducedRun
from .runfolder import (
    MAX_METADATA_BYTES,
    MAX_METADATA_DEPTH,
    RunFiles,
    cpu_for,
    locate_run,
    read_cpu,
    read_metadata,
    run_label,
)
from .tables import CSV_FAMILY, detect_format, parse_concurrency, stated_concurrency

__all__ = [
    "CPU_TOLERANCE",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "LatencyHist",
    "ReducedRun",
    "RunFiles",
    "load_run",
    "locate_run",
    "read_cpu",
    "read_metadata",
    "read_requests",
    "reduce_run",
    "run_label",
    "short_text",
    "write_json",
]


def short_text(s: str) -> str:
    """At most 60 printable ASCII characters of a value from the user."""
    return _short(str(s), 60)


def load_run(
    path: str | os.PathLike,
    *,
    label: str | None = None,
    cpu_cores: float | None = None,
    base_time_ns: int | None = None,
    skip_bad_rows: bool = False,
    format: str | None = None,
    steps: str | None = None,
    concurrency: str | None = None,
) -> Run:
    """Load one run whole: every request, CPU samples (if present) and metadata.

    Parameters
    ----------
    path
        A run folder, a ``perfResults.csv[.gz]`` file (also ``old_``), a file
        prefix such as ``runs/x/old_``, a request file of any format, or
        several request files (a list, or a folder of them) read as
        :func:`reduce_run` reads them: files whose times overlap are load
        generators of one ramp (steps matched on the wall clock, concurrency
        summed, requests concatenated), files that follow each other are steps.
    label
        Overrides the label taken from metadata (``sha``) or the folder name.
    cpu_cores
        How many cores 100 % in a single-column CPU file stands for.  Default:
        metadata ``cpu_cores`` if present, else 1 (percent of one core).  A
        per-CPU file always counts one core per column.
    base_time_ns
        For files with relative times (hey offsets, oha): the wall-clock
        start (UTC ns).
    skip_bad_rows
        Drop unparsable request rows instead of failing, counting them in a
        warning that names the first one (throughputramp and hey files).
    format
        The input format (see :data:`headroom.formats.FORMATS`, or a tool name
        such as ``k6``); default: detected from the file's content.
    steps
        For files without steps of their own: cut the run into steps of a
        duration (``"10s"``) or at times in seconds since the first start
        (``"0,10,20"``).
    concurrency
        A stated plan, one level per step: ``"1:40:3"`` (1, 4, ..., 40) or ``"1,2,4,8"``.

    Returns
    -------
    Run
        With ``requests`` set (:func:`reduce_run` gives the reduced form).

    Raises
    ------
    HeadroomError
        With a one-line message naming the file (and line) on bad input.
    """
    plan_c = parse_concurrency(concurrency) if concurrency is not None else None
    files = locate_run(path)
    fields = read_metadata(files.meta) if files.meta else {}
    settings = ReadSettings(
        skip_bad_rows=skip_bad_rows, base_time_ns=base_time_ns, format=format, steps=steps, concurrency=plan_c
    )
    if files.steps and len(files.steps) > 1:
        loaded = _load_several(files, settings)
    else:
        loaded = TableSource(files, settings, detect_format(files.perf, format)).load()
    requests, step_errors, error_codes, kind, warnings, conc, rates = loaded
    errors = 0 if step_errors is None else int(step_errors.sum())
    cpu = cpu_for(files, fields, cpu_cores, warnings)
    meta = RunMeta(label=label or run_label(fields, files.name), source=str(files.perf), fields=fields,
                   step_concurrency=conc, step_rates=rates)  # fmt: skip
    return Run(requests=requests, cpu=cpu, meta=meta, errors=errors, error_codes=error_codes,
               warnings=tuple(warnings), format=kind, step_errors=step_errors)  # fmt: skip


# --------------------------------------------------------------------------
# several request files of one run: the decisions of reading.plan, on whole requests


def _load_several(files: RunFiles, s: ReadSettings) -> tuple:
    """Several request files as one run's requests, in :meth:`TableSource.load`'s shape.

    As :func:`reduce_run` decides (:func:`headroom.reading.plan`): one format per run;
    files with relative times (oha, hey offsets) are one file per step, placed one after
    another; other files whose times overlap are load generators of one ramp
    (:func:`headroom.reading.align`); throughputramp and hey files that follow each other
    are steps in time order; other formats that follow each other are one file per step.
    A stated plan (``concurrency``) is the run's: applied once, to the steps of all files.
    """
    from .reading import overlapping, relative_offsets

    fmt = _one_format(files, s.format)
    each = dataclasses.replace(s, concurrency=None)
    relative = fmt in ("oha-csv", "ab") or (
        fmt in CSV_FAMILY and any(relative_offsets(p) for p in files.steps)
    )
    loaded = None
    if not relative:
        sources = [TableSource(files, each, fmt, p) for p in files.steps]
        spans = [src.spans() for src in sources]
        if overlapping(spans):
            loaded = _generators(sources, spans)
        elif fmt in CSV_FAMILY:
            loaded = _in_sequence(sources, spans)
    if loaded is None:
        loaded = TableSource(files, each, "one file per step").load()
    if s.concurrency is None:
        return loaded
    req, step_errors, codes, kind, warnings, conc, rates = loaded
    conc = stated_concurrency(str(files.perf), s.concurrency, req.n_steps, conc, rates, warnings)
    return req, step_errors, codes, kind, warnings, conc, rates


def _one_format(files: RunFiles, option: str | None) -> str:
    """The format of every request file (one per run), or the one-line error naming the odd file."""
    fmts = [detect_format(p, option) for p in files.steps]
    k = next((i for i, f in enumerate(fmts) if f != fmts[0]), None)
    if k is not None:
        raise HeadroomError(
            f"{files.steps[k]}: {fmts[k]}, but {files.steps[0].name} is {fmts[0]}: one format per run"
        )
    return fmts[0]


def _step_rows(req: Requests, k: int) -> slice:
    return slice(int(req.step_offsets[k]), int(req.step_offsets[k + 1]))


def _generators(sources: list[TableSource], spans: list) -> tuple:
    """Load generators of one ramp: run step ``j`` holds every file's step that :func:`align` matched
    to it (in file order); failed requests, concurrency and rates added as :func:`reduce_run` adds them."""
    from .reading import summed_rates

    maps, frames = align(spans)
    m = len(frames)
    loaded = [src.load() for src in sources]
    first = loaded[0]
    parts: list[list[tuple[Requests, int]]] = [[] for _ in range(m)]
    step_errors = None if first[1] is None else np.zeros(m, np.int64)
    conc: list | None = [0] * m
    codes: dict[int, int] = {}
    warnings: list[str] = []
    for (req, errs, file_codes, _, file_warnings, file_conc, _), mp in zip(loaded, maps):
        warnings += file_warnings
        add_codes(codes, file_codes)
        for k, j in sorted(mp.items()):
            parts[j].append((req, k))
            if step_errors is not None and errs is not None:
                step_errors[j] += errs[k]
            c = file_conc[k] if file_conc is not None else None
            conc = None if conc is None or c is None else conc
            if conc is not None:
                conc[j] += c
    requests = _concatenated(parts)
    warnings.append(
        f"{sources[0].path}: {len(sources)} files whose times overlap are read as load generators of one "
        f"ramp ({m} steps aligned on the wall clock, requests concatenated)"
    )
    rates = summed_rates(spans, maps, m)
    return requests, step_errors, codes, first[3], warnings, None if conc is None else tuple(conc), rates


def _concatenated(parts: list[list[tuple[Requests, int]]]) -> Requests:
    """One :class:`Requests` whose step ``j`` is the listed (file requests, file step) pairs of ``parts[j]``."""
    starts = [r.start_ns[_step_rows(r, k)] for step in parts for r, k in step]
    lats = [r.latency_s[_step_rows(r, k)] for step in parts for r, k in step]
    counts = [sum(int(r.step_offsets[k + 1] - r.step_offsets[k]) for r, k in step) for step in parts]
    offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)
    return Requests(
        np.concatenate(starts) if starts else np.zeros(0, np.int64),
        np.concatenate(lats) if lats else np.zeros(0, np.float64),
        offsets,
    )


def _in_sequence(sources: list[TableSource], spans: list) -> tuple:
    """throughputramp or hey files that follow each other: each file's steps after those of the file
    before it in time."""
    order = sorted(range(len(sources)), key=lambda i: spans[i].span() or (0, 0))
    loaded = [sources[i].load() for i in order]
    parts = [[(req, k)] for req, *_ in loaded for k in range(req.n_steps)]
    errs = [x[1] for x in loaded]
    step_errors = None if errs[0] is None else np.concatenate([e for e in errs if e is not None])
    codes: dict[int, int] = {}
    warnings: list[str] = []
    for x in loaded:
        add_codes(codes, x[2])
        warnings += x[4]
    return _concatenated(parts), step_errors, codes, loaded[0][3], warnings, None, None


def write_json(doc: dict, path: str | os.PathLike) -> None:
    """Write a JSON document deterministically (same input, same bytes); ``-`` is stdout."""
    text = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    target = Path(path)
    if str(target) == "-":
        sys.stdout.write(text)
        return
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as e:
        raise HeadroomError(f"{target}: cannot write JSON ({e.strerror})") from None
