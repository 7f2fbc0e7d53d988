"""JMeter: JTL CSV (with its header line) and XML JTL.

``timeStamp`` (ms since the epoch) is taken as the sample's START, as with
``sampleresult.timestamp.start=true`` (the setting docs/formats.md asks
for); ``elapsed`` is the latency in ms: per request, millisecond times.
``success`` decides errors; ``responseCode`` names them (0 when it is not a
number, e.g. "Non HTTP response code").  Transaction-controller parent
samples (message "Number of samples in transaction ...") are left out, so no
request is counted twice.  Steps: the ``allThreads`` levels (active threads
in the whole test when the sample was taken) that are held (headroom.levels:
thread start-up and shut-down are counted in the next step), else one step.

Both are read in one pass of bounded memory (:mod:`._batch`): ``scan_csv``
and ``scan_xml`` yield batches of compact columns (``key``: allThreads),
``finish`` turns a scan and its joined rows into the request table, and
``read_csv`` / ``read_xml`` are the two together.  The CSV is cut into
blocks at line ends outside quoted values (JMeter quotes a value with a
line end in it) and parsed block by block with pyarrow; a block pyarrow
refuses is read line by line with the csv module to name its bad line.
The XML is fed to expat in blocks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..endpoints import NameCodes, only_name
from ._batch import CHUNK_BYTES, Batch, Scan, join
from ._blocks import TextBlocks, raw_chunks
from ._common import COARSE_MS, fail, first_line, is_int, short
from ._plans import COLS, Found, LevelPlan, OneStep, UniquePlan
from ._protocol import Reader
from ._scan import BOM, arrow_copy

_TC = "Number of samples in transaction"
_NOHEADER = re.compile(rb"^1\d{12},\d+,")


def guess_csv(head: bytes) -> bool:
    line = first_line(head).lstrip(b"\xef\xbb\xbf")
    cols = line.split(b",")
    return b"timeStamp" in cols and b"elapsed" in cols


def guess_xml(head: bytes) -> bool:
    return b"<testResults" in head[:4096]


def no_header_hint(head: bytes) -> str | None:
    if _NOHEADER.match(first_line(head)):
        return (
            "looks like a JMeter JTL CSV without its header line: run JMeter with "
            "-Jjmeter.save.saveservice.print_field_names=true (see docs/formats.md)"
        )
    return None


# --------------------------------------------------------------------------
# CSV JTL


_DICT = None  # pa.dictionary(pa.int32(), pa.string()), made on first use (pyarrow imported lazily)


def _csv_types(cols: list[str]) -> dict:
    import pyarrow as pa

    global _DICT
    if _DICT is None:
        _DICT = pa.dictionary(pa.int32(), pa.string())
    types = {"timeStamp": pa.int64(), "elapsed": pa.int64()}
    for c in ("success", "responseCode", "responseMessage", "label"):
        if c in cols:
            types[c] = _DICT  # few distinct values: judged once per value, not once per row
    if "allThreads" in cols:
        types["allThreads"] = pa.int64()
    return types


def _row_problem(cols: list[str]):
    ti, ei = cols.index("timeStamp"), cols.index("elapsed")
    ai = cols.index("allThreads") if "allThreads" in cols else None

    def problem(row):
        if not is_int(row[ti]):
            return (
                f"bad timeStamp '{short(row[ti], 40)}' (expected milliseconds since the epoch: "
                "set jmeter.save.saveservice.timestamp_format=ms)"
            )
        if not is_int(row[ei]) or int(row[ei]) < 0:
            return f"bad elapsed '{short(row[ei], 40)}' (expected milliseconds >= 0)"
        if ai is not None and not is_int(row[ai]):
            return f"bad allThreads '{short(row[ai], 40)}' (expected an integer)"
        return None

    return problem


def _diagnose(path: Path, block, first_csv_line: int, header: bool, cols: list[str], why: str):
    """The first bad line of a block pyarrow refused (the csv module, line by line), as an error.

    ``first_csv_line``: the file line the block starts at, counted as the csv module counts
    (``\\r``, ``\\n`` and ``\\r\\n`` each end a line).
    """
    import csv
    import io

    problem = _row_problem(cols)
    ncols = len(cols)
    reader = csv.reader(io.StringIO(bytes(block).decode("utf-8", "replace"), newline=""))
    off = first_csv_line - 1
    try:
        for row in reader:
            if header and reader.line_num == 1:
                continue
            if len(row) != ncols:
                return fail(
                    path,
                    off + reader.line_num,
                    f"expected {ncols} fields, got {len(row)}: '{short(','.join(row))}'",
                )
            p = problem(row)
            if p:
                return fail(path, off + reader.line_num, p)
    except csv.Error as e:
        return fail(path, off + reader.line_num, f"bad CSV ({short(str(e))})")
    return fail(path, None, f"cannot parse this CSV file: {short(why.splitlines()[0] if why else why)}")


def _by_value(col, judge, memo: dict, dtype) -> np.ndarray:
    """``judge`` (a verdict per distinct value, :func:`_judged`) of every row of a dictionary column.

    ``memo`` keeps the verdicts across blocks: each distinct value is judged once per file.
    Nothing here converts a pyarrow array to numpy through pyarrow's pandas machinery
    (``pa.array`` of a list, ``to_numpy(zero_copy_only=False)``, a compute call with a Python
    scalar): that imports pandas, about 0.2 s of CPU in a fresh process.
    """
    from ._scan import np_column

    parts = []
    for chunk in col.chunks:
        d = chunk.dictionary
        vals = d.to_pylist()
        at = [i for i, v in enumerate(vals) if v not in memo]
        if at:
            memo.update(zip([vals[i] for i in at], _judged(judge, d, vals, at)))
        of = np.array([memo[v] for v in vals], dtype)
        idx = chunk.indices
        if idx.null_count:  # (not with strings_can_be_null=False)
            parts.append(of[np.asarray(idx.to_numpy(zero_copy_only=False), np.int64)])
        elif len(of) and (of == of[0]).all():  # one verdict for all (no transaction parent, all successes)
            parts.append(np.full(len(chunk), of[0], dtype))
        else:
            parts.append(of.take(np_column(_chunked(idx), np.int32)))
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def _judged(judge, d, vals: list, at: list[int]) -> list:
    """The verdicts of ``judge`` (a pair: plain Python on one ASCII string, pyarrow compute on an array)
    on the values ``vals[i]`` for ``i`` in ``at`` of the dictionary ``d`` (``vals`` is ``d`` as a list).

    The two agree on ASCII strings (whitespace, case and digits are the same there; the tests check
    every ASCII character), so pyarrow compute (whose import costs about 0.1 s of CPU) is only
    used for a value outside ASCII.
    """
    by_python, by_arrow = judge
    new = [vals[i] for i in at]
    if all(v is not None and v.isascii() for v in new):
        return [by_python(v) for v in new]
    return by_arrow(d if len(at) == len(vals) else d.filter(_mask(len(vals), at)))


def _mask(n: int, at: list[int]):
    """A pyarrow boolean array of ``n`` values, true at ``at`` (built from a numpy buffer, without pandas)."""
    import pyarrow as pa

    bits = np.zeros(n, bool)
    bits[at] = True
    packed = np.packbits(bits, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(packed)])


def _chunked(a):
    import pyarrow as pa

    return pa.chunked_array([a], type=a.type)


def _code_of(v: str) -> int:
    """The HTTP status of an ASCII value: 1 to 4 digits after trimming whitespace, else 0."""
    v = v.strip()
    return int(v) if 1 <= len(v) <= 4 and v.isdigit() else 0


def _code_of_arrow(values) -> list[int]:
    import pyarrow.compute as pc

    rc = pc.utf8_trim_whitespace(values)
    ok = pc.match_substring_regex(rc, r"^[0-9]{1,4}$").to_pylist()
    return [int(v) if m else 0 for v, m in zip(rc.to_pylist(), ok)]


def _success_of(v: str) -> bool:
    return v.strip().lower() == "true"


def _success_of_arrow(values) -> list[bool]:
    import pyarrow.compute as pc

    return [v == "true" for v in pc.utf8_lower(pc.utf8_trim_whitespace(values)).to_pylist()]


def _tc_of(v: str) -> bool:
    return v.startswith(_TC)


def _tc_of_arrow(values) -> list[bool]:
    import pyarrow.compute as pc

    return pc.starts_with(values, _TC).to_pylist()


#: judges of the dictionary columns: (plain Python on one ASCII value, pyarrow compute on an array)
_CODE, _SUCCESS, _TCP = (_code_of, _code_of_arrow), (_success_of, _success_of_arrow), (_tc_of, _tc_of_arrow)


def _int_column(col, first_null: list, name: str, base: int) -> np.ndarray:
    """A null-free int64 column as numpy; the first null's row (``base`` + index) is noted in ``first_null``."""
    from ._scan import first_null as first_null_row
    from ._scan import np_column

    if col.null_count:
        import pyarrow.compute as pc

        if first_null[0] is None:
            first_null[0] = base + first_null_row(col)
        col = pc.fill_null(col, 0)
    out = np_column(col, np.int64)
    return out if out.flags.owndata else out.copy()  # (several chunks: already a copy)


