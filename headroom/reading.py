"""Reading a run: its request files -> partial reductions -> one reduced :class:`~headroom.model.Run`.

Every request file becomes a *source* (:mod:`headroom.sources`, through its
format's reader :func:`headroom.formats.reader_for`) that reduces its steps
into a :class:`~headroom.reduce.Partial`; partials add up.  Several files of
one run are either load generators of one ramp (their times overlap: steps
aligned on the wall clock, concurrency summed, histograms added, never
percentiles averaged) or one file per step (in sequence): :func:`plan`.
With ``keep_requests`` the sources keep every request as well (in
:attr:`Partial.rows`): that is :func:`headroom.load_run`.  With a Dask
``client`` the same sources run as tasks on the cluster and the result is
the same, bit for bit; there a load-generator file is parsed once
(:mod:`headroom.cluster`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from .cluster import Kept
from .endpoints import add_counts
from .formats._checks import add_codes, all_failed, failed_warning, skipped_warning
from .formats.hey import relative_offsets
from .formats.throughputramp import CsvFile
from .model import HeadroomError, Requests, Run, RunMeta
from .options import ReadOptions
from .reduce import (
    RESOLUTION_S,
    Frame,
    Partial,
    add_step_parts,
    assemble,
)
from .runfolder import RunFiles, cpu_for, locate_run, read_metadata, run_label
from .sources import CsvSource, ReadSettings, StepFilesSource, _no_names, source_for
from .spooled import SpoolSource

# --------------------------------------------------------------------------
# planning: which sources, and how their partials combine


def candidates(files: RunFiles, s: ReadSettings) -> tuple[str, list]:
    """("one", [source]) for one file (or a folder of one file per step); for several, ("csv" |
    "spooled", a source per file): load generators when their times overlap, else steps."""
    from .formats import reader_for

    if not files.steps or len(files.steps) == 1:
        return "one", [source_for(files, files.request_files[0], s)]
    files = read_together(files, s)
    if len(files.steps) == 1:
        return "one", [source_for(files, files.steps[0], s)]
    readers = [reader_for(p, s.format) for p in files.steps]
    if any(r.name != readers[0].name for r in readers):
        k = next(i for i, r in enumerate(readers) if r.name != readers[0].name)
        raise HeadroomError(
            f"{files.steps[k]}: {readers[k].name}, but {files.steps[0].name} is {readers[0].name}: "
            "one format per run"
        )
    reader = readers[0]
    if s.name is not None and "name" not in reader.scan_options:
        raise _no_names(files.steps[0], reader)
    if reader.layout == "sections":
        if any(relative_offsets(p) for p in files.steps):
            from .tables import csv_family_folder

            raise csv_family_folder(files.steps[0])
        return "csv", [CsvSource(p, s) for p in files.steps]
    if reader.one_file_per_step:  # relative times, or starts to the second: one file per step
        return "one", [StepFilesSource(files, s, reader)]
    return "spooled", [SpoolSource(p, s, reader) for p in files.steps]


def read_together(files: RunFiles, s: ReadSettings) -> RunFiles:
    """A folder's files without those its reader reads with another of them (``Reader.read_with``)."""
    from dataclasses import replace

    from .formats import reader_for

    given = {Path(p).resolve() for p in files.steps}
    kept = []
    for p in files.steps:
        with_ = reader_for(p, s.format).read_with
        other = with_(Path(p)) if with_ is not None else None
        if other is None or other.resolve() not in given:
            kept.append(p)
    if len(kept) == len(files.steps):
        return files
    return replace(files, perf=kept[0], steps=tuple(kept) if len(kept) > 1 else ())


def plan(files: RunFiles, s: ReadSettings) -> tuple[str, list]:
    """("one", [source]) for one file; ("generators" | "several", sources) for several (the spooled
    formats' spans read here, in this process)."""
    mode, sources = candidates(files, s)
    if mode == "csv":
        return "several", sources
    if mode == "spooled":
        if not overlapping([t.spans() for t in sources]):
            for t in sources:
                t.close()
            return "one", [StepFilesSource(read_together(files, s), s, sources[0].reader)]
        return "generators", sources
    return mode, sources


def overlapping(spans: list[Partial]) -> bool:
    """Whether the files' time spans overlap (load generators of one ramp) rather than follow each other."""
    sp = [p.span() for p in spans]
    if any(x is None for x in sp):
        return False
    sp.sort()
    return all(sp[i + 1][0] < sp[i][1] for i in range(len(sp) - 1))


