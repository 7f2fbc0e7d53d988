"""Request names (endpoints) kept by the readers and shown per step (issue 51).

Every figure is recomputed from the raw files with the csv/json/xml modules of the standard library
(nearest-rank percentiles in integer microseconds or milliseconds), and against the generators' own
per-name statistics (Locust's --csv stats, written by Locust itself at the end of the run).
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

import numpy as np
import pytest
from conftest import ROOT, need_tool

REAL = ROOT / "tests" / "data" / "formats" / "real"
LOCUST = [REAL / "locust" / "nginx-single", REAL / "locust" / "nginx-distributed"]


def _headroom(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "headroom", *args], capture_output=True, text=True, cwd=ROOT)


def _summary_json(*args: str) -> dict:
    out = _headroom("summary", *args, "--json", "-")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout[out.stdout.index("{") :])


def _nearest_rank(sorted_values: list, q: float):
    return sorted_values[max(1, math.ceil(len(sorted_values) * q)) - 1]


def _locust_rows(run_dir):
    """(stage, name, ok, latency_us) of every request row of every file of a headroom.locust run."""
    out = []
    for f in sorted(run_dir.glob("locust*.csv.gz")):
        with gzip.open(f, "rt", newline="") as fh:
            for r in csv.DictReader(fh):
                if r["event"] == "request":
                    out.append((int(r["stage"]), r["name"], r["ok"] == "1", int(r["latency_us"])))
    return out


@pytest.mark.parametrize("case", LOCUST, ids=lambda p: p.name)
def test_locust_endpoints_equal_the_raw_rows_and_locusts_own_statistics(case):
    rows = _locust_rows(case / "run")
    doc = _summary_json(str(case / "run"))
    eps = {e["name"]: e for e in doc["endpoints"]}
    stages = sorted({s for s, *_ in rows})
    # Locust's own per-name statistics (its --csv stats file): requests and failures of each name
    with open(case / "locust-own" / "run_stats.csv", newline="") as fh:
        own = {r["Name"]: r for r in csv.DictReader(fh) if r["Name"] != "Aggregated"}
    assert set(eps) == set(own)
    for name, r in own.items():
        assert eps[name]["requests"] + eps[name]["errors"] == int(r["Request Count"])
        assert eps[name]["errors"] == int(r["Failure Count"])
    # per step: kept requests, failures, exact nearest-rank percentiles, share of the step
    for name, e in eps.items():
        for k, stage in enumerate(stages):
            mine = [lat for s, n, ok, lat in rows if s == stage and n == name and ok]
            bad = sum(1 for s, n, ok, _ in rows if s == stage and n == name and not ok)
            every = sum(1 for s, *_ in rows if s == stage)
            st = e["steps"][k]
            assert (st["requests"], st["errors"]) == (len(mine), bad)
            assert st["share"] == pytest.approx((len(mine) + bad) / every)
            mine.sort()
            for key, q in (("p50_s", 0.5), ("p90_s", 0.9), ("p99_s", 0.99)):
                want = _nearest_rank(mine, q) / 1e6 if mine else None
                assert st[key] == (pytest.approx(want, abs=1e-9) if want is not None else None)


def _k6_points(path):
    with gzip.open(path, "rt") as fh:
        for line in fh:
            d = json.loads(line)
            if d.get("type") == "Point" and d.get("metric") == "http_req_duration":
                yield d["data"]


def test_k6_names_are_the_name_tag_else_the_url_and_name_keeps_one():
    path = REAL / "k6-ramping-vus.json.gz"
    by_name = defaultdict(list)
    for d in _k6_points(path):
        tags = d.get("tags", {})
        by_name[tags.get("name") or tags.get("url") or ""].append(d["value"])
    doc = _summary_json(str(path))
    got = {e["name"]: e["requests"] + e["errors"] for e in doc["endpoints"]}
    assert got == {n: len(v) for n, v in by_name.items()}
    # the CSV output of the same run names the same requests
    csv_doc = _summary_json(str(REAL / "k6-ramping-vus.csv.gz"))
    assert {e["name"]: e["requests"] + e["errors"] for e in csv_doc["endpoints"]} == got
    # --name keeps that name's requests only: the run's requests are then the endpoint's
    name = max(by_name, key=lambda n: len(by_name[n]))
    one = _summary_json(str(path), "--name", name)
    assert one["requests"]["total"] == len(by_name[name])
    assert [e["name"] for e in one["endpoints"]] == [name]


def _vegeta_names(rows) -> dict[str, list[int]]:
    """Latencies (ns) per vegeta request name, "METHOD url", from rows of its CSV columns."""
    by_name = defaultdict(list)
    for r in rows:
        by_name[f"{r[9]} {r[10]}"].append(int(r[2]))
    return by_name


def test_vegeta_names_are_method_and_url_in_csv_and_json(tmp_path):
    """The real vegeta rate ramp (94 % GET /, 404s, 503s, a refused port): every name's requests and
    errors equal a count of its rows by the csv module, p99 by nearest rank; the JSON lines vegeta
    itself encodes from it (vegeta encode -to json) give the same; --name keeps one."""
    path = REAL / "vegeta-rates.csv.gz"
    with gzip.open(path, "rt", newline="") as fh:
        rows = list(csv.reader(fh))
    by_name = _vegeta_names(rows)
    failed = defaultdict(int)
    for r in rows:
        failed[f"{r[9]} {r[10]}"] += not 200 <= int(r[1]) < 400
    doc = _summary_json(str(path))
    assert len(doc["endpoints"]) == 4
    for e in doc["endpoints"]:
        assert e["requests"] + e["errors"] == len(by_name[e["name"]])
        assert e["errors"] == failed[e["name"]]
    vegeta = need_tool("vegeta")
    plain = tmp_path / "rates.csv"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    js = tmp_path / "rates.json"
    with open(js, "wb") as out:
        subprocess.run([vegeta, "encode", "-to", "json", str(plain)], stdout=out, check=True, timeout=60)
    jdoc = _summary_json(str(js))
    assert {e["name"]: (e["requests"], e["errors"]) for e in jdoc["endpoints"]} == {
        e["name"]: (e["requests"], e["errors"]) for e in doc["endpoints"]
    }
    name = max(by_name, key=lambda n: len(by_name[n]))
    one = _summary_json(str(js), "--name", name)
    assert one["requests"]["total"] == len(by_name[name])
    # its requests all succeeded: the last step's p99 is the nearest rank of its rows' latencies
    last = [int(r[2]) for r in rows if f"{r[9]} {r[10]}" == name and r[7] == "rate4000"]
    want_s = _nearest_rank(sorted(last), 0.99) / 1e9
    assert one["steps"][-1]["p99_s"] == pytest.approx(want_s, rel=1e-4)  # the run's steps: 4 digits
    top = next(e for e in doc["endpoints"] if e["name"] == name)
    assert top["steps"][-1]["p99_s"] == pytest.approx(want_s, rel=1e-6)
    # a file of one name counts it from its reduced steps (no pass of its own): the same exact figures
    assert one["endpoints"][0]["steps"][-1]["p99_s"] == pytest.approx(want_s, rel=1e-6)
    assert [x["requests"] for x in one["endpoints"][0]["steps"]] == [x["requests"] for x in top["steps"]]


def _gatling_report(path) -> dict:
    """Gatling's own console report (3.11's and 3.16's layouts): its request count, and each error
    message's count."""
    import re

    text = path.read_text()
    line = next(x for x in text.splitlines() if x.startswith("> request count"))
    total = int(re.findall(r"[\d,]+", line.split("|")[1] if "|" in line else line)[0].replace(",", ""))
    errors = {}
    for line in text.split("---- Errors")[1].splitlines()[1:]:
        m = re.match(r"> (.*?)\s+([\d,]+)\s+\(\s*[\d.]+%\)$", line)
        if m:
            errors[m.group(1)] = int(m.group(2).replace(",", ""))
    return {"total": total, "errors": errors}


