"""The reader protocol: the one small interface every input format implements.

A format is one :class:`Reader`, declared once in its own module and listed
once in the registry (:data:`headroom.formats.FORMATS`), as xarray's
``BackendEntrypoint`` is:

* ``guess_can_open(head)``: whether the first bytes of a file (inside gzip
  too) are this format's; cheap, no parsing;
* ``scan(path, ...)``: one pass over the file as record batches
  (:class:`~headroom.formats._batch.Scan` of :class:`~headroom.formats._batch.Batch`),
  in bounded memory, with what the steps need collected on the side;
* ``plan(scan, rows)``: the incremental step plan (:mod:`headroom.formats._plans`):
  it reads the spooled rows as often as it needs, then gives the step of
  every row chunk by chunk (``assign``) and says what the steps are (``found``).

Everything else is the same for every format: :mod:`headroom.spooled` spools
the batches and reduces them with the plan; a whole file in memory is that
same scan as one batch, its steps by the same plan (:meth:`Reader.table`).
How several files of a format combine is said by two attributes, so that no
code outside :mod:`headroom.formats` tests a format's name:

* ``layout``: ``"records"`` (spooled), or ``"sections"`` (a CSV whose
  sections are its steps, streamed section by section by :mod:`headroom.reading`
  when its times are absolute);
* ``one_file_per_step``: several files of it are the steps of one ramp, one
  after another, never load generators of one (relative or whole-second times).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._batch import CHUNK_BYTES, Batch, Scan, join
from ._common import Table

#: The columns of spooled rows (:mod:`headroom.spooled`) and of :class:`Rows`.
COLUMNS = ("start_ns", "latency_s", "status", "ok", "key", "line")
_DTYPES = {"start_ns": np.int64, "latency_s": np.float64, "status": np.int64, "ok": np.bool_, "key": np.int64,
           "line": np.int64}  # fmt: skip


@dataclass(frozen=True)
class Reader:
    """One input format: how to recognise it, read it in batches, and find its steps.

    Attributes
    ----------
    name
        The format's name (``--format NAME``).
    tool
        The load generator (for messages).
    fidelity
        How exact its times and latencies are.
    export
        How to make such a file.
    expects
        What its beginning looks like, for "does not look like" messages.
    guess_can_open
        ``(head: bytes) -> bool``.
    scan
        ``(path, *, chunk_bytes, **options) -> Scan``; ``options`` are the
        names of :attr:`scan_options` (reading options it takes).
    plan
        ``(scan, rows) -> plan``: ``rows`` holds the scan's rows (a spool, or
        :class:`Rows` in memory) with ``chunks(names)``, ``column(name)``, ``n``.
    layout, one_file_per_step
        How files of the format combine (module docstring).
    one_step
        Every file is one step (its plan is always
        :class:`~headroom.formats._plans.OneStep`): a spooled file's step
        statistics are then taken while it is parsed, with no pass of
        their own.
    keyed
        Every row's step is its ``key`` (steps in key order, keys small integers): a spooled file's
        step statistics are taken while it is parsed and each row's step is ``plan.ranks()[key]``,
        with no pass of their own (headroom.locust's stages).
    scan_options
        Reading options its scan takes (``skip_bad_rows``, ``progress``).
    errors_unknown
        Why a file of it cannot tell failed requests, when it cannot (a few words, for
        "errors unknown (...)").
    read_with
        ``(path) -> Path | None``: the file a file of it is read with (a part of that
        file's step, such as YCSB's failed-operation log beside its successes): a folder
        of one file per step leaves it out of the steps.  None: every file is its own.
    """

    name: str
    tool: str
    fidelity: str
    export: str
    expects: str
    guess_can_open: Callable[[bytes], bool]
    scan: Callable[..., Scan]
    plan: Callable
    layout: str = "records"
    one_file_per_step: bool = False
    one_step: bool = False
    keyed: bool = False
    scan_options: tuple[str, ...] = ()
    errors_unknown: str = "no status column"
    read_with: Callable | None = None

    def open(self, path: Path, *, chunk_bytes: int = CHUNK_BYTES, options=None) -> Scan:
        """:attr:`scan` with the reading options it takes from ``options`` (any object with those
        attributes, e.g. :class:`headroom.sources.ReadSettings`)."""
        kw = {
            k: getattr(options, k) for k in self.scan_options if options is not None and hasattr(options, k)
        }
        return self.scan(Path(path), chunk_bytes=chunk_bytes, **kw)

    def table(self, path: Path) -> Table:
        """The whole file in memory: its scan as one batch, its steps by its plan."""
        scan = self.open(path)
        rows = join(list(scan.batches()))
        return table_of(self, scan, rows)


class Rows:
    """Rows held in memory, with the reading interface of a spool (one chunk: all of them)."""

    def __init__(self, batch: Batch):
        n = len(batch.start_ns)
        self.n = n
        self.have = {k: getattr(batch, k) is not None for k in ("status", "ok", "key", "line")}
        z = np.zeros(n, np.int64)
        self._cols = {k: (getattr(batch, k) if getattr(batch, k) is not None else z).astype(_DTYPES[k], copy=False)
                      for k in COLUMNS}  # fmt: skip

    def chunks(self, names=COLUMNS):
        if self.n:
            yield {k: self._cols[k] for k in names}

    def column(self, name: str) -> np.ndarray:
        return self._cols[name]


def table_of(reader: Reader, scan: Scan, rows: Batch) -> Table:
    """The request table of a scan's joined rows: every row's step by the reader's plan."""
    held = Rows(rows)
    if not held.have["key"]:
        scan.key_kind = None
    plan = reader.plan(scan, held)
    step = np.concatenate([np.asarray(plan.assign(c), np.int64) for c in held.chunks()]) if held.n else None
    found = plan.found()
    return Table(
        fmt=scan.fmt,
        fidelity=scan.fidelity,
        start_ns=rows.start_ns,
        latency_s=rows.latency_s,
        status=rows.status,
        ok=rows.ok,
        step=step if step is not None else np.zeros(0, np.int64),
        step_names=list(found.names),
        step_concurrency=found.concurrency,
        step_rates=found.rates,
        steps_source=found.source,
        relative=scan.relative,
        line=rows.line,
        warnings=list(found.warnings),
    )
