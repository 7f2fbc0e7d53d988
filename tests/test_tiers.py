"""The test tiers stay honest: tests/slow_tests.txt names only tests that exist (issue 30, item 6)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT, headroom_modules, is_slow, slow_entries


def _defined(path: Path) -> set[str]:
    """``test_x`` and ``TestC::test_x`` of every test function a file defines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.add(node.name)
        elif isinstance(node, ast.ClassDef):
            out |= {
                f"{node.name}::{f.name}"
                for f in node.body
                if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            }
    return out


def test_slow_list_is_current():
    """Every entry of slow_tests.txt is a test file, or a test function in one (no parameter ids)."""
    entries = slow_entries()
    assert entries, "slow_tests.txt lists nothing"
    stale = []
    for e in entries:
        file, _, name = e.partition("::")
        path = ROOT / file
        if "[" in e or not file.startswith("tests/test_") or not path.is_file():
            stale.append(e)
        elif name and name not in _defined(path):
            stale.append(e)
    assert not stale, f"tests/slow_tests.txt names tests that do not exist (remove or fix them): {stale}"
    assert len(set(entries)) == len(entries), "an entry is listed twice"


def test_slow_entries_match_their_tests_only():
    entries = ["tests/test_a.py::test_b", "tests/test_c.py"]
    assert is_slow("tests/test_a.py::test_b", entries)
    assert is_slow("tests/test_a.py::test_b[1-x]", entries)
    assert is_slow("tests/test_c.py::TestK::test_z", entries)
    assert not is_slow("tests/test_a.py::test_bb", entries)
    assert not is_slow("tests/test_cc.py::test_x", entries)


def test_module_list_is_the_package():
    """The modules the fast tier must import are the package's files (a new module is on it)."""
    mods = headroom_modules()
    assert "headroom" in mods and "headroom.formats" in mods and "headroom.formats.hey" in mods
    assert "headroom.helptext" in mods and all(m.startswith("headroom") for m in mods)
    assert len(mods) == len(list((ROOT / "headroom").rglob("*.py")))


def test_the_tier_figures_in_the_docs_are_the_scripts_lines():
    """docs/testing.md's measured tier lines are written by scripts/tier_figures.py: each line in its
    marker block has the script's form, and the script's summary reader takes pytest's last line."""
    import re
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    import tier_figures

    doc = (ROOT / "docs" / "testing.md").read_text()
    block = doc[doc.index("<!-- tier-figures -->") : doc.index("<!-- /tier-figures -->")].splitlines()[1:]
    form = re.compile(
        r"^- (fast|full) tier, \d{4}-\d\d-\d\d \d\d:\d\d UTC: [\d,]+ passed(, [\d,]+ deselected)? in "
        r"\d+ min \d\d s \((\d+) s\) on \d+ CPUs, load average [\d.]+ before and [\d.]+ after$"
    )
    assert block and all(form.match(ln) for ln in block), block
    for ln in block:
        m = form.match(ln)
        mins, secs = re.search(r"in (\d+) min (\d\d) s", ln).groups()
        assert int(mins) * 60 + int(secs) == int(m.group(3))
    last = tier_figures.LAST.search("847 passed, 1176 deselected in 334.51s (0:05:34)")
    assert last.group(1) == "847 passed, 1176 deselected" and last.group(2) == "334.51"
