"""A spool: columns of rows kept as they are parsed, in memory up to a budget, else in temporary files.

A format that needs the whole run before it knows its steps (JMeter's
thread levels, Gatling's users, k6's VU samples) is parsed once; its rows
go to a spool (about 41 bytes a request) and every later pass (steps,
accounting, buckets) reads the spool a chunk at a time.  Rows stay in
memory, in slabs of :data:`CHUNK_ROWS` rows that are read back without a
copy, while all spools together hold fewer than :data:`BUDGET_BYTES`;
beyond that the largest spool appends to files in a folder under
``$TMPDIR`` (``HEADROOM_SPOOL_DIR`` overrides), removed when the spool is
closed or collected.  Memory stays at the budget and a chunk, whatever the
run's length.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator

import numpy as np

#: Rows per chunk read back (and per slab held in memory).
CHUNK_ROWS = 1 << 18
#: Bytes all spools keep in memory together (about 400k rows of a parsed file); more go to disk.
BUDGET_BYTES = 16 << 20
_buffered = [0]  # bytes held in memory by all spools
_holders: weakref.WeakSet = weakref.WeakSet()  # the spools holding rows in memory


class Spool:
    """Named columns of fixed dtypes, appended in batches, read back in chunks of rows."""

    def __init__(self, dtypes: dict[str, np.dtype], where: str | None = None, zeros=()):
        self.dtypes = {k: np.dtype(v) for k, v in dtypes.items()}
        #: the columns kept; those of ``zeros`` (a format without them) read back as zeros, never stored
        self.stored = {k: d for k, d in self.dtypes.items() if k not in zeros}
        self.row_bytes = sum(d.itemsize for d in self.stored.values())
        self.where = where or os.environ.get("HEADROOM_SPOOL_DIR") or None
        self.dir: str | None = None
        self.cap = CHUNK_ROWS
        self._slabs: list[dict[str, np.ndarray]] = []  # rows not written yet (after those on disk)
        self._fill = 0  # rows in the last slab
        self._mem_rows = self.on_disk = self.n = 0
        self._release = weakref.finalize(self, _forget, self._counter())

    def _counter(self) -> list:
        self._held = [0]
        return self._held

    def append(self, **cols: np.ndarray) -> None:
        """Add rows (copied): one array per column, all of one length (the zero columns may be left out)."""
        n = len(next(iter(cols.values())))
        cols = {k: a for k, a in cols.items() if k in self.stored}
        if set(cols) != set(self.stored) or any(len(a) != n for a in cols.values()):
            raise ValueError(f"a spool append needs {sorted(self.stored)} of one length")
        i = 0
        while i < n:
            if not self._slabs or self._fill == self.cap:
                # np.empty: pages are taken as rows are written, not for the whole slab
                self._slabs.append({k: np.empty(self.cap, d) for k, d in self.stored.items()})
                self._fill = 0
            m = min(n - i, self.cap - self._fill)
            slab = self._slabs[-1]
            for k, a in cols.items():
                slab[k][self._fill : self._fill + m] = a[i : i + m]
            self._fill += m
            i += m
        self._mem_rows += n
        self.n += n
        nbytes = n * self.row_bytes
        self._held[0] += nbytes
        _buffered[0] += nbytes
        _holders.add(self)
        while _buffered[0] > BUDGET_BYTES and _holders:
            max(_holders, key=lambda sp: sp._held[0])._flush()  # the largest goes to disk

    def _parts(self) -> Iterator[dict[str, np.ndarray]]:
        """The slabs held in memory, each cut to its rows (views)."""
        last = len(self._slabs) - 1
        for j, slab in enumerate(self._slabs):
            m = self._fill if j == last else self.cap
            yield {k: a[:m] for k, a in slab.items()}

    def _flush(self) -> None:
        """Write the rows held in memory to this spool's files."""
        _holders.discard(self)
        if not self._slabs:
            return
        if self.dir is None:
            self.dir = tempfile.mkdtemp(prefix="headroom-spool-", dir=self.where)
            self._cleanup = weakref.finalize(self, shutil.rmtree, self.dir, True)
        for k in self.stored:
            with open(os.path.join(self.dir, k), "ab") as f:
                for part in self._parts():
                    f.write(part[k].data)
        self.on_disk += self._mem_rows
        _buffered[0] -= self._held[0]
        self._held[0] = 0
        self._slabs, self._fill, self._mem_rows = [], 0, 0

    def chunks(
        self, names: tuple[str, ...] | list[str], rows: int | None = None
    ) -> Iterator[dict[str, np.ndarray]]:
        """The rows in order, at most ``rows`` (default :data:`CHUNK_ROWS`) at a time, as {column: array}.

        Rows held in memory come as views of the spool's slabs: read them, do not write them.
        """
        rows = rows or CHUNK_ROWS
        # the rows as they are now: a flush while they are read (another spool appending) moves
        # rows from memory to disk, and these slabs stay alive until they are read
        on_disk, parts = self.on_disk, list(self._parts())
        zero = [k for k in names if k not in self.stored]

        def with_zeros(c: dict, m: int) -> dict:
            return {k: c[k] if k in c else np.zeros(m, self.dtypes[k]) for k in names} if zero else c

        if on_disk:
            handles = {k: open(os.path.join(self.dir, k), "rb") for k in names if k in self.stored}  # noqa: SIM115
            try:
                done = 0
                while done < on_disk:
                    m = min(rows, on_disk - done)
                    yield with_zeros({k: np.fromfile(h, self.dtypes[k], m) for k, h in handles.items()}, m)
                    done += m
            finally:
                for h in handles.values():
                    h.close()
        for part in parts:
            n = len(part[next(iter(self.stored))])
            for a in range(0, n, rows):
                yield with_zeros(
                    {k: part[k][a : a + rows] for k in names if k in self.stored}, min(rows, n - a)
                )

    def column(self, name: str) -> np.ndarray:
        """One whole column (for the rare paths that need it whole)."""
        parts = [c[name] for c in self.chunks((name,))]
        return np.concatenate(parts) if parts else np.zeros(0, self.dtypes[name])

    def close(self) -> None:
        _holders.discard(self)
        self._release()
        self._slabs, self._fill, self._mem_rows = [], 0, 0
        if self.dir is not None:
            self._cleanup()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Cursor:
    """A spool's rows read in pieces of any length, in order (to walk two spools of one length together)."""

    def __init__(self, spool: Spool, names: tuple[str, ...]):
        self.names = names
        self._it = spool.chunks(names)
        self._buf: dict[str, np.ndarray] | None = None
        self._pos = 0

    def take(self, m: int) -> dict[str, np.ndarray]:
        """The next ``m`` rows (fewer only at the end)."""
        out: list[dict[str, np.ndarray]] = []
        while m > 0:
            if self._buf is None or self._pos == len(self._buf[self.names[0]]):
                self._buf = next(self._it, None)
                self._pos = 0
                if self._buf is None:
                    break
            have = len(self._buf[self.names[0]]) - self._pos
            k = min(m, have)
            out.append({n: a[self._pos : self._pos + k] for n, a in self._buf.items()})
            self._pos += k
            m -= k
        if len(out) == 1:
            return out[0]
        return {n: np.concatenate([o[n] for o in out]) if out else np.zeros(0) for n in self.names}


def _forget(held: list) -> None:
    """A spool closed or collected: its rows in memory no longer count against the budget."""
    _buffered[0] -= held[0]
    held[0] = 0
