"""Reading the SHAPES of the real tool samples at about 1M requests, as a ratio against a plain parse.

    python3 bench/bench_real.py                      # about 1M requests per format
    python3 bench/bench_real.py --requests 200000    # smaller, quicker

For each real sample in tests/data/formats/real/ (JMeter 5.6.3 CSV JTL
``jmeter-stacked.csv.gz``, Gatling 3.11 ``gatling-ClosedRampSimulation.log.gz``, Gatling 3.16.0
binary ``gatling3_16_0-ClosedRampSimulation.log.gz`` (times shifted in the records; strings defined
once), ApacheBench ``ab-steps/ab-c*.tsv.gz`` (the five steps one after another in one file),
k6 ramping-vus CSV ``k6-ramping-vus.csv.gz``, vegeta ``vegeta-rates.csv.gz``, Locust
``locust/goserver-single/run/locust.csv.gz``: headroom.locust's file of a real run, 4 stages)
a file of about N requests is written to bench/_data/ (git-ignored) by tiling
the sample's data rows k times (k = round(N / the sample's requests)), tile i
shifted in time by i x (the sample's span + 1 s): the header is kept once
(Gatling: the RUN record once; USER and REQUEST times shifted), so each tile
repeats the plan (levels, attacks; vegeta keeps its attack names).  The tiled
file must read with ``headroom.reduce_run(path)`` and hold k x the sample's
requests.

Measured in the same run, best of 3, each run in a fresh child process
that first imports, untimed, what both sides load (``pyarrow.csv``, with
pyarrow and numpy) and headroom's reading layer (``headroom.io``, which
loads the readers and the reduction): the ratios compare the reading, not
the start of a Python process.  Headroom's imports are timed on their own
and printed in their own column (CPU s, a fixed cost per process, about
0.04 s here; at 1M requests it would add about a quarter to the ratio).
"floor" is ``pyarrow.csv.read_csv`` of the tiled file with the columns the
reader needs (tab-separated, REQUEST-shaped rows, for Gatling; for the binary Gatling log, which no
other parser reads, headroom's own parse of its records alone); "headroom"
is ``headroom.reduce_run(path)`` (detection, parsing, checks, steps, errors,
reduction to histograms).  The ratios are headroom / floor in CPU time (both cores' work)
and wall time (lower is better);
no absolute time is asserted.  Peak RSS is the child's high-water mark
(``VmHWM``, else ``resource.getrusage``) for reduce_run (includes the interpreter and imports).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REAL = ROOT / "tests" / "data" / "formats" / "real"
OUT = ROOT / "bench" / "_data"
SEC_NS = 10**9


def _lines(name: str) -> list[str]:
    with gzip.open(REAL / name, "rt", encoding="utf-8", newline="") as f:
        return f.read().splitlines(keepends=True)


# ---- tiling: each writes `out` and returns its number of lines (records) ---------------------------------------------------


def tile_jmeter(k: int, out: Path) -> Path:
    lines = _lines("jmeter-stacked.csv.gz")
    head, rows = lines[0], lines[1:]
    ts = np.array([int(r[: r.index(",")]) for r in rows], np.int64)  # ms
    rest = [r[r.index(",") :] for r in rows]
    shift = int(ts.max() - ts.min()) + 1000
    with open(out, "w", encoding="utf-8", newline="") as f:
        f.write(head)
        for i in range(k):
            f.writelines([f"{t}{r}" for t, r in zip((ts + i * shift).tolist(), rest)])
    return 1 + k * len(rows)


def tile_gatling(k: int, out: Path) -> Path:
    lines = _lines("gatling-ClosedRampSimulation.log.gz")
    runs = [ln for ln in lines if ln.startswith("RUN\t")]
    recs = [ln.rstrip("\r\n").split("\t") for ln in lines if not ln.startswith("RUN\t")]
    kinds = {r[0] for r in recs}
    assert kinds <= {"USER", "REQUEST"}, kinds
    times = [int(r[3]) for r in recs] + [int(r[4]) for r in recs if r[0] == "REQUEST"]
    shift = max(times) - min(times) + 1000  # ms
    with open(out, "w", encoding="utf-8", newline="") as f:
        f.writelines(runs)
        for i in range(k):
            d = i * shift
            buf = []
            for r in recs:
                if r[0] == "REQUEST":
                    buf.append("\t".join([*r[:3], str(int(r[3]) + d), str(int(r[4]) + d), *r[5:]]) + "\n")
                else:
                    buf.append("\t".join([*r[:3], str(int(r[3]) + d), *r[4:]]) + "\n")
            f.writelines(buf)
    return len(runs) + k * len(recs)


def _gatling_binary_records(raw: bytes):
    """The records of a Gatling 3.13+ binary log (no groups): (end of the RUN record, per record its
    start, length, byte offsets of its int32 times, and its bytes with string definitions turned
    into references, for the tiles after the first)."""
    import struct

    from headroom.formats import gatling_bin as G

    r = G._Reader(Path("sample"))
    p, _, _ = G._run_record(r, raw)
    run_end, out = p, []
    while p < len(raw):
        h = raw[p]
        end, _ = r.one(raw, p)
        if h == G.USER:
            out.append((p, end - p, (6,), None))
        elif h == G.REQUEST:
            assert struct.unpack_from(">i", raw, p + 1)[0] == 0, "groups"
            idx = struct.unpack_from(">i", raw, p + 5)[0]
            q = p + 9 if idx < 0 else r.string(raw, p + 9)
            s, e, ok = struct.unpack_from(">iib", raw, q)
            midx = struct.unpack_from(">i", raw, q + 9)[0]
            ref = None
            if idx > 0 or midx > 0:  # a string's first use: the later tiles refer to it
                ref = struct.pack(">biiiibi", 1, 0, -abs(idx), s, e, ok, -abs(midx))
            out.append((p, end - p, (q - p, q - p + 4), ref))
        else:
            raise AssertionError(f"record type {h}")
        p = end
    return run_end, out


def tile_gatling_binary(k: int, out: Path) -> Path:
    """The 3.16.0 closed-ramp binary log tiled k times: the RUN record once, each tile's times
    (int32 ms since the run start) shifted by the tile's offset, strings defined once."""
    with gzip.open(REAL / "gatling3_16_0-ClosedRampSimulation.log.gz", "rb") as f:
        raw = f.read()
    run_end, recs = _gatling_binary_records(raw)
    body = bytearray()
    time_pos = []
    for p, n, offs, ref in recs:
        at = len(body)
        body += raw[p : p + n] if ref is None else ref
        time_pos.extend(at + (o if ref is None else 9 + 4 * j) for j, o in enumerate(offs))
    later = np.frombuffer(bytes(body), np.uint8).copy()
    pos = np.array(time_pos, np.int64)
    idx = pos[:, None] + np.arange(4)
    t = later[idx].astype(np.int64) @ np.array([1 << 24, 1 << 16, 1 << 8, 1], np.int64)
    shift = int(t.max() - t.min()) + 1000  # ms
    with open(out, "wb") as f:
        f.write(raw[:run_end])
        f.write(raw[run_end:])
        for i in range(1, k):
            v = (t + i * shift).astype(">i4").view(np.uint8).reshape(-1, 4)
            later[idx] = v
            f.write(later.tobytes())
    return 1 + k * len(recs)


