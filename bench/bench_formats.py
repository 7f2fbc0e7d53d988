"""Reading each input format at a large size, as a ratio against a plain parse of the same file.

    python3 bench/bench_formats.py            # 1M requests per format (about a minute and a half)
    HEADROOM_BENCH_N=5000000 python3 bench/bench_formats.py

Synthetic files (a 3-step ramp, 1 % errors) are written to a temporary
folder.  "headroom" is ``headroom.reduce_run`` (detection, parsing, checks,
steps, errors, the reduction to histograms: what ``headroom summary``
reads); "floor" is the fastest honest parse of the same bytes in the same
run: ``pyarrow.csv.read_csv`` for CSV files (also Gatling's tab-separated
log), ``pyarrow.json.read_json`` for JSON lines, ``ElementTree.iterparse``
for XML; for the binary Gatling log, which no other parser reads, headroom's own
parse of its records (``gatling_bin.scan``) alone.  The ratio is headroom / floor (lower is better; target 1.5x).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import headroom  # noqa: E402

N = int(os.environ.get("HEADROOM_BENCH_N", 1_000_000))
T0 = 1_795_430_000_000_000_000
rng = np.random.default_rng(1)


def _data(n):
    step = np.repeat(np.arange(3), [n // 3, n // 3, n - 2 * (n // 3)])
    start = T0 + np.sort(rng.integers(0, 60_000_000_000, n)) + step * 60_000_000_000
    lat_ns = rng.integers(200_000, 30_000_000, n)
    code = np.where(rng.random(n) < 0.01, 503, 200)
    return step, start, lat_ns, code


def write_vegeta_csv(p, n):
    step, start, lat, code = _data(n)
    with open(p, "w") as f:
        for s, t, la, c in zip(step.tolist(), start.tolist(), lat.tolist(), code.tolist()):
            f.write(f"{t},{c},{la},0,6,,,rate{s},0,GET,http://127.0.0.1:8080/,\n")


def write_vegeta_json(p, n):
    import datetime as dt

    step, start, lat, code = _data(n)
    with open(p, "w") as f:
        for s, t, la, c in zip(step.tolist(), start.tolist(), lat.tolist(), code.tolist()):
            ts = (
                dt.datetime.fromtimestamp(t // 10**9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
                + f".{t % 10**9:09d}Z"
            )
            f.write(
                f'{{"attack":"rate{s}","seq":0,"code":{c},"timestamp":"{ts}","latency":{la},"bytes_out":0,'
                f'"bytes_in":6,"error":"","body":null,"method":"GET","url":"http://127.0.0.1:8080/","headers":null}}\n'
            )


def write_k6_csv(p, n):
    import datetime as dt

    step, start, lat, code = _data(n)
    with open(p, "w") as f:
        f.write("metric_name,timestamp,metric_value,check,error,error_code,expected_response,group,method,name,"
                "proto,scenario,service,status,subproto,tls_version,url,extra_tags,metadata\n")  # fmt: skip
        for s, t, la, c in zip(step.tolist(), start.tolist(), lat.tolist(), code.tolist()):
            e = t + la
            ts = (
                dt.datetime.fromtimestamp(e // 10**9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
                + f".{e % 10**9:09d}Z"
            )
            f.write(f"http_req_duration,{ts},{la / 1e6:f},,,,{'true' if c == 200 else 'false'},,GET,u,HTTP/1.1,"
                    f"c{s},,{c},,,http://127.0.0.1:8080/,,\n")  # fmt: skip


def write_k6_json(p, n):
    import datetime as dt

    step, start, lat, code = _data(n)
    with open(p, "w") as f:
        for s, t, la, c in zip(step.tolist(), start.tolist(), lat.tolist(), code.tolist()):
            e = t + la
            ts = (
                dt.datetime.fromtimestamp(e // 10**9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
                + f".{e % 10**9:09d}Z"
            )
            f.write(f'{{"metric":"http_req_duration","type":"Point","data":{{"time":"{ts}","value":{la / 1e6:f},'
                    f'"tags":{{"expected_response":"{"true" if c == 200 else "false"}","method":"GET",'
                    f'"scenario":"c{s}","status":"{c}","url":"http://127.0.0.1:8080/"}}}}}}\n')  # fmt: skip


def write_jmeter_csv(p, n):
    step, start, lat, code = _data(n)
    with open(p, "w") as f:
        f.write("timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,failureMessage,"
                "bytes,sentBytes,grpThreads,allThreads,URL,Latency,IdleTime,Connect\n")  # fmt: skip
        for s, t, la, c in zip(step.tolist(), start.tolist(), lat.tolist(), code.tolist()):
            k = 2**s
            f.write(f"{t // 10**6},{la // 10**6},index,{c},OK,g 1-1,text,{'true' if c == 200 else 'false'},,6,120,"
                    f"{k},{k},http://127.0.0.1:8080/,{la // 10**6},0,0\n")  # fmt: skip


def write_jmeter_xml(p, n):
    step, start, lat, code = _data(n)
    with open(p, "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testResults version="1.2">\n')
        for s, t, la, c in zip(step.tolist(), start.tolist(), lat.tolist(), code.tolist()):
            f.write(f'<httpSample t="{la // 10**6}" lt="0" ts="{t // 10**6}" s="{"true" if c == 200 else "false"}" '
                    f'lb="index" rc="{c}" rm="OK" tn="g 1-1" ng="{2**s}" na="{2**s}"/>\n')  # fmt: skip
        f.write("</testResults>\n")


def write_gatling(p, n):
    step, start, lat, code = _data(n)
    with open(p, "w") as f:
        f.write(f"RUN\tdemo.Sim\tsim\t{T0 // 10**6}\t \t3.9.5\n")
        for _s, t, la, c in zip(step.tolist(), start.tolist(), lat.tolist(), code.tolist()):
            a = t // 10**6
            f.write(f"REQUEST\t\tindex\t{a}\t{a + la // 10**6}\t{'OK' if c == 200 else 'KO'}\t \n")


def write_ab(p, n):
    """ab -g rows: start (ctime text, local = UTC here, and whole seconds), ctime, dtime, ttime, wait (ms)."""
    import time as _time

    step, start, lat, code = _data(n)
    sec = start // 10**9
    ms = np.rint(lat / 1e6).astype(np.int64)
    text = {}
    with open(p, "w") as f:
        f.write("starttime\tseconds\tctime\tdtime\tttime\twait\n")
        for s_, m in zip(sec.tolist(), ms.tolist()):
            t = text.get(s_) or text.setdefault(s_, _time.strftime("%a %b %d %H:%M:%S %Y", _time.gmtime(s_)))
            f.write(f"{t}\t{s_}\t0\t{m}\t{m}\t{m}\n")


def write_gatling_binary(p, n):
    """A Gatling 3.16 binary simulation.log of a closed ramp, as constantConcurrentUsers writes it: 4, 8
    then 16 users, each user one request (latency 0.2-30 ms) and the next user started when it ends;
    records in time order (USER start, then REQUEST and USER end at the response); 1 % KO.  Name
    "index" and message "" are defined by the first request, referred to after."""
    import struct

    levels = (4, 8, 16)
    per = [n // 3, n // 3, n - 2 * (n // 3)]
    lat = rng.integers(1, 30, n)  # ms
    ok = rng.random(n) >= 0.01
    start, slot_end, i = np.zeros(n, np.int64), 0, 0
    for c, m in zip(levels, per):
        slot = np.arange(m) % c
        order = np.argsort(slot, kind="stable")  # each slot's requests one after another
        lo = lat[i : i + m][order]
        ends = np.empty(m, np.int64)
        for k in range(c):  # per slot: cumulative latencies from the step start
            sel = slice(np.searchsorted(slot[order], k), np.searchsorted(slot[order], k, "right"))
            ends[sel] = slot_end + np.cumsum(lo[sel])
        st = np.empty(m, np.int64)
        st[order] = ends - lo
        start[i : i + m] = st
        slot_end, i = int(ends.max()) + 1, i + m
    end = start + lat

    def string(b):
        return struct.pack(">i", len(b)) + (b + b"\x00" if b else b"")

    t0 = T0 // 10**6
    run = b"\x00" + string(b"3.16.0") + string(b"demo.Sim") + struct.pack(">q", t0) + string(b"")
    run += struct.pack(">i", 1) + string(b"sim") + struct.pack(">i", 0)
    user = np.dtype([("h", "u1"), ("sc", ">i4"), ("st", "u1"), ("t", ">i4")])
    req = np.dtype([("h", "u1"), ("g", ">i4"), ("name", ">i4"), ("s", ">i4"), ("e", ">i4"), ("ok", "u1"),
                    ("msg", ">i4")])  # fmt: skip
    # events: 0 user start (at start), 1 request and 2 user end (at end), in time order
    t = np.concatenate([start, end, end])
    kind = np.repeat(np.arange(3), n)
    idx = np.tile(np.arange(n), 3)
    order = np.lexsort((kind, idx, t))  # by time, then request, then kind
    with open(p, "wb") as f:
        f.write(run)
        first = True
        for a_ in range(0, 3 * n, 1 << 20):
            o = order[a_ : a_ + (1 << 20)]
            k, j = kind[o], idx[o]
            size = np.where(k == 1, req.itemsize, user.itemsize)
            if first:  # the first event is user 0's start; its request defines the strings (written slowly)
                first = False
            off = np.concatenate([[0], np.cumsum(size)])
            buf = np.zeros(int(off[-1]), np.uint8)
            u = k != 1
            ur = np.zeros(int(u.sum()), user)
            ur["h"], ur["st"] = 2, k[u] == 0
            ur["t"] = np.where(k[u] == 0, start[j[u]], end[j[u]])
            rr = np.zeros(int((~u).sum()), req)
            rr["h"], rr["name"], rr["msg"] = 1, -1, -2
            rr["s"], rr["e"], rr["ok"] = start[j[~u]], end[j[~u]], ok[j[~u]]
            for sel, recs, w in ((u, ur, user.itemsize), (~u, rr, req.itemsize)):
                at = off[:-1][sel]
                buf[(at[:, None] + np.arange(w)).ravel()] = recs.view(np.uint8)
            data = buf.tobytes()
            if a_ == 0:  # the first request record: define "index" (1) and "" (2) where it is
                q = int(off[:-1][np.flatnonzero(~u)[0]])
                s0, e0, ok0 = struct.unpack_from(">iib", data, q + 9)
                rec0 = struct.pack(">bii", 1, 0, 1) + string(b"index") + struct.pack(">iib", s0, e0, ok0)
                data = data[:q] + rec0 + struct.pack(">i", 2) + string(b"") + data[q + req.itemsize :]
            f.write(data)


def plain_gatling_binary(p):
    # no parser of this format exists outside Gatling (JVM): headroom's own parse of the records
    from headroom.formats import gatling_bin
    from headroom.formats._batch import join

    return len(join(list(gatling_bin.scan(p).batches())))


def write_hlog(p, n):
    """A YCSB HdrHistogram interval log (format 1.3, V2-encoded histograms, microseconds) of the same
    requests: one histogram per 1 s interval of their ends (successes only, as YCSB's READ.hdr), written
    with HdrHistogram_py's encoder (the samples in tests/data/formats/real/ycsb-hlog are YCSB's own)."""
    from hdrh.histogram import HdrHistogram

    step, start, lat, code = _data(n)
    end_us = (start + lat) // 1000
    lat_us = np.maximum(lat // 1000, 1)
    t0_us = int(end_us.min()) // 1_000_000 * 1_000_000
    sec = (end_us - t0_us) // 1_000_000
    order = np.argsort(sec, kind="stable")
    sec, lat_us = sec[order], lat_us[order]
    cuts = np.flatnonzero(np.r_[True, sec[1:] != sec[:-1], True])
    with open(p, "w") as f:
        f.write(f"#[Logging for: READ]\n#[Histogram log format version 1.3]\n"
                f"#[StartTime: {t0_us / 1e6:.3f} (seconds since epoch), bench]\n"
                '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"\n')  # fmt: skip
        for a, b in zip(cuts[:-1], cuts[1:]):
            h = HdrHistogram(1, 3_600_000_000, 3)
            values, counts = np.unique(lat_us[a:b], return_counts=True)
            for v, c in zip(values.tolist(), counts.tolist()):
                h.record_value(v, c)
            payload = h.encode().decode("ascii")
            f.write(f"{int(sec[a]):.3f},1.000,{int(values[-1]) / 1000:.3f},{payload}\n")


def plain_hlog(p):
    # the least that gives one value per request: every interval's histogram decoded by the maintained
    # decoder (HdrHistogram_py) and its counts repeated into per-request bucket indices (numpy)
    from hdrh.histogram import HdrHistogram

    n = 0
    with open(p, "rb") as f:
        for line in f:
            if line[:1].isdigit():
                h = HdrHistogram.decode(line.rstrip().rsplit(b",", 1)[1])
                counts = np.ctypeslib.as_array(h.counts)[: h.counts_len].astype(np.int64)
                nz = np.flatnonzero(counts)
                n += len(np.repeat(nz, counts[nz]))
    return n


def write_oha(p, n):
    step, start, lat, code = _data(n)
    with open(p, "w") as f:
        f.write("request-start,DNS,DNS+dialup,Response-delay,request-duration,bytes,status\n")
        for t, la, c in zip(((start - T0) / 1e9).tolist(), (lat / 1e9).tolist(), code.tolist()):
            f.write(f"{t:.9f},0.000001,0.00002,{la:.9f},{la:.9f},6,{c}\n")


def write_hey(p, n):
    step, start, lat, code = _data(n)
    with open(p, "w") as f:
        for k in range(3):
            f.write(
                "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\n"
            )
            sel = step == k
            t0 = start[sel].min()
            for t, la, c in zip(
                ((start[sel] - t0) / 1e9).tolist(), (lat[sel] / 1e9).tolist(), code[sel].tolist()
            ):
                f.write(f"{la:.4f},0.0000,0.0000,0.0000,{la:.4f},0.0000,{c},{t:.4f}\n")


def plain_csv(p, header=True, delimiter=","):
    import pyarrow.csv as pacsv

    ro = pacsv.ReadOptions(autogenerate_column_names=not header)
    return pacsv.read_csv(p, read_options=ro, parse_options=pacsv.ParseOptions(delimiter=delimiter)).num_rows


def plain_hey(p):
    import pyarrow.csv as pacsv

    # the least work: one read_csv per section (hey files repeat the header)
    raw = Path(p).read_bytes()
    head = raw[: raw.index(b"\n") + 1]
    import pyarrow as pa

    return sum(
        pacsv.read_csv(pa.BufferReader(pa.py_buffer(head + part))).num_rows
        for part in raw.split(head)
        if part
    )


def plain_json_lines(p):
    import pyarrow.json as pajson

    return pajson.read_json(p).num_rows


def plain_xml(p):
    import xml.etree.ElementTree as ET

    n = 0
    for _, el in ET.iterparse(p):
        if el.tag == "httpSample":
            n += 1
            el.clear()
    return n


def plain_tsv(p):
    import pyarrow.csv as pacsv

    # the REQUEST records' columns; records of other lengths (RUN, USER) are skipped
    return pacsv.read_csv(
        p,
        read_options=pacsv.ReadOptions(column_names=[f"c{i}" for i in range(7)]),
        parse_options=pacsv.ParseOptions(delimiter="\t", invalid_row_handler=lambda row: "skip"),
    ).num_rows


CASES = [
    ("hey CSV (3 sections)", "hey.csv", write_hey, plain_hey),
    ("vegeta CSV", "vegeta.csv", write_vegeta_csv, lambda p: plain_csv(p, header=False)),
    ("vegeta JSON", "vegeta.json", write_vegeta_json, plain_json_lines),
    ("k6 CSV", "k6.csv", write_k6_csv, plain_csv),
    ("k6 JSON", "k6.json", write_k6_json, plain_json_lines),
    ("JMeter CSV", "jmeter.jtl", write_jmeter_csv, plain_csv),
    ("JMeter XML", "jmeter.xml", write_jmeter_xml, plain_xml),
    ("Gatling log", "simulation.log", write_gatling, plain_tsv),
    ("Gatling binary log", "simulation-binary.log", write_gatling_binary, plain_gatling_binary),
    ("ab -g", "ab.tsv", write_ab, lambda p: plain_csv(p, delimiter="\t")),
    ("oha CSV", "oha.csv", write_oha, plain_csv),
    ("hlog (YCSB)", "ycsb-c1.hlog", write_hlog, plain_hlog),
]


def best(fn, repeat=2):
    """(CPU s, wall s), each the least of ``repeat`` runs: CPU counts both cores' work (pyarrow parses on
    threads), wall what a user waits; on a shared machine CPU is the steadier of the two."""
    cpu, wall = [], []
    for _ in range(repeat):
        c, t = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - t)
    return min(cpu), min(wall)


def main() -> None:
    only = sys.argv[1:]
    rows = []
    with tempfile.TemporaryDirectory(prefix="headroom-bench-") as d:
        for label, name, write, plain in CASES:
            if only and not any(o.lower() in label.lower() for o in only):
                continue
            p = Path(d) / name
            write(p, N)
            size = p.stat().st_size
            repeat = 3 if N <= 1_000_000 else 1
            t_plain = best(lambda p=p, plain=plain: plain(p), repeat)
            t_head = best(lambda p=p: headroom.reduce_run(p, base_time_ns=T0), repeat)
            run = headroom.reduce_run(p, base_time_ns=T0)
            assert run.n_requests + run.errors == N, (label, run.n_requests, run.errors)
            rows.append((label, size, t_plain, t_head))
            print(f"  {label}: CPU {t_head[0]:.2f} s (plain {t_plain[0]:.2f} s)", file=sys.stderr, flush=True)
            p.unlink()
    print(f"reading {N:,} requests per format (best of {3 if N <= 1_000_000 else 1})\n")
    print(
        "| format | file MB | floor CPU s | headroom CPU s | CPU ratio | floor wall s | headroom wall s | wall ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, size, (cp, wp), (ch, wh) in rows:
        print(
            f"| {label} | {size / 2**20:,.0f} | {cp:.2f} | {ch:.2f} | {ch / cp:.2f} | {wp:.2f} | {wh:.2f} | {wh / wp:.2f} |"
        )


if __name__ == "__main__":
    main()
