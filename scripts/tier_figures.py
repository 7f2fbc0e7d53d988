#!/usr/bin/env python3
"""Run a test tier and write what it measured into docs/testing.md (issue 49: docs figures from a script).

    python3 scripts/tier_figures.py fast     # python3 -m pytest -m "not slow"
    python3 scripts/tier_figures.py full     # python3 -m pytest (what CI runs)

Runs the tier in this checkout (``-q -p no:cacheprovider``), reads pytest's last line (passed,
failed, deselected, seconds), the machine's load average before and after and its CPU count, and
replaces the tier's line between the ``<!-- tier-figures -->`` markers of docs/testing.md with the
date, the counts and the time; a failed tier is written as failed (and the script exits 1).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "testing.md"
TIERS = {"fast": ["-m", "not slow"], "full": []}
LAST = re.compile(r"^(?:=+ )?(\d+ (?:passed|failed).*) in ([\d.]+)s")
#: the test that reads the block this script writes: left out of the run that measures it
SELF_TEST = "tests/test_tiers.py::test_the_tier_figures_in_the_docs_are_the_scripts_lines"


def measure(tier: str) -> tuple[str, dict]:
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TIERS[tier],
                          "--deselect", SELF_TEST],
                         cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    wall = time.monotonic() - t0
    last = next((m for line in reversed(out.stdout.splitlines()) if (m := LAST.search(line))), None)
    if last is None:
        sys.exit(f"tier_figures: no pytest summary line in the output:\n{out.stdout[-2000:]}")
    counts = {
        k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|deselected|skipped|errors?)", last.group(1))
    }
    return out.returncode, {"counts": counts, "seconds": float(last.group(2)), "wall": wall,
                            "load": (load0, os.getloadavg()[0]), "cpus": os.cpu_count()}  # fmt: skip


def line(tier: str, code: int, m: dict) -> str:
    c = m["counts"]
    s = int(round(m["seconds"]))
    what = f"{c.get('passed', 0):,} passed" + (f", {c['failed']:,} FAILED" if c.get("failed") else "")
    what += f", {c['deselected']:,} deselected" if c.get("deselected") else ""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (f"- {tier} tier, {when}: {what} in {s // 60} min {s % 60:02d} s ({s} s) on {m['cpus']} CPUs, "
            f"load average {m['load'][0]:.1f} before and {m['load'][1]:.1f} after{'' if code == 0 else ' (failed)'}")  # fmt: skip


def write(tier: str, text: str) -> None:
    doc = DOC.read_text()
    a, b = doc.index("<!-- tier-figures -->"), doc.index("<!-- /tier-figures -->")
    lines = [ln for ln in doc[a:b].splitlines()[1:] if ln.strip() and not ln.startswith(f"- {tier} tier,")]
    block = "\n".join(sorted([*lines, text]))
    DOC.write_text(doc[:a] + "<!-- tier-figures -->\n" + block + "\n" + doc[b:])


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in TIERS:
        sys.exit("usage: tier_figures.py fast|full")
    code, m = measure(argv[0])
    text = line(argv[0], code, m)
    write(argv[0], text)
    print(text)
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
