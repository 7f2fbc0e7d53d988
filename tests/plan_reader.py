"""An independent reader of the real samples in tests/data/formats/real/ and of their plans.

Written from the tools' documented output formats with the standard library
only (csv, json, xml.etree, gzip): no headroom code, so that tests can hold
headroom's readers and step inference against it.  Plans come from the plans
that were run (tests/data/formats/real/README.md): consecutive windows of the
planned durations from the first request's start.

Latencies are in the file's own unit (JMeter, Gatling: integer ms; k6:
float ms; vegeta: integer ns); percentiles are exact nearest-rank over the
successful requests of a window.
"""

from __future__ import annotations

import bisect
import csv
import gzip
import io
import json
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

REAL = Path(__file__).parent / "data" / "formats" / "real"
NS = 1_000_000_000

#: the plans that were run (scripts/make_real_samples.sh, STEP_S=8)
STEP_S = 8
CLOSED_LEVELS = (1, 2, 4, 8, 16)
GATLING_OPEN_RATES = (50, 100, 200, 400, 800)
K6_ARRIVAL_RATES = (25, 50, 100, 200, 400)
VEGETA_RATES = (250, 500, 1000, 2000, 4000)
#: jmeter-plugins Concurrency Thread Group: 16 threads in 4 steps over 32 s, held 8 s more
STEPPING_LEVELS = (4, 8, 12, 16)
STEPPING_DURATIONS_S = (8, 8, 8, 16)


@dataclass
class Requests:
    """Plain lists, one entry per request, in file order."""

    start_ns: list[int]
    latency: list[float]  # file's unit
    ok: list[bool]
    code: list[int]  # HTTP status, 0 without a response; -1 when the file has none
    level: list[int] | None = None  # JMeter allThreads
    group: list[str] | None = None  # vegeta attack


def _text(path: Path):
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return io.StringIO(raw.decode("utf-8"), newline="")


def rfc3339_ns(s: str) -> int:
    """RFC 3339 with up to 9 fractional digits, 'Z' or an offset, to ns since the epoch."""
    main, frac, tz = s, "", "+00:00"
    if s.endswith("Z"):
        main = s[:-1]
    else:
        main, tz = s[:-6], s[-6:]
    if "." in main:
        main, frac = main.split(".")
    dt = datetime.fromisoformat(main + tz)
    secs = int(dt.timestamp())  # tz is always given: never local time
    return secs * NS + int((frac + "000000000")[:9])


def jmeter_csv(path: Path) -> Requests:
    rows = csv.DictReader(_text(path))
    r = Requests([], [], [], [], level=[])
    for row in rows:
        r.start_ns.append(int(row["timeStamp"]) * 1_000_000)
        r.latency.append(int(row["elapsed"]))
        r.ok.append(row["success"] == "true")
        rc = row["responseCode"]
        r.code.append(int(rc) if rc.isdigit() else 0)
        r.level.append(int(row["allThreads"]))
    return r


def jmeter_xml(path: Path) -> Requests:
    r = Requests([], [], [], [], level=[])
    for _, el in ET.iterparse(_text(path), events=("end",)):
        if el.tag in ("httpSample", "sample"):
            a = el.attrib
            r.start_ns.append(int(a["ts"]) * 1_000_000)
            r.latency.append(int(a["t"]))
            r.ok.append(a["s"] == "true")
            r.code.append(int(a["rc"]) if a["rc"].isdigit() else 0)
            r.level.append(int(a["na"]))
            el.clear()
    return r


@dataclass
class GatlingLog:
    requests: Requests
    user_start_ms: list[int]
    user_end_ms: list[int]
    run_start_ms: int


def gatling(path: Path) -> GatlingLog:
    """Gatling 3.4-3.11 simulation.log: REQUEST<TAB>groups<TAB>name<TAB>start<TAB>end<TAB>OK|KO<TAB>msg."""
    r = Requests([], [], [], [])
    us, ue, run = [], [], 0
    for line in _text(path):
        f = line.rstrip("\n").split("\t")
        if f[0] == "REQUEST":
            start, end = int(f[3]), int(f[4])
            r.start_ns.append(start * 1_000_000)
            r.latency.append(end - start)
            r.ok.append(f[5] == "OK")
            r.code.append(-1)
        elif f[0] == "USER":
            (us if f[2] == "START" else ue).append(int(f[3]))
        elif f[0] == "RUN":
            run = int(f[3])
    return GatlingLog(r, us, ue, run)


@dataclass
class K6Run:
    requests: Requests  # start = sample time (the request's end) - http_req_duration
    vus_ns: list[int]
    vus: list[int]
    dropped_ns: list[int]


def _k6_add(k: K6Run, metric: str, t: str, value: float, status: str, expected: str) -> None:
    if metric == "http_req_duration":
        end = rfc3339_ns(t)
        k.requests.start_ns.append(end - round(value * 1e6))
        k.requests.latency.append(value)
        k.requests.ok.append(expected == "true")
        k.requests.code.append(int(status) if status.isdigit() else 0)
    elif metric == "vus":
        k.vus_ns.append(rfc3339_ns(t))
        k.vus.append(int(value))
    elif metric == "dropped_iterations":
        for _ in range(int(value)):
            k.dropped_ns.append(rfc3339_ns(t))