def tile_ab(k: int, out: Path) -> Path:
    """The five ab -g files (c1 ... c16) one after another, tiled k times, as ONE ab -g file (the
    reader's work per row is the same; a step folder is five of these)."""
    rows = []
    for c in (1, 2, 4, 8, 16):
        rows += _lines(f"ab-steps/ab-c{c}.tsv.gz")[1:]
    sec = np.array([int(r.split("\t")[1]) for r in rows], np.int64)
    head = [r.split("\t")[0] for r in rows]
    rest = [r.split("\t", 2)[2] for r in rows]
    shift = int(sec.max() - sec.min()) + 1
    with open(out, "w", encoding="utf-8", newline="") as f:
        f.write("starttime\tseconds\tctime\tdtime\tttime\twait\n")
        for i in range(k):
            f.writelines([f"{h}\t{s}\t{r}" for h, s, r in zip(head, (sec + i * shift).tolist(), rest)])
    return 1 + k * len(rows)


def tile_k6(k: int, out: Path) -> Path:
    lines = _lines("k6-ramping-vus.csv.gz")
    head, rows = lines[0], lines[1:]
    assert head.split(",")[1] == "timestamp", head
    parts = [r.split(",", 2) for r in rows]  # metric_name, timestamp (rfc3339_nano, UTC 'Z'), rest
    assert all(p[1].endswith("Z") for p in parts)
    ts = np.array([p[1][:-1] for p in parts], "datetime64[ns]").astype(np.int64)
    names = [p[0] for p in parts]
    rest = [p[2] for p in parts]
    shift = int(ts.max() - ts.min()) + SEC_NS
    with open(out, "w", encoding="utf-8", newline="") as f:
        f.write(head)
        for i in range(k):
            s = np.datetime_as_string((ts + i * shift).astype("datetime64[ns]"), unit="ns").tolist()
            f.writelines([f"{n},{t}Z,{r}" for n, t, r in zip(names, s, rest)])
    return 1 + k * len(rows)