def align(spans: list[Partial]) -> tuple[list[dict[int, int]], list[Frame]]:
    """Steps of several generators matched on the wall clock: (file step -> run step per file, frames).

    Steps with the same index are matched when every generator has as many
    steps and they overlap; else steps are grouped by overlapping spans.
    """
    n = spans[0].n_steps
    if all(p.n_steps == n for p in spans) and all(_same_time(spans, k) for k in range(n)):
        maps = [{k: k for k in range(n)} for _ in spans]
    else:
        maps = _group_by_time(spans)
    m = 1 + max((j for mp in maps for j in mp.values()), default=-1)
    frames = []
    for j in range(m):
        parts = [p.steps[k] for p, mp in zip(spans, maps) for k, jj in mp.items() if jj == j and k in p.steps]
        parts = [q for q in parts if q.n]
        frames.append(Frame(min((q.t0 for q in parts), default=0), max((q.t1 for q in parts), default=0),
                            sum(q.n for q in parts)))  # fmt: skip
    return maps, frames


def _same_time(spans: list[Partial], k: int) -> bool:
    parts = [p.steps[k] for p in spans if k in p.steps and p.steps[k].n]
    return all(a.t0 < b.t1 and b.t0 < a.t1 for a in parts for b in parts)


def _group_by_time(spans: list[Partial]) -> list[dict[int, int]]:
    items = sorted((q.t0, q.t1, i, k) for i, p in enumerate(spans) for k, q in p.steps.items() if q.n)
    maps: list[dict[int, int]] = [{} for _ in spans]
    j, end = -1, None
    for t0, t1, i, k in items:
        if end is None or t0 >= end:
            j, end = j + 1, t1
        end = max(end, t1)
        maps[i][k] = j
    return maps


# --------------------------------------------------------------------------
# running: locally or on a Dask cluster


def _spans(src) -> Partial:
    return src.spans()


def _reduce(src, frames=None) -> Partial:
    return src.reduce(frames)


class _Local:
    """Runs tasks in this process, in order (the same functions a cluster runs).

    A spooled file is parsed once (its source keeps its spool from its spans
    to its reduction); a CSV file is streamed twice (spans, then buckets),
    in bounded memory and no disk.
    """

    def map(self, fn, *iterables):
        return [fn(*args) for args in zip(*iterables)]

    def prepare(self, sources: list) -> Kept:
        kept = Kept(list(sources))
        try:
            kept.spans = [src.spans() for src in sources]
        except BaseException:
            self.release(kept)
            raise
        return kept

    def reduce(self, kept: Kept, frames: list[dict]) -> list:
        return [src.reduce(fr) for src, fr in zip(kept.sources, frames)]

    def release(self, kept: Kept) -> None:
        for src in kept.sources:
            if isinstance(src, SpoolSource):
                src.close()


def _union(partials: list[Partial]) -> Partial:
    """Partials of disjoint steps of one file (sections split across tasks) as one."""
    out = dataclasses.replace(partials[0], steps={}, warnings=[], skipped=[], error_codes={})
    if out.step_errors is not None:
        out.step_errors = np.zeros(out.n_steps, np.int64)
    out.rows = None if partials[0].rows is None else {}
    for p in partials:
        out.steps.update(p.steps)
        if out.rows is not None:
            out.rows.update(p.rows)
        out.warnings += p.warnings
        out.skipped += p.skipped
        add_codes(out.error_codes, p.error_codes)
        if p.step_errors is not None:
            out.step_errors += p.step_errors
    return out


def _one(src, runner) -> Partial:
    if not isinstance(runner, _Local) and isinstance(src, CsvSource):
        with CsvFile(src.path, stream=True) as f:
            n = len(f.sections)
        pieces = [CsvSource(src.path, src.settings, (k, k + 1)) for k in range(n)]
        return _union(runner.map(_reduce, pieces))
    return runner.map(_reduce, [src])[0]


def generators(kept: Kept, runner) -> Partial:
    """Load generators of one ramp (read once by ``runner.prepare``): steps aligned, then every file
    reduced in the shared frames."""
    spans = kept.spans
    maps, frames = align(spans)
    per_file = [{k: frames[j] for k, j in mp.items()} for mp in maps]
    reduced = runner.reduce(kept, per_file)
    out = _merged_accounting(spans, maps, len(frames))
    out.endpoints = add_counts([r.endpoints for r in reduced], maps, len(frames))
    for j, fr in enumerate(frames):
        parts = [
            r.steps[k] for r, mp in zip(reduced, maps) for k, jj in mp.items() if jj == j and k in r.steps
        ]
        out.steps[j] = add_step_parts(parts, fr)
    if reduced and reduced[0].rows is not None:  # every file's rows of the step, in file order
        out.rows = {j: [x for r, mp in zip(reduced, maps) for k, jj in sorted(mp.items()) if jj == j
                        for x in r.rows.get(k, [])] for j in range(len(frames))}  # fmt: skip
    out.warnings.append(
        f"{out.source}: {len(spans)} files whose times overlap are read as load generators of one ramp "
        f"({len(frames)} steps aligned on the wall clock, "
        f"{'histograms added' if out.rows is None else 'requests concatenated'})"
    )
    return out