def scan_csv(path, *, chunk_bytes: int = CHUNK_BYTES, name: str | None = None) -> Scan:
    """One pass over a CSV JTL (plain or gzip) in blocks of about ``chunk_bytes``: batches of its samples.

    Transaction-controller parents are left out (counted in a warning); ``key`` is
    ``allThreads`` (None without the column, or from the first block with an empty value on:
    then :attr:`Scan.key_kind` is None after the pass and a warning says so).  Errors that
    need the whole file (an empty or negative value, no samples) are raised at the end of the pass.
    """
    return only_name(_scan_csv(Path(path), chunk_bytes, None), name)


def _scan_csv(path: Path, chunk_bytes: int, data: bytes | None) -> Scan:
    scan = Scan(path, "jmeter-csv", COARSE_MS, key_kind="level")
    scan._gen = _csv_batches(scan, chunk_bytes, data)
    return scan


class _CsvPass:
    """What one pass over a CSV JTL carries from block to block: columns, counts, first bad values."""

    def __init__(self, scan: Scan):
        self.scan, self.cols, self.types, self.opts = scan, None, {}, None
        self.rows = self.kept = self.n_tc = 0
        self.csv_line = 1  # file line of the block's start as the csv module counts lines (for messages)
        self.null_ts: list = [None]
        self.null_el: list = [None]
        self.el_min, self.el_min_row = 0, -1
        self.threads_ok = True
        self.memo: dict = {"rc": {}, "ok": {}, "tc": {}}
        self.names = NameCodes(scan.names)

    def header(self, buf, start: int, end: int) -> int:
        """Read the header line of the first block; returns where the block's text starts."""
        import pyarrow.csv as pacsv

        if buf[start : start + 3] == BOM:
            start += 3
        nl = buf.find(b"\n", start, end)
        first = first_line(buf[start : nl if nl >= 0 else end])
        self.cols = [c.strip() for c in first.decode("utf-8", "replace").split(",")]
        if "timeStamp" not in self.cols or "elapsed" not in self.cols:
            raise fail(
                self.scan.path, 1, f"a JTL CSV header without timeStamp and elapsed: '{short(first, 60)}'"
            )
        self.types = _csv_types(self.cols)
        if "allThreads" not in self.types:
            self.scan.key_kind = None
        self.opts = (
            pacsv.ParseOptions(newlines_in_values=True),
            pacsv.ConvertOptions(column_types=self.types, include_columns=list(self.types), null_values=[""],
                                 strings_can_be_null=False, quoted_strings_can_be_null=False),
        )  # fmt: skip
        return start

    def parse(self, block, header: bool):
        """One block as a table, on one thread: pyarrow's threads (1 MB parse blocks and their
        hand-offs) cost about 40 % more CPU on a JTL block of a few MB and gain no time on 2 busy cores."""
        import pyarrow as pa
        import pyarrow.csv as pacsv

        try:
            return pacsv.read_csv(
                pa.BufferReader(arrow_copy(block)),
                read_options=pacsv.ReadOptions(
                    column_names=self.cols, skip_rows=1 if header else 0, use_threads=False
                ),
                parse_options=self.opts[0],
                convert_options=self.opts[1],
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise _diagnose(self.scan.path, block, self.csv_line, header, self.cols, str(exc)) from None

    def batch(self, t) -> Batch:
        """The samples of one parsed block (transaction parents left out)."""
        n, types, rows = t.num_rows, self.types, self.rows
        ts = _int_column(t.column("timeStamp"), self.null_ts, "timeStamp", rows)
        el = _int_column(t.column("elapsed"), self.null_el, "elapsed", rows)
        i = int(np.argmin(el))
        if el[i] < self.el_min:
            self.el_min, self.el_min_row = int(el[i]), rows + i
        code = _by_value(t.column("responseCode"), _CODE, self.memo["rc"], np.int64) if "responseCode" in types \
            else np.zeros(n, np.int64)  # fmt: skip
        ok = _by_value(t.column("success"), _SUCCESS, self.memo["ok"], bool) if "success" in types \
            else (code >= 200) & (code <= 299)  # fmt: skip
        key = None
        if self.threads_ok and "allThreads" in types:
            c = t.column("allThreads")
            if c.null_count:
                self.threads_ok = False
            else:
                key = _int_column(c, [None], "allThreads", rows)
        self.rows += n
        name = self.names.of_dictionary(t.column("label")) if "label" in types else None
        b = Batch(
            ts * 1_000_000, el / 1e3, code, ok, key, np.arange(rows + 2, rows + 2 + n, dtype=np.int64), name
        )
        if "responseMessage" in types:
            tc = _by_value(t.column("responseMessage"), _TCP, self.memo["tc"], bool)
            if tc.any():
                self.n_tc += int(tc.sum())
                b = b.take(~tc)
        self.kept += len(b)
        return b

    def finish(self, truncated: str | None) -> None:
        """The warnings of the whole pass, and the errors that needed it."""
        scan, path = self.scan, self.scan.path
        if truncated:
            scan.warnings.append(truncated)
        if "allThreads" in (self.cols or ()) and not self.threads_ok:
            scan.key_kind = None
            scan.warnings.append(f"{path}: allThreads has empty values: one step")
        if self.n_tc:
            scan.warnings.append(
                f"{path}: left out {self.n_tc} transaction-controller parent sample(s) "
                "(their requests are counted on their own rows)"
            )
        for name, first in (("timeStamp", self.null_ts[0]), ("elapsed", self.null_el[0])):
            if first is not None:
                raise fail(path, first + 2, f"empty {name} value")
        if self.el_min < 0:
            raise fail(path, self.el_min_row + 2, f"bad elapsed {self.el_min} (must be >= 0)")
        if self.kept == 0:
            raise fail(path, None, "no samples (the file has a header but no data rows)")


def _csv_batches(scan: Scan, chunk_bytes: int, data: bytes | None) -> Iterator[Batch]:
    blocks = TextBlocks(scan.path, raw_chunks(scan.path, data, chunk_bytes), chunk_bytes, quotes=True)
    st = _CsvPass(scan)
    for buf, start, end, line in blocks:
        header = st.cols is None
        if header:
            start = st.header(buf, start, end)
        t = st.parse(memoryview(buf)[start:end], header)
        nxt = blocks.line_after
        if buf.find(b"\r", start, end) >= 0:  # a lone CR ends a line for the csv module too
            nxt += buf.count(b"\r", start, end) - buf.count(b"\r\n", start, end)
        st.csv_line += nxt - line
        if t.num_rows == 0:
            continue
        b = st.batch(t)
        del t
        if len(b):
            yield b
    st.finish(blocks.truncated)


# --------------------------------------------------------------------------
# XML JTL

_SAMPLES = ("httpSample", "sample")


def scan_xml(path, *, chunk_bytes: int = CHUNK_BYTES, name: str | None = None) -> Scan:
    """One pass over an XML JTL (plain or gzip), fed to expat in blocks of about ``chunk_bytes``.

    The top-level samples (``httpSample`` or ``sample``) of ``testResults``; a
    transaction-controller parent gives its child samples instead.  ``key`` is ``na``
    (None from the first batch with a sample without an integer ``na`` on: then
    :attr:`Scan.key_kind` is None after the pass).  A file with a DOCTYPE (entity
    definitions) is refused rather than expanded: no block holding ``<!ENTITY`` is parsed.
    """
    return only_name(_scan_xml(Path(path), chunk_bytes, None), name)


def _scan_xml(path: Path, chunk_bytes: int, data: bytes | None) -> Scan:
    scan = Scan(path, "jmeter-xml", COARSE_MS, key_kind="level")
    scan._gen = _xml_batches(scan, chunk_bytes, data)
    return scan


def _refused(path: Path):
    return fail(path, None, "an XML JTL with a DOCTYPE or entity definitions is refused (JMeter writes none)")


def _xml_rows(path: Path, attrs: list[dict], lines: list[int], state: dict) -> Batch | None:
    """The samples collected from one block as a batch (ts and t must be integers, as Python reads them)."""
    if not attrs:
        return None
    try:
        ts = list(map(int, [a["ts"] for a in attrs]))
        el = list(map(int, [a["t"] for a in attrs]))
    except (KeyError, ValueError):
        for a, ln in zip(attrs, lines):
            try:
                int(a["ts"])
                int(a["t"])
            except (KeyError, ValueError):
                shown = {(("{" + k) if "}" in k else k): v for k, v in a.items()}  # as ElementTree names them
                raise fail(
                    path, ln, f"a sample without integer ts and t attributes: '{short(str(shown))}'"
                ) from None
        raise
    memo: dict = state["memo"]
    ok = np.fromiter((a.get("s", "true") == "true" for a in attrs), bool, len(attrs))
    rcs = [a.get("rc", "") for a in attrs]
    for v in set(rcs).difference(memo["rc"]):
        memo["rc"][v] = int(v) if v and v.isascii() and v.isdigit() and len(v) <= 4 else 0
    code = np.fromiter(map(memo["rc"].__getitem__, rcs), np.int64, len(rcs))
    key = None
    if state["threads"]:
        nas = [a.get("na") for a in attrs]
        for v in set(nas).difference(memo["na"]):
            memo["na"][v] = int(v) if v is not None and is_int(v) else None
        thr = list(map(memo["na"].__getitem__, nas))
        if None in thr:
            state["threads"] = False
        else:
            key = np.array(thr, np.int64)
    ts_a = np.array(ts, np.int64)
    el_a = np.array(el, np.int64)
    line = np.array(lines, np.int64)
    if len(el_a):
        i = int(np.argmin(el_a))
        if el_a[i] < state["el_min"][0]:
            state["el_min"] = (int(el_a[i]), int(line[i]))
    name = state["names"].of_values([a.get("lb", "") for a in attrs])
    return Batch(ts_a * 1_000_000, el_a / 1e3, code, ok, key, line, name)


class _XmlPass:
    """expat over an XML JTL: the top-level samples (a transaction parent's children instead of it)."""

    def __init__(self, scan: Scan):
        import xml.parsers.expat as expat

        self.scan, self.expat = scan, expat
        self.p = expat.ParserCreate(
            None, "}"
        )  # as ElementTree's parser: names in a namespace are not samples
        self.p.StartElementHandler, self.p.EndElementHandler = self._start, self._end
        self.attrs: list[dict] = []
        self.lines: list[int] = []
        self.depth = 0
        self.top: dict | None = None  # the attributes of the open top-level sample
        self.tc = False  # ... a transaction-controller parent: its child samples are the rows
        self.children: list[dict] = []
        self.state = {
            "memo": {"rc": {}, "na": {}},
            "threads": True,
            "el_min": (0, 0),
            "names": NameCodes(scan.names),
        }

    def _start(self, name, a):
        self.depth += 1
        if self.depth == 2:
            if name in _SAMPLES:
                self.top = a
                self.tc = a.get("rm", "").startswith(_TC)
                if self.tc:
                    self.children.clear()
        elif self.depth == 3 and self.tc and self.top is not None and name in _SAMPLES:
            self.children.append(a)

    def _end(self, name):
        self.depth -= 1
        if self.depth == 1 and self.top is not None:
            if self.tc:
                self.attrs.extend(self.children)
                self.lines.extend([self.p.CurrentLineNumber] * len(self.children))
            else:
                self.attrs.append(self.top)
                self.lines.append(self.p.CurrentLineNumber)
            self.top, self.tc = None, False

    def parse(self, piece: bytes, final: bool) -> Batch | None:
        path = self.scan.path
        try:
            self.p.Parse(piece, final)
        except self.expat.ExpatError as e:
            _xml_rows(
                path, self.attrs, self.lines, self.state
            )  # a bad sample before the bad XML is named first
            raise fail(path, e.lineno, f"bad XML ({short(str(e), 80)})") from None
        b = _xml_rows(path, self.attrs, self.lines, self.state)
        self.attrs.clear()
        self.lines.clear()
        return b


def _xml_batches(scan: Scan, chunk_bytes: int, data: bytes | None) -> Iterator[Batch]:
    path = scan.path
    xp = _XmlPass(scan)
    parse, state = xp.parse, xp.state
    if data is not None and (b"<!DOCTYPE" in data[:4096] or b"<!ENTITY" in data):
        raise _refused(path)
    n = 0
    head, prev = b"", b""
    step = min(chunk_bytes, 1 << 20)  # expat's attribute dicts of at most this many bytes at a time
    parts: list[Batch] = []
    for chunk in raw_chunks(path, data, chunk_bytes):
        if len(head) < 4096:
            head += chunk[: 4096 - len(head)]
            if b"<!DOCTYPE" in head:
                raise _refused(path)
        if b"<!ENTITY" in prev + chunk[:8] or b"<!ENTITY" in chunk:
            raise _refused(path)
        prev = chunk[-8:]
        view = memoryview(chunk)
        for i in range(0, len(chunk), step):
            b = parse(view[i : i + step], False)
            if b is not None:
                parts.append(b)
        if parts:
            b = join(parts) if len(parts) > 1 else parts[0]
            parts.clear()
            n += len(b)
            yield b
    b = parse(b"", True)
    if b is not None:
        n += len(b)
        yield b
    if not state["threads"]:
        scan.key_kind = None
    if state["el_min"][0] < 0:
        v, ln = state["el_min"]
        raise fail(path, ln, f"bad elapsed t={v} (must be >= 0)")
    if n == 0:
        raise fail(path, None, "no samples (the file has a header but no data rows)")


# --------------------------------------------------------------------------
# the request table


# --------------------------------------------------------------------------
# the step plan of a spooled file (headroom.spooled): the same steps as finish()


class JMeterPlan:
    """JMeter: the held ``allThreads`` levels; none held: one step per level; no column: one step."""

    def __init__(self, scan, raw):
        from ._checks import fail

        self.scan, self.notes = scan, ()
        if scan.key_kind != "level":
            self.plan = OneStep(scan, "")
            self.names, self.conc = ["all"], None
            self.src = "no allThreads column (jmeter.save.saveservice.thread_counts=true adds it): one step"
            return

        def check(c):
            bad = c["key"] <= 0
            if bad.any():
                i = int(np.argmax(bad))
                raise fail(scan.path, int(c["line"][i]), f"bad allThreads {int(c['key'][i])} (must be > 0)")

        key = lambda c: c["key"]  # noqa: E731
        levels = LevelPlan(raw, key, check=check)
        if levels.steps.levels:
            # the notes count every row: the assign pass that follows does (found), no pass of its own
            self.plan, self.rows = levels, raw.n
            lv = self.plan.steps.levels
            self.names = [f"concurrency {float(v):g}" for v in lv]
            self.conc = [int(v) for v in lv]
            self.src = f"allThreads, held levels ({len(lv)} steps)"
        else:
            for c in raw.chunks(COLS):
                levels.assign(c)
            self.notes = levels.steps.notes()
            self.plan = UniquePlan(raw, key)
            self.names = [f"concurrency {int(v)}" for v in self.plan.levels]
            self.conc = [int(v) for v in self.plan.levels]
            self.src = f"allThreads ({len(self.names)} levels, none held: one step each)"

    def assign(self, c: dict) -> np.ndarray:
        return self.plan.assign(c)

    def found(self) -> Found:
        """The steps; called once every row was assigned (the held levels' notes count them all)."""
        notes = self.notes
        if isinstance(self.plan, LevelPlan):
            steps = self.plan.steps
            if steps.n != self.rows:
                raise RuntimeError(
                    f"{self.scan.path}: steps found after {steps.n} of {self.rows} rows assigned"
                )
            notes = steps.notes()
        w = list(self.scan.warnings) + [f"{self.scan.path}: {n}" for n in notes]
        return Found(self.names, self.conc, None, self.src, w)


# --------------------------------------------------------------------------
# the readers

CSV_READER = Reader(
    "jmeter-csv", "JMeter", COARSE_MS, "jmeter -n -t plan.jmx -l results.jtl (CSV with header, thread_counts=true)",
    "a JTL header with timeStamp and elapsed", guess_csv, scan_csv, JMeterPlan, scan_options=("name",),
)  # fmt: skip
XML_READER = Reader(
    "jmeter-xml", "JMeter", COARSE_MS,
    "jmeter -n -t plan.jmx -l results.jtl -Jjmeter.save.saveservice.output_format=xml",
    "an XML <testResults> document", guess_xml, scan_xml, JMeterPlan, scan_options=("name",),
)  # fmt: skip
