"""HdrHistogram interval logs (``.hlog``) as YCSB writes them: one latency histogram per interval.

YCSB (``-p measurementtype=hdrhistogram -p hdrhistogram.fileoutput=true``)
writes one log per measurement, ``<hdrhistogram.output.path><NAME>.hdr``,
through HdrHistogram's own ``HistogramLogWriter``::

    #[Logging for: READ]
    #[Histogram log format version 1.3]
    #[StartTime: 1795654381.018 (seconds since epoch), Thu Nov 26 00:53:01 UTC 2026]
    "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
    0.027,0.526,0.139,HISTFAAAAsB42j1U...

One line per status interval (``-p status.interval=S``): its start (seconds
after ``StartTime``, or after ``#[BaseTime: ...]`` when there is one, or
absolute), its length, its maximum, and the histogram, compressed and
base64-encoded.  The histograms are decoded by the maintained decoder,
HdrHistogram_py (``hdrhistogram`` on PyPI, ``HdrHistogram.decode``); the
lines around them (comments, timestamps) are read here, with the rules of
its ``HistogramLogReader`` (``BaseTime``; timestamps more than a year before
``StartTime`` are relative to it), but strictly: a line that is neither a
comment, the legend nor a whole interval is an error naming it (the
Python reader skips such lines silently).

An interval histogram has no requests, so rows are made from it:

- each recorded value with count c gives c rows; the latency of a row is
  the highest value equivalent to its histogram bucket, as HdrHistogram
  reports a percentile (``getValueAtPercentile``), so headroom's nearest
  rank percentile of the rows is HdrHistogram's to its precision (YCSB: 3
  significant digits);
- the unit is YCSB's: microseconds (``DBWrapper.measure`` records
  ``(end - start) / 1000`` ns).  A log does not say its unit, so only
  YCSB's logs (the ``#[Logging for: NAME]`` line YCSB writes first) are read;
- HdrHistogram records a value when the operation completes, so the
  interval is the one of the completions: the ends of an interval's rows
  are spread evenly across it, each row's start is its end minus its
  latency, and the latencies are laid out in a fixed pseudo-random order
  (seeded by the line number: reproducible) so that a time bucket shorter
  than the interval sees the interval's mix rather than its sorted values.

Errors: YCSB records a failed operation under a measurement of its own
(``READ-FAILED``, or ``READ-NOT_FOUND`` etc. with ``latencytrackederrors``
or ``reportlatencyforeacherror``), so ``READ.hdr`` holds successes only and
its failures are in another file.  A log of a failed-operation measurement
is read as failed requests (``ok`` False); any other log's errors are
unknown (``ok`` None), as for ab.  One log is one step (one YCSB run, one
``-threads``): a folder of one log per step, the concurrency in each name
(``ycsb-c8.hlog``), is a ramp.
"""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

import numpy as np

from ._batch import CHUNK_BYTES, Batch, Scan
from ._checks import MIN_TIME_NS, fail
from ._common import short
from ._protocol import Reader
from ._scan import truncated_warning

TOOL = "HdrHistogram interval log (YCSB)"
FIDELITY = (
    "per interval (YCSB's status.interval): request counts and latencies to the histogram's precision "
    "(3 significant digits), each request's time only to its interval"
)
EXPORT = ("ycsb run ... -threads C -s -p measurementtype=hdrhistogram -p hdrhistogram.fileoutput=true "
          "-p status.interval=1 (one READ.hdr per concurrency, renamed ycsb-cC.hlog)")  # fmt: skip
ONE_STEP = "one YCSB run: one step (give one log per step, the concurrency in its name, or --steps)"
#: log format versions whose histograms are V2-encoded (what HdrHistogram_py decodes)
VERSIONS = ("1.2", "1.3")
#: Status names of YCSB core (site.ycsb.Status) other than OK: a measurement NAME-<status> holds failures
FAILED_SUFFIXES = ("-FAILED", "-ERROR", "-NOT_FOUND", "-NOT_IMPLEMENTED", "-UNEXPECTED_STATE",
                   "-BAD_REQUEST", "-FORBIDDEN", "-SERVICE_UNAVAILABLE")  # fmt: skip
_NUM = rb"(\d+(?:\.\d*)?)"
_INTERVAL = re.compile(_NUM + b"," + _NUM + b"," + _NUM + rb",([A-Za-z0-9+/=]+)$")
_VERSION = re.compile(rb"#\[Histogram log format version ([^\]]*)\]")
_TIME = re.compile(rb"#\[(StartTime|BaseTime): *(\d+(?:\.\d*)?)[ \]]")
_YEAR_S = 365 * 24 * 3600.0


