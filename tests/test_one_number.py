"""One name, one value: every figure the terminal, the JSON and the HTML report share agrees on the same runs.

The three are produced the way a user produces them: ``headroom summary
--json``, ``headroom compare --json`` and ``headroom report`` (a real
notebook on a real kernel), each in its own process.  Numbers are read back
from the printed text and the HTML, not from the library's objects.
"""

import html
import json
import re

import pytest
from conftest import RUNS
from test_report import cli

RUN_NAMES = ("nginx-no-keepalive", "nginx-keepalive")
OBJ = "p99<=5ms"
#: capacity row name -> the JSON field (under "capacity") it prints
REQ_S_ROWS = {
    "modelled capacity (USL)": "capacity_rps",
    "knee (USL, max power)": "knee_rps",
    "plateau throughput": "plateau_rps",
    "peak step": "peak_step_rps",
    f"throughput at {OBJ}": "at_objective",
    "max useful throughput": "max_useful_rps",
}
#: figures the comparison shows beside its verdict, under the summary's own names (its paired
#: plateau estimate is a different figure and gets its own name in headroom/compare/specs.py)
SHOWN = {"capacity_rps": "capacity_rps", "knee_rps": "knee_rps", "peak_step_rps": "peak_step_rps"}


def _terminal_rows(text: str) -> dict[str, str]:
    """The capacity block of ``headroom summary``: row name -> value (wrapped lines joined)."""
    lines = text.split("\n")
    start = next(i for i, ln in enumerate(lines) if ln.startswith("capacity ("))
    rows, name = {}, None
    for ln in lines[start + 1 :]:
        if not ln.strip():
            break
        m = re.match(r"^  (\S.*?|  \S.*?)  +(\S.*)$", ln)
        if m and not ln.startswith("      "):
            name = m.group(1).strip()
            rows[name] = m.group(2).strip()
        else:
            rows[name] += " " + ln.strip()
    return rows


def _html_rows(page: str) -> dict[str, list[str]]:
    """The report's capacity table: row name -> one value per run."""
    table = re.search(r'<table class="headroom"><thead><tr><th></th>.*?</table>', page, re.S).group(0)
    rows = {}
    for name, cells in re.findall(r"<tr><td><b>(.*?)</b></td>(.*?)</tr>", table, re.S):
        rows[html.unescape(name)] = [
            html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", cells, re.S)
        ]
    return rows


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("one-number")
    out = {"summary": [], "json": []}
    for name in RUN_NAMES:
        p = cli("summary", RUNS / name, "--objective", OBJ, "--json", tmp / f"{name}.json")
        assert p.returncode == 0, p.stderr
        out["summary"].append(p.stdout)
        out["json"].append(json.loads((tmp / f"{name}.json").read_text()))
    p = cli("compare", *(RUNS / n for n in RUN_NAMES), "--objective", OBJ, "--json", tmp / "c.json")
    assert p.returncode in (0, 1), p.stderr
    out["compare"] = json.loads((tmp / "c.json").read_text())
    p = cli("report", *(RUNS / n for n in RUN_NAMES), "--objective", OBJ, "-o", tmp / "r.html")
    assert p.returncode == 0, p.stderr
    out["html"] = (tmp / "r.html").read_text()
    return out


def test_terminal_and_json_agree_on_every_capacity_figure(outputs):
    for text, doc in zip(outputs["summary"], outputs["json"]):
        rows, cap = _terminal_rows(text), doc["capacity"]
        for row, key in REQ_S_ROWS.items():
            v = cap[key]["rps"] if key == "at_objective" else cap[key]
            if v is None:
                assert row not in rows or "req/s" not in rows[row], (row, rows.get(row))
                continue
            shown = rows[row].removeprefix(">= ")
            assert shown.startswith(f"{v:,.0f} req/s"), (row, rows[row], v)
        # the statuses, in the same words
        assert cap["at_objective"]["status"] in ("crossed", "held")
        held = cap["at_objective"]["status"] == "held"
        assert rows[f"throughput at {OBJ}"].startswith(">= ") == held
        assert rows["max useful throughput"].startswith(">= ") == held
        cpu = cap["at_cpu_target"]
        assert (cpu["status"] == "not reached") == rows["throughput at 70 % CPU"].startswith("not reached")
        assert (cpu["rps"] is None) == (cpu["status"] != "crossed")
        assert rows["CPU per request (whole run)"].startswith(f"{cap['cpu_s_per_req'] * 1e6:.1f} us")


def test_report_shows_the_terminals_values(outputs):
    """Each capacity row of the HTML report reads exactly as ``headroom summary`` prints it, run by run."""
    page = _html_rows(outputs["html"])
    for k, text in enumerate(outputs["summary"]):
        rows = _terminal_rows(text)
        assert set(rows) == {name for name, cells in page.items() if cells[k] != "-"}
        for name, value in rows.items():
            assert page[name][k] == value, name


def test_comparison_shows_the_summaries_values(outputs):
    metrics = {m["key"]: m for m in outputs["compare"]["metrics"]}
    for side, doc in zip(("baseline", "candidate"), outputs["json"]):
        cap = doc["capacity"]
        for key, summary_key in SHOWN.items():
            assert metrics[key][side] == pytest.approx(cap[summary_key], rel=1e-5), key
        assert metrics["rps_at_objective"][side] == pytest.approx(cap["at_objective"]["rps"], rel=1e-5)
    # the comparison's paired plateau is another figure, under another name than the summary's
    assert metrics["paired_plateau_rps"]["name"] != "plateau throughput"
    assert "plateau_rps" not in metrics


def test_history_shows_the_summaries_values(outputs, tmp_path):
    """``headroom history`` on the same runs: each release's figures are the summary's."""
    out = tmp_path / "h.json"
    p = cli("history", *(RUNS / n for n in RUN_NAMES), "--objective", OBJ, "--cache", "none", "--json", out)
    assert p.returncode in (0, 1, 3), p.stderr
    doc = json.loads(out.read_text())
    assert [r["label"] for r in doc["runs"]] == [d["label"] for d in outputs["json"]]
    for release, summary in zip(doc["runs"], outputs["json"]):
        cap, ms = summary["capacity"], release["metrics"]
        for key in ("plateau_rps", "capacity_rps"):
            assert ms[key]["value"] == pytest.approx(cap[key], rel=1e-5), key
        assert ms["rps_at_objective"]["value"] == pytest.approx(cap["at_objective"]["rps"], rel=1e-5)
        assert ms["rps_at_objective"]["lower_bound"] == (cap["at_objective"]["status"] == "held")