def _merged_accounting(spans: list[Partial], maps: list[dict[int, int]], m: int) -> Partial:
    """The generators' warnings, failed requests, concurrency and rates, on the run's ``m`` steps."""
    first = spans[0]
    out = Partial(first.source, first.kind, m, failures_said=first.failures_said)
    out.step_errors = None if first.step_errors is None else np.zeros(m, np.int64)
    conc: list | None = [0] * m
    for p, mp in zip(spans, maps):
        out.warnings += p.warnings
        out.skipped += p.skipped
        add_codes(out.error_codes, p.error_codes)
        for k, j in mp.items():
            if out.step_errors is not None and p.step_errors is not None:
                out.step_errors[j] += p.step_errors[k]
            c = p.step_concurrency[k] if p.step_concurrency is not None else None
            conc = None if conc is None or c is None else conc
            if conc is not None:
                conc[j] += c
    out.step_concurrency = tuple(conc) if conc is not None else None
    out.step_rates = summed_rates(spans, maps, m)
    return out


def summed_rates(spans: list[Partial], maps: list[dict[int, int]], m: int) -> tuple | None:
    """Rate steps of load generators of one ramp: every step's planned and sent rates added up,
    dropped work added, behind when any generator fell behind (None when a file has no rates)."""
    if any(p.step_rates is None for p in spans):
        return None
    parts: list[list[dict]] = [[] for _ in range(m)]
    for p, mp in zip(spans, maps):
        for k, j in mp.items():
            if k < len(p.step_rates):
                parts[j].append(p.step_rates[k])

    def total(rs, key):
        vals = [r.get(key) for r in rs]
        return None if not vals or any(v is None for v in vals) else sum(vals)

    out = []
    for rs in parts:
        behind = [r.get("fell_behind") for r in rs]
        out.append({"intended_rps": total(rs, "intended_rps"), "sent_rps": total(rs, "sent_rps"),
                    "dropped": total(rs, "dropped"),
                    "fell_behind": True if True in behind else (False if behind and all(b is False for b in behind)
                                                               else None)})  # fmt: skip
    return tuple(out)


def _sequence(sources: list, runner) -> Partial:
    """Files that follow each other: each file's steps after the previous file's."""
    parts = runner.map(_reduce, sources)
    order = sorted(range(len(parts)), key=lambda i: parts[i].span() or (0, 0))
    parts = [parts[i] for i in order]
    out = Partial(parts[0].source, parts[0].kind, sum(p.n_steps for p in parts))
    out.step_errors = None if parts[0].step_errors is None else np.zeros(out.n_steps, np.int64)
    out.rows = None if parts[0].rows is None else {}
    out.endpoints = add_counts([p.endpoints for p in parts], _bases(parts), out.n_steps)
    base = 0
    for p in parts:
        if out.rows is not None:
            out.rows.update({base + k: q for k, q in p.rows.items()})
        out.warnings += p.warnings
        out.skipped += p.skipped
        add_codes(out.error_codes, p.error_codes)
        out.steps.update({base + k: q for k, q in p.steps.items()})
        if out.step_errors is not None and p.step_errors is not None:
            out.step_errors[base : base + p.n_steps] = p.step_errors
        base += p.n_steps
    return out


def _bases(parts: list[Partial]) -> list[dict[int, int]]:
    """Each file's steps on the run of files that follow each other (after the files before it)."""
    out, base = [], 0
    for p in parts:
        out.append({k: base + k for k in range(p.n_steps)})
        base += p.n_steps
    return out


def runner_for(client):
    """Where tasks run: this process, or the cluster of a Dask ``client``."""
    if client is None:
        return _Local()
    from .cluster import DaskRunner

    return DaskRunner(client)


def reduce_partial(files: RunFiles, settings: ReadSettings, client=None) -> Partial:
    """Reduce every request file of a run into one partial (on ``client``'s cluster when given)."""
    runner = runner_for(client)
    mode, sources = candidates(files, settings)
    if mode == "one":
        return _one(sources[0], runner)
    kept = runner.prepare(sources)
    try:
        if overlapping(kept.spans):
            return generators(kept, runner)
    finally:
        runner.release(kept)
    if mode == "spooled":  # files that follow each other: one file per step
        return _one(StepFilesSource(read_together(files, settings), settings, sources[0].reader), runner)
    return _sequence(sources, runner)


