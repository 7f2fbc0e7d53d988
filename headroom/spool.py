"""A spool: columns of rows kept as they are parsed, in memory up to a budget, else in temporary files.

A format that needs the whole run before it knows its steps (JMeter's
thread levels, Gatling's users, k6's VU samples) is parsed once; its rows
go to a spool (about 41 bytes a request) and every later pass (steps,
accounting, one spool per step for the buckets) reads the spool a chunk at
a time.  Rows stay in memory while all spools together hold fewer than
:data:`BUDGET_ROWS`; beyond that a spool appends to files in a folder under
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

#: Rows per chunk read back.
CHUNK_ROWS = 1 << 18
#: Rows all spools keep in memory together (about 40 MB); more go to disk.
BUDGET_ROWS = 1 << 20
_buffered = [0]  # rows held in memory by all spools
_holders: weakref.WeakSet = weakref.WeakSet()  # the spools holding rows in memory


class Spool:
    """Named columns of fixed dtypes, appended in batches, read back in chunks of rows."""

    def __init__(self, dtypes: dict[str, np.dtype], where: str | None = None):
        self.dtypes = {k: np.dtype(v) for k, v in dtypes.items()}
        self.where = where or os.environ.get("HEADROOM_SPOOL_DIR") or None
        self.dir: str | None = None
        self._mem: list[dict[str, np.ndarray]] = []  # rows not written yet (after those on disk)
        self._mem_rows = self.on_disk = self.n = 0
        self._release = weakref.finalize(self, _forget, self._counter())

    def _counter(self) -> list:
        self._held = [0]
        return self._held

    def append(self, **cols: np.ndarray) -> None:
        """Add rows: one array per column, all of one length."""
        n = len(next(iter(cols.values())))
        if set(cols) != set(self.dtypes) or any(len(a) != n for a in cols.values()):
            raise ValueError(f"a spool append needs {sorted(self.dtypes)} of one length")
        self._mem.append({k: np.array(a, self.dtypes[k], copy=True) for k, a in cols.items()})
        self._mem_rows += n
        self._held[0] += n
        _buffered[0] += n
        self.n += n
        _holders.add(self)
        while _buffered[0] > BUDGET_ROWS and _holders:
            max(_holders, key=lambda sp: sp._mem_rows)._flush()  # the largest goes to disk

    def _flush(self) -> None:
        """Write the rows held in memory to this spool's files."""
        _holders.discard(self)
        if not self._mem:
            return
        if self.dir is None:
            self.dir = tempfile.mkdtemp(prefix="headroom-spool-", dir=self.where)
            self._cleanup = weakref.finalize(self, shutil.rmtree, self.dir, True)
        for k in self.dtypes:
            with open(os.path.join(self.dir, k), "ab") as f:
                for part in self._mem:
                    f.write(part[k].data)
        self.on_disk += self._mem_rows
        _buffered[0] -= self._mem_rows
        self._held[0] = 0
        self._mem, self._mem_rows = [], 0

    def chunks(
        self, names: tuple[str, ...] | list[str], rows: int = CHUNK_ROWS
    ) -> Iterator[dict[str, np.ndarray]]:
        """The rows in order, ``rows`` at a time, as {column: array}."""
        if self.on_disk:
            handles = {k: open(os.path.join(self.dir, k), "rb") for k in names}  # noqa: SIM115
            try:
                done = 0
                while done < self.on_disk:
                    m = min(rows, self.on_disk - done)
                    yield {k: np.fromfile(h, self.dtypes[k], m) for k, h in handles.items()}
                    done += m
            finally:
                for h in handles.values():
                    h.close()
        mem = self._mem  # in memory: joined a chunk at a time
        for a in range(0, self._mem_rows, rows):
            yield {k: _rows(mem, k, a, a + rows) for k in names}

    def column(self, name: str) -> np.ndarray:
        """One whole column (for the rare paths that need it whole)."""
        return np.concatenate([c[name] for c in self.chunks((name,), max(self.n, 1))] or
                              [np.zeros(0, self.dtypes[name])])  # fmt: skip

    def close(self) -> None:
        _holders.discard(self)
        self._release()
        self._mem, self._mem_rows = [], 0
        if self.dir is not None:
            self._cleanup()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _forget(held: list) -> None:
    """A spool closed or collected: its rows in memory no longer count against the budget."""
    _buffered[0] -= held[0]
    held[0] = 0


def _rows(parts: list[dict], name: str, a: int, b: int) -> np.ndarray:
    """Rows ``a`` to ``b`` of column ``name`` across the parts held in memory."""
    out, pos = [], 0
    for p in parts:
        col = p[name]
        lo, hi = max(a - pos, 0), min(b - pos, len(col))
        if lo < hi:
            out.append(col[lo:hi])
        pos += len(col)
        if pos >= b:
            break
    return np.concatenate(out) if len(out) != 1 else out[0]
