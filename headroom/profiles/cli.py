"""``headroom profiles RUN [RUN]``: a run's step profiles per request, or where the CPU went.

One run: every profiled step's CPU per request and its top functions (the
``profile_top`` of the JSON).  Two runs (baseline, candidate): the diff at
matched concurrency, top 10 cumulative changes.  A bad profile file is one
line naming the file and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..model import HeadroomError

EPILOG = """\
examples:
  headroom profiles runs/candidate                      # per step: CPU per request, top functions
  headroom profiles runs/base runs/candidate            # where the CPU went, per request
  headroom profiles runs/x --profiles my-profiles/      # profiles taken by hand: step3.pb.gz, c8.pprof ...
  headroom profiles runs/base runs/candidate --json -   # the JSON (profile_top or profile_diff) on stdout

exit codes: 0 done, 2 bad input (a file that is not a CPU profile, a truncated gzip,
a profile longer than its step, no profiles)
"""


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``profiles`` subcommand to the CLI's subparsers."""
    p = sub.add_parser(
        "profiles",
        help="CPU profiles per step, per request; two runs: where the CPU went",
        description=__doc__.splitlines()[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folder(s): one, or baseline and candidate")
    p.add_argument(
        "--profiles", metavar="DIR", help="one run: its step profiles are here (default RUN/profiles)"
    )
    p.add_argument("--top", type=int, default=10, help="functions shown per step or in the diff (default 10)")
    p.add_argument("--confidence", type=float, default=0.95, help="of the diff's intervals (default 0.95)")
    p.add_argument("--json", metavar="FILE", help="write the JSON here ('-': stdout)")
    p.add_argument("--debug", action="store_true", help="show a traceback on errors")
    return p


def run(args) -> int:
    """The ``profiles`` command from parsed arguments; HeadroomError for bad input."""
    from .diff import diff_profiles, rows_json
    from .steps import load
    from .text import profile_diff_text, profile_set_text

    if len(args.runs) > 2:
        raise HeadroomError(f"give one run or two (baseline, candidate), not {len(args.runs)}")
    if args.profiles and len(args.runs) != 1:
        raise HeadroomError("--profiles is for one run")
    sets = [load(r, args.profiles) for r in args.runs]
    for ps in sets:
        if not ps.steps:
            raise HeadroomError(f"{ps.folder}: no step profiles (expected profiles/step-NNN-cC.pb.gz)")
    if len(sets) == 1:
        text, doc = profile_set_text(sets[0], min(args.top, 5)), sets[0].to_json(args.top)
    else:
        d = diff_profiles(sets[0], sets[1], confidence=args.confidence)
        if d is None:
            raise HeadroomError("the two runs share no profiled concurrency level")
        text = profile_diff_text(d, args.top)
        doc = {
            "schema": 1,
            "kind": "profile_diff",
            "profile_diff": rows_json(d.cum),
            "profile_diff_flat": rows_json(d.flat),
            "profile_diff_info": d.to_json(),
        }
    if args.json != "-":
        sys.stdout.write(text)
    if args.json:
        out = json.dumps(doc, indent=1, allow_nan=False, default=float)
        if args.json == "-":
            print(out)
        else:
            with open(args.json, "w") as f:
                f.write(out + "\n")
    for ps in sets:
        for w in ps.warnings:
            print(f"headroom: warning: {w}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``headroom profiles`` on its own (tests, ``python -m headroom.profiles.cli``)."""
    parser = argparse.ArgumentParser(prog="headroom")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["profiles", *(sys.argv[1:] if argv is None else argv)])
    try:
        return run(args)
    except HeadroomError as e:
        if args.debug:
            raise
        print(f"headroom: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
