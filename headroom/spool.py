"""A spool: columns of rows written to temporary files as they are parsed, read back in chunks.

A format that needs the whole run before it knows its steps (JMeter's
thread levels, Gatling's users, k6's VU samples) is parsed once; its rows
go to a spool on disk (about 30 bytes a request) and every later pass
(steps, accounting, one spool per step for the buckets) reads the spool a
chunk at a time.  Memory stays at a chunk, whatever the run's length.  The
files live in a folder under ``$TMPDIR`` (``HEADROOM_SPOOL_DIR`` overrides)
removed when the spool is closed or collected.
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


class Spool:
    """Named columns of fixed dtypes, appended in batches, read back in chunks of rows."""

    def __init__(self, dtypes: dict[str, np.dtype], where: str | None = None):
        self.dtypes = {k: np.dtype(v) for k, v in dtypes.items()}
        base = where or os.environ.get("HEADROOM_SPOOL_DIR") or None
        self.dir = tempfile.mkdtemp(prefix="headroom-spool-", dir=base)
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.dir, True)
        self.n = 0

    def append(self, **cols: np.ndarray) -> None:
        """Add rows: one array per column, all of one length."""
        n = len(next(iter(cols.values())))
        if set(cols) != set(self.dtypes) or any(len(a) != n for a in cols.values()):
            raise ValueError(f"a spool append needs {sorted(self.dtypes)} of one length")
        for k, a in cols.items():  # opened per append: a run with thousands of steps has as many spools
            with open(os.path.join(self.dir, k), "ab") as f:
                f.write(np.ascontiguousarray(a, self.dtypes[k]).data)
        self.n += n

    def chunks(
        self, names: tuple[str, ...] | list[str], rows: int = CHUNK_ROWS
    ) -> Iterator[dict[str, np.ndarray]]:
        """The rows in order, ``rows`` at a time, as {column: array}."""
        handles = {k: open(os.path.join(self.dir, k), "rb") for k in names}  # noqa: SIM115
        try:
            done = 0
            while done < self.n:
                m = min(rows, self.n - done)
                yield {k: np.fromfile(h, self.dtypes[k], m) for k, h in handles.items()}
                done += m
        finally:
            for h in handles.values():
                h.close()

    def column(self, name: str) -> np.ndarray:
        """One whole column (for the rare paths that need it whole)."""
        return np.fromfile(os.path.join(self.dir, name), self.dtypes[name], self.n)

    def close(self) -> None:
        self._cleanup()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
