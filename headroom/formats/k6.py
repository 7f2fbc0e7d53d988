"""k6: ``--out json=F`` (NDJSON ``Point`` samples) and ``--out csv=F`` (with a sub-second ``timeFormat``).

k6 stamps a request's ``http_req_duration`` sample when the request ENDS:
start = time - duration.  Status "0" is a request without a response
(connection refused, timeout).  ``expected_response`` (k6 >= 0.31) decides
success when present, else the status (2xx).  Steps: one per scenario when
there are several (their concurrency from the ``vus`` samples inside each);
else from the ``vus`` metric (one sample a second, so boundaries are accurate
to about a second); else one step.

Both readers are one pass over the file in blocks of whole lines
(:func:`headroom.formats._blocks.blocks`): only the ``http_req_duration``
rows become request rows (a k6 CSV has about 13 metric rows per request,
filtered per block and never kept), the ``vus`` and ``dropped_iterations``
samples (one a second) are kept on the side for the steps.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ..endpoints import NameCodes, only_name
from ..model import HeadroomError
from ._batch import CHUNK_BYTES, Batch, Scan
from ._blocks import (
    Block,
    blocks,
    col_np,
    json_read_options,
    label_codes,
    py_strings,
    read_block_csv,
    row_lines,
    steps_of_labels,
)
from ._common import EXACT, Table, fail, first_line, is_float, rfc3339_ns, short
from ._plans import COLS, Counted, Found, GroupPlan, OneStep, TablePlan, ends
from ._protocol import Reader
from ._scan import TS_UTC, head_bytes, strip_bom

_CSV_HEAD = re.compile(rb"^metric_name,timestamp,metric_value(,|$)")
_UNIX_SCALE = {19: 1, 16: 1_000, 13: 1_000_000}  # digits of a unix time now -> ns factor
_SECONDS_HINT = (
    "k6's default CSV timeFormat is whole seconds, too coarse: run k6 with "
    "--out csv=fileName=F,timeFormat=rfc3339_nano (or K6_CSV_TIME_FORMAT=rfc3339_nano), or --out json=F"
)


def guess_csv(head: bytes) -> bool:
    return bool(_CSV_HEAD.match(first_line(head).lstrip(b"\xef\xbb\xbf")))


def guess_json(head: bytes) -> bool:
    line = first_line(head).lstrip()
    return line.startswith(b"{") and b'"type"' in line and (b'"Metric"' in line or b'"Point"' in line)


def _times_ns(values: list[str], path: Path, lines) -> np.ndarray:
    """k6 sample times: RFC 3339 with fraction, or unix ms/us/ns; whole seconds are refused."""

    if not values:
        return np.zeros(0, np.int64)
    v0 = values[0].strip()
    if v0.isdigit():
        scale = _UNIX_SCALE.get(len(v0))
        if scale is None:
            raise fail(path, lines[0], f"timestamp '{short(v0, 30)}' is in whole seconds: {_SECONDS_HINT}")
        out = np.empty(len(values), np.int64)
        for i, v in enumerate(values):
            v = v.strip()
            if not v.isdigit() or len(v) != len(v0):
                raise fail(
                    path,
                    lines[i],
                    f"bad timestamp '{short(v, 30)}' (expected {len(v0)} digits like the first)",
                )
            out[i] = int(v) * scale
        return out
    if "." not in v0:
        raise fail(
            path,
            lines[0],
            f"timestamp '{short(v0, 40)}' has whole seconds (timeFormat=rfc3339): {_SECONDS_HINT}",
        )
    return rfc3339_ns(values, path, lambda i: lines[i])


def _dropped(times_ns: np.ndarray, values: np.ndarray) -> np.ndarray | None:
    """One time per dropped iteration (a sample counts one or more); None without samples."""
    if len(times_ns) == 0:
        return None
    n = np.clip(np.nan_to_num(np.rint(values)), 0, 1 << 20).astype(np.int64)
    return np.repeat(np.asarray(times_ns, np.int64), n)


def _steps_of(path, start, end_ns, vus_t, vus_v, dropped, warnings):
    """One scenario's steps (headroom.levels): the held VU levels (``vus``, sampled once a second,
    changes placed by the request rate), or rate steps from the request starts and the
    ``dropped_iterations`` samples when k6 dropped work or the VU levels go up and down
    (``ramping-arrival-rate``).  Returns (step, names, concurrency, rates, source)."""
    from ..arrivals import steps_from_arrivals
    from ..levels import closed_loop, levels_from_samples, reader_steps

    inf, turns = None, 0
    if len(vus_t):
        level = levels_from_samples(start, vus_t, vus_v)
        inf = closed_loop(start, level, end_ns=end_ns, source="the vus metric")
        lv = np.diff(np.asarray(inf.levels))
        turns = int((np.sign(lv[1:]) * np.sign(lv[:-1]) < 0).sum()) if len(lv) > 1 else 0
    if inf is None or (dropped is not None and len(dropped)) or turns >= 2 or inf.looks_open:
        drop = np.zeros(0, np.int64) if dropped is None else dropped
        inf = steps_from_arrivals(start, dropped_ns=drop, transients="next",
                                  source="requests + dropped_iterations per second")  # fmt: skip
    rs = reader_steps(inf)
    warnings += [f"{path}: {x}" for x in inf.notes]
    if rs is None:
        return np.zeros(len(start), np.int64), ["all"], None, None, "no level held: one step"
    if rs.rates is not None:
        return rs.step, rs.names, None, rs.rates, "rate steps (requests and dropped_iterations per second)"
    src = "the vus metric (held levels; sampled once a second, changes placed by the request rate)"
    return rs.step, rs.names, rs.concurrency, None, src


def _bool_np(arr) -> np.ndarray:
    """A null-free pyarrow boolean array as numpy (``to_numpy`` of booleans imports pandas)."""
    import pyarrow as pa

    return col_np(arr.cast(pa.int8()), np.int8).astype(bool)


def _codes_ok(status, expected):
    """HTTP codes (0: none), success (expected_response when present, else 2xx) and whether any row
    had expected_response, of lists or pyarrow arrays."""
    if isinstance(status, list):
        codes = np.array([int(s) if s.isdigit() and len(s) <= 4 else 0 for s in status], np.int64)
        ok = np.array([e == "true" if e else 200 <= c <= 299 for e, c in zip(expected, codes)], bool)
        return codes, ok.reshape(len(codes)), any(e for e in expected)
    import pyarrow as pa
    import pyarrow.compute as pc

    st = pc.fill_null(status, "")
    try:  # k6's status is 1-4 ASCII digits (0: no response): a plain cast when all are
        codes = col_np(st.cast(pa.int64()), np.int64)
        clean = not len(codes) or (
            pc.all(pc.ascii_is_decimal(st)).as_py() is not False and pc.max(pc.utf8_length(st)).as_py() <= 4
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        clean = False
    if not clean:
        codes = pc.if_else(pc.match_substring_regex(st, r"^[0-9]{1,4}$"), st, "0").cast(pa.int64())
        codes = col_np(codes, np.int64)
    exp = pc.fill_null(expected, "")
    given = _bool_np(pc.not_equal(exp, ""))
    two = (codes >= 200) & (codes <= 299)
    if not given.any():
        return codes, two, False
    return codes, np.where(given, _bool_np(pc.equal(exp, "true")), two), True


class _Times:
    """Sample times of a k6 file: the first value of each metric decides the form (RFC 3339 with a
    fraction, or unix ms/us/ns by its digits) for the whole file, as a whole-file read did."""

    def __init__(self, path: Path):
        self.path = path
        self.first: dict[str, tuple[str, int]] = {}

    def strings(self, metric: str, values: list[str], lines) -> np.ndarray:
        if not values:
            return np.zeros(0, np.int64)
        f = self.first.setdefault(metric, (values[0], int(lines[0])))
        return _times_ns([f[0], *values], self.path, [f[1], *lines])[1:]

    def arrow(self, metric: str, col, lines) -> np.ndarray:
        """Like :meth:`strings` for a pyarrow string column: vectorized when the values are clean."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if len(col) == 0:
            return np.zeros(0, np.int64)
        f = self.first.setdefault(metric, (py_strings(col.slice(0, 1))[0], int(lines[0])))
        v0 = f[0].strip()
        try:
            if v0.isdigit():
                scale = _UNIX_SCALE.get(len(v0))
                same = pc.all(pc.equal(pc.utf8_length(col), len(v0))).as_py()
                if scale is not None and same:
                    return col_np(col.cast(pa.int64()), np.int64) * scale
            elif "." in v0:
                return col_np(col.cast(TS_UTC).cast(pa.int64()), np.int64)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        return self.strings(metric, py_strings(col), lines)


