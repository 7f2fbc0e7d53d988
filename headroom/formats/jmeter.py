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
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ._common import (
    COARSE_MS,
    Table,
    arrow_csv,
    drop_truncated_tail,
    fail,
    first_line,
    is_int,
    short,
    steps_from_concurrency,
)

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


def steps_of(path, ts: np.ndarray, threads: np.ndarray | None, lines: np.ndarray, elapsed: np.ndarray):
    """The steps of the samples: the ``allThreads`` levels that are held (headroom.levels), else one step.

    Returns (step of every sample, step names, concurrency per step or None, how steps were found,
    notes for the warnings).
    """
    if threads is None:
        src = "no allThreads column (jmeter.save.saveservice.thread_counts=true adds it): one step"
        return np.zeros(len(ts), np.int64), ["all"], None, src, ()
    if (threads <= 0).any():
        i = int(np.argmax(threads <= 0))
        raise fail(path, int(lines[i]), f"bad allThreads {int(threads[i])} (must be > 0)")
    from ..levels import closed_loop, reader_steps

    inf = closed_loop(ts * 1_000_000, threads, end_ns=(ts + elapsed) * 1_000_000, source="allThreads")
    rs = reader_steps(inf)
    if rs is None:
        step, names, conc = steps_from_concurrency(threads)
        return step, names, conc, f"allThreads ({len(names)} levels, none held: one step each)", inf.notes
    return rs.step, rs.names, rs.concurrency, f"allThreads, held levels ({len(rs.names)} steps)", rs.notes


def _finish(path, fmt, ts, elapsed, success, code, threads, msgs, lines, warnings) -> Table:
    n = len(ts)
    if msgs is None:
        tc = np.zeros(n, bool)
    elif isinstance(msgs, np.ndarray):
        tc = msgs  # already the transaction-parent flags
    else:
        tc = np.array([m.startswith(_TC) for m in msgs], bool)
    if tc.any():
        warnings.append(
            f"{path}: left out {int(tc.sum())} transaction-controller parent sample(s) "
            "(their requests are counted on their own rows)"
        )
        keep = ~tc
        ts, elapsed, success, code, lines = ts[keep], elapsed[keep], success[keep], code[keep], lines[keep]
        threads = threads[keep] if threads is not None else None
    if len(ts) == 0:
        raise fail(path, None, "no samples (the file has a header but no data rows)")
    step, names, conc, src, notes = steps_of(path, ts, threads, lines, elapsed)
    warnings += [f"{path}: {n}" for n in notes]
    return Table(
        fmt=fmt,
        fidelity=COARSE_MS,
        start_ns=ts * 1_000_000,
        latency_s=elapsed / 1e3,
        status=code,
        ok=success,
        step=step,
        step_names=names,
        step_concurrency=conc,
        steps_source=src,
        line=lines,
        warnings=warnings,
    )


def _codes(values) -> np.ndarray:
    return np.array(
        [int(v) if v and v.isascii() and v.isdigit() and len(v) <= 4 else 0 for v in values], np.int64
    )


