"""The profile options of ``headroom ramp`` (argparse), kept next to the code that reads them."""

from __future__ import annotations

import argparse


def add_ramp_profile_options(parser: argparse.ArgumentParser) -> None:
    """Add --pprof, --pprof-a/--pprof-b, --pprof-heap and --perf-pid to the ramp parser."""
    g = parser.add_argument_group(
        "CPU profiles per step (docs/profiles.md)",
        "  A CPU profile of the server during every step, kept in DIR/profiles/ (one file\n"
        "  per step); headroom compare then says where the CPU per request went.",
    )
    g.add_argument(
        "--pprof",
        metavar="BASE_URL",
        help="a Go server with net/http/pprof: take BASE_URL/debug/pprof/profile?seconds=N during every "
        "step (N whole seconds inside the step; steps of 1.5s or more)",
    )
    g.add_argument("--pprof-a", metavar="BASE_URL", help="--ab: the pprof of server A")
    g.add_argument("--pprof-b", metavar="BASE_URL", help="--ab: the pprof of server B")
    g.add_argument(
        "--pprof-heap",
        action="store_true",
        help="also keep an allocs profile at every step's end (step-NNN-cC.allocs.pb.gz)",
    )
    g.add_argument(
        "--perf-pid",
        metavar="PID",
        help="a server that is not Go: 'perf record -F 99 -g' on PID during every step, kept as "
        "collapsed stacks (needs perf and the right to sample PID)",
    )
