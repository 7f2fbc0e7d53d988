"""Every input format: real sample files (tests/data/formats, see its README) read by headroom
against an independent reading of the same file with the csv/json/xml modules.

Checked per step: successful requests, errors, exact nearest-rank percentiles
(sorted[ceil(q * n) - 1]) and the step's concurrency where the file gives it.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from conftest import ROOT

import headroom
from headroom import formats
from headroom.io import load_run, reduce_run
from headroom.model import HeadroomError

DATA = ROOT / "tests" / "data" / "formats"


# --------------------------------------------------------------------------
# the independent reader: per step, a list of (start_ns, latency_s, failed)


def _ns_rfc3339(text: str) -> int:
    from reference import parse_time_ns

    return parse_time_ns(text)


def ref_vegeta_csv(path):
    steps: dict[str, list] = {}
    with open(path, newline="") as f:
        for row in csv.reader(f):
            code = int(row[1])
            steps.setdefault(row[7], []).append((int(row[0]), int(row[2]) / 1e9, not 200 <= code <= 299))
    return _ordered(steps.values()), None


def ref_vegeta_json(path):
    steps: dict[str, list] = {}
    for line in open(path):
        r = json.loads(line)
        steps.setdefault(r["attack"], []).append(
            (_ns_rfc3339(r["timestamp"]), r["latency"] / 1e9, not 200 <= r["code"] <= 299)
        )
    return _ordered(steps.values()), None


def _ordered(groups):
    return sorted((list(g) for g in groups), key=lambda g: min(r[0] for r in g))


def _k6_steps(samples, vus):
    by: dict[str, list] = {}
    for scen, end, ms, status, expected in samples:
        lat = ms / 1e3
        failed = expected != "true" if expected else not 200 <= int(status or 0) <= 299
        by.setdefault(scen, []).append((end - round(lat * 1e9), lat, failed))
    steps = _ordered(by.values())
    conc = []
    for g in steps:
        lo, hi = min(r[0] for r in g), max(r[0] + round(r[1] * 1e9) for r in g)
        inside = sorted(v for t, v in vus if lo < t < hi)
        conc.append(int(np.median(inside)) if inside else None)
    return steps, conc


def ref_k6_json(path):
    samples, vus = [], []
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            if '"http_req_duration"' in line or '"vus"' in line:
                raise
            continue  # a damaged line of another metric cannot change a request or a step

        if r.get("type") != "Point":
            continue
        d = r["data"]
        if r["metric"] == "vus":
            vus.append((_ns_rfc3339(d["time"]), d["value"]))
        elif r["metric"] == "http_req_duration":
            tags = d["tags"]
            samples.append(
                (
                    tags["scenario"],
                    _ns_rfc3339(d["time"]),
                    d["value"],
                    tags["status"],
                    tags.get("expected_response", ""),
                )
            )
    return _k6_steps(samples, vus)


def ref_k6_csv(path):
    samples, vus = [], []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["metric_name"] == "vus":
                vus.append((_ns_rfc3339(r["timestamp"]), float(r["metric_value"])))
            elif r["metric_name"] == "http_req_duration":
                samples.append(
                    (r["scenario"], _ns_rfc3339(r["timestamp"]), float(r["metric_value"]), r["status"],
                     r["expected_response"])
                )  # fmt: skip
    return _k6_steps(samples, vus)


def ref_jmeter_csv(path):
    by: dict[int, list] = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["responseMessage"].startswith("Number of samples in transaction"):
                continue
            by.setdefault(int(r["allThreads"]), []).append(
                (int(r["timeStamp"]) * 1_000_000, int(r["elapsed"]) / 1e3, r["success"] != "true")
            )
    return [by[k] for k in sorted(by)], sorted(by)


def ref_jmeter_xml(path):
    by: dict[int, list] = {}
    for el in ET.parse(path).getroot():
        rows = [el]
        if el.get("rm", "").startswith("Number of samples in transaction"):
            rows = list(el)
        for r in rows:
            by.setdefault(int(r.get("na")), []).append(
                (int(r.get("ts")) * 1_000_000, int(r.get("t")) / 1e3, r.get("s") != "true")
            )
    return [by[k] for k in sorted(by)], sorted(by)


def ref_gatling(path):
    users: list[tuple[int, int]] = []
    reqs = []
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if f[0] == "USER":
            users.append((int(f[-1]), 1 if f[2] == "START" else -1))
        elif f[0] == "REQUEST":
            k = [i for i, x in enumerate(f) if x in ("OK", "KO") and i >= 3][0]
            reqs.append((int(f[k - 2]), int(f[k - 1]), f[k] == "KO"))
    by: dict[int, list] = {}
    for s, e, ko in reqs:
        active = sum(d for t, d in users if t <= s)
        by.setdefault(max(active, 1), []).append((s * 1_000_000, (e - s) / 1e3, ko))
    return [by[k] for k in sorted(by)], sorted(by)


def ref_oha(path):
    with open(path, newline="") as f:
        rows = [
            (
                round(float(r["request-start"]) * 1e9),
                float(r["request-duration"]),
                not 200 <= int(r["status"]) <= 299,
            )
            for r in csv.DictReader(f)
        ]
    return [rows], None


def ref_hey(path):
    steps, shift = [], 0
    for line in open(path):
        f = line.strip().split(",")
        if f[0] == "response-time":
            steps.append([])
            continue
        lat, code, off = float(f[0]), int(f[6]), float(f[7])
        steps[-1].append((round(off * 1e9), lat, not 200 <= code <= 299))
    out = []
    for s in steps:  # each run starts when the previous one ended
        out.append([(t + shift, lat, bad) for t, lat, bad in s])
        if s:
            shift = max(t + shift + round(lat * 1e9) for t, lat, _ in s)
    return out, None


SAMPLES = {
    "vegeta.csv": ("vegeta-csv", ref_vegeta_csv),
    "vegeta.json": ("vegeta-json", ref_vegeta_json),
    "k6.json": ("k6-json", ref_k6_json),
    "k6.csv": ("k6-csv", ref_k6_csv),
    "jmeter.csv": ("jmeter-csv", ref_jmeter_csv),
    "jmeter.xml": ("jmeter-xml", ref_jmeter_xml),
    "gatling-simulation.log": ("gatling", ref_gatling),
    "oha.csv": ("oha-csv", ref_oha),
    "hey-ramp.csv": ("hey", ref_hey),
}


def nearest_rank(values, num, den):
    v = sorted(values)
    return v[math.ceil(len(v) * num / den) - 1]


@pytest.mark.parametrize("name", list(SAMPLES))
def test_sample_reads_exactly(name):
    fmt, ref = SAMPLES[name]
    steps, conc = ref(DATA / name)
    run = load_run(DATA / name)
    assert run.format == fmt
    s = headroom.analyze(run)
    t = s.table
    assert len(t) == len(steps)
    for k, rows in enumerate(steps):
        ok = [lat for _, lat, bad in rows if not bad]
        errors = sum(bad for *_, bad in rows)
        assert t.requests[k] == len(ok), (k, name)
        assert t.errors is not None and t.errors[k] == errors, (k, name)
        for pname, num, den in headroom.model.PERCENTILES:
            if ok:
                assert t.latency.pct[pname][k] == pytest.approx(
                    nearest_rank(ok, num, den), rel=1e-12, abs=1e-15
                )
        if conc is not None:
            assert run.meta.concurrency(k) == conc[k]
    total_err = sum(bad for rows in steps for *_, bad in rows)
    assert run.errors == total_err
    assert len(run.requests) == sum(len(rows) for rows in steps) - total_err
    # the streamed entry point gives the same steps, and the same percentiles: exactly for latencies
    # on a decimal grid (ms, 0.1 ms), to the nearest microsecond for nanosecond latencies
    reduced = reduce_run(DATA / name)
    s2 = headroom.analyze(reduced)
    assert list(s2.table.requests) == list(t.requests)
    rounded = any("1 us resolution" in w for w in reduced.warnings)
    assert rounded == (fmt in ("vegeta-csv", "vegeta-json", "k6-json", "k6-csv", "oha-csv")), name
    for k, rows in enumerate(steps):
        ok = [lat for _, lat, bad in rows if not bad]
        for pname, num, den in headroom.model.PERCENTILES:
            if ok:
                want = nearest_rank(ok, num, den)
                got = s2.table.latency.pct[pname][k]
                assert got == (round(want * 1e6) / 1e6 if rounded else pytest.approx(want, rel=1e-12)), (
                    name,
                    k,
                )


def test_steps_exist_in_every_ramp_sample():
    for name in ("vegeta.csv", "k6.json", "jmeter.csv", "gatling-simulation.log", "hey-ramp.csv"):
        assert load_run(DATA / name).requests.n_steps == 3, name


def test_appended_hey_ramp_lasts_the_sum_of_its_steps():
    run = load_run(DATA / "hey-ramp.csv", base_time_ns=0)
    req = run.requests
    steps, _ = ref_hey(DATA / "hey-ramp.csv")
    spans = []
    for rows in steps:
        if rows:
            spans.append(max(t + round(lat * 1e9) for t, lat, _ in rows) - min(t for t, *_ in rows))
    end = max(t + round(lat * 1e9) for rows in steps for t, lat, _ in rows)
    assert end >= sum(spans)  # steps follow each other: the ramp lasts at least the sum of its steps
    assert end > 2.5e9  # three 1 s runs, not 1 s read three times over
    # step k starts after step k-1 ended
    for k in range(1, req.n_steps):
        a, b = req.step_offsets[k - 1], req.step_offsets[k]
        c, d = req.step_offsets[k], req.step_offsets[k + 1]
        if b > a and d > c:
            assert req.start_ns[c:d].min() >= (req.start_ns[a:b] + req.latency_s[a:b] * 1e9).max() - 1
    assert any("spacing between them is unknown" in w for w in run.warnings)


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "headroom", *map(str, args)], capture_output=True, text=True, cwd=ROOT
    )


def one_line_error(p, fragment):
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert fragment in p.stderr, p.stderr
    assert len(p.stderr) < 400


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("hey-refused.csv", "hey wrote only its header line"),
        ("oha.json", "oha's JSON summary"),
        ("vegeta.gob", "vegeta encode -to csv"),
        ("k6-unix-seconds.csv", "timeFormat=rfc3339_nano"),
    ],
)
def test_unusable_files_say_what_to_export(name, fragment):
    one_line_error(cli("summary", DATA / name), fragment)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            b"Running 10s test @ http://127.0.0.1:8080/\n  2 threads and 10 connections\n  Thread Stats   Avg\n",
            "wrk",
        ),
        (b"Percentage served,Time in ms\n0,1.2\n", "ab -e"),
        (b"Summary:\n  Total:\t1.0 secs\n  Requests/sec:\t100\n", "hey"),
        (b'{"latencies":{"total":1},"status_codes":{"200":3}}\n', "vegeta report"),
        (b'{"root_group":{},"metrics":{"http_req_duration":{}}}\n', "k6's end-of-test summary"),
        (b"1795430000003,12,index,200,OK,t 1-1,text,true,,153,120,1,1,u,12,0,0\n", "print_field_names=true"),
        (b"\x00\x01simulation log of gatling\x00", "Gatling 3.12"),
        (b"time,latency\n1,2\n", "unknown format"),
    ],
)
def test_summary_only_and_unknown_formats(tmp_path, text, fragment):
    p = tmp_path / "results.out"
    p.write_bytes(text)
    one_line_error(cli("summary", p), fragment)


def test_detection_reads_inside_gzip_and_ignores_the_name(tmp_path):
    import gzip

    p = tmp_path / "whatever.txt.gz"
    p.write_bytes(gzip.compress((DATA / "k6.json").read_bytes()))
    assert load_run(p).format == "k6-json"
    q = tmp_path / "results.csv"  # a JSON file named .csv
    q.write_bytes((DATA / "vegeta.json").read_bytes())
    assert load_run(q).format == "vegeta-json"


def test_format_option_overrides_and_checks(tmp_path):
    assert load_run(DATA / "vegeta.csv", format="vegeta-csv").format == "vegeta-csv"
    assert load_run(DATA / "k6.csv", format="k6").format == "k6-csv"
    with pytest.raises(HeadroomError, match="does not look like k6"):
        load_run(DATA / "vegeta.csv", format="k6")
    with pytest.raises(HeadroomError, match="unknown --format"):
        load_run(DATA / "vegeta.csv", format="wrk")
    p = cli("summary", DATA / "k6.json", "--format", "k6-json", "--json", "-")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["schema"] == 2


def test_every_registered_format_has_a_sample_and_detects_itself():
    # a format with a test module of its own (tests/test_ab.py, tests/test_hlog.py: real samples)
    # needs no sample here; throughputramp's are the bundled runs, hey's the hey sample
    own = {n for n in formats.FORMATS if (ROOT / "tests" / f"test_{n.replace('-', '_')}.py").is_file()}
    fmts = {v[0] for v in SAMPLES.values()} | own | {"throughputramp", "hey"}
    names = set(formats.FORMATS)
    assert names <= fmts, names - fmts
    assert {"ab", "hlog"} <= own
    for name, (fmt, _) in SAMPLES.items():
        assert formats.detect(DATA / name) == fmt, name


def test_steps_option_cuts_a_one_step_run():
    run = load_run(DATA / "oha.csv")
    assert run.requests.n_steps == 1
    assert any("one step" in w and "--steps" in w for w in run.warnings)
    span = (run.requests.start_ns.max() - run.requests.start_ns.min()) / 1e9
    cut = load_run(DATA / "oha.csv", steps=f"{span / 2 + 1e-9:.9f}")
    assert cut.requests.n_steps == 2
    assert len(cut.requests) == len(run.requests)
    with pytest.raises(HeadroomError, match="sections are its steps"):
        load_run(DATA / "hey-ramp.csv", steps="1s")


def test_all_requests_failed_is_said_so(tmp_path):
    p = tmp_path / "all404.csv"
    lines = (DATA / "hey-ramp.csv").read_text().splitlines()
    header = lines[0]
    rows = [ln for ln in lines[1:] if ln != header and ",404," in ln]
    p.write_text(header + "\n" + "\n".join(rows) + "\n")
    one_line_error(cli("summary", p), f"all {len(rows):,} requests failed: {len(rows):,}x HTTP 404")


def test_report_reads_with_the_options_summary_takes(tmp_path):
    # a hey ramp with a stated start and plan: the report's step table is summary's, step for step
    opts = ["--hey-start", "2024-01-01T00:00:00Z", "--concurrency", "3,5,7", "--format", "hey"]
    js = tmp_path / "s.json"
    assert cli("summary", DATA / "hey-ramp.csv", *opts, "--json", js).returncode == 0
    doc = json.loads(js.read_text())
    assert [s["concurrency"] for s in doc["steps"]] == [3, 5, 7]
    p = cli("report", DATA / "hey-ramp.csv", *opts, "-o", tmp_path / "r.html")
    assert p.returncode == 0, p.stderr
    page = (tmp_path / "r.html").read_text()
    # the stated plan reached the notebook: step k at concurrency 3, 5, 7 in the report's step table
    for k, c in enumerate((3, 5, 7), start=1):  # steps numbered from 1, as summary's text
        assert f"<tr><td>{k}</td><td>{c}</td>" in page
    shown = [s for s in doc["steps"] if s["goodput_rps"] is not None]
    assert shown
    for step in shown:
        assert f"<td>{round(step['goodput_rps']):,}</td>" in page
    # a forced format that does not fit is refused the same way in both
    bad = cli("report", DATA / "k6.json", "--format", "jmeter-csv", "-o", tmp_path / "x.html")
    one_line_error(bad, "k6.json")
    assert not (tmp_path / "x.html").exists()


def test_truncated_last_line_is_dropped_by_its_missing_line_end(tmp_path):
    for name in ("vegeta.csv", "k6.csv", "jmeter.csv", "oha.csv", "gatling-simulation.log", "k6.json"):
        data = (DATA / name).read_bytes()
        cut = data[: data.rstrip(b"\n").rfind(b"\n") + 1 + 12]  # the last line cut after 12 bytes
        p = tmp_path / name
        p.write_bytes(cut)
        run = load_run(p)
        assert any("dropped a truncated last line of 12 bytes" in w for w in run.warnings), (
            name,
            run.warnings,
        )
        full = load_run(DATA / name)
        last = data.rstrip(b"\n").rsplit(b"\n", 1)[1]
        if (
            (name.startswith("k6") and b"http_req_duration" not in last)
            or b"samples in transaction" in last
            or last.startswith(b"USER")
        ):
            continue  # not a request: nothing lost
        assert len(run.requests) + run.errors == len(full.requests) + full.errors - 1, name


def test_folder_of_one_file_per_step():
    """Real oha runs, one file per concurrency (oha-c1.csv, oha-c2.csv, oha-c4.csv): one ramp."""
    folder = DATA / "oha-ramp"
    run = load_run(folder)
    files = sorted(folder.glob("oha-c*.csv"), key=lambda f: int(f.stem.split("c")[-1]))
    assert run.format == "oha-csv" and run.requests.n_steps == 3
    assert [run.meta.concurrency(k) for k in range(3)] == [1, 2, 4]
    s = headroom.analyze(run)
    prev_end = None
    for k, f in enumerate(files):
        (rows,), _ = ref_oha(f)
        ok = [lat for _, lat, bad in rows if not bad]
        assert s.table.requests[k] == len(ok)
        assert s.table.errors[k] == len(rows) - len(ok)
        for pname, num, den in headroom.model.PERCENTILES:
            assert s.table.latency.pct[pname][k] == pytest.approx(nearest_rank(ok, num, den), rel=1e-12)
        a, b = run.requests.step_offsets[k], run.requests.step_offsets[k + 1]
        if prev_end is not None:  # each step starts after the previous one ended
            assert run.requests.start_ns[a:b].min() >= prev_end - 1
        prev_end = (run.requests.start_ns[a:b] + run.requests.latency_s[a:b] * 1e9).max()
    assert any("spacing between them is unknown" in w for w in run.warnings)
    assert headroom.analyze(reduce_run(folder)).table.requests.tolist() == s.table.requests.tolist()


def test_folder_of_mixed_formats_is_refused(tmp_path):
    import shutil

    shutil.copy(DATA / "oha.csv", tmp_path / "a.csv")
    shutil.copy(DATA / "vegeta.csv", tmp_path / "b.csv")
    with pytest.raises(HeadroomError, match="one format per (folder|run)"):
        load_run(tmp_path)


# --------------------------------------------------------------------------
# the reader protocol: a new format is one Reader and one registry line


def _toy_reader():
    """A format made up here: ``toy-start-ns,latency-us,code,level`` rows, one step per level."""
    from headroom.formats import EXACT, Reader
    from headroom.formats._batch import Batch, Scan
    from headroom.formats._plans import Found, UniquePlan

    def guess(head: bytes) -> bool:
        return head.startswith(b"toy-start-ns,")

    def scan(path, *, chunk_bytes=1 << 20):
        sc = Scan(path, "toy", EXACT, key_kind="level")

        def batches():
            rows = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
            for a in range(0, len(rows), 777):
                r = rows[a : a + 777]
                yield Batch(r[:, 0], r[:, 1] / 1e6, r[:, 2], None, r[:, 3], np.arange(a + 2, a + 2 + len(r)))

        sc._gen = batches()
        return sc

    class Plan:
        def __init__(self, scan, rows):
            self.p = UniquePlan(rows, lambda c: c["key"])

        def assign(self, c):
            return self.p.assign(c)

        def found(self):
            lv = [int(v) for v in self.p.levels]
            return Found([f"level {v}" for v in lv], lv, None, "the level column", [])

    return Reader("toy", "toy", EXACT, "toy > out.csv", "a header 'toy-start-ns,...'", guess, scan, Plan)


def test_a_new_format_is_one_reader_and_one_registry_line(tmp_path, monkeypatch, capsys):
    """A format declared only as a Reader in the registry is detected, read, stepped, its failed requests
    counted and its percentiles exact, by summary and by load_run, with nothing else told about it."""
    from headroom.cli import main as cli_main

    monkeypatch.setitem(formats.FORMATS, "toy", _toy_reader())
    rng = np.random.default_rng(7)
    t0, rows = 1_795_430_000 * 10**9, []
    for k, level in enumerate((2, 4, 8)):
        n = 3000
        start = t0 + k * 30 * 10**9 + np.sort(rng.integers(0, 20 * 10**9, n))
        lat_us = rng.integers(500, 40_000, n)
        code = np.where(rng.random(n) < 0.02, 503, 200)
        rows += [(int(s), int(la), int(c), level) for s, la, c in zip(start, lat_us, code)]
    order = rng.permutation(len(rows))  # any file order
    p = tmp_path / "run.toy"
    p.write_text("toy-start-ns,latency-us,code,level\n" + "".join(f"{a},{b},{c},{d}\n" for a, b, c, d in
                                                                (rows[i] for i in order)))  # fmt: skip
    assert formats.detect(p) == "toy"
    assert cli_main(["summary", str(p), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "toy" and [s["concurrency"] for s in doc["steps"]] == [2, 4, 8]
    arr = np.array(rows, np.int64)
    for s, level in zip(doc["steps"], (2, 4, 8)):
        mine = arr[arr[:, 3] == level]
        ok = mine[mine[:, 2] == 200]
        assert (s["requests"], s["errors"]) == (len(ok), len(mine) - len(ok))
        lat = np.sort(ok[:, 1]) / 1e6
        assert s["p50_s"] == pytest.approx(lat[math.ceil(len(lat) * 0.5) - 1], abs=1e-12)
        assert s["p99_s"] == pytest.approx(lat[math.ceil(len(lat) * 0.99) - 1], abs=1e-12)
    run = load_run(p)
    ok = arr[arr[:, 2] == 200]
    assert run.format == "toy" and run.n_requests == len(ok) and run.errors == len(arr) - len(ok)
    for k, level in enumerate((2, 4, 8)):
        got = run.requests.latency_s[run.requests.step_offsets[k] : run.requests.step_offsets[k + 1]]
        assert sorted(got.tolist()) == sorted((ok[ok[:, 3] == level][:, 1] / 1e6).tolist())


def test_every_registered_format_is_a_reader_of_its_own_name():
    for name, r in formats.FORMATS.items():
        assert isinstance(r, formats.Reader) and r.name == name
        assert callable(r.guess_can_open) and callable(r.scan) and callable(r.plan)
        assert r.layout in ("records", "sections")
