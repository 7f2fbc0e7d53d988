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
run's length.  A column that counts up by one from row to row (the file line
of a format with one request a line) is kept as runs (first row, first value)
and stored only if an append breaks the count.
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

    def __init__(self, dtypes: dict[str, np.dtype], where: str | None = None, zeros=(), counting=()):
        self.dtypes = {k: np.dtype(v) for k, v in dtypes.items()}
        #: the columns kept; those of ``zeros`` (a format without them) read back as zeros, never stored
        self.stored = {k: d for k, d in self.dtypes.items() if k not in zeros}
        #: columns of ``counting`` (file lines) that have counted up by one from row to row so far: kept
        #: as runs, {name: ([first row], [its value])}, until an append breaks the count
        self._runs = {k: ([], []) for k in counting if k in self.stored}
        for k in self._runs:
            del self.stored[k]
        self.row_bytes = sum(d.itemsize for d in self.stored.values())
        self.where = where or os.environ.get("HEADROOM_SPOOL_DIR") or None
        self.dir: str | None = None
        self.cap = CHUNK_ROWS
        self._slabs: list[dict[str, np.ndarray]] = []  # rows not written yet (after those on disk)
        self._used: list[int] = []  # rows in each slab (a slab of its own arrays is full)
        self._mem_rows = self.on_disk = self.n = 0
        self._release = weakref.finalize(self, _forget, self._counter())

    def _counter(self) -> list:
        self._held = [0]
        return self._held

    def append(self, *, own: bool = False, **cols: np.ndarray) -> None:
        """Add rows (copied): one array per column, all of one length (the zero columns may be left out).

        ``own``: the caller gives the arrays away (it neither keeps nor writes them): arrays that own
        their memory, of the columns' dtypes and long enough, become a slab as they are, uncopied."""
        n = len(next(iter(cols.values())))
        for k in list(self._runs):
            if k in cols and not self._count_on(k, cols[k]):
                self._store_runs(k)
        cols = {k: a for k, a in cols.items() if k in self.stored}
        if set(cols) != set(self.stored) or any(len(a) != n for a in cols.values()):
            raise ValueError(f"a spool append needs {sorted(self.stored)} of one length")
        if own and n >= self.cap // 8 and all(_whole(a, self.stored[k]) for k, a in cols.items()):
            self._slabs.append(cols)
            self._used.append(n)
            n_copy = 0
        else:
            n_copy = n
        i = 0
        while i < n_copy:
            if not self._slabs or self._used[-1] == len(next(iter(self._slabs[-1].values()))):
                # np.empty: pages are taken as rows are written, not for the whole slab
                self._slabs.append({k: np.empty(self.cap, d) for k, d in self.stored.items()})
                self._used.append(0)
            fill = self._used[-1]
            m = min(n - i, self.cap - fill)
            slab = self._slabs[-1]
            for k, a in cols.items():
                slab[k][fill : fill + m] = a[i : i + m]
            self._used[-1] += m
            i += m
        self._mem_rows += n
        self.n += n
        nbytes = n * self.row_bytes
        self._held[0] += nbytes
        _buffered[0] += nbytes
        _holders.add(self)
        while _buffered[0] > BUDGET_BYTES and _holders:
            max(_holders, key=lambda sp: sp._held[0])._flush()  # the largest goes to disk

    def _count_on(self, name: str, a: np.ndarray) -> bool:
        """Keep ``a`` (the new rows' values of a counting column) as a run, if it counts up by one."""
        n = len(a)
        # (values n - 1 apart at the ends, and each above the one before: one by one)
        if n and not (int(a[-1]) - int(a[0]) == n - 1 and (n < 3 or bool((a[1:] > a[:-1]).all()))):
            return False
        rows, vals = self._runs[name]
        if n and not (rows and vals[-1] + (self.n - rows[-1]) == int(a[0])):
            rows.append(self.n)
            vals.append(int(a[0]))
        return True

    def _counted(self, name: str, r0: int, m: int) -> np.ndarray:
        """Rows ``r0 .. r0 + m`` of a counting column kept as runs."""
        rows, vals = self._runs[name]
        out = np.empty(m, self.dtypes[name])
        j = max(int(np.searchsorted(rows, r0, side="right")) - 1, 0)
        pos, stop = r0, r0 + m
        while pos < stop:
            end = min(rows[j + 1] if j + 1 < len(rows) else stop, stop)
            out[pos - r0 : end - r0] = np.arange(vals[j] + pos - rows[j], vals[j] + end - rows[j])
            pos, j = end, j + 1
        return out

    def _store_runs(self, name: str) -> None:
        """A counting column that stopped counting: its rows so far stored as any column's."""
        d = self.dtypes[name]
        if self.on_disk:
            if self.dir is None:  # (cannot be: rows on disk made the folder)
                raise RuntimeError("spool rows on disk without a folder")
            with open(os.path.join(self.dir, name), "ab") as f:
                for a in range(0, self.on_disk, CHUNK_ROWS):
                    f.write(self._counted(name, a, min(CHUNK_ROWS, self.on_disk - a)).data)
        r0 = self.on_disk
        for slab, m in zip(self._slabs, self._used):
            slab[name] = np.empty(len(next(iter(slab.values()))), d)
            slab[name][:m] = self._counted(name, r0, m)
            r0 += m
        del self._runs[name]
        self.stored[name] = d
        self.row_bytes += d.itemsize
        grown = self._mem_rows * d.itemsize
        self._held[0] += grown
        _buffered[0] += grown

    def _parts(self) -> Iterator[dict[str, np.ndarray]]:
        """The slabs held in memory, each cut to its rows (views)."""
        for slab, m in zip(self._slabs, self._used):
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
        self._slabs, self._used, self._mem_rows = [], [], 0

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
        at = [0]  # the first row of the next chunk

        def with_zeros(c: dict, m: int) -> dict:
            r0, at[0] = at[0], at[0] + m
            if not zero:
                return c
            return {k: c[k] if k in c else self._counted(k, r0, m) if k in self._runs else np.zeros(m, self.dtypes[k])
                    for k in names}  # fmt: skip

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
        self._slabs, self._used, self._mem_rows = [], [], 0
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


def _whole(a: np.ndarray, dtype: np.dtype) -> bool:
    """Whether ``a`` can be kept as it is: its own contiguous memory, of ``dtype``, writable (not a
    view keeping a larger array alive)."""
    return a.base is None and a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable


def _forget(held: list) -> None:
    """A spool closed or collected: its rows in memory no longer count against the budget."""
    _buffered[0] -= held[0]
    held[0] = 0
