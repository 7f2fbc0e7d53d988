"""The answer on the first screen (issue 49): the bundled report (the README's first command) states its
verdict word in the first 700 characters of the page's text, and compare's first sentence is the verdict."""

from __future__ import annotations

import html
import re
import subprocess
import sys

from conftest import ROOT

RUNS = ROOT / "data" / "runs"
WORDS = ("REGRESSED", "IMPROVED", "NO REGRESSION", "NO CHANGE", "INCONCLUSIVE")


def page_text(path) -> str:
    body = path.read_text()
    body = body[body.find("<body") :]
    body = re.sub(r"<(style|script)\b.*?</\1>", " ", body, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body))).strip()


def test_the_bundled_reports_verdict_is_in_its_first_700_characters(tmp_path):
    out = tmp_path / "report.html"
    cmd = [sys.executable, "-m", "headroom", "report", RUNS / "nginx-no-keepalive", RUNS / "nginx-keepalive",
           "--objective", "p99<=5ms", "-o", out]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-800:]
    text = page_text(out)
    first = min((text.find(w) for w in WORDS if w in text), default=-1)
    assert 0 <= first < 700, (first, text[:800])
    said = re.search(r"verdict: (\w[\w ]*?) \(exit", p.stderr).group(1)
    assert said in text[: first + 20]


def test_compares_first_sentence_is_the_verdict():
    cmd = [sys.executable, "-m", "headroom", "compare", RUNS / "nginx-no-keepalive", RUNS / "nginx-keepalive"]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    sentences = [ln for ln in p.stdout.splitlines() if ln.startswith("  > ")]
    assert sentences and any(sentences[0].startswith(f"  > {w} (exit") for w in WORDS), sentences[:2]