def read_csv(path: Path, data: bytes) -> Table:
    import pyarrow as pa

    warnings: list[str] = []
    data = drop_truncated_tail(data, path, warnings)
    if data[:3] == b"\xef\xbb\xbf":
        data = data[3:]
    cols = [c.strip() for c in first_line(data).decode("utf-8", "replace").split(",")]
    types = {"timeStamp": pa.int64(), "elapsed": pa.int64()}
    for c in ("success", "responseCode", "responseMessage"):
        if c in cols:
            types[c] = pa.string()
    if "allThreads" in cols:
        types["allThreads"] = pa.int64()
    ti, ei = cols.index("timeStamp"), cols.index("elapsed")

    def problem(row):
        if not is_int(row[ti]):
            return (
                f"bad timeStamp '{short(row[ti], 40)}' (expected milliseconds since the epoch: "
                "set jmeter.save.saveservice.timestamp_format=ms)"
            )
        if not is_int(row[ei]) or int(row[ei]) < 0:
            return f"bad elapsed '{short(row[ei], 40)}' (expected milliseconds >= 0)"
        if "allThreads" in cols and not is_int(row[cols.index("allThreads")]):
            return f"bad allThreads '{short(row[cols.index('allThreads')], 40)}' (expected an integer)"
        return None

    t = arrow_csv(
        data, path, columns=cols, types=types, header=True, row_problem=problem, newlines_in_values=True
    )
    from ._common import null_check

    null_check(t, path, ["timeStamp", "elapsed"])
    ts = np.asarray(t.column("timeStamp").to_numpy(), np.int64)
    el = np.asarray(t.column("elapsed").to_numpy(), np.int64)
    if len(el) and el.min() < 0:
        i = int(np.argmin(el))
        raise fail(path, i + 2, f"bad elapsed {int(el[i])} (must be >= 0)")

    import pyarrow.compute as pc

    def strings(name):
        return pc.fill_null(t.column(name), "") if name in types else None

    def np_bool(a):
        return np.asarray(a.to_numpy(zero_copy_only=False), bool)

    rc = strings("responseCode")
    if rc is not None:
        rc = pc.utf8_trim_whitespace(rc)
        code = pc.if_else(pc.match_substring_regex(rc, r"^[0-9]{1,4}$"), rc, "0").cast(pa.int64())
        code = np.asarray(code.to_numpy(zero_copy_only=False), np.int64)
    else:
        code = np.zeros(len(ts), np.int64)
    succ = strings("success")
    if succ is not None:
        success = np_bool(pc.equal(pc.utf8_lower(pc.utf8_trim_whitespace(succ)), "true"))
    else:
        success = (code >= 200) & (code <= 299)
    msgs = strings("responseMessage")
    tc = np_bool(pc.starts_with(msgs, _TC)) if msgs is not None else None
    threads = None
    if "allThreads" in types:
        c = t.column("allThreads")
        if c.null_count:
            threads = None
            warnings.append(f"{path}: allThreads has empty values: one step")
        else:
            threads = np.asarray(c.to_numpy(), np.int64)
    return _finish(path, "jmeter-csv", ts, el, success, code, threads, tc,
                   np.arange(2, len(ts) + 2), warnings)  # fmt: skip


def read_xml(path: Path, data: bytes) -> Table:
    """XML JTL: the top-level samples (``httpSample`` or ``sample``) of ``testResults``.

    Parsed with the standard library's expat; a file with a DOCTYPE (entity
    definitions) is refused rather than expanded.
    """
    import xml.etree.ElementTree as ET

    if b"<!DOCTYPE" in data[:4096] or b"<!ENTITY" in data:
        raise fail(
            path, None, "an XML JTL with a DOCTYPE or entity definitions is refused (JMeter writes none)"
        )
    warnings: list[str] = []
    ts, el, ok, rc, thr, msg, lines = [], [], [], [], [], [], []
    parser = ET.XMLPullParser(events=("start", "end"))
    depth = 0
    has_threads = True
    try:
        for lno, chunk in enumerate(data.splitlines(keepends=True), start=1):
            parser.feed(chunk)
            for ev, elem in parser.read_events():
                if ev == "start":
                    depth += 1
                    continue
                depth -= 1
                if depth != 1 or elem.tag not in ("httpSample", "sample"):
                    continue
                a = elem.attrib
                rows = [a]
                if a.get("rm", "").startswith(_TC):
                    rows = [c.attrib for c in elem if c.tag in ("httpSample", "sample")]
                for r in rows:
                    try:
                        ts.append(int(r["ts"]))
                        el.append(int(r["t"]))
                    except (KeyError, ValueError):
                        raise fail(
                            path, lno, f"a sample without integer ts and t attributes: '{short(str(r))}'"
                        ) from None
                    ok.append(r.get("s", "true") == "true")
                    rc.append(r.get("rc", ""))
                    msg.append("")
                    lines.append(lno)
                    if "na" in r and is_int(r["na"]):
                        thr.append(int(r["na"]))
                    else:
                        has_threads = False
                elem.clear()
        parser.close()
    except ET.ParseError as e:
        line = getattr(e, "position", (None,))[0]
        raise fail(path, line, f"bad XML ({short(str(e), 80)})") from None
    ts_a = np.array(ts, np.int64)
    el_a = np.array(el, np.int64)
    if len(el_a) and el_a.min() < 0:
        i = int(np.argmin(el_a))
        raise fail(path, lines[i], f"bad elapsed t={int(el_a[i])} (must be >= 0)")
    threads = np.array(thr, np.int64) if has_threads and thr else None
    return _finish(path, "jmeter-xml", ts_a, el_a, np.array(ok, bool), _codes(rc), threads, msg,
                   np.array(lines, np.int64), warnings)  # fmt: skip