def guess_can_open(head: bytes) -> bool:
    """An interval log's header: ``#[`` comments (StartTime, BaseTime, format version), its legend,
    or its first interval line (tagged or not)."""
    text = head.lstrip(b"\xef\xbb\xbf")
    first = text.split(b"\n", 1)[0].rstrip(b"\r")
    if first.startswith(b"#["):
        return any(
            k in text[:4096] for k in (b"#[StartTime:", b"#[BaseTime:", b"#[Histogram log format version")
        )
    if first.startswith(b'"StartTimestamp","Interval_Length"'):
        return True
    if first.startswith(b"Tag="):
        first = first.split(b",", 1)[-1]
    return bool(_INTERVAL.match(first))


def _lines(path: Path):
    """(line number, bytes without the line end, ended by a line end) of a plain or gzipped log."""
    try:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        with (gzip.open if gz else open)(path, "rb") as f:
            for n, raw in enumerate(f, 1):
                ended = raw.endswith(b"\n")
                yield n, raw.rstrip(b"\r\n"), ended
    except (OSError, EOFError, zlib.error) as e:
        raise fail(path, None, f"cannot read the log ({e}): a damaged gzip file?") from None


class _Header:
    """What the comment lines said so far (HistogramLogReader's rules for the times)."""

    def __init__(self, path: Path):
        self.path = path
        self.name: str | None = None
        self.version: str | None = None
        self.start_s: float | None = None
        self.base_s: float | None = None
        self.values: dict = {}  # bucket index -> value, per histogram layout (_recorded)

    def comment(self, n: int, line: bytes) -> None:
        m = _TIME.match(line)
        if m:
            setattr(self, "start_s" if m[1] == b"StartTime" else "base_s", float(m[2]))
            return
        m = _VERSION.match(line)
        if m:
            self.version = m[1].decode("ascii", "replace").strip()
            if self.version not in VERSIONS:
                raise fail(self.path, n, _old_version(self.version))
            return
        if line.startswith(b"#[Logging for: ") and self.name is None:
            self.name = line[len(b"#[Logging for: ") :].rstrip(b"]").decode("utf-8", "replace")

    def absolute_s(self, n: int, t: float) -> float:
        """An interval's start in seconds since the epoch."""
        if self.name is None:
            raise fail(self.path, n, _not_ycsb())
        if self.start_s is None:
            self.start_s = t  # HistogramLogReader: no StartTime, the first interval's time is the start
        if self.base_s is None:
            self.base_s = self.start_s if t < self.start_s - _YEAR_S else 0.0
        return t + self.base_s


def _old_version(v: str) -> str:
    return (
        f"HdrHistogram log format version {short(v, 20)}: headroom reads versions {', '.join(VERSIONS)} "
        "(V2-encoded histograms); 1.1 is HdrHistogram 2.1.4's (YCSB 0.17.0's own): record with "
        "HdrHistogram 2.1.12 on YCSB's classpath (as YCSB's master does)"
    )


def _not_ycsb() -> str:
    return (
        "an HdrHistogram interval log without YCSB's '#[Logging for: NAME]' first line: the log does "
        "not say its value unit (YCSB records microseconds, jHiccup nanoseconds), so headroom reads "
        "only YCSB's logs (ycsb ... -p measurementtype=hdrhistogram -p hdrhistogram.fileoutput=true)"
    )


def _decode(path: Path, n: int, payload: bytes):
    """One interval's histogram, decoded by HdrHistogram_py; a damaged one is an error naming the line."""
    from hdrh.histogram import HdrHistogram

    try:
        return HdrHistogram.decode(payload)
    except Exception as e:  # base64, zlib, cookie and length errors of the decoder
        why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        return _decode_failed(path, n, payload, why)


def _decode_failed(path: Path, n: int, payload: bytes, why: str):
    hint = "a damaged or truncated histogram"
    if "cookie" in why.lower():
        hint = ("not a V2-encoded integer histogram (an older HdrHistogram's V0/V1 encoding, or a "
                "DoubleHistogram): record with HdrHistogram 2.1.12")  # fmt: skip
    raise fail(path, n, f"cannot decode the interval's histogram ({short(why, 60)}): {hint} "
                        f"'{short(payload.decode('ascii', 'replace'), 30)}'")  # fmt: skip


