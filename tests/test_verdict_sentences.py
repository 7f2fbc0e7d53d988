"""Every sentence of compare's output says what its numbers say (issue 48).

On real interleaved recordings (data/calibration/interleaved), judged the ways docs/ci.md shows (the
plain compare, and the CI recipe: --noise-from two earlier A/A recordings, an objective, a 10 %
threshold; with the server's CPU and without it), the terminal output of `headroom compare` is read
sentence by sentence:

* the verdict's reason quotes the evidence that decided: for REGRESSED a change of the named metric
  at least the threshold the worse way, for IMPROVED the better way (never "+0.2 %" for a regression);
* a change printed beside two values ("-22.4 % (5,564 req/s to 6,215 req/s)") has the sign and size
  of their ratio;
* "Next:" never advises recording interleaved what already is.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

IL = ROOT / "data" / "calibration" / "interleaved"
#: (set, its A/A set): the held-out r7 sets of issue 48 (both servers, both foreign loads), recordings
#: 01-04 of each (all of a set of two), every way; bench/check_sentences.py reads every r7 recording
SETS = [
    ("r7-go-aa-30", "r7-go-aa-30"),
    ("r7-nginx-aa-95", "r7-nginx-aa-95"),
    ("r7-go-latency2ms-95", "r7-go-aa-95"),
    ("r7-nginx-cpu25-30", "r7-nginx-aa-30"),
    ("r7-nginx-go-latency2ms-30", "r7-nginx-aa-30"),
]
PCT = r"([+-]\d[\d,]*(?:\.\d+)?) ?%"
VALUES = re.compile(PCT + r" \(([\d,]+(?:\.\d+)?) req/s to ([\d,]+(?:\.\d+)?) req/s")


def _text(name: str, aa: str, k: int, recipe: bool, cpu: bool) -> tuple[str, object]:
    from calibrate_paired import no_cpu
    from calibrate_recipe import _reduced  # each recording read once in this process

    from headroom.compare import compare_runs
    from headroom.text import format_comparison

    def load(p: Path):
        r = _reduced(p)
        return r if cpu else no_cpu(r)

    a, b = load(IL / name / f"a-{k:02d}"), load(IL / name / f"b-{k:02d}")
    if recipe:
        n = len(list((IL / aa).glob("a-*")))
        picks = [(k - 2) % n + 1, (k - 3) % n + 1] if name == aa else [k % n + 1, (k + 1) % n + 1]
        noise = [load(IL / aa / f"{s}-{i:02d}") for i in picks for s in "ab"]
        c = compare_runs(a, b, noise_from=noise, objective="p99<=20ms", threshold=0.10)
    else:
        c = compare_runs(a, b)
    return format_comparison(c), c


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def check(text: str, c) -> list[str]:
    """The sentences of one comparison's text that say something its numbers do not."""
    bad = []
    flat = " ".join(line.strip() for line in text.splitlines())
    for m in VALUES.finditer(flat):
        change, a, b = _num(m.group(1)) / 100, _num(m.group(2)), _num(m.group(3))
        if a > 0 and b > 0 and abs(math.log1p(change) - math.log(b / a)) > 0.02 + 0.01 * abs(change):
            bad.append(f"{m.group(0)}: the change is not the ratio of its values ({b / a - 1:+.1%})")
    if c.verdict in ("regressed", "improved"):
        reason = c.reason.split("; although")[0]
        metric = next((x for x in c.metrics if reason.startswith(x.name + " ")), None)
        first = re.search(PCT, reason) if metric is not None and metric.key != "error_rate" else None
        if metric is None:
            bad.append(f"the reason names no metric: {reason}")
        elif first is not None:
            q = math.log1p(_num(first.group(1)) / 100)
            way = 1.0 if (c.verdict == "regressed") == (metric.better == "lower") else -1.0
            if way * q < math.log1p(c.threshold) - 1e-3:
                bad.append(f"{c.verdict.upper()} quotes {first.group(0)} for {metric.name}: {reason}")
    if c.design == "interleaved steps" and "--interleave steps)," in flat and "Next: record A and B" in flat:
        bad.append("Next: advises interleaving a recording that already is")
    return bad


@pytest.mark.parametrize("name,aa", SETS)
def test_every_sentence_agrees_with_its_numbers(name, aa):
    problems = []
    for k in range(1, 1 + min(4, len(list((IL / name).glob("a-*"))))):
        for recipe, cpu in ((False, True), (True, True), (True, False)):
            text, c = _text(name, aa, k, recipe, cpu)
            problems += [f"{name}/{k:02d} recipe={recipe} cpu={cpu}: {p}" for p in check(text, c)]
    assert not problems, "\n".join(problems)


def test_the_checker_catches_the_sentences_of_issue_48():
    """The checker itself, on the sentences the issue quoted (the numbers as they were printed)."""
    from types import SimpleNamespace as NS

    p50 = NS(name="p50 latency", key="p50_s", better="lower")
    cpu = NS(name="CPU per request", key="cpu_s_per_req", better="lower")
    c = NS(verdict="regressed", reason="p50 latency +0.2% (interval -8.2% to +9.4%)", metrics=[p50],
           threshold=0.10, design="interleaved steps")  # fmt: skip
    assert check("", c)
    c = NS(verdict="improved", reason="p50 latency +4.3% (interval -6.9% to +16.9%); across load +3.2% at c=1",
           metrics=[p50], threshold=0.10, design="interleaved steps")  # fmt: skip
    assert check("", c)
    c = NS(verdict="regressed", reason="CPU per request +64.0% at c=31 (that level's own interval +20.0% to +124.0%)",
           metrics=[cpu], threshold=0.10, design="interleaved steps")  # fmt: skip
    assert not check("", c)
    text = "at p99<=20ms: -22.4 % (5,564 req/s to 6,215 req/s), not shown beyond the noise"
    c = NS(verdict="no regression", reason="", metrics=[], threshold=0.10, design="interleaved steps")
    assert check(text, c)
    assert not check("at p99<=20ms: +11.7 % (5,564 req/s to 6,215 req/s)", c)
    assert check("Next: record A and B alternating at every load step (headroom ramp --ab URL_A URL_B "
                 "--interleave steps), or learn", c)  # fmt: skip