class _Side:
    """The ``vus`` and ``dropped_iterations`` samples of a scan, block by block (one a second: small)."""

    def __init__(self):
        self.parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {"vus": [], "dropped_iterations": []}
        self.expected = False

    def add(self, metric: str, t: np.ndarray, v: np.ndarray) -> None:
        if len(t):
            self.parts[metric].append((np.asarray(t, np.int64), np.asarray(v, np.float64)))

    def store(self, scan: Scan) -> None:
        for metric, name in (("vus", "vus"), ("dropped_iterations", "dropped")):
            ps = self.parts[metric]
            t = np.concatenate([p[0] for p in ps]) if ps else np.zeros(0, np.int64)
            v = np.concatenate([p[1] for p in ps]) if ps else np.zeros(0, np.float64)
            scan.side[name] = (t, v)
        scan.side["expected_response"] = self.expected


def _request_batch(path, end_ns, dur_ms, codes, ok, key, lines, name=None) -> Batch:
    """Request rows from k6's end times and durations (ms); a bad duration is named at its line."""
    lat = np.asarray(dur_ms, np.float64) / 1e3
    if len(lat) and not (np.isfinite(lat.max()) and lat.min() >= 0):
        bad = ~np.isfinite(lat) | (lat < 0)
        i = int(np.argmax(bad))
        raise fail(
            path,
            int(lines[i]),
            f"bad http_req_duration {float(dur_ms[i])!r} ms (must be a finite number >= 0)",
        )
    start = end_ns - np.rint(lat * 1e9).astype(np.int64)
    return Batch(start, lat, codes, ok, key, np.asarray(lines, np.int64), name)