def reduce_run(
    path,
    *,
    bucket_s: float = 1.0,
    min_partial: float = 0.5,
    label: str | None = None,
    cpu_cores: float | None = None,
    skip_bad_rows: bool = False,
    chunk_bytes: int = 64 << 20,
    progress: bool | None = None,
    base_time_ns: int | None = None,
    format: str | None = None,
    steps: str | None = None,
    concurrency: str | None = None,
    client=None,
    telemetry=None,
    options: ReadOptions | None = None,
    keep_requests: bool = False,
) -> Run:
    """Read a run of any size, reduced to per-bucket latency histograms.

    Throughputramp and hey-fork files are streamed section by section (a
    section longer than ``chunk_bytes`` in chunks, in two passes: its span,
    then its buckets), with memory bounded by the chunk and the histograms;
    other formats are parsed whole, then reduced the same way.  Several
    request files (a list, or a folder of them) whose times overlap are load
    generators of one ramp; files that follow each other are steps.

    Parameters
    ----------
    path
        A run folder, a request file, a file prefix such as ``runs/x/old_``,
        or a list of request files.
    bucket_s, min_partial
        The bucket rule (:mod:`headroom.aggregate`).
    label, cpu_cores, skip_bad_rows, base_time_ns, format, steps
        As for :func:`headroom.load_run`.
    concurrency
        A stated plan for a file that does not carry it (a hey ramp, ``--steps``):
        ``"1:40:3"`` or ``"1,2,4,8"``, one level per step (else a one-line error).
    chunk_bytes
        Bytes of a section parsed at once.
    progress
        A progress line on stderr (default: on a terminal, for reads over 2 s).
    client
        A ``dask.distributed.Client`` (or its address): reduce the files (or
        a file's sections) as tasks on that cluster; the result is identical.
    telemetry
        A :class:`headroom.telemetry.PromSource`: the server's CPU and memory from
        Prometheus over the run's load window, instead of the run folder's files.
    options
        The reading options whole (:class:`headroom.options.ReadOptions`): when given,
        they replace ``cpu_cores``, ``skip_bad_rows``, ``base_time_ns``, ``format``,
        ``steps`` and ``concurrency``.
    keep_requests
        Keep every request too (what :func:`headroom.load_run` does).

    Returns
    -------
    Run
        With ``reduced`` (a :class:`~headroom.reduce.ReducedRun`), and ``requests``
        when ``keep_requests`` (else None).
    """
    kept = reduced_file(path)
    if kept is not None:
        return _kept_run(kept, bucket_s, label)
    if options is None:
        options = ReadOptions(cpu_cores, skip_bad_rows, base_time_ns, format, steps, concurrency)
    files = locate_run(path)
    fields = read_metadata(files.meta) if files.meta else {}
    settings = ReadSettings.of(options, bucket_s=bucket_s, min_partial=min_partial, chunk_bytes=chunk_bytes,
                               progress=progress, keep_requests=keep_requests)  # fmt: skip
    files = read_together(files, settings)
    if isinstance(client, str):
        with _connect(client) as c:
            p = reduce_partial(files, settings, c)
    else:
        p = reduce_partial(files, settings, client)
    return run_from_partial(p, files, fields, settings, label=label, cpu_cores=options.cpu_cores,
                            telemetry=telemetry)  # fmt: skip


#: the name of a run folder's reduced form (headroom.reduce.save_run), read when the folder
#: keeps no request file
REDUCED_NAME = "reduced.npz"
#: why a run read with --name shows no CPU (its warning; the summary's CPU line says it too)
CPU_NOT_SPLIT = "the server's CPU is not split by endpoint"


def reduced_file(path) -> Path | None:
    """A reduced run to read instead of request files: ``path`` itself when it is a ``.npz`` file,
    or a folder's ``reduced.npz`` when the folder holds no ``perfResults.csv[.gz]``."""
    if isinstance(path, (list, tuple)):  # the command line's runs: one reduced file or folder alone
        if len(path) != 1:
            return None
        path = path[0]
    p = Path(path)
    if p.suffix == ".npz" and p.is_file():
        return p
    if p.is_dir() and (p / REDUCED_NAME).is_file():
        if not any((p / n).exists() for n in ("perfResults.csv", "perfResults.csv.gz")):
            return p / REDUCED_NAME
    return None


