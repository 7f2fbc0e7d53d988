"""What the streamed-reader tests share: tiny blocks, file writers, whole-scan joins, row comparison.

The readers under test cut a file into blocks of about ``chunk_bytes``; :data:`SMALL` makes a
sample of a few hundred kB dozens of blocks, :data:`WHOLE` makes any sample one block.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from headroom.formats._batch import join
from headroom.formats._scan import read_bytes

DATA = Path(__file__).resolve().parent / "data" / "formats"
REAL = DATA / "real"
SMALL = 4096  # bytes per block: the real samples become tens to hundreds of blocks
WHOLE = 1 << 30  # bytes per block: every sample is one block
BLOCK_SIZES = (SMALL, WHOLE)

#: ``@GZ`` runs a test on a plain file and on its gzip copy (the test takes ``gz``)
GZ = pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])

ROW_FIELDS = ("start_ns", "latency_s", "status", "ok", "key", "line")


def scan_all(scan):
    """A reader's scan run to its end: (the scan, its batches, the batches joined)."""
    batches = list(scan.batches())
    return scan, batches, join(batches)


def same_rows(a, b) -> None:
    """Two batches hold the same rows: every column equal, with the same dtype, or absent in both."""
    for name in ROW_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and np.array_equal(x, y), name


def write(tmp: Path, name: str, data: bytes, gz: bool = False) -> Path:
    """``data`` written to ``tmp/name`` (gzip-compressed to ``tmp/name.gz`` with ``gz``)."""
    p = tmp / (name + (".gz" if gz else ""))
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def plain_copy(tmp: Path, path: Path, prefix: str = "") -> Path:
    """A decompressed copy of a (possibly gzipped) sample in ``tmp``."""
    return write(tmp, prefix + path.name.removesuffix(".gz"), read_bytes(path))


def head_lines(path: Path, n: int) -> list[bytes]:
    """The first ``n`` lines of a gzipped sample, line ends kept."""
    with gzip.open(path, "rb") as f:
        return [f.readline() for _ in range(n)]


def line_after(lines: list[bytes], nbytes: float, prefix: bytes = b"") -> int:
    """Index of the first line (of a file split at ``\\n``) that starts after ``nbytes`` bytes and
    with ``prefix``: a line in a later block when ``nbytes`` is a few :data:`SMALL`."""
    at = 0
    for i, ln in enumerate(lines):
        if at > nbytes and ln.startswith(prefix):
            return i
        at += len(ln) + 1
    raise AssertionError(f"no line starting with {prefix!r} after {nbytes} bytes")


def check_truncated_warning(warnings: list[str], path: Path, cut: bytes, shown: int) -> None:
    """The one warning of a file that ends in the middle of its last line: at that line, its length,
    and its first ``shown`` bytes quoted."""
    last = cut[cut.rindex(b"\n") + 1 :]
    line = cut.count(b"\n") + 1
    (w,) = warnings
    assert w.startswith(
        f"{path}:{line}: dropped a truncated last line of {len(last)} bytes "
        f"without a line end '{last[:shown].decode()}"
    ), w