def _new_scan(path: Path, fmt: str) -> Scan:
    return Scan(path=Path(path), fmt=fmt, fidelity=EXACT, key_kind=None)


def _end(scan: Scan, side: _Side, labels: dict[str, int], rows: int) -> None:
    side.store(scan)
    scan.labels[:] = list(labels)
    scan.key_kind = "label" if len(labels) > 1 else None
    if rows == 0:
        raise fail(
            scan.path,
            None,
            "no http_req_duration samples: is this the output of a k6 test that made HTTP requests?",
        )


def finish(scan: Scan, rows: Batch) -> Table:
    """The request table of a k6 scan: steps per scenario, else from the vus samples (or rate steps
    from the requests and dropped_iterations), else one step."""
    path, warnings = scan.path, list(scan.warnings)
    n = len(rows.start_ns)
    if n == 0:
        raise fail(
            path,
            None,
            "no http_req_duration samples: is this the output of a k6 test that made HTTP requests?",
        )
    start, lat = rows.start_ns, rows.latency_s
    end_ns = start + np.rint(lat * 1e9).astype(np.int64)
    ok = rows.ok if scan.side.get("expected_response") else None
    vus_t, vus_v = scan.side.get("vus", (np.zeros(0, np.int64), np.zeros(0)))
    order = np.argsort(vus_t, kind="stable")
    vus_t, vus_v = vus_t[order], vus_v[order]
    drop_t, drop_v = scan.side.get("dropped", (np.zeros(0, np.int64), np.zeros(0)))
    dropped = _dropped(drop_t, drop_v)
    labels = list(scan.labels) or [""]
    names = sorted(labels)
    conc, rates = None, None
    if len(names) > 1:
        step, names = steps_of_labels(rows.key, labels, start)
        src = f"the scenario tag ({len(names)} scenarios)"
        conc = []
        for k in range(len(names)):
            sel = step == k
            lo, hi = int(start[sel].min()), int(end_ns[sel].max())
            inside = vus_v[(vus_t > lo) & (vus_t < hi)]
            conc.append(int(np.median(inside)) if len(inside) else None)
        if any(c is None for c in conc):
            warnings.append(
                f"{path}: some scenarios have no vus sample inside them: their concurrency is unknown"
            )
    elif len(vus_t) or dropped is not None:
        step, names, conc, rates, src = _steps_of(path, start, end_ns, vus_t, vus_v, dropped, warnings)
    else:
        step = np.zeros(n, np.int64)
        names = [names[0] if names and names[0] else "all"]
        src = "one scenario and no vus samples: one step"
    return Table(
        fmt=scan.fmt,
        fidelity=EXACT,
        start_ns=start,
        latency_s=lat,
        status=rows.status,
        ok=ok,
        step=step,
        step_names=names,
        step_concurrency=conc,
        step_rates=rates,
        steps_source=src,
        line=rows.line,
        warnings=warnings,
    )