def _kept_run(path: Path, bucket_s: float, label: str | None) -> Run:
    import dataclasses

    from .reduce import load_run_file

    run = load_run_file(path)
    kept = run.reduced.buckets.bucket_s
    if abs(kept - bucket_s) > 1e-9:
        raise HeadroomError(
            f"{path}: a reduced run kept at {kept:g} s buckets, not {bucket_s:g} s: read the request "
            "files for other buckets"
        )
    if label is not None:
        run = dataclasses.replace(run, meta=dataclasses.replace(run.meta, label=label))
    return run


def _connect(address: str):
    """A Dask client of the scheduler at ``address``, or a one-line error."""
    try:
        from distributed import Client
    except ImportError:
        raise HeadroomError(
            "--dask needs the dask extra: python3 -m pip install 'headroom-plot[dask]'"
        ) from None
    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as e:
        raise HeadroomError(
            f"--dask {address}: cannot reach the Dask scheduler ({str(e).splitlines()[0]})"
        ) from None


def run_from_partial(
    p: Partial, files: RunFiles, fields: dict, s: ReadSettings, *, label=None, cpu_cores=None, telemetry=None
) -> Run:
    """The reduced run: steps, buckets, histograms, CPU, failed requests and warnings."""
    from .telemetry.load import server_telemetry

    warnings = list(p.warnings)
    cpu, tel, fields = server_telemetry(
        files, fields, p, telemetry, lambda: cpu_for(files, fields, cpu_cores, warnings)
    )
    if tel is not None:
        warnings.extend(tel.warnings)
    if s.name is not None and cpu is not None:  # the server's CPU served every endpoint, not this one
        cpu = None
        warnings.append(
            f"{p.source}: --name {s.name}: {CPU_NOT_SPLIT}, so CPU and CPU per request are not shown for "
            "one endpoint (read the run without --name for them)"
        )
    errors = int(sum(p.error_codes.values()))
    total = sum(q.n for q in p.steps.values())
    if p.skipped:
        warnings.append(skipped_warning(Path(p.source), p.skipped))
    if errors and not p.failures_said:
        if total == 0:
            raise all_failed(p.source, errors, p.error_codes)
        warnings.append(failed_warning(p.source, errors, errors + total, p.error_codes))
    if total == 0 and not _died_at_once(fields, p.n_steps):
        raise HeadroomError(f"{p.source}: no requests (the file has a header but no data rows)")
    if p.rows is None and any(q.rounded for q in p.steps.values()):  # kept requests are analysed exactly
        warnings.append(
            f"{p.source}: latencies finer than 0.1 us (nanoseconds) are counted at "
            f"{RESOLUTION_S * 1e6:g} us resolution: percentiles and maxima to the nearest us, means exact"
        )
    conc = p.step_concurrency
    if s.concurrency is not None:
        from .tables import stated_concurrency

        conc = stated_concurrency(p.source, s.concurrency, p.n_steps, conc, p.step_rates, warnings)
    meta = RunMeta(label=label or run_label(fields, files.name), source=str(files.perf), fields=fields,
                   step_concurrency=conc, step_rates=p.step_rates)  # fmt: skip
    reduced = assemble(p.steps, p.n_steps, [meta.concurrency(k) for k in range(p.n_steps)], cpu, s.bucket_s)
    requests = kept_requests(p) if p.rows is not None else None
    run = Run(requests=requests, cpu=cpu, meta=meta, errors=errors, error_codes=dict(sorted(p.error_codes.items())),
              warnings=tuple(warnings), format=p.kind, reduced=reduced, step_errors=p.step_errors,
              endpoints=p.endpoints)  # fmt: skip
    from .telemetry import attach

    return attach(run, tel)


def _died_at_once(fields: dict, n_steps: int) -> bool:
    """headroom ramp's server stopped answering before it answered any request (step 1, no section):
    a run of no step, to which the analysis adds the step it died in (headroom.stopped)."""
    from .stopped import server_stop

    st = server_stop(fields)
    return n_steps <= 1 and st is not None and st.get("step") == 1


def kept_requests(p: Partial) -> Requests:
    """The requests a reduction kept (:attr:`Partial.rows`), step by step."""
    pieces = [p.rows.get(k, []) for k in range(p.n_steps)]
    counts = [sum(len(st) for st, _ in step) for step in pieces]
    offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)
    starts = [st for step in pieces for st, _ in step]
    lats = [lat for step in pieces for _, lat in step]
    return Requests(
        np.concatenate(starts).astype(np.int64, copy=False) if starts else np.zeros(0, np.int64),
        np.concatenate(lats).astype(np.float64, copy=False) if lats else np.zeros(0, np.float64),
        offsets,
    )
