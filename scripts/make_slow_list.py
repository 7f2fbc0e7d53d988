"""Write tests/slow_tests.txt from a full run's durations (the fast tier is what it leaves out).

    python3 -m pytest -q -p no:cacheprovider --durations=0 > /tmp/durations.txt   # the full suite
    python3 -m pytest -q -p no:cacheprovider -m "not slow" --durations=0 > /tmp/fast.txt  # optional
    python3 scripts/make_slow_list.py /tmp/durations.txt [/tmp/fast.txt] [--seconds 1.5] [--keep ...]

A test function is slow when its setup + call + teardown, summed over its
parameters, took ``--seconds`` or more in any of the runs given (a fast-tier
run finds tests that were quick in the full run only because a slow test
before them filled a cache); a test that takes a module- or
session-scoped fixture of its file that a slow test also takes is slow too
(otherwise the fixture's cost moves to it in the fast tier).  ``--keep``
keeps a test in the fast tier anyway (the only test of a module).
"""

from __future__ import annotations

import argparse
import ast
import collections
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "slow_tests.txt"
HEADER = """\
# Tests the fast tier (python3 -m pytest -m "not slow") leaves out; tests/conftest.py marks them slow.
# Made by scripts/make_slow_list.py from --durations=0 of a full run and of a fast-tier run on the
# 2-core shared machine: a test function taking {seconds:g} s or more in either (setup+call+teardown over its parameters), and every test
# sharing a module/session fixture with one; kept fast: {keep}.
# One entry a line: tests/file.py::test_name (all its parameters); the number is its seconds then.
# tests/test_tiers.py::test_slow_list_is_current fails when an entry no longer exists.
"""


def durations(paths: list[Path]) -> collections.Counter:
    """Seconds per test function (summed over parameters), the largest of the runs."""
    out: collections.Counter = collections.Counter()
    for path in paths:
        per: collections.Counter = collections.Counter()
        for line in path.read_text().splitlines():
            m = re.match(r"([\d.]+)s (setup|call|teardown)\s+(\S+)", line)
            if m:
                per[m.group(3).split("[")[0]] += float(m.group(1))
        for t, s in per.items():
            out[t] = max(out[t], s)
    return out


def shared_fixtures(file: Path) -> dict[str, set[str]]:
    """``{test: module/session fixtures of the file it takes}``."""
    tree = ast.parse(file.read_text(encoding="utf-8"))
    wide = {
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef)
        and any(
            "fixture" in ast.unparse(d) and re.search(r"module|session", ast.unparse(d))
            for d in n.decorator_list
        )
    }
    return {
        n.name: {a.arg for a in n.args.args} & wide
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
    }


def slow_tests(per: collections.Counter, seconds: float, keep: set[str]) -> list[str]:
    slow = {t for t, s in per.items() if s >= seconds}
    for file in sorted((ROOT / "tests").glob("test_*.py")):
        rel = f"tests/{file.name}"
        uses = shared_fixtures(file)
        heavy = set().union(*(uses.get(t.split("::", 1)[1], set()) for t in slow if t.startswith(rel + "::")))
        slow |= {f"{rel}::{t}" for t, fx in uses.items() if fx & heavy}
    return sorted(slow - keep)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("durations", type=Path, nargs="+")
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--keep", nargs="*", default=[])
    a = ap.parse_args()
    per = durations(a.durations)
    slow = slow_tests(per, a.seconds, set(a.keep))
    text = HEADER.format(seconds=a.seconds, keep=", ".join(a.keep) or "none")
    OUT.write_text(text + "".join(f"{t}  # {per.get(t, 0.0):.1f}\n" for t in slow))
    rest = sum(v for t, v in per.items() if t not in slow)
    print(f"{len(slow)} slow tests; the rest took {rest:.0f} s (the larger of the runs)")


if __name__ == "__main__":
    main()
