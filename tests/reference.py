"""A slow, obviously-correct reader used only to check headroom's fast one.

Pure Python: no pyarrow, no numpy in the parsing.  Times become integer UTC
nanoseconds via calendar arithmetic on the digits themselves.
"""

from __future__ import annotations

import calendar
import gzip
import re

_TS = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))? ?(Z|[+-]\d\d:?\d\d)")


def parse_time_ns(text: str) -> int:
    m = _TS.match(text.strip())
    if not m:
        raise ValueError(text)
    y, mo, d, h, mi, s = (int(m[i]) for i in range(1, 7))
    frac = int((m[7] or "").ljust(9, "0"))
    secs = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    zone = m[8]
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        z = zone[1:].replace(":", "")
        secs -= sign * (int(z[:2]) * 3600 + int(z[2:]) * 60)
    return secs * 1_000_000_000 + frac


def read_text(path) -> str:
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8-sig").replace("\r\n", "\n")


def read_perf(path):
    """Sections of (start_ns, latency_s) sorted by start time within each section."""
    sections = []
    header = None
    for line in read_text(path).split("\n"):
        if not line.strip():
            continue
        if header is None:
            header = line
        if line == header:
            sections.append([])
            continue
        t, lat = line.split(",")
        sections[-1].append((parse_time_ns(t), float(lat)))
    return [sorted(s, key=lambda r: r[0]) for s in sections]


def read_cpu(path):
    rows = []
    lines = [ln for ln in read_text(path).split("\n") if ln.strip()]
    for line in lines[1:]:
        parts = line.split(",")
        rows.append((parse_time_ns(parts[0]), [float(p) for p in parts[1:]]))
    return sorted(rows)


def read_ab(path):
    """``ab -g`` rows as (start_ns, ttime_ms): ``seconds`` checked against the ``starttime`` ctime
    text (ab's local time: equal up to a time-zone offset of whole quarter hours)."""
    import time

    lines = read_text(path).split("\n")
    assert lines[0].split("\t") == ["starttime", "seconds", "ctime", "dtime", "ttime", "wait"], lines[0]
    rows = []
    for line in lines[1:]:
        if not line:
            continue
        text, sec, ctime, dtime, ttime, wait = line.split("\t")
        off = calendar.timegm(time.strptime(text, "%a %b %d %H:%M:%S %Y")) - int(sec)
        assert off % 900 == 0 and abs(off) <= 14 * 3600, (text, sec)
        assert 0 <= int(wait) <= int(ttime) and abs(int(ctime) + int(dtime) - int(ttime)) <= 1
        rows.append((int(sec) * 1_000_000_000, int(ttime)))
    return rows


def ab_summary(path):
    """ab's own text summaries (stdout of several runs): per run, its concurrency, complete requests,
    failed requests and the 'Percentage of the requests served' table {50: ms, ..., 100: ms}."""
    import re

    runs = []
    for part in read_text(path).split("Benchmarking ")[1:]:
        conc = int(re.search(r"Concurrency Level:\s+(\d+)", part)[1])
        n = int(re.search(r"Complete requests:\s+(\d+)", part)[1])
        failed = int(re.search(r"Failed requests:\s+(\d+)", part)[1])
        pct = {int(p): int(v) for p, v in re.findall(r"^\s+(\d+)%\s+(\d+)", part, re.M)}
        runs.append({"concurrency": conc, "requests": n, "failed": failed, "pct": pct})
    return runs


def read_gatling_binary(path):
    """A Gatling 3.13+ binary simulation.log read record by record with ``struct`` and a real string
    cache (strings decoded), following Gatling's LogFileReader: returns a dict with ``version``,
    ``run_start_ms``, ``scenarios``, ``requests`` [(name, start_ms, end_ms, ok, message)],
    ``users`` [(scenario, is_start, time_ms)], ``groups`` and ``errors`` (counts)."""
    import io
    import struct

    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    s = io.BytesIO(raw)

    def take(n):
        b = s.read(n)
        if len(b) != n:
            raise EOFError
        return b

    def i32():
        return struct.unpack(">i", take(4))[0]

    def string():
        n = i32()
        if n == 0:
            return ""
        value, coder = take(n), take(1)[0]
        return value.decode("latin-1") if coder == 0 else value.decode("utf-16-le")

    cache = {}

    def cached():
        i = i32()
        if i >= 0:
            cache[i] = string()
            return cache[i]
        return cache[-i]

    assert take(1) == b"\x00"
    out = {"version": string(), "class": string(), "run_start_ms": struct.unpack(">q", take(8))[0]}
    out["description"] = string()
    out["scenarios"] = [string() for _ in range(i32())]
    for _ in range(i32()):
        take(i32())
    out.update(requests=[], users=[], groups=0, errors=0)
    while True:
        h = s.read(1)
        if not h:
            return out
        if h == b"\x01":
            groups = [cached() for _ in range(i32())]
            name = cached()
            start, end = i32(), i32()
            ok = take(1) == b"\x01"
            out["requests"].append(("/".join([*groups, name]), start, end, ok, cached()))
        elif h == b"\x02":
            sc = i32()
            out["users"].append((out["scenarios"][sc], take(1) == b"\x01", i32()))
        elif h == b"\x03":
            [cached() for _ in range(i32())]
            i32(), i32(), i32(), take(1)
            out["groups"] += 1
        elif h == b"\x04":
            cached(), i32()
            out["errors"] += 1
        else:
            raise ValueError(f"record type {h!r}")
