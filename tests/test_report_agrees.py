"""``headroom report`` states the verdict and exit code ``headroom compare`` gives (issue 40, item 2).

Each case runs both commands, each in its own process, with the same runs and
options: ``compare --json`` and ``report --exit-code``.  The report must exit
with compare's exit code, print compare's verdict line, and its page must
state the same verdict and exit code in its opening sentences and the same
change, interval and noise source for every decision metric in its table
(read back from the HTML).  Cases: the bundled pair (runs recorded apart,
default noise), the same pair with noise learned from four real A/A runs
(``--noise-from``), one interleaved recording of the Go test server with +20 %
CPU per request, and two such recordings a side (``--baseline/--candidate``)
with the noise of two interleaved A/A recordings.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys

import pytest
from conftest import ROOT, RUNS

IL = ROOT / "data" / "calibration" / "interleaved"
AA_RUNS = [RUNS / f"nginx-ka-aa{i}-{s}" for i in (1, 2) for s in "ab"]

CASES = {
    "bundled-pair": ([RUNS / "nginx-no-keepalive", RUNS / "nginx-keepalive"], ["--objective", "p99<=5ms"]),
    "noise-from": (
        [RUNS / "nginx-no-keepalive", RUNS / "nginx-keepalive"],
        ["--noise-from", *AA_RUNS, "--threshold", "15%", "--confidence", "90%"],
    ),
    "interleaved-job": ([IL / "go-cpu20" / "a-01", IL / "go-cpu20" / "b-01"], ["--objective", "p99<=20ms"]),
    "interleaved-repeats-noise-from": (
        [
            "--baseline", IL / "go-cpu20" / "a-02", IL / "go-cpu20" / "a-03",
            "--candidate", IL / "go-cpu20" / "b-02", IL / "go-cpu20" / "b-03",
        ],
        ["--noise-from", *(IL / "go-aa" / f"{s}-0{i}" for i in (1, 2) for s in "ab")],
    ),
}  # fmt: skip


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "headroom", *map(str, args)], capture_output=True, text=True, cwd=ROOT
    )


def _table_rows(page: str) -> dict[str, list[str]]:
    """The verdict's table in the page: metric name -> its cells (text)."""
    table = re.search(r"<table class=\"headroom\"><thead><tr><th>metric</th>.*?</table>", page, re.S).group(0)
    rows = {}
    for cells in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]:
        texts = [
            html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
            for c in re.findall(r"<td[^>]*>(.*?)</td>", cells, re.S)
        ]
        rows[texts[0]] = texts[1:]
    return rows


@pytest.mark.parametrize("case", list(CASES))
def test_report_and_compare_agree(case, tmp_path):
    runs, options = CASES[case]
    c = cli("compare", *runs, *options, "--json", tmp_path / "v.json")
    doc = json.loads((tmp_path / "v.json").read_text())
    assert c.returncode == doc["exit_code"] and c.returncode in (0, 1, 3), c.stderr
    out = tmp_path / "r.html"
    r = cli("report", *runs, *options, "--exit-code", "-o", out)
    assert r.returncode == doc["exit_code"], (r.returncode, doc["verdict"], r.stderr[-2000:])
    assert (
        f"headroom: verdict: {doc['verdict'].upper()} (exit {doc['exit_code']}): {doc['reason']}" in r.stderr
    )
    page = out.read_text()
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))
    for sentence in doc["headline"]:  # the opening sentences, word for word
        assert sentence in text, sentence
    assert any(x.startswith(f"{doc['verdict'].upper()} (exit {doc['exit_code']}): ") for x in doc["headline"])
    rows = _table_rows(page)
    for m in doc["metrics"]:
        if not m["decides"] or m["change"] is None:
            continue
        cells = rows[m["name"]]
        assert cells[2] == f"{m['change'] * 100:+.1f}%", (m["name"], cells)
        lo, hi = (f"{v * 100:+.1f}%" for v in m["ci"])
        assert cells[3].startswith(f"[{lo}, ") and cells[3].endswith(f", {hi}]") or ">+999%" in cells[3]
        assert cells[4].startswith(f"{m['noise']['sd'] * 100:.1f}%"), (m["name"], cells[4])
    # the options travelled whole: the parameters table says them as the command line did
    threshold = options[options.index("--threshold") + 1] if "--threshold" in options else "10%"
    assert re.search(
        rf"<code>--threshold</code></td><td[^>]*>[^<]*</td><td>{re.escape(threshold)}</td>", page
    )
    assert doc["settings"]["threshold"] == pytest.approx(float(threshold.rstrip("%")) / 100)
    if "--baseline" in runs:  # several runs a side: all judged, the first of each shown, and said so
        assert "The verdict judges every run: baseline 2 runs" in text and "candidate 2 runs" in text
    noise = _after(options, "--noise-from")
    if noise:
        assert "learned" in doc["noise"]["source"]
        assert all(html.escape(str(p)) in page for p in noise)


def _after(options: list, flag: str) -> list:
    """The values that follow ``flag`` up to the next option."""
    if flag not in options:
        return []
    out = []
    for v in options[options.index(flag) + 1 :]:
        if str(v).startswith("--"):
            break
        out.append(v)
    return out


def test_the_verdict_options_are_compares_and_travel_whole():
    """VerdictOptions' defaults are compare_runs' own; the command line's values reach the notebook."""
    from headroom import helptext
    from headroom.cli import build_parser, report_parameters
    from headroom.options import VerdictOptions

    d = VerdictOptions()
    assert helptext.compare_defaults() == {
        "threshold": d.threshold,
        "confidence": d.confidence,
        "error_threshold": d.error_threshold,
    }
    argv = ["report", "--baseline", "a1", "a2", "--candidate", "b1", "-o", "r.html", "--threshold", "5%"]
    argv += ["--confidence", "90%", "--error-threshold", "0.5%", "--noise-from", "aa/x", "aa/y"]
    name, params = report_parameters(build_parser().parse_args(argv))
    assert name == "comparison_report.ipynb"
    assert params["baseline_paths"] == ["a1", "a2"] and params["candidate_paths"] == ["b1"]
    got = VerdictOptions.from_dict(params["verdict_options"])
    assert got == VerdictOptions(0.05, 0.005, 0.90, ("aa/x", "aa/y"))
    with pytest.raises(ValueError, match="unknown verdict option"):
        VerdictOptions.from_dict({"treshold": 0.1})


def test_exit_code_needs_a_comparison(tmp_path):
    """--exit-code gives a verdict's exit code: with one run there is none, and that is a usage error."""
    p = cli("report", RUNS / "nginx-keepalive", "--exit-code", "-o", tmp_path / "r.html")
    assert p.returncode == 2 and p.stderr.startswith("headroom report: error:")
    assert "--exit-code needs a baseline and a candidate" in p.stderr and not (tmp_path / "r.html").exists()