def _recorded(h, cache: dict) -> tuple[np.ndarray, np.ndarray]:
    """The recorded values of a decoded histogram (each bucket's highest equivalent value, as its
    recorded-values iterator gives them) and their counts.  The counts are read from the decoded
    array at once and the values asked of HdrHistogram_py for the non-zero buckets only (its
    iterator walks every bucket in Python: 28 ms an interval); ``cache`` keeps them per layout."""
    counts = np.ctypeslib.as_array(h.counts).astype(np.int64, copy=False)[: h.counts_len]
    idx = np.flatnonzero(counts)
    layout = cache.setdefault((h.unit_magnitude, h.sub_bucket_half_count_magnitude), {})
    vals = np.empty(len(idx), np.int64)
    for k, i in enumerate(idx.tolist()):
        v = layout.get(i)
        if v is None:
            v = layout[i] = h.get_highest_equivalent_value(h.get_value_from_index(i))
        vals[k] = v
    return vals, counts[idx]


def _rows(h, start_s: float, length_s: float, n: int, cache: dict):
    """The rows of one interval histogram: latencies (s) in a seeded order, ends spread evenly."""
    vals, counts = _recorded(h, cache)
    total = int(counts.sum())
    if total == 0:
        return None
    lat = np.repeat(vals / 1e6, counts)
    lat = lat[np.random.default_rng(n).permutation(total)]
    t0, span = round(start_s * 1e9), round(length_s * 1e9)
    ends = t0 + (np.arange(total, dtype=np.int64) * 2 + 1) * span // (2 * total)
    return ends - np.rint(lat * 1e9).astype(np.int64), lat


