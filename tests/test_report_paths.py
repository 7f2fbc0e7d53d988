"""Every report path rendered and read: one run and two runs of each input format, a history.

The reports are rendered once per session, two at a time (each runs a notebook on a real
kernel, about 5 s).  Each page is then read as a reader would: its tables parsed out of the
HTML, every figure decoded as an image by Pillow, and the figures in the tables compared with
the JSON the matching command writes for the same input (``summary --json``, ``compare
--json``, ``history --json``): the page and the command must tell one story.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import shutil
import subprocess
import sys
import time

import pytest
from conftest import ROOT, RUNS

FORMATS = ROOT / "tests" / "data" / "formats"

#: one run per input format (throughputramp and hey have their own report tests:
#: test_report.test_run_report_html, test_formats.test_report_reads_with_the_options_summary_takes)
ONE_RUN = {
    "vegeta": [FORMATS / "vegeta.csv"],
    "k6": [FORMATS / "k6.json"],
    "jmeter": [FORMATS / "jmeter.xml"],
    "gatling": [FORMATS / "gatling-simulation.log"],
    "oha": [FORMATS / "oha-ramp"],
    "throughputramp": [RUNS / "nginx-large-buffering-on"],
}
TWO_RUNS = [RUNS / "nginx-large-buffering-off", RUNS / "nginx-large-buffering-on"]
REAL = FORMATS / "real"
#: two runs of each input format: two encodings of one run where the tool writes two (k6, JMeter),
#: two Gatling versions' runs of one simulation, two releases (hey), else one real run against itself
TWO = {
    "throughputramp": TWO_RUNS,
    "k6": [REAL / "k6-ramping-vus.csv.gz", REAL / "k6-ramping-vus.json.gz"],
    "jmeter": [REAL / "jmeter-stacked.csv.gz", REAL / "jmeter-stacked.xml.gz"],
    "gatling": [
        REAL / "gatling3_13_5-ClosedRampSimulation.log.gz",
        REAL / "gatling3_16_0-ClosedRampSimulation.log.gz",
    ],
    "vegeta": [REAL / "vegeta-rates.csv.gz"] * 2,
    "oha": [REAL / "oha-rates"] * 2,
    "hey": [REAL / "hey-ramp-base.csv.gz", REAL / "hey-ramp-x2.csv.gz"],
    "ab": [REAL / "ab-steps"] * 2,
}
HISTORY = [RUNS / n for n in ("nginx-ka-aa1-a", "nginx-ka-aa1-b", "nginx-no-keepalive", "nginx-keepalive")]


def _cmd(*args) -> list[str]:
    return [sys.executable, "-m", "headroom", *map(str, args)]


@pytest.fixture(scope="session")
def rendered(tmp_path_factory):
    """name -> (page text, JSON of the same command), all rendered two at a time."""
    d = tmp_path_factory.mktemp("reports")
    jobs = {}
    for name, paths in ONE_RUN.items():
        jobs[name] = (
            _cmd("report", *paths, "-o", d / f"{name}.html"),
            _cmd("summary", *paths, "--json", "-"),
        )
    for fmt, paths in TWO.items():
        if paths[0] == paths[1]:  # one real sample of the tool: a copy of it as the candidate (the same
            # file twice is a usage error, exit 2: nothing can change)
            copy = d / f"copy-{fmt}" / paths[1].name
            copy.parent.mkdir()
            (shutil.copytree if paths[1].is_dir() else shutil.copy)(paths[1], copy)
            paths = [paths[0], copy]
        jobs[f"two-{fmt}"] = (
            _cmd("report", *paths, "-o", d / f"two-{fmt}.html"),
            _cmd("compare", *paths, "--json", "-"),
        )
    jobs["history"] = (
        _cmd("history", *HISTORY, "-o", d / "history.html", "--json", d / "history.json", "--cache", "none"),
        None,
    )
    # the reports and the JSON of the same commands, two processes at a time
    cmds = [(name, "page", job[0]) for name, job in jobs.items()]
    cmds += [(name, "json", job[1]) for name, job in jobs.items() if job[1] is not None]
    pending, running, done = list(cmds), [], {}
    deadline = time.monotonic() + 600
    while pending or running:
        while pending and len(running) < 2:
            name, what, cmd = pending.pop(0)
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
            running.append((name, what, p))
        name, what, p = running.pop(0)
        out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
        done[name, what] = (p.returncode, out, err)
    for (name, what), (rc, _, err) in done.items():
        ok = (0,) if what == "page" else (0, 1, 3)  # compare: a verdict; summary: 0
        assert rc in ok, f"{name} ({what}): exit {rc}: {err}"
    out = {}
    for name, (_, js) in jobs.items():
        doc = json.loads((d / "history.json").read_text() if js is None else done[name, "json"][1])
        out[name] = ((d / f"{name}.html").read_text(), doc)
    return out


# --------------------------------------------------------------------------
# reading a page


def _text(cell: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()


def tables(page: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every table of the page as (header cells, rows of cell texts)."""
    out = []
    for t in re.findall(r"<table[^>]*>(.*?)</table>", page, flags=re.S):
        head = [_text(c) for c in re.findall(r"<th[^>]*>(.*?)</th>", t, flags=re.S)]
        body = re.search(r"<tbody>(.*?)</tbody>", t, flags=re.S)
        rows = [
            [_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r, flags=re.S)]
            for r in re.findall(r"<tr>(.*?)</tr>", body.group(1) if body else "", flags=re.S)
        ]
        out.append((head, rows))
    return out


