"""k6: ``--out json=F`` (NDJSON ``Point`` samples) and ``--out csv=F`` (with a sub-second ``timeFormat``).

k6 stamps a request's ``http_req_duration`` sample when the request ENDS:
start = time - duration.  Status "0" is a request without a response
(connection refused, timeout).  ``expected_response`` (k6 >= 0.31) decides
success when present, else the status (2xx).  Steps: one per scenario when
there are several (their concurrency from the ``vus`` samples inside each);
else from the ``vus`` metric (one sample a second, so boundaries are accurate
to about a second); else one step.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ._common import (
    EXACT,
    Table,
    arrow_csv,
    drop_truncated_tail,
    fail,
    first_line,
    is_float,
    rfc3339_ns,
    short,
    steps_from_arrow,
    steps_from_labels,
)
from ._scan import arrow_copy

_CSV_HEAD = re.compile(rb"^metric_name,timestamp,metric_value(,|$)")
_UNIX_SCALE = {19: 1, 16: 1_000, 13: 1_000_000}  # digits of a unix time now -> ns factor
_SECONDS_HINT = (
    "k6's default CSV timeFormat is whole seconds, too coarse for per-second buckets: "
    "run k6 with --out csv=fileName=F,timeFormat=rfc3339_nano (or unix_nano, unix_micro, unix_milli; "
    "K6_CSV_TIME_FORMAT=rfc3339_nano), or use --out json=F"
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


def _codes_ok(status, expected):
    """HTTP codes (0: none) and success (expected_response when present, else 2xx) of lists or pyarrow arrays."""
    if isinstance(status, list):
        codes = np.array([int(s) if s.isdigit() and len(s) <= 4 else 0 for s in status], np.int64)
        ok = None
        if any(e for e in expected):
            ok = np.array([e == "true" if e else 200 <= c <= 299 for e, c in zip(expected, codes)], bool)
        return codes, ok
    import pyarrow as pa
    import pyarrow.compute as pc

    st = pc.fill_null(status, "")
    codes = pc.if_else(pc.match_substring_regex(st, r"^[0-9]{1,4}$"), st, "0").cast(pa.int64())
    codes = np.asarray(codes.to_numpy(zero_copy_only=False), np.int64)
    exp = pc.fill_null(expected, "")
    given = np.asarray(pc.not_equal(exp, "").to_numpy(zero_copy_only=False), bool)
    if not given.any():
        return codes, None
    true = np.asarray(pc.equal(exp, "true").to_numpy(zero_copy_only=False), bool)
    return codes, np.where(given, true, (codes >= 200) & (codes <= 299))


def _times_arrow(col, path: Path, lines) -> np.ndarray:
    """Like _times_ns, for a pyarrow string column: vectorized when the values are clean."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ._scan import TS_UTC

    if len(col) == 0:
        return np.zeros(0, np.int64)
    v0 = str(col[0].as_py() or "").strip()
    try:
        if v0.isdigit():
            scale = _UNIX_SCALE.get(len(v0))
            same = pc.all(pc.equal(pc.utf8_length(col), len(v0))).as_py()
            if scale is not None and same:
                return np.asarray(col.cast(pa.int64()).to_numpy(zero_copy_only=False), np.int64) * scale
        elif "." in v0:
            return np.asarray(col.cast(TS_UTC).cast(pa.int64()).to_numpy(zero_copy_only=False), np.int64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    return _times_ns([("" if v is None else str(v)) for v in col.to_pylist()], path, lines)


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
    from ..levels import closed_loop, levels_from_samples, reader_steps, steps_from_arrivals

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


def _build(path, fmt, end_ns, dur_ms, status, expected, scenario, lines, vus_t, vus_v, warnings,
           dropped=None) -> Table:  # fmt: skip
    n = len(end_ns)
    if n == 0:
        raise fail(
            path,
            None,
            "no http_req_duration samples: is this the output of a k6 test that made HTTP requests?",
        )
    lat = np.asarray(dur_ms, np.float64) / 1e3
    bad = ~np.isfinite(lat) | (lat < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise fail(
            path,
            int(lines[i]),
            f"bad http_req_duration {float(dur_ms[i])!r} ms (must be a finite number >= 0)",
        )
    start = end_ns - np.rint(lat * 1e9).astype(np.int64)
    codes, ok = _codes_ok(status, expected)
    vus_t = np.asarray(vus_t, np.int64)
    vus_v = np.asarray(vus_v, np.float64)
    order = np.argsort(vus_t, kind="stable")
    vus_t, vus_v = vus_t[order], vus_v[order]
    arrow = not isinstance(scenario, list)
    names = sorted(set(scenario)) if not arrow else sorted(str(v) for v in scenario.unique().to_pylist())
    conc, rates = None, None
    if len(names) > 1:
        step, names = steps_from_labels(scenario, start) if not arrow else steps_from_arrow(scenario, start)
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
        fmt=fmt,
        fidelity=EXACT,
        start_ns=start,
        latency_s=lat,
        status=codes,
        ok=ok,
        step=step,
        step_names=names,
        step_concurrency=conc,
        step_rates=rates,
        steps_source=src,
        line=np.asarray(lines, np.int64),
        warnings=warnings,
    )


def _json_arrow(path: Path, data: bytes, warnings: list[str]) -> Table | None:
    """NDJSON parsed by pyarrow (only the needed fields); None when anything is off, so that the
    line-by-line reader names the bad line."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pajson

    if b"\n\n" in data or data.startswith(b"\n"):  # rows would not match lines
        return None
    tags = pa.struct([("status", pa.string()), ("expected_response", pa.string()), ("scenario", pa.string())])
    data_t = pa.struct([("time", pa.string()), ("value", pa.float64()), ("tags", tags)])
    schema = pa.schema([("type", pa.string()), ("metric", pa.string()), ("data", data_t)])
    try:
        t = pajson.read_json(pa.BufferReader(arrow_copy(data)), parse_options=pajson.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore"))  # fmt: skip
        point = pc.fill_null(pc.equal(t.column("type"), "Point"), False)
        rows = {}
        for metric in ("http_req_duration", "vus", "dropped_iterations"):
            sel = pc.and_(point, pc.fill_null(pc.equal(t.column("metric"), metric), False))
            d = pc.filter(t.column("data"), sel).combine_chunks()
            idx = np.flatnonzero(np.asarray(sel.to_numpy(zero_copy_only=False), bool))
            if d.null_count or d.field("time").null_count or d.field("value").null_count:
                return None
            rows[metric] = (d, idx + 1)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    (req, lines), (vus, vus_lines) = rows["http_req_duration"], rows["vus"]
    drop, drop_lines = rows["dropped_iterations"]
    drop_v = np.asarray(drop.field("value").to_numpy(zero_copy_only=False), np.float64)
    dropped = _dropped(_times_arrow(drop.field("time"), path, drop_lines), drop_v)
    end_ns = _times_arrow(req.field("time"), path, lines)
    vus_t = _times_arrow(vus.field("time"), path, vus_lines)
    tg = req.field("tags")
    status, expected, scen = (
        pc.fill_null(tg.field(n), "") for n in ("status", "expected_response", "scenario")
    )
    durs = np.asarray(req.field("value").to_numpy(zero_copy_only=False), np.float64)
    vus_v = np.asarray(vus.field("value").to_numpy(zero_copy_only=False), np.float64)
    return _build(
        path, "k6-json", end_ns, durs, status, expected, scen, lines, vus_t, vus_v, warnings, dropped
    )


def read_json(path: Path, data: bytes) -> Table:
    """NDJSON: pyarrow's JSON reader, or line by line with the json module to name a bad line."""
    warnings: list[str] = []
    data = drop_truncated_tail(data, path, warnings)
    fast = _json_arrow(path, data, warnings)
    if fast is not None:
        return fast
    times, durs, status, expected, scen, lines = [], [], [], [], [], []
    vus_times, vus_vals, vus_lines = [], [], []
    drop_times, drop_vals, drop_lines = [], [], []
    for ln, line in enumerate(data.split(b"\n"), start=1):
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
        if metric not in ("http_req_duration", "vus", "dropped_iterations"):
            continue
        d = rec.get("data")
        if (
            not isinstance(d, dict)
            or not isinstance(d.get("time"), str)
            or not isinstance(d.get("value"), (int, float))
        ):
            raise fail(path, ln, f"a k6 Point without data.time and data.value: '{short(line)}'")
        if metric != "http_req_duration":
            t, v, ls = (
                (vus_times, vus_vals, vus_lines) if metric == "vus" else (drop_times, drop_vals, drop_lines)
            )
            t.append(d["time"])
            v.append(float(d["value"]))
            ls.append(ln)
            continue
        tags = d.get("tags") if isinstance(d.get("tags"), dict) else {}
        times.append(d["time"])
        durs.append(float(d["value"]))
        status.append(str(tags.get("status", "")))
        expected.append(str(tags.get("expected_response", "")))
        scen.append(str(tags.get("scenario", "")))
        lines.append(ln)
    end_ns = _times_ns(times, path, lines)
    vus_t = _times_ns(vus_times, path, vus_lines)
    dropped = _dropped(_times_ns(drop_times, path, drop_lines), np.asarray(drop_vals, np.float64))
    return _build(
        path, "k6-json", end_ns, durs, status, expected, scen, lines, vus_t, vus_vals, warnings, dropped
    )


def read_csv(path: Path, data: bytes) -> Table:
    import pyarrow as pa
    import pyarrow.compute as pc

    warnings: list[str] = []
    data = drop_truncated_tail(data, path, warnings)
    if data[:3] == b"\xef\xbb\xbf":
        data = data[3:]
    header = first_line(data).decode("utf-8", "replace")
    cols = [c.strip() for c in header.split(",")]
    types = {"metric_name": pa.string(), "timestamp": pa.string(), "metric_value": pa.string()}
    for opt in ("status", "expected_response", "scenario"):
        if opt in cols:
            types[opt] = pa.string()

    def problem(row):
        if not is_float(row[2]):
            return f"bad metric_value '{short(row[2], 40)}' (expected a number)"
        return None

    t = arrow_csv(data, path, columns=cols, types=types, header=True, row_problem=problem)
    line = np.arange(2, t.num_rows + 2)
    names = t.column("metric_name")
    req = np.asarray(pc.equal(names, "http_req_duration").to_numpy(zero_copy_only=False), bool)
    vus = np.asarray(pc.equal(names, "vus").to_numpy(zero_copy_only=False), bool)
    drop = np.asarray(pc.equal(names, "dropped_iterations").to_numpy(zero_copy_only=False), bool)
    dt = t.filter(pa.array(drop))
    rt = t.filter(pa.array(req))
    vt = t.filter(pa.array(vus))

    def col(tab, name):
        if name not in types:
            return pa.array([""] * tab.num_rows, pa.string())
        return pc.fill_null(tab.column(name).combine_chunks(), "")

    try:
        durs = np.asarray(
            col(rt, "metric_value").cast(pa.float64()).to_numpy(zero_copy_only=False), np.float64
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        for v, ln in zip(col(rt, "metric_value").to_pylist(), line[req]):
            if not is_float(v):
                raise fail(path, int(ln), f"bad metric_value '{short(v, 40)}' (expected a number)") from None
        raise
    end_ns = _times_arrow(col(rt, "timestamp"), path, line[req])
    vus_t = _times_arrow(col(vt, "timestamp"), path, line[vus])
    vus_v = [float(v) if is_float(v) else 0.0 for v in col(vt, "metric_value").to_pylist()]
    drop_v = np.array([float(v) if is_float(v) else 0.0 for v in col(dt, "metric_value").to_pylist()])
    dropped = _dropped(_times_arrow(col(dt, "timestamp"), path, line[drop]), drop_v)
    return _build(
        path, "k6-csv", end_ns, durs, col(rt, "status"), col(rt, "expected_response"), col(rt, "scenario"),
        line[req], vus_t, vus_v, warnings, dropped,
    )  # fmt: skip