# --------------------------------------------------------------------------
# JSON lines

_METRICS = ("http_req_duration", "vus", "dropped_iterations")


def request_names(name, url):
    """k6's request name: the ``name`` tag (k6 sets it to the URL unless the script names the request),
    else ``url``; pyarrow string columns."""
    import pyarrow.compute as pc

    name, url = pc.fill_null(name, ""), pc.fill_null(url, "")
    return pc.if_else(pc.equal(name, ""), url, name)


def _json_fast(
    blk: Block, path: Path, times: _Times, side: _Side, labels: dict[str, int], names
) -> Batch | None:
    """A block of NDJSON parsed by pyarrow (only the needed fields); None when anything is off, so
    that the block is read line by line to name the bad line."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pajson

    if blk.blank_line():  # rows would not match lines
        return None
    tags = pa.struct([("status", pa.string()), ("expected_response", pa.string()), ("scenario", pa.string()),
                      ("name", pa.string()), ("url", pa.string())])  # fmt: skip
    data_t = pa.struct([("time", pa.string()), ("value", pa.float64()), ("tags", tags)])
    schema = pa.schema([("type", pa.string()), ("metric", pa.string()), ("data", data_t)])
    try:
        t = pajson.read_json(pa.BufferReader(blk.data), read_options=json_read_options(blk),
                             parse_options=pajson.ParseOptions(explicit_schema=schema,
                                                               unexpected_field_behavior="ignore"))  # fmt: skip
        if t.num_rows != blk.lines():
            return None
        point = pc.fill_null(pc.equal(t.column("type"), "Point"), False)
        got = {}
        for metric in _METRICS:
            sel = pc.and_(point, pc.fill_null(pc.equal(t.column("metric"), metric), False))
            d = pc.filter(t.column("data"), sel).combine_chunks()
            if d.null_count or d.field("time").null_count or d.field("value").null_count:
                return None
            idx = pc.indices_nonzero(sel)
            got[metric] = (d, blk.line0 + col_np(idx, np.uint64).astype(np.int64))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    req, lines = got["http_req_duration"]
    end_ns = times.arrow("http_req_duration", req.field("time"), lines)
    for metric in ("vus", "dropped_iterations"):
        d, ls = got[metric]
        tv = times.arrow(metric, d.field("time"), ls)
        side.add(metric, tv, col_np(d.field("value"), np.float64))
    tg = req.field("tags")
    status, expected, scen = (
        pc.fill_null(tg.field(n), "") for n in ("status", "expected_response", "scenario")
    )
    codes, ok, given = _codes_ok(status, expected)
    side.expected = side.expected or given
    key = label_codes(scen, labels)
    name = names.of_dictionary(request_names(tg.field("name"), tg.field("url")))
    return _request_batch(path, end_ns, col_np(req.field("value"), np.float64), codes, ok, key, lines, name)


def _json_slow(blk: Block, path: Path, times: _Times, side: _Side, labels: dict[str, int], names) -> Batch:
    """A block line by line with the json module: the first bad line is named."""
    ts, durs, status, expected, keys, lines, named = [], [], [], [], [], [], []
    other = {m: ([], [], []) for m in _METRICS[1:]}
    for ln, line in enumerate(blk.text().split(b"\n"), start=blk.line0):
        if not line.strip():
            continue
        if b'"Point"' not in line:
            if b'"Metric"' in line:
                continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            raise fail(path, ln, f"not a JSON line: '{short(line)}'") from None
        if not isinstance(rec, dict) or rec.get("type") != "Point":
            continue
        metric = rec.get("metric")
        if metric not in _METRICS:
            continue
        d = rec.get("data")
        if (
            not isinstance(d, dict)
            or not isinstance(d.get("time"), str)
            or not isinstance(d.get("value"), (int, float))
        ):
            raise fail(path, ln, f"a k6 Point without data.time and data.value: '{short(line)}'")
        if metric != "http_req_duration":
            t, v, ls = other[metric]
            t.append(d["time"])
            v.append(float(d["value"]))
            ls.append(ln)
            continue
        tags = d.get("tags") if isinstance(d.get("tags"), dict) else {}
        ts.append(d["time"])
        durs.append(float(d["value"]))
        status.append(str(tags.get("status", "")))
        expected.append(str(tags.get("expected_response", "")))
        keys.append(labels.setdefault(str(tags.get("scenario", "")), len(labels)))
        named.append(str(tags.get("name") or tags.get("url") or ""))
        lines.append(ln)
    end_ns = times.strings("http_req_duration", ts, lines)
    for metric, (t, v, ls) in other.items():
        side.add(metric, times.strings(metric, t, ls), np.asarray(v, np.float64))
    codes, ok, given = _codes_ok(status, expected)
    side.expected = side.expected or given
    return _request_batch(path, end_ns, np.asarray(durs, np.float64), codes, ok, np.array(keys, np.int64), lines,
                          names.of_values(named))  # fmt: skip


def scan_json(path: Path, *, chunk_bytes: int = CHUNK_BYTES, name: str | None = None) -> Scan:
    """One pass over k6 NDJSON in blocks (pyarrow per block; the json module for a block it refuses);
    ``name``: the requests of that name only (``--name``)."""
    scan = _new_scan(path, "k6-json")
    scan._gen = _json_batches(scan, chunk_bytes)
    return only_name(scan, name)


def _json_batches(scan: Scan, chunk_bytes: int):
    path, times, side, labels, rows = scan.path, _Times(scan.path), _Side(), {}, 0
    names = NameCodes(scan.names)
    for blk in blocks(path, chunk_bytes, scan.warnings):
        b = _json_fast(blk, path, times, side, labels, names)
        if b is None:  # pyarrow refused the block, or its rows are not its lines
            b = _json_slow(blk, path, times, side, labels, names)
        scan.labels[:] = list(labels)
        if len(b):
            rows += len(b)
            yield b
    _end(scan, side, labels, rows)


# --------------------------------------------------------------------------
# CSV


def _csv_problem(row):
    if not is_float(row[2]):
        return f"bad metric_value '{short(row[2], 40)}' (expected a number)"
    return None


def _floats(col, lines, path: Path, strict: bool) -> np.ndarray:
    """metric_value strings as floats: a bad one is an error (``strict``) or 0.0."""
    import pyarrow as pa

    if col.type == pa.float64():
        return col_np(col, np.float64)
    try:
        return col_np(col.cast(pa.float64()), np.float64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    vals = col.to_pylist()
    if strict:
        for v, ln in zip(vals, lines):
            if not is_float(v):
                raise fail(path, int(ln), f"bad metric_value '{short(v, 40)}' (expected a number)") from None
    return np.array([float(v) if is_float(v) else 0.0 for v in vals], np.float64)


def _metric_rows(names) -> dict[str, np.ndarray]:
    """Rows of each metric of :data:`_METRICS` in a dictionary-encoded metric_name column, found by
    the dictionary code (a dozen names per chunk) rather than by comparing strings."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out: dict[str, list[np.ndarray]] = {m: [] for m in _METRICS}
    base = 0
    for ch in names.chunks:
        names_of = ch.dictionary.to_pylist()
        codes = ch.indices if not ch.null_count else pc.fill_null(ch.indices, -1)
        codes = col_np(pa.chunked_array([codes]), np.int32)
        for m in _METRICS:
            if m in names_of:
                out[m].append(base + np.flatnonzero(codes == names_of.index(m)))
        base += len(ch)
    return {m: np.concatenate(v) if v else np.zeros(0, np.int64) for m, v in out.items()}


