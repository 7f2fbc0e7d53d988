"""Reading and writing runs: the public entry points, and the names other modules import from here.

The work lives in its own modules (see docs/formats.md): locating a run's
files, metadata and CPU in :mod:`headroom.runfolder`; one reader per input
format in :mod:`headroom.formats`; the streamed, mergeable reduction in
:mod:`headroom.reduce` and :mod:`headroom.reading`.  :func:`load_run` reads
a run whole into memory (every request, for notebooks and tests): it is
:func:`reduce_run`, which reads a run of any size into histograms, keeping
the requests.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

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
from .model import HeadroomError, Run
from .options import ReadOptions
from .reading import reduce_run
from .reduce import LatencyHist, ReducedRun
from .runfolder import (
    MAX_METADATA_BYTES,
    MAX_METADATA_DEPTH,
    RunFiles,
    locate_run,
    read_cpu,
    read_metadata,
    run_label,
)

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
    options: ReadOptions | None = None,
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
    options
        The reading options whole (:class:`headroom.options.ReadOptions`); when given they
        replace ``cpu_cores``, ``skip_bad_rows``, ``base_time_ns``, ``format``, ``steps`` and
        ``concurrency``.

    Returns
    -------
    Run
        With ``requests`` set, and ``reduced``: this is :func:`reduce_run`
        keeping the requests, through the same readers and the same decisions.

    Raises
    ------
    HeadroomError
        With a one-line message naming the file (and line) on bad input.
    """
    if options is None:
        options = ReadOptions(cpu_cores, skip_bad_rows, base_time_ns, format, steps, concurrency)
    return reduce_run(path, label=label, keep_requests=True, progress=False, options=options)


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
