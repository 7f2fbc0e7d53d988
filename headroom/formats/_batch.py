"""Record batches: what a streaming format reader yields, a bounded slice of a file at a time.

A reader's ``scan_*(path, chunk_bytes=...)`` returns a :class:`Scan`: one
pass over the file (gzip too) that yields :class:`Batch` es of compact
columns and never holds the whole file, its text or a pyarrow table of it.
What a format needs to find its steps besides the rows (k6 ``vus`` samples,
Gatling ``USER`` records, attack names) is collected on the side during the
pass and is small (bounded by the run's duration or its users, not by its
requests).  :func:`headroom.reading` spools the batches and reduces them;
``read_*`` (the whole-table readers) are the same scan with its batches
joined (:func:`join`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: Bytes of the file (after decompression) one batch comes from, by default: 4 MB parse as fast as
#: 16 MB (measured) and the working set of a parse (several times its block) stays small.
CHUNK_BYTES = 4 << 20


@dataclass
class Batch:
    """Rows of one slice of a file, in file order.

    ``start_ns`` int64 (UTC ns since the epoch, or relative to the
    generator's start when the scan is ``relative``), ``latency_s`` float64,
    ``status`` int64 HTTP code per row (0: no response; None: the format has
    none), ``ok`` bool success (None: judged by ``status``), ``key`` int64 per
    row: the load level (JMeter ``allThreads``) or the code of a label
    (:attr:`Scan.labels`: vegeta's attack, k6's scenario), None without one;
    ``line`` int64 file line of every row (for messages); ``name`` int32 code of the request's name
    (:attr:`Scan.names`: an endpoint), None when the format or file names none.
    """

    start_ns: np.ndarray
    latency_s: np.ndarray
    status: np.ndarray | None = None
    ok: np.ndarray | None = None
    key: np.ndarray | None = None
    line: np.ndarray | None = None
    name: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.start_ns)

    def take(self, keep: np.ndarray) -> Batch:
        """The rows where ``keep`` (a bool mask or indices)."""
        pick = lambda a: None if a is None else a[keep]  # noqa: E731
        return Batch(self.start_ns[keep], self.latency_s[keep], pick(self.status), pick(self.ok),
                     pick(self.key), pick(self.line), pick(self.name))  # fmt: skip


@dataclass
class Scan:
    """One file's pass: its batches, then what was learned on the way.

    ``batches()`` may be iterated once.  ``key_kind`` says what
    :attr:`Batch.key` holds: ``"level"``, ``"label"`` or None.  After the
    pass: ``labels`` (names of the label codes), ``warnings`` (each starting
    with the file's path), ``side`` (format-specific small data for its
    steps, e.g. ``{"vus": (times_ns, levels)}``), ``rows`` (rows yielded).
    """

    path: Path
    fmt: str
    fidelity: str
    key_kind: str | None = None
    relative: bool = False
    labels: list[str] = field(default_factory=list)
    #: request names (endpoints) of :attr:`Batch.name` codes, in order of first sight
    names: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    side: dict = field(default_factory=dict)
    rows: int = 0
    _gen: Iterator[Batch] | None = None

    def batches(self) -> Iterator[Batch]:
        if self._gen is None:
            raise RuntimeError(f"{self.path}: a scan's batches can be read once")
        gen, self._gen = self._gen, None
        for b in gen:
            self.rows += len(b)
            yield b


def join(batches: list[Batch]) -> Batch:
    """All rows of ``batches`` as one batch (columns a batch lacks are None in the result)."""
    if not batches:
        z = np.zeros(0, np.int64)
        return Batch(z, np.zeros(0), None, None, None, z.copy())

    def cat(name, dtype):
        parts = [getattr(b, name) for b in batches]
        return None if any(p is None for p in parts) else np.concatenate(parts).astype(dtype, copy=False)

    return Batch(cat("start_ns", np.int64), cat("latency_s", np.float64), cat("status", np.int64),
                 cat("ok", bool), cat("key", np.int64), cat("line", np.int64))  # fmt: skip
