"""The answer in plain words (issue 30): the headline sentences say what the comparison's numbers
say, the terminal and the JSON carry the same words, and a run whose errors are unknown shows
'unknown' everywhere (never 0 beside 'unknown')."""

import json
import re
import subprocess
import sys

import pytest
from conftest import ROOT

RUNS = ROOT / "data" / "runs"
IL = ROOT / "data" / "calibration" / "interleaved"

CASES = {
    # baseline, candidate: real recordings of known outcome
    "improved": (RUNS / "nginx-no-keepalive", RUNS / "nginx-keepalive"),
    "inconclusive": (RUNS / "nginx-ka-aa1-a", RUNS / "nginx-ka-aa1-b"),
    "regressed": (IL / "x2" / "a-02", IL / "x2" / "b-02"),
}


def _compare(a, b, tmp_path):
    out = tmp_path / "c.json"
    p = subprocess.run(
        [sys.executable, "-m", "headroom", "compare", str(a), str(b), "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return p, json.loads(out.read_text())


def _pct(v: float) -> str:
    return f"{v * 100:+.1f} %"


@pytest.mark.parametrize("case", sorted(CASES))
def test_headline_says_what_the_numbers_say(case, tmp_path):
    p, doc = _compare(*CASES[case], tmp_path)
    assert doc["verdict"] == case and p.returncode == doc["exit_code"]
    head = doc["headline"]
    metrics = {m["key"]: m for m in doc["metrics"]}
    # 1. how sure, first (issue 49: the answer on the first screen): the verdict and the exit code
    assert head[0].startswith(f"{case.upper()} (exit {p.returncode}): ")
    # 2. capacity: the paired throughput's baseline, candidate, change and interval, as its row says
    thr = next(m for k, m in metrics.items() if "plateau" in k and m["decides"])
    said = re.search(r"([\d,]+) req/s to ([\d,]+) req/s", head[1]).groups()
    assert [
        abs(float(x.replace(",", "")) - thr[k]) <= 0.51 for x, k in zip(said, ("baseline", "candidate"))
    ] == [
        True,
        True,
    ]  # the JSON keeps 6 significant digits, the sentence whole req/s
    assert f"{abs(thr['change']) * 100:.1f} %" in head[1]
    assert f"{_pct(thr['ci'][0])} to {_pct(thr['ci'][1])}" in head[1]
    word = {"worse": "fell", "better": "rose", "same": "did not change", "unclear": "not shown beyond"}
    assert word[thr["decision"]] in head[1]
    # 3. CPU per request, in microseconds as the table gives them
    cpu = metrics["cpu_s_per_req"]
    assert f"{cpu['baseline'] * 1e6:,.1f} us to {cpu['candidate'] * 1e6:,.1f} us" in head[2]
    assert ("beyond the noise" in head[2]) == (cpu["decision"] in ("worse", "better"))
    # 4. what next, only when undecided
    assert (len(head) == 4) == (case == "inconclusive")
    if case == "inconclusive":
        assert re.search(rf"about {doc['runs_needed']} ", head[3]) and "headroom ramp --ab" in head[3]
    # the terminal prints the same sentences (wrapped), before the tables
    flat = re.sub(r"\s+", " ", p.stdout)
    for sentence in head:
        assert f"> {sentence}" in flat
    assert flat.index(head[0]) < flat.index(" metric ")


def test_unknown_errors_are_unknown_everywhere(tmp_path):
    """A hey recording (transport errors not kept): summary, its JSON and compare all say unknown."""
    run = RUNS / "nginx-ka-aa1-a"
    meta = (run / "metadata.yml").read_text()
    assert re.search(r"^errors: null", meta, re.M)  # the recorder said it could not count them
    p = subprocess.run(
        [sys.executable, "-m", "headroom", "summary", str(run), "--json", "-"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    doc = json.loads(p.stdout)
    assert doc["format"] == "hey"  # as --format spells it
    assert doc["requests"]["errors"] is None and doc["requests"]["total"] is None
    assert all(s["errors"] is None for s in doc["steps"])
    text = subprocess.run(
        [sys.executable, "-m", "headroom", "summary", str(run)], capture_output=True, text=True, cwd=ROOT
    ).stdout
    assert "errors unknown" in text and " 0 errors" not in text
    rows = [ln.split() for ln in text.splitlines() if re.match(r"\s+\d+\s+\d+\s+\d+\.\d\s+\d", ln)]
    assert rows and all(r[5] == "?" for r in rows)  # the errors column of every step
    _, cmp_doc = _compare(run, RUNS / "nginx-ka-aa1-b", tmp_path)
    err = next(m for m in cmp_doc["metrics"] if m["key"] == "error_rate")
    assert err["decision"] == "not judged" and "unknown" in err["note"]


def test_a_change_found_across_load_says_where():
    """An interleaved comparison whose metric is worse at one level (or along the line across load)
    while its average's interval holds 0 names the level and the figures the JSON's levels carry,
    never "beyond the noise" beside an interval that includes no change."""
    import json
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    sets = root / "data" / "calibration" / "interleaved" / "dev-go-latency200-70"
    p = subprocess.run(
        [sys.executable, "-m", "headroom", "compare", sets / "a-03", sets / "b-03", "--json", "-"],
        capture_output=True, text=True, cwd=root, timeout=300,
    )  # fmt: skip
    doc = json.loads(p.stdout)
    cpu = next(m for m in doc["metrics"] if m["key"] == "cpu_s_per_req")
    assert cpu["decision"] == "worse" and cpu["ci"][0] < 0 < cpu["ci"][1]
    sentence = next(s for s in doc["headline"] if s.startswith("CPU per request"))
    top = max((lv for lv in cpu["levels"] if lv["raw_ci"][0] > 0), key=lambda lv: abs(lv["raw_change"]))
    assert f"by {abs(top['raw_change']) * 100:.1f} % at c={top['load']:g}, beyond the noise there" in sentence
    assert f"on average over the levels {cpu['change'] * 100:+.1f} %" in sentence
    for s in doc["headline"]:
        m = re.search(r"beyond the noise \(([-+][\d.]+) % to ([-+][\d.]+) %\)", s)
        assert m is None or not (float(m[1]) < 0 < float(m[2])), s