def _read_block(blk, path: Path, cols: list[str], types: dict):
    """A block with metric_value parsed as numbers by pyarrow; as text (each metric's own rule for a
    bad or empty value) when a value is not a number."""
    import pyarrow as pa

    try:
        t = read_block_csv(blk, path, columns=cols, types={**types, "metric_value": pa.float64()},
                           row_problem=_csv_problem)  # fmt: skip
        if t.num_rows == 0 or t.column("metric_value").null_count == 0:
            return t
    except HeadroomError:
        pass
    return read_block_csv(blk, path, columns=cols, types=types, row_problem=_csv_problem)


def scan_csv(path: Path, *, chunk_bytes: int = CHUNK_BYTES, name: str | None = None) -> Scan:
    """One pass over a k6 CSV in blocks: the http_req_duration rows, the vus and dropped_iterations samples."""
    path = Path(path)
    header = first_line(strip_bom(head_bytes(path))).decode("utf-8", "replace")
    cols = [c.strip() for c in header.split(",")]
    missing = [c for c in ("metric_name", "timestamp", "metric_value") if c not in cols]
    if missing:
        raise fail(path, 1, f"a k6 CSV header without {', '.join(missing)}: '{short(header, 60)}'")
    scan = _new_scan(path, "k6-csv")
    scan._gen = _csv_batches(scan, chunk_bytes, cols)
    return only_name(scan, name)


