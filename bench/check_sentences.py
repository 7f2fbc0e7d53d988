"""Every sentence of compare's output on every held-out r7 recording, judged every way docs/ci.md shows.

tests/test_verdict_sentences.py reads five of the r7 sets (recordings 01-04) in the suite; this
reads all of them: every recording of every ``r7-*`` set of data/calibration/interleaved, the plain
compare with the server's CPU and the CI recipe (--noise-from two other A/A recordings of the same
server and load, objective p99<=20ms, 10 %) with and without it, and prints every sentence the
checker finds against its own numbers (the verdict's quoted change the other way or under the
threshold, a change beside two values of another ratio, "Next:" advising what the recording is).

Usage: python3 bench/check_sentences.py [SET ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]

from test_verdict_sentences import IL, _text, check  # noqa: E402


def aa_of(name: str) -> str:
    server = "nginx" if name.startswith("r7-nginx") else "go"
    return f"r7-{server}-aa-{name.rsplit('-', 1)[1]}"


def main(argv: list[str]) -> int:
    sets = argv or sorted(p.name for p in IL.glob("r7-*") if p.is_dir())
    read = bad = 0
    for name in sets:
        n = len(list((IL / name).glob("a-*")))
        for k in range(1, n + 1):
            for recipe, cpu in ((False, True), (True, True), (True, False)):
                text, c = _text(name, aa_of(name), k, recipe, cpu)
                problems = check(text, c)
                read += 1
                bad += bool(problems)
                for p in problems:
                    print(f"{name}/{k:02d} recipe={recipe} cpu={cpu}: {p}")
        print(f"{name}: {n} recordings x 3 ways read", file=sys.stderr, flush=True)
    print(f"{read} comparisons read, {bad} with a sentence against its numbers")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