def k6_json(path: Path) -> K6Run:
    k = K6Run(Requests([], [], [], []), [], [], [])
    for line in _text(path):
        rec = json.loads(line)
        if rec["type"] != "Point":
            continue
        d = rec["data"]
        tags = d.get("tags") or {}
        _k6_add(k, rec["metric"], d["time"], d["value"], tags.get("status", ""),
                tags.get("expected_response", ""))  # fmt: skip
    return k


def k6_csv(path: Path) -> K6Run:
    k = K6Run(Requests([], [], [], []), [], [], [])
    for row in csv.DictReader(_text(path)):
        _k6_add(k, row["metric_name"], row["timestamp"], float(row["metric_value"]),
                row.get("status", ""), row.get("expected_response", ""))  # fmt: skip
    return k


def vegeta_csv(path: Path) -> Requests:
    """vegeta encode -to csv: timestamp ns, code, latency ns, bytes out, bytes in, error, body, attack, seq, ..."""
    r = Requests([], [], [], [], group=[])
    for row in csv.reader(_text(path)):
        r.start_ns.append(int(row[0]))
        code = int(row[1])
        r.code.append(code)
        r.latency.append(int(row[2]))
        r.ok.append(200 <= code < 400 and row[5] == "")
        r.group.append(row[7])
    return r


def nearest_rank(sorted_values: list, p: float):
    """Exact nearest-rank percentile (p in 0-100) of a sorted list; None when empty."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass
class Window:
    level: float
    start_ns: int
    end_ns: int
    n: int
    errors: int
    rps: float
    p50: float | None
    p99: float | None


def stats(r: Requests, members: list[list[int]], bounds: list[tuple[int, int]], levels) -> list[Window]:
    """Per step: requests, errors, req/s over its bounds, p50/p99 of the successful requests."""
    out = []
    for idx, (a, b), lv in zip(members, bounds, levels):
        good = sorted(r.latency[i] for i in idx if r.ok[i])
        dur = (b - a) / NS
        out.append(Window(lv, a, b, len(idx), sum(1 for i in idx if not r.ok[i]),
                          len(idx) / dur if dur > 0 else 0.0,
                          nearest_rank(good, 50), nearest_rank(good, 99)))  # fmt: skip
    return out


def plan_windows(
    r: Requests, levels, step_s: float = STEP_S, t0_ns: int | None = None, durations_s=None
) -> list[Window]:
    """The plan's windows: consecutive ``durations_s`` (default ``step_s`` each) from t0, the first request."""
    t0 = min(r.start_ns) if t0_ns is None else t0_ns
    durations_s = durations_s or [step_s] * len(levels)
    edges = [t0]
    for d in durations_s:
        edges.append(edges[-1] + round(d * NS))
    bounds = list(zip(edges[:-1], edges[1:]))
    members: list[list[int]] = [[] for _ in levels]
    for i, t in enumerate(r.start_ns):
        k = bisect.bisect_right(edges, t) - 1
        if 0 <= k < len(levels):
            members[k].append(i)
    return stats(r, members, bounds, levels)


def count_in_windows(times_ns: list[int], windows: list[Window]) -> list[int]:
    """How many of ``times_ns`` fall in each window [start, end)."""
    return [sum(1 for t in times_ns if w.start_ns <= t < w.end_ns) for w in windows]


OHA_RATES = (250, 500, 1000, 2000)


def oha_csv(path: Path) -> Requests:
    """oha --output-format csv: request-start (s from the run's start), ..., request-duration (s), bytes, status."""
    r = Requests([], [], [], [])
    for row in csv.DictReader(_text(path)):
        r.start_ns.append(round(float(row["request-start"]) * NS))
        r.latency.append(float(row["request-duration"]))
        code = int(row["status"])
        r.code.append(code)
        r.ok.append(200 <= code < 300)
    return r


def jmeter_test_start_ns(summary: Path) -> int:
    """JMeter's own start marker: 'Starting standalone test @ ... (<ms since the epoch>)'."""
    for line in summary.read_text().splitlines():
        if line.startswith("Starting standalone test @"):
            return int(line.rsplit("(", 1)[1].rstrip(")")) * 1_000_000
    raise ValueError(f"{summary}: no 'Starting standalone test' line")


def jmeter_log_time_ns(log: Path, message: str) -> int:
    """Time of the first jmeter.log line containing ``message`` (the log's times are UTC here:
    the machine's zone, checked against the summary's 'Starting standalone test' marker)."""
    for line in log.read_text().splitlines():
        if message in line:
            stamp, ms = line[:23].split(",")
            dt = datetime.fromisoformat(stamp + "+00:00")
            return (int(dt.timestamp()) * 1000 + int(ms)) * 1_000_000
    raise ValueError(f"{log}: no line with {message!r}")