def _csv_batches(scan: Scan, chunk_bytes: int, cols: list[str]):
    import pyarrow as pa
    import pyarrow.compute as pc

    path, times, side, labels, rows = scan.path, _Times(scan.path), _Side(), {}, 0
    # metric_name as a dictionary: a dozen names repeated, parsed and compared once per block
    types = {"metric_name": pa.dictionary(pa.int32(), pa.string()), "timestamp": pa.string(),
             "metric_value": pa.string()}  # fmt: skip
    names = NameCodes(scan.names)
    for opt in ("status", "expected_response", "scenario", "name", "url"):
        if opt in cols:
            types[opt] = pa.string()

    def col(tab, name):
        if name not in types:
            return pa.array([""] * tab.num_rows, pa.string())
        c = tab.column(name)
        return pc.fill_null(c, "") if c.null_count else c

    for blk in blocks(path, chunk_bytes, scan.warnings, header=True):
        t = _read_block(blk, path, cols, types)
        if t.num_rows == 0:
            continue
        lines = row_lines(blk, t.num_rows)
        picked = {}
        for metric, idx in _metric_rows(t.column("metric_name")).items():
            whole = len(idx) == t.num_rows  # every row of the block (a file of request rows only)
            picked[metric] = (
                t if whole else t.take(idx) if len(idx) else None,
                lines if whole else lines[idx],
            )
        rt, req_lines = picked["http_req_duration"]
        if rt is not None:
            durs = _floats(col(rt, "metric_value"), req_lines, path, strict=True)
            end_ns = times.arrow("http_req_duration", col(rt, "timestamp"), req_lines)
        for metric in ("vus", "dropped_iterations"):
            st, ls = picked[metric]
            if st is not None:
                tv = times.arrow(metric, col(st, "timestamp"), ls)
                side.add(metric, tv, _floats(col(st, "metric_value"), ls, path, strict=False))
        if rt is None:
            continue
        codes, ok, given = _codes_ok(col(rt, "status"), col(rt, "expected_response"))
        side.expected = side.expected or given
        key = label_codes(col(rt, "scenario"), labels)
        scan.labels[:] = list(labels)
        rows += len(req_lines)
        name = names.of_dictionary(request_names(col(rt, "name"), col(rt, "url")))
        yield _request_batch(path, end_ns, durs, codes, ok, key, req_lines, name)
    _end(scan, side, labels, rows)