@pytest.mark.parametrize("log", ["gatling-ClosedRampSimulation", "gatling3_16_0-ClosedRampSimulation"])
def test_gatling_request_names_in_text_and_binary_logs_equal_gatlings_own_counts(log):
    """The real Gatling runs (3.11's text log, 3.16's binary one) request "home" and three failing names:
    each name's requests as Gatling's own report counts them (its request count, and each error
    message's count: 404 = missing, 503 = busy, connection refused = refused); the text log's names also
    as a count of its REQUEST records by the str methods; --name keeps one."""
    path = REAL / f"{log}.log.gz"
    doc = _summary_json(str(path))
    got = {e["name"]: (e["requests"], e["errors"]) for e in doc["endpoints"]}
    rep = _gatling_report(REAL / f"{log}-report.txt")
    assert sum(a + b for a, b in got.values()) == rep["total"]
    by_msg = {"missing": "found 404", "busy": "found 503", "refused": "Connection ref"}
    for name, part in by_msg.items():
        want = [v for k, v in rep["errors"].items() if part in k]
        assert got[name] == (0, want[0])
    assert got["home"][1] == 0
    if not log.startswith("gatling3_1"):  # the text log: its REQUEST records counted by name
        counts = defaultdict(int)
        with gzip.open(path, "rt") as fh:
            for line in fh:
                f = line.rstrip("\n").split("\t")
                if f[0] == "REQUEST":
                    k = next(i for i in range(3, len(f)) if f[i] in ("OK", "KO"))
                    counts[f[k - 3]] += 1
        assert {n: a + b for n, (a, b) in got.items()} == dict(counts)
    one = _summary_json(str(path), "--name", "home")
    assert one["requests"]["total"] == got["home"][0]
    assert [e["name"] for e in one["endpoints"]] == ["home"]