def tile_vegeta(k: int, out: Path) -> Path:
    rows = _lines("vegeta-rates.csv.gz")  # no header; timestamp (unix ns) is the first field
    ts = np.array([int(r[: r.index(",")]) for r in rows], np.int64)
    rest = [r[r.index(",") :] for r in rows]
    shift = int(ts.max() - ts.min()) + SEC_NS
    with open(out, "w", encoding="utf-8", newline="") as f:
        for i in range(k):
            f.writelines([f"{t}{r}" for t, r in zip((ts + i * shift).tolist(), rest)])
    return k * len(rows)


def tile_locust(k: int, out: Path) -> Path:
    """headroom.locust's file of the Go test server run (one process, 4 stages): each tile shifted by the
    sample's span + 1 s and its stages numbered after the previous tile's (a tile's stages are new ones)."""
    import csv

    with gzip.open(REAL / "locust" / "goserver-single" / "run" / "locust.csv.gz", "rt", newline="") as f:
        rows = list(csv.reader(f))
    head, rows = rows[0], rows[1:]
    t = [int(r[1]) for r in rows]
    shift, stages = max(t) - min(t) + 1_000_000, 1 + max(int(r[2]) for r in rows)
    with open(out, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(head)
        for i in range(k):
            w.writerows([r[0], int(r[1]) + i * shift, int(r[2]) + i * stages, *r[3:]] for r in rows)
    return 1 + k * len(rows)


# ---- floors: pyarrow.csv.read_csv of the columns the reader needs --------------------------


def floor_locust(p):
    import pyarrow as pa
    import pyarrow.csv as pacsv

    # the reader's columns and types (the event names as a dictionary, the rest integers)
    types = {"event": pa.dictionary(pa.int32(), pa.string())}
    types.update({c: pa.int64() for c in ("time_us", "stage", "users", "latency_us", "status", "ok")})
    return pacsv.read_csv(
        p, convert_options=pacsv.ConvertOptions(column_types=types, include_columns=list(types))
    ).num_rows


def floor_jmeter(p):
    import pyarrow.csv as pacsv

    cols = ["timeStamp", "elapsed", "success", "responseCode", "responseMessage", "allThreads"]
    return pacsv.read_csv(
        p,
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(include_columns=cols),
    ).num_rows


def floor_gatling(p):
    import pyarrow.csv as pacsv

    # REQUEST records (7 fields); RUN and USER records (other lengths) are skipped.  One thread, as
    # the reader does: with threads the Python row handler makes it ~15x slower (4.4 s against 0.25 s
    # on the 1x closed-ramp tile), which would flatter the ratio.
    return pacsv.read_csv(
        p,
        read_options=pacsv.ReadOptions(column_names=[f"c{i}" for i in range(7)], use_threads=False),
        parse_options=pacsv.ParseOptions(
            delimiter="\t", quote_char=False, invalid_row_handler=lambda row: "skip"
        ),
        convert_options=pacsv.ConvertOptions(include_columns=["c0", "c3", "c4", "c5"]),
    ).num_rows


def floor_gatling_binary(p):
    # No parser of this format exists outside Gatling (JVM): the floor is headroom's own parse of the
    # records (gatling_bin.scan, the rows joined), without steps, checks or histograms
    from headroom.formats import gatling_bin
    from headroom.formats._batch import join

    return len(join(list(gatling_bin.scan(p).batches())))


def floor_ab(p):
    import pyarrow.csv as pacsv

    return pacsv.read_csv(
        p,
        parse_options=pacsv.ParseOptions(delimiter="\t"),
        convert_options=pacsv.ConvertOptions(include_columns=["seconds", "ttime"]),
    ).num_rows


def floor_k6(p):
    import pyarrow.csv as pacsv

    cols = ["metric_name", "timestamp", "metric_value", "status", "expected_response", "scenario"]
    return pacsv.read_csv(p, convert_options=pacsv.ConvertOptions(include_columns=cols)).num_rows


def floor_vegeta(p):
    import pyarrow.csv as pacsv

    from headroom.formats.vegeta import CSV_COLUMNS

    return pacsv.read_csv(
        p,
        read_options=pacsv.ReadOptions(column_names=CSV_COLUMNS),
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(include_columns=["timestamp", "code", "latency", "attack"]),
    ).num_rows


CASES = {  # key: (label, sample, tiled name, tile, floor)
    "jmeter": ("JMeter CSV (stacked)", "jmeter-stacked.csv.gz", "real-jmeter.csv", tile_jmeter, floor_jmeter),
    "gatling": (
        "Gatling log (closed ramp)",
        "gatling-ClosedRampSimulation.log.gz",
        "real-simulation.log",
        tile_gatling,
        floor_gatling,
    ),  # fmt: skip
    "gatling-binary": (
        "Gatling 3.16 binary log (closed ramp)",
        "gatling3_16_0-ClosedRampSimulation.log.gz",
        "real-simulation-binary.log",
        tile_gatling_binary,
        floor_gatling_binary,
    ),  # fmt: skip
    "ab": ("ab -g (5 steps in one file)", "ab-steps/ab-c1.tsv.gz", "real-ab.tsv", tile_ab, floor_ab),
    "k6": ("k6 CSV (ramping-vus)", "k6-ramping-vus.csv.gz", "real-k6.csv", tile_k6, floor_k6),
    "vegeta": ("vegeta CSV (5 attacks)", "vegeta-rates.csv.gz", "real-vegeta.csv", tile_vegeta, floor_vegeta),
    "locust": (
        "Locust (headroom.locust, 4 stages)",
        "locust/goserver-single/run/locust.csv.gz",
        "real-locust.csv",
        tile_locust,
        floor_locust,
    ),  # fmt: skip
}


def _requests(run) -> int:
    return run.n_requests + run.errors


def _child(what: str, key: str, path: str) -> None:
    """One timed measurement in this (fresh) process; prints JSON."""
    import resource

    # the same imports on both sides, outside the timer: pyarrow.csv (the floor's parser, which loads
    # pyarrow and numpy) and headroom's reading layer (its readers, reduction, telemetry and model):
    # what is timed is the reading, not the start of a Python process; headroom's own imports are
    # timed here and printed in their own column
    import pyarrow.csv  # noqa: F401

    c = time.process_time()
    import headroom
    import headroom.io  # noqa: F401  (headroom.reading, the readers, headroom.reduce, headroom.spooled)
    import headroom.telemetry.load  # noqa: F401  (loaded by reduce_run for the server's telemetry)

    imports = time.process_time() - c
    t, c = time.perf_counter(), time.process_time()
    if what == "floor":
        n = CASES[key][4](path)
    else:
        n = _requests(headroom.reduce_run(path))
    s, cpu = time.perf_counter() - t, time.process_time() - c
    # VmHWM is this process's own peak (ru_maxrss after fork+exec may carry the parent's)
    try:
        status = Path("/proc/self/status").read_text()
        rss_kb = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmHWM:")))
    except (OSError, StopIteration):
        rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"s": s, "cpu": cpu, "n": n, "rss_mb": rss_kb / 1024, "imports": imports}))