def table(page: str, first: str) -> list[dict[str, str]]:
    """The rows of the (one) table whose first column is ``first``, as dicts by header."""
    found = [(h, rows) for h, rows in tables(page) if h and h[0] == first]
    assert found, f"no table starting with {first!r}"
    heads = {tuple(h) for h, _ in found}
    assert len(heads) == 1
    return [dict(zip(found[0][0], r)) for _, rows in found[:1] for r in rows]


def decoded_figures(page: str) -> list[tuple[str, int, int]]:
    """Every <img> of the page decoded by Pillow: (format, width, height); none may refer outside."""
    from PIL import Image

    srcs = re.findall(r'<img[^>]+src="([^"]+)"', page)
    out = []
    for src in srcs:
        m = re.fullmatch(r"data:image/(png|svg\+xml);base64,([A-Za-z0-9+/=\s]+)", src)
        assert m, f"a figure that is not an embedded image: {src[:80]!r}"
        raw = base64.b64decode(m.group(2), validate=False)
        if m.group(1) == "png":
            with Image.open(io.BytesIO(raw)) as im:
                im.load()  # the whole image decodes, not only its header
                out.append(("PNG", im.width, im.height))
        else:
            import xml.etree.ElementTree as ET

            root = ET.fromstring(raw)
            assert root.tag.endswith("svg")
            out.append(("SVG", 1, 1))
    return out


def shows(cell: str, value: float | None, decimals: int, scale: float = 1.0, unit: str = "") -> bool:
    """Whether a cell shows ``value * scale`` to ``decimals`` places (``unit`` after it; '-' for None).

    The JSON holds 6 significant digits, the page rounds the full value: one last-place unit of
    the page plus the JSON's rounding apart at most.
    """
    if value is None:
        return cell in ("-", "–", "?")
    m = re.fullmatch(r"([+-]?[\d,]+(?:\.\d+)?)" + re.escape(unit), cell)
    if (
        not m
        or (decimals == 0 and "." in m.group(1))
        or (decimals and len(m.group(1).split(".")[-1]) != decimals)
    ):
        return False
    shown = float(m.group(1).replace(",", ""))
    return abs(shown - value * scale) <= 0.5 * 10**-decimals + 6e-6 * abs(value * scale)


# --------------------------------------------------------------------------
# one run of each format


@pytest.mark.parametrize("name", list(ONE_RUN))
def test_one_run_report_of_each_format(rendered, name):
    page, doc = rendered[name]
    assert "Traceback" not in page and "<script" not in page
    figs = decoded_figures(page)
    # seven figures, the memory one only when the run has memory telemetry (none of these has), and the
    # endpoints' small multiples when the run's requests carry two or more names (its JSON lists them)
    named = len(doc.get("endpoints", [])) >= 2
    assert len(figs) == 6 + named and all(w > 50 and h > 50 for _, w, h in figs), figs
    assert ("<h2>Endpoints</h2>" in page) == named
    assert "No memory telemetry for" in page
    assert f"<title>Capacity report: {html.escape(doc['label'], quote=False)}" in page
    steps = table(page, "step")
    assert len(steps) == len(doc["steps"]) > 0
    for row, s in zip(steps, doc["steps"]):
        assert int(row["step"]) == s["index"] + 1  # numbered from 1; the JSON's index from 0
        # a rate ramp (vegeta, k6 arrival rate) heads its level column "rate req/s"
        rate = s.get("kind") == "rate"
        level = s["intended_rps"] if rate else s["concurrency"]
        assert float(row["rate req/s" if rate else "concurrency"].replace(",", "")) == level, (row, s)
        assert row["requests"].replace(",", "") == str(s["requests"]), (row, s)
        assert shows(row["errors"], s["errors"], 0), (row, s)
        assert shows(row["req/s"], s["goodput_rps"], 0), (row, s)
        for col, key in (("p50 ms", "p50_s"), ("p99 ms", "p99_s"), ("max ms", "max_s")):
            assert shows(row[col], s[key], 2, 1e3), (col, row, s)
    cap = {r[""]: list(r.values())[1] for r in table(page, "")}
    plateau = doc["capacity"]["plateau_rps"]
    if plateau is not None:
        assert shows(cap["plateau throughput"].split(" req/s")[0], plateau, 0), cap
    peak = doc["capacity"]["peak_step_rps"]
    assert shows(cap["peak step"].split(" req/s")[0], peak, 0), cap


def test_a_rate_ramp_names_its_level_a_rate(rendered):
    page, doc = rendered["vegeta"]
    assert all(s.get("kind") == "rate" for s in doc["steps"])
    head = next(h for h, _ in tables(page) if h and h[0] == "step")
    assert "concurrency" not in head and head[1] == "rate req/s"