def test_jmeter_labels_are_names_in_csv_and_xml():
    fmt = ROOT / "tests" / "data" / "formats"
    with open(fmt / "jmeter.csv", newline="") as fh:
        csv_labels = {r["label"] for r in csv.DictReader(fh)}
    xml_labels = {
        s.get("lb")
        for s in ET.parse(fmt / "jmeter.xml").getroot().iter()
        if s.tag in ("httpSample", "sample")
    }
    for f, labels in (("jmeter.csv", csv_labels), ("jmeter.xml", xml_labels)):
        doc = _summary_json(str(fmt / f))
        got = {e["name"]: e["requests"] + e["errors"] for e in doc["endpoints"]}
        # every request under one of the file's labels (transaction-controller parents are not requests)
        assert sum(got.values()) == doc["requests"]["total"]
        assert set(got) <= labels


def test_runs_without_names_have_no_endpoints_and_endpoints_is_refused_in_one_line():
    run = ROOT / "data" / "runs" / "nginx-keepalive"
    doc = _summary_json(str(run))
    assert "endpoints" not in doc
    out = _headroom("summary", str(run), "--endpoints")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "--endpoints: its requests carry no names" in out.stderr


def test_summary_text_names_every_endpoint_with_its_step_table():
    case = LOCUST[0] / "run"
    out = _headroom("summary", str(case), "--endpoints", "--objective", "p99<=5ms")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    rows = _locust_rows(case)
    kept = defaultdict(int)
    for _s, n, ok, _lat in rows:
        kept[n] += ok
    overview = text[text.index("endpoints (") : text.index("endpoint home by step")]
    for name, n in kept.items():
        assert f"endpoint {name} by step" in text
        line = next(ln for ln in overview.splitlines() if ln.strip().startswith(name + " "))
        assert f"{n:,}" in line.split()