def scan(path: Path, *, chunk_bytes: int = CHUNK_BYTES) -> Scan:
    """One pass over an interval log: every interval's rows, a batch of about ``chunk_bytes / 8`` rows
    at a time."""
    path = Path(path)
    s = Scan(path=path, fmt="hlog", fidelity=FIDELITY)
    s._gen = _batches(s, max(1024, chunk_bytes // 8))
    return s


def _batches(scan: Scan, per_batch: int):
    """The log's rows; a successes log's step failures from the failed-operation logs beside it."""
    hdr = _Header(scan.path)
    beside: list[Path] | None = None  # found once the log's name is read (before its first batch)
    for parts in _parts(scan, scan.path, hdr, per_batch):
        if beside is None:
            beside = _beside(scan.path, hdr.name)
            if beside:
                scan.side["failures_from"] = [p.name for p in beside]
        yield _batch(parts, hdr.name, scan.path, joined=bool(beside))
    for other in beside or ():
        o = _Header(other)
        for parts in _parts(scan, other, o, per_batch):
            if not (o.name or "").endswith(FAILED_SUFFIXES):
                raise fail(
                    other, None, f"expected a failed-operation log ({hdr.name}-FAILED), found {o.name}"
                )
            b = _batch(parts, o.name, other, joined=True)
            b.line[:] = 0  # rows of another file: no line of this one to name
            yield b


def _parts(scan: Scan, path: Path, hdr: _Header, per_batch: int):
    """The rows of one log, as lists of interval parts of about ``per_batch`` rows."""
    parts, held, intervals, last = [], 0, 0, 0
    for n, line, ended in _lines(path):
        last = n
        if not ended and line.strip():
            scan.warnings.append(truncated_warning(path, n, len(line), line.decode("utf-8", "replace")))
            break
        rows = _line_rows(path, hdr, n, line)
        if rows is None:
            continue
        intervals += 1
        if len(rows[0]):
            parts.append(rows)
            held += len(rows[0])
        if held >= per_batch:
            yield parts
            parts, held = [], 0
    if intervals == 0:
        raise fail(path, None, f"no intervals (the log has {last} header lines and no interval line)")
    if parts:
        yield parts


def _line_rows(path: Path, hdr: _Header, n: int, line: bytes):
    """Rows of one line (start ns, latency s, line), or None for a comment, the legend or a blank."""
    if line.startswith(b"#"):
        hdr.comment(n, line)
        return None
    if not line.strip() or line.startswith(b'"StartTimestamp"'):
        return None
    if line.startswith(b"Tag="):
        raise fail(path, n, "a tagged interval (Tag=NAME): several series in one log are not read; "
                            "YCSB writes one log per measurement, untagged")  # fmt: skip
    m = _INTERVAL.match(line)
    if not m:
        raise fail(path, n, "not an interval line 'start,length,max,HIST...' (a damaged log?): "
                            f"'{short(line.decode('utf-8', 'replace'), 60)}'")  # fmt: skip
    start_s = hdr.absolute_s(n, float(m[1]))
    if start_s * 1e9 < MIN_TIME_NS:
        raise fail(path, n, f"interval start {start_s:.3f} s since the epoch is before 2000: the log has no "
                            "#[StartTime: ...] line to anchor its relative timestamps")  # fmt: skip
    rows = _rows(_decode(path, n, m[4]), start_s, float(m[2]), n, hdr.values)
    if rows is None:
        return np.zeros(0, np.int64), np.zeros(0), 0
    return rows[0], rows[1], n


_EXTS = (".hlog", ".hdr", ".hlog.gz", ".hdr.gz")


def _stem(path: Path) -> tuple[str, str]:
    """A log's name without its extension, and the extension."""
    for ext in _EXTS:
        if path.name.endswith(ext):
            return path.name[: -len(ext)], ext
    return path.stem, path.suffix


def _partner(path: Path, name: str) -> Path | None:
    """The log of the same step's successes beside a failed-operation log ``path`` (measurement
    ``name``): ``READ.hdr`` beside YCSB's ``READ-FAILED.hdr``, ``ycsb-c8.hlog`` beside
    ``ycsb-c8-READ-FAILED.hlog``; None when there is none."""
    stem, _ = _stem(path)
    op = next((name[: -len(x)] for x in FAILED_SUFFIXES if name.endswith(x)), name)
    stems = [op] if stem == name else [stem[: -len(name) - 1]] if stem.endswith("-" + name) else []
    for st in stems:
        for ext in _EXTS:
            if st and (path.parent / (st + ext)).is_file():
                return path.parent / (st + ext)
    return None


def _beside(path: Path, name: str | None) -> list[Path]:
    """The failed-operation logs of a successes log's step beside it (the names :func:`_partner` pairs):
    ``READ-FAILED.hdr`` beside ``READ.hdr``, ``ycsb-c8-READ-FAILED.hlog`` beside ``ycsb-c8.hlog``."""
    if name is None or name.endswith(FAILED_SUFFIXES):
        return []
    stem, _ = _stem(path)
    heads = [name] if stem == name else [f"{stem}-{name}"]
    return [path.parent / (h + x + ext) for h in heads for x in FAILED_SUFFIXES for ext in _EXTS
            if (path.parent / (h + x + ext)).is_file()]  # fmt: skip


def read_with(path: Path) -> Path | None:
    """The successes log a failed-operation log is read with (its step's failures), else None: a
    folder of one log per step leaves it out of the steps."""
    name = _name(path)
    return _partner(path, name) if name is not None and name.endswith(FAILED_SUFFIXES) else None


def _name(path: Path) -> str | None:
    """The measurement a log is of (YCSB's first line, ``#[Logging for: NAME]``), else None."""
    for _, line, _ in _lines(path):
        if line.startswith(b"#[Logging for: "):
            return line[len(b"#[Logging for: ") :].rstrip(b"]").decode("utf-8", "replace")
        if not line.startswith(b"#"):
            return None
    return None


def _batch(parts, name: str | None, path: Path, joined: bool = False) -> Batch:
    """Rows of interval parts: failed ones (``ok`` False) from a failed-operation log, successes
    (``ok`` True) when failures are joined to them, else ``ok`` None (errors unknown)."""
    st = np.concatenate([p[0] for p in parts])
    lat = np.concatenate([p[1] for p in parts])
    line = np.concatenate([np.full(len(p[0]), p[2], np.int64) for p in parts])
    failed = name is not None and name.endswith(FAILED_SUFFIXES)
    if failed and not joined:
        partner = _partner(path, name)
        if partner is not None:
            raise fail(path, None, f"the failed operations ({name}) of the step whose successes are in "
                                   f"{partner.name}, which reads them with it: give {partner.name}")  # fmt: skip
    ok = np.full(len(st), not failed) if (failed or joined) else None
    return Batch(st, lat, None, ok, None, line)


def plan(scan: Scan, raw):
    """One log is one step."""
    from ._plans import OneStep

    return OneStep(scan, ONE_STEP)


READER = Reader(
    "hlog", TOOL, FIDELITY, EXPORT,
    "an HdrHistogram interval log ('#[StartTime: ...', '#[Histogram log format version 1.3]' ...)",
    guess_can_open, scan, plan, one_file_per_step=True, one_step=True,
    errors_unknown="no READ-FAILED log beside it", read_with=read_with,
)  # fmt: skip