# --------------------------------------------------------------------------
# the step plan of a spooled file (headroom.spooled): the same steps as finish()


class K6Plan:
    """k6: one step per scenario; else the held VU levels (``vus`` samples); else the whole-table
    reader (rate steps from requests and ``dropped_iterations``); else one step."""

    def __init__(self, scan, raw):
        from ..levels import SampledLevels

        self.scan, self.extra, self.fallback = scan, [], None
        z = (np.zeros(0, np.int64), np.zeros(0))
        vus_t, vus_v = scan.side.get("vus", z)
        drop_t, drop_v = scan.side.get("dropped", z)
        dropped = len(drop_t) and int(np.clip(np.nan_to_num(np.rint(drop_v)), 0, 1 << 20).sum())
        if scan.key_kind == "label" and len(scan.labels) > 1:
            self._scenarios(raw, vus_t, vus_v)
        elif not len(vus_t) and not len(drop_t):
            name = sorted(scan.labels or [""])[0]
            self.plan, self.names, self.conc = OneStep(scan, ""), [name or "all"], None
            self.src = "one scenario and no vus samples: one step"
        elif not len(vus_t) or dropped:
            self.fallback = TablePlan(scan, raw, finish)
        else:
            sl = SampledLevels(vus_t, vus_v)
            sl.refine(sum(sl.interval_counts(c["start_ns"]) for c in raw.chunks(("start_ns",))))
            counted = Counted(raw, lambda c: sl.at(c["start_ns"]))
            lv = np.diff(np.asarray(counted.plan.steps.levels, np.float64))
            turns = int((np.sign(lv[1:]) * np.sign(lv[:-1]) < 0).sum()) if len(lv) > 1 else 0
            if turns >= 2 or counted.looks_open:
                self.fallback = TablePlan(scan, raw, finish)
                return
            self.extra = [f"{scan.path}: {x}" for x in counted.notes]
            if counted.held:
                self.plan = counted.plan
                levels = self.plan.steps.levels
                self.names = [f"concurrency {float(v):g}" for v in levels]
                self.conc = [int(v) for v in levels]
                self.src = (
                    "the vus metric (held levels; sampled once a second, changes placed by the request rate)"
                )
            else:
                self.plan, self.names, self.conc, self.src = (
                    OneStep(scan, ""),
                    ["all"],
                    None,
                    "no level held: one step",
                )

    def _scenarios(self, raw, vus_t, vus_v) -> None:
        g = GroupPlan(raw, self.scan.labels)
        hi = np.full(len(g.n), np.iinfo(np.int64).min)
        for c in raw.chunks(COLS):
            np.maximum.at(hi, c["key"], ends(c))
        o = np.argsort(vus_t, kind="stable")
        vus_t, vus_v = vus_t[o], vus_v[o]
        self.plan, self.names, self.conc = g, g.names, []
        for code in g.order:
            inside = vus_v[(vus_t > g.first[code]) & (vus_t < hi[code])]
            self.conc.append(int(np.median(inside)) if len(inside) else None)
        if any(c is None for c in self.conc):
            self.extra = [
                f"{self.scan.path}: some scenarios have no vus sample inside them: their concurrency is unknown"
            ]
        self.src = f"the scenario tag ({len(self.names)} scenarios)"

    def assign(self, c: dict) -> np.ndarray:
        return (self.fallback or self.plan).assign(c)

    def found(self) -> Found:
        if self.fallback is not None:
            return self.fallback.found()
        return Found(self.names, self.conc, None, self.src, list(self.scan.warnings) + self.extra)


# --------------------------------------------------------------------------
# the readers

JSON_READER = Reader(
    "k6-json", "k6", EXACT, "k6 run --out json=results.json script.js", "JSON lines with type Metric or Point",
    guess_json, scan_json, K6Plan, scan_options=("name",),
)  # fmt: skip
CSV_READER = Reader(
    "k6-csv", "k6", EXACT, "k6 run --out csv=fileName=results.csv,timeFormat=rfc3339_nano script.js",
    "a header 'metric_name,timestamp,metric_value,...'", guess_csv, scan_csv, K6Plan, scan_options=("name",),
)  # fmt: skip