def test_ramp_engine_locust_keeps_every_requests_name_and_name_follows_one(tmp_path):
    """headroom ramp --engine locust with a three-endpoint locustfile (scripts/locust/endpoints.py) against
    the Go test server: perfResults.csv carries a request-name column; the endpoints' counts per step are
    the file's rows of each name in each section (read with the csv module); --name keeps one name."""
    from test_locust_live import need_locust

    need_locust()
    from goserver import GoMissing, GoServer

    try:
        srv = GoServer(work=500, delay=0.001).start()
    except GoMissing as e:
        pytest.skip(str(e))
    out = tmp_path / "run"
    try:
        r = subprocess.run(
            [sys.executable, "-m", "headroom", "ramp", srv.url, "-o", str(out), "--engine", "locust",
             "--locustfile", str(ROOT / "scripts" / "locust" / "endpoints.py"), "--concurrency", "1:3:2",
             "--step-duration", "2s", "--pause", "0"],
            capture_output=True, text=True, timeout=180, cwd=ROOT,
        )  # fmt: skip
    finally:
        srv.stop()
    assert r.returncode == 0, r.stderr
    sections, counts = [], defaultdict(int)
    with open(out / "perfResults.csv", newline="", encoding="utf-8") as fh:
        for row in csv.reader(fh):
            if row[0] == "start-time":
                assert row == ["start-time", "response-time", "status-code", "request-name"]
                sections.append(defaultdict(int))
                continue
            sections[-1][row[3]] += 1
            counts[row[3]] += 1
    assert set(counts) == {"/api/v1/items", "/api/v2/cart", "/api/v1/search"}
    doc = _summary_json(str(out))
    for e in doc["endpoints"]:
        assert [s["requests"] + s["errors"] for s in e["steps"]] == [sec[e["name"]] for sec in sections]
    one = _summary_json(str(out), "--name", "/api/v2/cart")
    assert one["requests"]["total"] == counts["/api/v2/cart"]


def test_report_sections_and_the_grid_in_process():
    """The report's per-endpoint sections and the small multiples, drawn in this process: every endpoint's
    row with its counts from the raw rows, one visible panel per endpoint with its own throughput."""
    import matplotlib

    matplotlib.use("Agg")
    import headroom
    from headroom import endpoint_html
    from headroom.compare import compare_runs
    from headroom.plot.endpoints import endpoint_grid

    single, dist = (headroom.analyze(headroom.reduce_run(str(c / "run"))) for c in LOCUST)
    page = endpoint_html.run_section(single, fmt="svg")
    kept = defaultdict(int)
    for _s, n, ok, _lat in _locust_rows(LOCUST[0] / "run"):
        kept[n] += ok
    assert "<h2>Endpoints</h2>" in page and page.count("<svg") == 1
    for name, n in kept.items():
        assert f"<td>{name}</td><td>{n:,}</td>" in page
    axes = endpoint_grid([single, dist])
    shown = [ax for ax in axes.flat if ax.get_visible()]
    assert [ax.get_title().split()[0] for ax in shown] == [e.name for e in single.endpoints]
    steps = [st for st, n, ok, _lat in _locust_rows(LOCUST[0] / "run") if n == "home" and ok]
    per_step = [steps.count(k) for k in sorted(set(steps))]  # home's kept requests of every stage
    points = shown[0].lines[0].get_xdata()  # the first run's steps (p50 points): req/s of home alone
    dur = (single.steps.end_ns - single.steps.start_ns) / 1e9
    assert points == pytest.approx(np.array(per_step) / dur, rel=1e-9)
    c = compare_runs(single.run, dist.run, accept_mismatch=True)
    assert [e.name for e in c.endpoints] == ["home", "missing", "refused"]
    section = endpoint_html.comparison_section(c, [single, dist], fmt="svg")
    assert "<h2>Which endpoint</h2>" in section and "No endpoint regressed" in section
    # a run without names has no section
    plain = headroom.analyze(headroom.reduce_run(str(ROOT / "data" / "runs" / "nginx-keepalive")))
    assert endpoint_html.run_section(plain) == ""


