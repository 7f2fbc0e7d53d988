"""A capacity search is shown as a search (issue 49): summary text and report say the answer, the
precision asked and reached, why it stopped and the probes by load; the headroom plot draws the probes
as points without numbers over them.

Checked against the folder's own metadata.yml (read with yaml here) and ``headroom summary --json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from html import escape

import pytest
import yaml
from conftest import ROOT

FOLDER = ROOT / "data" / "search" / "ref5-nginx-hog" / "01" / "search"


@pytest.fixture(scope="module")
def meta():
    return yaml.safe_load((FOLDER / "metadata.yml").read_text())


def _summary(*extra):
    return subprocess.run(
        [sys.executable, "-m", "headroom", "summary", str(FOLDER), *extra],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip


def test_summary_says_the_search_first_in_its_own_words(meta, tmp_path):
    out = tmp_path / "s.json"
    p = _summary("--json", str(out))  # no --objective: the search's own is the default
    assert p.returncode == 0, p.stderr
    at = json.loads(out.read_text())["capacity"]["at_objective"]
    s = meta["search"]
    text = p.stdout
    block = text[text.index("capacity search") : text.index("\nsteps (")]
    assert f"headroom ramp --find {s['objective']}" in block
    assert f"{at['rps']:,.0f} req/s at {s['objective']}" in block
    assert f"95 % interval {at['low']:,.0f} to {at['high']:,.0f} req/s" in block
    hw = max(at["rps"] - at["low"], at["high"] - at["rps"]) / at["rps"]
    assert f"asked ±{100 * s['precision']:g} %, reached ±{100 * hw:.1f} % (not reached)" in block
    assert f"stopped    {s['stopped']} (" in block
    assert f"{len(s['probes'])} probes at {len({q['concurrency'] for q in s['probes']})} loads" in block
    # the probes by load: every load once, lowest first, with its count and verdicts
    counts = Counter(q["concurrency"] for q in s["probes"])
    rows = [ln.split() for ln in block.splitlines() if ln.strip() and ln.split()[0].isdigit()]
    assert [int(r[0]) for r in rows] == sorted(counts)
    assert [int(r[1]) for r in rows] == [counts[c] for c in sorted(counts)]
    # the capacity table names the loads the crossing lies between, not step numbers of a probe order
    line = text[text.index(f"throughput at {s['objective']}") :].split("\n  throughput at 70")[0]
    assert "between the probes at" in line and "between steps" not in line


def test_a_ramp_keeps_its_step_words():
    p = subprocess.run(
        [sys.executable, "-m", "headroom", "summary", str(ROOT / "data" / "runs" / "nginx-keepalive"),
         "--objective", "p99<=5ms"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0 and "capacity search" not in p.stdout


def test_the_report_header_and_plot_show_a_search(meta):
    import matplotlib

    matplotlib.use("Agg")
    from headroom import analyze, html, plot
    from headroom.io import reduce_run

    s = analyze(reduce_run(str(FOLDER)))
    at = s.capacity.at_objective
    head = str(html.header("", [s]))
    assert head.index("Capacity search") < head.index("<ul>")  # before the run list: the answer first
    assert escape(f"{at.rps:,.0f} req/s at {meta['search']['objective']}") in head
    assert head.count("<tr>") == 1 + len({q["concurrency"] for q in meta["search"]["probes"]})
    ax = plot.headroom(s)
    texts = [t.get_text() for t in ax.texts]
    assert not any(t.strip().isdigit() for t in texts), texts  # no probe numbers over the points
    assert any(f"{at.rps:,.0f} req/s" in t for t in texts)  # the answer's label


def test_an_ab_search_refuses_the_options_it_cannot_honour():
    """headroom.ramp.search_ab's checks, in process (the fast tier imports the A/B search here): --find
    with --ab needs --interleave steps, and refuses the options of repeated recordings by name."""
    from argparse import Namespace

    from headroom.model import HeadroomError
    from headroom.ramp.search_ab import _ab_checks

    ok = dict(interleave="steps", until_decided=False, pairs_per_level=None, repeats=None, max_repeats=None)
    _ab_checks(Namespace(**ok))
    with pytest.raises(HeadroomError, match="give --interleave steps"):
        _ab_checks(Namespace(**{**ok, "interleave": None}))
    for opt, key, value in (("--repeats", "repeats", 3), ("--until-decided", "until_decided", True),
                            ("--pairs-per-level", "pairs_per_level", 2), ("--max-repeats", "max_repeats", 4)):  # fmt: skip
        with pytest.raises(HeadroomError, match=f"^{opt} is not for --find"):
            _ab_checks(Namespace(**{**ok, key: value}))
