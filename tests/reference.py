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