def test_a_saved_reduced_run_keeps_its_endpoints(tmp_path):
    """reduced.npz (what a CI job keeps instead of the raw log) carries the names' counts: the summary
    of the saved file gives every endpoint's figures as the raw file's does; a run without names saves
    none."""
    from headroom.io import reduce_run
    from headroom.reduce import load_run_file, save_run
    from headroom.summary import analyze, to_json

    raw = REAL / "vegeta-rates.csv.gz"
    (tmp_path / "v").mkdir()
    save_run(reduce_run(str(raw)), tmp_path / "v" / "reduced.npz")  # a run folder of its reduced file
    doc = _summary_json(str(tmp_path / "v"))
    assert doc["endpoints"] == _summary_json(str(raw))["endpoints"]
    plain = reduce_run(str(ROOT / "data" / "runs" / "nginx-keepalive"))
    save_run(plain, tmp_path / "p.npz")
    assert load_run_file(tmp_path / "p.npz").endpoints is None
    assert "endpoints" not in to_json(analyze(load_run_file(tmp_path / "p.npz")))


def test_name_shows_no_cpu_per_request_the_server_spent_on_every_endpoint():
    """The server's CPU served every endpoint: a run read with --name shows none (and says why) rather
    than the whole server's CPU divided by one endpoint's requests."""
    run = str(ROOT / "data" / "endpoints" / "ep-go-cart2x-45" / "a-01")
    whole = _summary_json(run)
    assert any(st["cpu_s_per_req"] for st in whole["steps"])
    one = _headroom("summary", run, "--name", "/api/v2/cart")
    assert one.returncode == 0, one.stderr
    assert "CPU: not shown for one endpoint (--name): the server's CPU is not split by endpoint" in one.stdout
    assert "CPU and CPU per request are not shown for one endpoint" in one.stderr
    doc = _summary_json(run, "--name", "/api/v2/cart")
    assert not any(st["cpu_s_per_req"] for st in doc["steps"])


def test_the_endpoint_grid_tells_two_runs_of_one_label_apart():
    """Two JMeter runs both named results.csv.gz share the label "results": the panels' legend names
    them as the report's tables do (text.run_labels), not "results" twice."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from headroom.io import reduce_run
    from headroom.plot.endpoints import endpoint_grid
    from headroom.summary import analyze
    from headroom.text import run_labels

    d = ROOT / "data" / "endpoints" / "jm-go-cart10x-45"
    runs = [analyze(reduce_run(str(d / k / "results.csv.gz"))) for k in ("01-a1", "01-b1")]
    assert runs[0].label == runs[1].label
    axes = endpoint_grid(runs)
    got = axes.flat[0].get_legend_handles_labels()[1]
    labels = run_labels(runs)
    assert labels[0] != labels[1]
    assert got == [f"{lb} {p}" for lb in labels for p in ("p50", "p99")]
    plt.close(axes.flat[0].figure)


def test_a_vegeta_url_that_is_not_utf8_is_a_name_not_a_traceback(tmp_path):
    """vegeta's url column is read as bytes: a URL whose bytes are not UTF-8 is named with the bad
    bytes replaced (as every reader's text), the run read as usual."""
    with gzip.open(REAL / "vegeta-rates.csv.gz", "rb") as fh:
        lines = fh.read().splitlines(keepends=True)[:400]
    bad = [ln.replace(b"18790/,", b"18790/caf\xe9,") if i % 3 == 0 else ln for i, ln in enumerate(lines)]
    (tmp_path / "v.csv").write_bytes(b"".join(bad))
    doc = _summary_json(str(tmp_path / "v.csv"))
    names = {e["name"]: e["requests"] + e["errors"] for e in doc["endpoints"]}
    want = sum(b"/caf\xe9" in ln for ln in bad)
    assert want and names["GET http://127.0.0.1:18790/caf\ufffd"] == want
    assert sum(names.values()) == len(bad)
