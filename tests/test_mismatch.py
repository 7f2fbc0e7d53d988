"""Runs that do not measure the same thing are said first (issue 40, item 4), on real runs.

Cases, each from real recordings of this repository:

* a candidate whose perfResults file is the bundled keep-alive run cut after
  its third section (the real file, truncated as a broken upload would);
* a Go test server's interleaved recording (hey, 11 levels 1..31, port
  44253) against the bundled nginx run (Go net/http ramp client, 8 levels
  1..29, port 8080);
* the two sides of one interleaved A/B recording, and the bundled pair: no
  warning (two addresses of one A/B job are expected).

What each pair should be warned about is worked out here from the runs'
metadata.yml and the file's sections (read with yaml and gzip, not with
headroom), and the warnings must be on the first screen: before the first
headline sentence in the terminal, before the headline box in the report.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, RUNS

from headroom.mismatch import PREFIX

GO = ROOT / "data" / "calibration" / "interleaved" / "go-aa"


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "headroom", *map(str, args)], capture_output=True, text=True, cwd=ROOT
    )


@pytest.fixture(scope="module")
def truncated(tmp_path_factory):
    """The bundled keep-alive run with its request file cut after the third section."""
    run = tmp_path_factory.mktemp("trunc") / "nginx-keepalive-3"
    shutil.copytree(RUNS / "nginx-keepalive", run)
    lines = gzip.open(RUNS / "nginx-keepalive" / "perfResults.csv.gz", "rt").read().splitlines(True)
    heads = [i for i, ln in enumerate(lines) if ln.startswith("start-time")]
    assert len(heads) == 8
    with gzip.open(run / "perfResults.csv.gz", "wt") as f:
        f.writelines(lines[: heads[3]])
    return run


def first_screen(stdout: str) -> str:
    """What the terminal shows before the first headline sentence ('  > ')."""
    return stdout[: stdout.index("\n  > ")]


def test_a_truncated_candidate_is_said_first(truncated):
    meta = yaml.safe_load((truncated / "metadata.yml").read_text())
    p = cli("compare", RUNS / "nginx-no-keepalive", truncated, "--json", "-")
    doc = json.loads(p.stdout)
    assert p.returncode == doc["exit_code"]
    first = doc["warnings"][0]
    assert first.startswith(PREFIX) and "far fewer load steps" in first
    assert f"3 against {meta['steps']}" in first and f"metadata plans {meta['steps']}" in first
    text = cli("compare", RUNS / "nginx-no-keepalive", truncated).stdout
    screen = re.sub(r"\s+", " ", first_screen(text))
    assert "WARNING: runs do not match: the candidate" in screen and "far fewer load steps" in screen


def test_a_truncated_candidate_cannot_pass_the_gate(truncated):
    """3 of the 8 steps its own metadata plans: compare exits 3 naming it (it passed as NO REGRESSION,
    exit 0, issue 49); --accept-mismatch judges the matched steps as before."""
    p = cli("compare", RUNS / "nginx-no-keepalive", truncated, "--json", "-")
    doc = json.loads(p.stdout)
    assert p.returncode == 3 and doc["exit_code"] == 3 and doc["verdict"] == "inconclusive"
    assert doc["reason"].startswith("the runs do not measure the same thing: the candidate")
    assert "metadata plans 8" in doc["reason"] and "--accept-mismatch" in doc["reason"]
    p = cli("compare", RUNS / "nginx-no-keepalive", truncated, "--accept-mismatch", "--json", "-")
    doc = json.loads(p.stdout)
    assert doc["verdict"] != "inconclusive" or "do not measure" not in doc["reason"]
    assert p.returncode == doc["exit_code"]


def test_the_gating_report_exits_3_on_a_truncated_candidate(truncated, tmp_path):
    out = tmp_path / "r.html"
    p = cli("report", RUNS / "nginx-no-keepalive", truncated, "--exit-code", "-o", out)
    assert p.returncode == 3, p.stderr[-500:]
    page = out.read_text()
    assert "do not measure the same thing" in page and "metadata plans 8" in page


def _levels(meta: dict) -> list[int]:
    if "concurrency" in meta and isinstance(meta["concurrency"], list):
        return [int(c) for c in meta["concurrency"]]
    lo, step, n = meta["lower_concurrency"], meta["concurrency_step"], meta["steps"]
    return [lo + k * step for k in range(n)]


def test_a_go_server_against_nginx_names_url_generator_and_plan():
    a, b = RUNS / "nginx-keepalive", GO / "a-01"
    ma, mb = (yaml.safe_load((r / "metadata.yml").read_text()) for r in (a, b))
    # what differs, from the metadata alone
    urls = (ma.get("url") or ma.get("target"), mb.get("url") or mb.get("target"))
    tools = (ma.get("engine") or ma.get("tool"), mb.get("engine") or mb.get("tool"))
    la, lb = set(_levels(ma)), set(_levels(mb))
    assert urls[0] != urls[1] and tools[0] != tools[1] and not (la <= lb or lb <= la)
    p = cli("compare", a, b, "--json", "-")
    doc = json.loads(p.stdout)
    said = [w for w in doc["warnings"] if w.startswith(PREFIX)]
    assert doc["warnings"][: len(said)] == said  # first among the warnings
    joined = " ".join(said)
    assert f"requested {urls[0]}" in joined and urls[1] in joined
    assert f"{tools[0]!r}" in joined and f"{tools[1]!r}" in joined
    assert f"they share {len(la & lb)} of them" in joined
    screen = re.sub(r"\s+", " ", first_screen(cli("compare", a, b).stdout))
    for word in ("different addresses", "different load generators", "different plans"):
        assert word in screen, word


@pytest.mark.parametrize(
    "pair",
    [(GO / "a-01", GO / "b-01"), (RUNS / "nginx-no-keepalive", RUNS / "nginx-keepalive")],
    ids=["one-ab-recording", "bundled-pair"],
)
def test_matching_runs_get_no_mismatch_warning(pair):
    doc = json.loads(cli("compare", *pair, "--json", "-").stdout)
    assert not [w for w in doc["warnings"] if w.startswith(PREFIX)]
    ma, mb = (yaml.safe_load((r / "metadata.yml").read_text()) for r in pair)
    if "ab" in ma:  # two addresses, one A/B job: the other side's URL is in the metadata
        assert ma["ab"]["other_url"] == mb["url"] and ma["url"] != mb["url"]


def test_the_report_shows_the_mismatch_before_the_headline(truncated, tmp_path):
    out = tmp_path / "r.html"
    p = cli("report", RUNS / "nginx-no-keepalive", truncated, "-o", out)
    assert p.returncode == 0, p.stderr
    page = out.read_text()
    box, head = page.find('<div class="mismatch">'), page.find('<div class="headline')
    assert 0 <= box < head and "far fewer load steps" in page[box:head]
    assert f"headroom: warning: {PREFIX}" in p.stderr  # and on the terminal


@pytest.mark.parametrize("objective", ["p99<5ms", "p99>=5ms", "p99=5ms"])
def test_an_objective_other_than_at_most_is_refused_in_one_line(objective):
    p = cli("compare", RUNS / "nginx-no-keepalive", RUNS / "nginx-keepalive", "--objective", objective)
    assert p.returncode == 2 and p.stdout == ""
    err = [ln for ln in p.stderr.splitlines() if "error:" in ln]
    assert len(err) == 1 and "only '<=' is supported" in err[0] and "write p99<=5ms" in err[0]
    assert p.stderr.startswith("headroom compare: error:")  # the subcommand, in one line (issue 49)
    assert len(p.stderr.strip().splitlines()) == 1 and "headroom compare --help" in p.stderr


def test_a_typo_is_said_in_one_line_naming_the_subcommand():
    p = cli("compare", RUNS / "nginx-no-keepalive", RUNS / "nginx-keepalive", "--treshold", "5%")
    assert p.returncode == 2 and p.stderr.startswith("headroom compare: error:")
    assert "unrecognized arguments: --treshold 5%" in p.stderr
    p = cli("report", RUNS / "nginx-keepalive", "-o", "x.html", "--exit-codes")
    assert p.returncode == 2 and p.stderr.startswith("headroom report: error:")