# --------------------------------------------------------------------------
# two runs


@pytest.mark.parametrize("tool", list(TWO))
def test_two_run_report(rendered, tool):
    page, doc = rendered[f"two-{tool}"]
    figs = decoded_figures(page)
    named = bool(doc.get("endpoints"))  # both sides' requests carry two or more names: judged per endpoint
    assert len(figs) == 6 + named and all(w > 50 and h > 50 for _, w, h in figs), figs
    assert ("<h2>Which endpoint</h2>" in page) == named
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert all(sentence in text for sentence in doc["headline"])  # the answer, in the JSON's words
    assert doc["headline"][0].startswith(f"{doc['verdict'].upper()} (exit {doc['exit_code']}): ")
    assert doc["reason"].split("; about ")[0] in doc["headline"][0]  # the runs it needs: the next sentence
    rows = {r["metric"]: r for r in table(page, "metric")}
    checked = 0
    for m in doc["metrics"]:
        row = rows[m["name"]]
        if m["change"] is None:
            assert row["change"] == "-", row
            continue
        fmt = (
            (1, 1e6, " us")
            if m["key"] == "cpu_s_per_req"
            else {"req/s": (0, 1, " req/s"), "s": (3, 1e3, " ms")}.get(m["unit"])
        )
        if fmt is None:
            continue
        for side in ("baseline", "candidate"):
            assert shows(row[side], m[side], *fmt), (side, row, m)
        assert shows(row["change"], m["change"], 1, 100, "%"), (row, m)
        if m.get("ci"):
            lo, hi = row["interval"].strip("[]").split(", ")
            # the page caps what is off the scale: above +999 % it says ">+999%"
            up = hi == ">+999%" if m["ci"][1] > 9.995 else shows(hi, m["ci"][1], 1, 100, "%")
            assert shows(lo, m["ci"][0], 1, 100, "%") and up, (row, m)
        checked += 1
    has_cpu = any(m["key"] == "cpu_s_per_req" and m["change"] is not None for m in doc["metrics"])
    assert checked >= (5 if has_cpu else 3), checked
    if TWO[tool][0] == TWO[tool][1] or tool in ("k6", "jmeter"):  # one run (two encodings of it): no change
        assert all(m["change"] in (None, 0.0) for m in doc["metrics"]), doc["metrics"]
    pairs = table(page, "concurrency")
    assert len(pairs) == len(doc["pairs"])
    for row, p in zip(pairs, doc["pairs"]):
        level = row["concurrency"].rstrip(" *")
        assert (level == "-") if p["concurrency"] is None else (float(level) == p["concurrency"]), (row, p)
        assert row["concurrency"].endswith("*") == p["plateau"]
        assert shows(row["baseline req/s"], p["baseline"]["rps"], 0), (row, p)
        assert shows(row["candidate req/s"], p["candidate"]["rps"], 0), (row, p)


# --------------------------------------------------------------------------
# a history


def test_history_report(rendered):
    page, doc = rendered["history"]
    figs = decoded_figures(page)
    assert figs and all(w > 50 and h > 50 for _, w, h in figs), figs
    rows = table(page, "#")
    assert [r["release"] for r in rows] == [r["label"] for r in doc["runs"]]
    assert len(rows) == len(HISTORY)
    for row, run in zip(rows, doc["runs"]):
        m = run["metrics"]
        for col, key in (("plateau req/s", "plateau_rps"), ("USL cap req/s", "capacity_rps")):
            cell = row[col]  # a lower bound (objective held, or the load generator's ceiling): "≥ " first
            assert cell.startswith("≥ ") == bool(m[key]["lower_bound"]), (col, row, m)
            assert shows(cell.removeprefix("≥ "), m[key]["value"], 0), (row, m)
        assert shows(row["CPU/req"], m["cpu_s_per_req"]["value"], 1, 1e6, " us"), (row, m)
        for col, key in (("p50", "p50_s"), ("p99", "p99_s")):
            v = m[key]["value"]
            assert shows(row[col], v, 1, 1e6, " us") or shows(row[col], v, 2, 1e3, " ms"), (col, row, m)


def test_the_page_reader_reads_what_it_is_given():
    """The helpers above fail on a page that lies: a broken image, a missing table."""
    page = (
        '<table class="headroom"><thead><tr><th>step</th><th>requests</th></tr></thead>'
        "<tbody><tr><td>0</td><td>1,234</td></tr></tbody></table>"
    )
    assert table(page, "step") == [{"step": "0", "requests": "1,234"}]
    assert shows("1,234", 1234.4, 0) and not shows("1,234", 1236, 0) and not shows("1.234", 1.234, 0)
    assert shows("-21.0%", -0.2104, 1, 100, "%") and not shows("-21.0%", 0.21, 1, 100, "%")
    with pytest.raises(AssertionError):
        table(page, "metric")
    with pytest.raises((OSError, SyntaxError)):  # Pillow: a truncated PNG
        decoded_figures('<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA">')
    with pytest.raises(AssertionError):
        decoded_figures('<img src="figure.png">')