def measure(what: str, key: str, path: Path, repeat: int) -> list[dict]:
    # the children may cache bytecode, as an installed package has it: without, every child would
    # compile headroom's modules again inside its timed reduce_run (their imports are lazy)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = []
    for _ in range(repeat):
        r = subprocess.run(
            [sys.executable, __file__, "--_child", what, key, str(path)],
            capture_output=True, text=True, env={**env, "PYTHONHASHSEED": "0"},
        )  # fmt: skip
        if r.returncode:
            raise RuntimeError((r.stderr.strip().splitlines() or ["(no message)"])[-1])
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--requests", type=int, default=1_000_000, help="requests per tiled file (default 1,000,000)"
    )
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs (default 3)")
    ap.add_argument("--keep", action="store_true", help="keep the tiled files in bench/_data/")
    ap.add_argument("formats", nargs="*", help=f"only these ({', '.join(CASES)})")
    ap.add_argument("--_child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._child:
        _child(*a._child)
        return

    import headroom

    OUT.mkdir(parents=True, exist_ok=True)
    rows, failed = [], []
    for key, (label, sample, name, tile, _floor) in CASES.items():
        if a.formats and key not in a.formats:
            continue
        samples = (
            [REAL / f"ab-steps/ab-c{c}.tsv.gz" for c in (1, 2, 4, 8, 16)] if key == "ab" else [REAL / sample]
        )
        base = sum(_requests(headroom.reduce_run(x)) for x in samples)
        k = max(1, round(a.requests / base))
        p = OUT / name
        t = time.perf_counter()
        nlines = tile(k, p)
        print(f"  {label}: {k} x {base:,} requests, {p.stat().st_size / 2**20:,.0f} MB "
              f"written in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)  # fmt: skip
        try:
            head = measure("headroom", key, p, a.repeat)
        except RuntimeError as exc:
            failed.append((label, str(exc)))
            print(f"  {label}: headroom could not read it: {exc}", file=sys.stderr, flush=True)
            continue
        n = head[0]["n"]
        if n != k * base:
            failed.append((label, f"{n:,} requests read, expected {k:,} x {base:,} = {k * base:,}"))
        floor = measure("floor", key, p, a.repeat)
        th, tf = min(r["s"] for r in head), min(r["s"] for r in floor)
        ch, cf = min(r["cpu"] for r in head), min(r["cpu"] for r in floor)
        rss = max(r["rss_mb"] for r in head)
        imports = min(r["imports"] for r in head)
        rows.append((label, n, nlines, p.stat().st_size, (cf, ch), (tf, th), rss, imports))
        print(f"  {label}: headroom {th:.2f} s (CPU {ch:.2f} s), floor {tf:.2f} s (CPU {cf:.2f} s)",
              file=sys.stderr, flush=True)  # fmt: skip
        if not a.keep:
            p.unlink()

    print(
        f"\nreal sample shapes tiled to ~{a.requests:,} requests (best of {a.repeat}, fresh process each)\n"
    )
    print("| format | requests | rows (lines) | MB | floor CPU s | headroom CPU s | CPU ratio | floor wall s "
          "| headroom wall s | wall ratio | headroom peak RSS MB | headroom imports CPU s |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, n, nrows, size, (cf, ch), (tf, th), rss, imports in rows:
        print(
            f"| {label} | {n:,} | {nrows:,} | {size / 2**20:,.0f} | {cf:.2f} | {ch:.2f} | {ch / cf:.2f} "
            f"| {tf:.2f} | {th:.2f} | {th / tf:.2f} | {rss:,.0f} | {imports:.3f} |"
        )
    for label, why in failed:
        print(f"\nFAILED {label}: {why}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
