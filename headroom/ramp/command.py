"""The ``headroom ramp`` command line: options, help, and one run or an A/B job."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..model import HeadroomError
from ..profiles.options import add_ramp_profile_options
from .engines import ENGINES
from .recorder import Recorder, check_url, prepare_output

EPILOG = """\
examples:
  headroom ramp http://127.0.0.1:8080/ -o runs/baseline --cpu-pid $(cat /run/nginx.pid)
  headroom ramp http://127.0.0.1:8080/ -o runs/candidate --concurrency 1:40:3 --step-duration 3s \\
      --cpu-pid 1234 --label v1.2-rc1
  headroom ramp http://127.0.0.1:8080/ -o runs/n --concurrency 1:9:4 --requests-per-step 20000
  headroom ramp http://127.0.0.1:8080/ -o runs/open --rate 1000:8000:1000 --engine vegeta
  headroom ramp http://127.0.0.1:8080/ -o runs/locust --engine locust --locustfile locustfile.py \\
      --concurrency 1,2,4,8 --step-duration 10s --cpu-pid 1234
  taskset -c 0 headroom ramp http://127.0.0.1:8080/ -o runs/pinned --cpu-pid 1234   # generator on CPU 0
  headroom compare runs/baseline runs/candidate
  # a CPU profile of a Go server at every step (net/http/pprof), compared per request
  headroom ramp http://127.0.0.1:8080/ -o runs/prof --cpu-pid 1234 --pprof http://127.0.0.1:8080

  # interleaved A/B: baseline and candidate servers both up, recorded A B B A A B B A
  headroom ramp --ab http://127.0.0.1:8080/ http://127.0.0.1:8090/ --repeats 4 -o runs/ab \\
      --cpu-pid-a 1234 --cpu-pid-b 5678 --label-a v1.4 --label-b v1.5-rc1
  headroom compare --baseline runs/ab/v1.4-* --candidate runs/ab/v1.5-rc1-*
  # A and B alternating at every concurrency level of one recording (the strongest design on a
  # shared machine: both sides of a level see the same host); compare pairs them level by level
  headroom ramp --ab http://127.0.0.1:8080/ http://127.0.0.1:8090/ --interleave steps -o runs/il \\
      --cpu-pid-a 1234 --cpu-pid-b 5678
  headroom compare runs/il/a-01 runs/il/b-01
  # search for the load where p99 breaks 20 ms instead of a fixed ramp (2 s probes; stops when its interval
  # is within 5 %, when more probes would not get it there in time, or at half a dense ramp's time)
  headroom ramp http://127.0.0.1:8080/ -o runs/find --find 'p99<=20ms' --cpu-pid 1234
  headroom ramp http://127.0.0.1:8080/ -o runs/find --find 'p99<=20ms' --concurrency 1:200 --precision 10% --budget 2m
  headroom ramp http://127.0.0.1:8080/ -o runs/find-open --find 'p99<=20ms' --rate 100:20000 --engine vegeta
  # both builds at the same loads, A and B alternating at every probe; the change in capacity at the end
  headroom ramp --ab http://127.0.0.1:8080/ http://127.0.0.1:8090/ --interleave steps --find 'p99<=20ms' \\
      -o runs/ab-find --cpu-pid-a 1234 --cpu-pid-b 5678
  # ... or keep recording ABBA blocks until compare decides (at most 6 runs a side)
  headroom ramp --ab http://127.0.0.1:8080/ http://127.0.0.1:8090/ --until-decided --max-repeats 6 \\
      -o runs/seq --cpu-pid-a 1234 --cpu-pid-b 5678

The ramp: --concurrency LOW:HIGH:STEP runs one closed-loop step per level
(1:40:3 is 1, 4, 7 ... 40: 14 steps), each for --step-duration (or for
--requests-per-step requests).  --rate LOW:HIGH:STEP runs an open-loop ramp at
fixed total rates instead (vegeta or oha).  Steps run back to back.

CPU: --cpu-pid samples those processes and all their children once a second
and at every step's launch and end (step_cpu_s in metadata.yml: each step's
exact CPU seconds, so its CPU per request is not smeared across steps)
(percent of all the machine's cores; give the server's master PID).  Without it the whole
machine is sampled, one column per CPU.  The generator's own CPU is recorded
too, and a warning says when it, not the server, set the ceiling.

Foreign load: every ramp also records, once a second, the machine's CPU used
by processes other than the sampled server(s), the --exclude-pid processes,
the generator and headroom (percent of the whole machine, all cores = 100) and the kernel's steal time,
in hostCpuStats.csv and foreign_cpu in metadata.yml; a warning says when
other processes used more than 10 % of the machine during the load.

Output: DIR/perfResults.csv (a section per step: start-time,response-time,
status-code), cpuStats.csv, generatorCpuStats.csv, hostCpuStats.csv,
metadata.yml.  Read it with headroom summary DIR, compare, report.

A/B (--ab URL_A URL_B): one job records both servers alternately in ABBA
order (A B B A A B B A ...), so that drift of the machine falls on both sides:
DIR/a-01, DIR/b-01, DIR/b-02, DIR/a-02 ... (names from --label-a/--label-b),
each a normal run folder; DIR/ab.yml lists the order.  --repeats N runs per
side (default {repeats}).  --cpu-pid-a/--cpu-pid-b sample each side's server; the
other side's server is never counted as foreign load.  At the end it prints
the headroom compare command for the job.

Interleaved steps (--interleave steps): one recording drives A and B
alternately within every load level (A then B at the first level, B then A
at the next, ...), so the two steps of a level are seconds apart and share
the machine's state; a-01 and b-01 are written as normal run folders with
the design in metadata (ab.design), and headroom compare uses the level
pairs as its replicates.  --repeats N records N such recordings (a-01/b-01,
a-02/b-02, ..., each starting with the other side); --until-decided looks
after every recording.  A recording stops at the first level where either
side stops; the other side keeps the levels it completed.

Sequential (--until-decided): after every ABBA block (2 runs a side), or
after every recording with --interleave steps (L = --max-repeats looks), headroom
compares what it has and stops as soon as the verdict is not inconclusive, or
at --max-repeats runs a side.  Every look uses the confidence
1 - (1 - C) / L (Bonferroni over the L = ceil(max-repeats / 2) possible
looks; C = --confidence, {confidence:g}), so repeated looking keeps the family error
at 1 - C; ab.yml records each look.  Exit code: the compare exit code of the
last look (0 improved / no change, 1 regressed, 3 inconclusive).

Search (--find OBJECTIVE): probes from the range's low end (--concurrency LOW:HIGH,
default 1:1000; --rate LOW:HIGH for an open loop), doubling the load until the
fitted percentile breaks the objective, then bisecting, then repeating the loads
that decide the interval's wider end, until the throughput at the objective's 95 %
interval lies within --precision of it, or more probes could not reach that
precision within the budget (it then says the precision reached), or another
probe would pass --budget (default auto: half the time a dense ramp from the
range's low end to past the first estimate would take at the same step length,
at most 5 min).  One run folder, steps in probe order; metadata.yml's search: block
holds the probes, the estimate, the precision reached and why it stopped.  A first
probe that already breaks the objective: exit 2.

Ctrl-C stops after the current step (twice: at once, dropping that step) and
leaves a valid run of the completed steps marked 'interrupted: true'.

exit codes: 0 all steps recorded, 1 stopped early (completed steps kept),
2 bad usage or missing generator, 130 interrupted (an A/B job stops after the
running step; completed runs are kept); --until-decided: 0/1/3 as compare
"""


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``ramp`` subcommand to the CLI's subparsers."""
    from .ab import DEFAULT_REPEATS, _confidence

    p = sub.add_parser(
        "ramp",
        help="record a ramp run: drive hey (or vegeta, oha, Locust) step by step, sample the server's CPU",
        description="Record a load-test ramp against URL: one load-generator run per step (closed\n"
        "loop at increasing concurrency, or open loop at increasing rate), the server's CPU\n"
        "sampled with psutil, written as a run folder that headroom summary/compare/report read.",
        epilog=EPILOG.format(repeats=DEFAULT_REPEATS, confidence=_confidence(None)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("url", metavar="URL", nargs="?", help="http:// or https:// URL to load (not with --ab)")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        help="run folder to write (new or empty); --ab: job folder",
    )
    p.add_argument(
        "--concurrency",
        metavar="LOW:HIGH:STEP",
        help="closed-loop ramp: concurrency LOW, LOW+STEP, ... up to HIGH (default: 1:40:3)",
    )
    p.add_argument(
        "--rate",
        metavar="LOW:HIGH:STEP",
        help="open-loop ramp instead: fixed total rates in req/s, e.g. 1000:8000:1000 (vegeta or oha)",
    )
    p.add_argument(
        "--step-duration",
        metavar="DUR",
        help="length of every step (default: 3s; --find: 2s a probe, its growth probes half as long)",
    )
    p.add_argument(
        "--requests-per-step",
        metavar="N",
        help="closed loop: send N requests per step instead of running for a duration (hey, oha)",
    )
    p.add_argument(
        "--cpu-pid",
        action="append",
        default=[],
        metavar="PID",
        help="sample this process and its children (repeat, or PID,PID; default: the whole machine, per CPU)",
    )
    p.add_argument(
        "--exclude-pid",
        action="append",
        default=[],
        metavar="PID",
        help="a process (and its children) of the system under test that is not the server, e.g. a database "
        "both sides share: its CPU is not counted as foreign load (repeatable, or PID,PID; with --ab too; "
        "a side's own backend belongs in --cpu-pid-a/-b)",
    )
    p.add_argument("--cpu-interval", default="1s", metavar="DUR", help="CPU sampling interval (default: 1s)")
    p.add_argument(
        "--label", metavar="TEXT", help="run label, written as sha and label (default: DIR's name)"
    )
    p.add_argument("--description", metavar="TEXT", help="free text for metadata.yml")
    _add_engine_options(p)
    p.add_argument("--gzip", action="store_true", help="write perfResults.csv.gz (gzip -9) at the end")
    p.add_argument("--force", action="store_true", help="write into DIR even if it is not empty")
    p.add_argument(
        "--progress", action="store_true", help="print a line per step even when not on a terminal"
    )
    p.add_argument("--debug", action="store_true", help="show a traceback on errors")
    _add_ab_options(p)
    _add_find_options(p)
    add_ramp_profile_options(p)
    from ..cli_args import telemetry_options

    telemetry_options(p)
    return p


def _add_engine_options(p: argparse.ArgumentParser) -> None:
    """The load generator and its limits."""
    p.add_argument(
        "--engine",
        choices=ENGINES,
        help="load generator (default: hey; with --rate: vegeta, else oha); locust runs your --locustfile",
    )
    p.add_argument(
        "--locustfile",
        metavar="FILE",
        help="--engine locust: your locustfile, run at every step with -u LEVEL (its users make the "
        "requests; headroom's listener records them); --engine-arg=--processes=2 for a master and workers",
    )
    p.add_argument(
        "--engine-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra option for the generator, repeatable; use the = form: --engine-arg=-disable-keepalive",
    )
    p.add_argument(
        "--timeout", default="10s", metavar="DUR", help="per-request timeout of the generator (default: 10s)"
    )
    p.add_argument(
        "--step-timeout",
        metavar="DUR",
        help="kill a generator that runs longer than this (default: step duration + request timeout "
        "+ 10s; 300s with --requests-per-step)",
    )
    p.add_argument(
        "--max-workers",
        metavar="N",
        help="open loop: cap on the generator's workers/connections (default: vegeta unlimited, oha 200)",
    )


def _add_find_options(p: argparse.ArgumentParser) -> None:
    from .search import DEFAULT_BUDGET, DEFAULT_PRECISION, DEFAULT_RANGE

    g = p.add_argument_group("searching for the capacity at an objective")
    g.add_argument(
        "--find",
        metavar="OBJECTIVE",
        help="search for the load at which OBJECTIVE (p99<=5ms) breaks instead of a fixed ramp: double the "
        "load until it breaks, bisect, repeat the probes near the crossing; --concurrency LOW:HIGH (default "
        f"{DEFAULT_RANGE}) or --rate LOW:HIGH is the range searched",
    )
    g.add_argument(
        "--precision",
        metavar="P",
        help=f"--find: stop when the capacity's 95 %% interval lies within +-P of it (default {DEFAULT_PRECISION:g}, "
        "or 5%%)",
    )
    g.add_argument(
        "--budget",
        metavar="DUR",
        help=f"--find: stop before a probe that would end after DUR (default {DEFAULT_BUDGET}: half the time of a "
        "dense ramp to past the first estimate, at most 5m)",
    )


def _add_ab_options(p: argparse.ArgumentParser) -> None:
    from .ab import DEFAULT_MAX_REPEATS, DEFAULT_PAIRS_PER_LEVEL, _confidence

    g = p.add_argument_group("interleaved A/B recording")
    g.add_argument(
        "--ab",
        nargs=2,
        metavar=("URL_A", "URL_B"),
        help="record baseline A and candidate B alternately (ABBA)",
    )
    g.add_argument(
        "--interleave",
        choices=("runs", "steps"),
        default=None,
        help="--ab: alternate whole runs in ABBA order (runs, the default) or A and B within every "
        "load level of one recording (steps: AB at one level, BA at the next; a-01 and b-01 are one recording)",
    )
    g.add_argument(
        "--pairs-per-level",
        metavar="N",
        help="--interleave steps: A/B pairs at every level, ABBA at one level and BAAB at the next "
        f"(default: {DEFAULT_PAIRS_PER_LEVEL}: the pairs of one level measure the noise apart from a change "
        "that varies with load; 1 halves the time)",
    )
    g.add_argument(
        "--repeats",
        metavar="N",
        help="--ab: runs per side (default: 2), or recordings with --interleave steps (default: 1)",
    )
    g.add_argument(
        "--cpu-pid-a",
        action="append",
        default=[],
        metavar="PID",
        help="--ab: A's server process (repeatable)",
    )
    g.add_argument(
        "--cpu-pid-b",
        action="append",
        default=[],
        metavar="PID",
        help="--ab: B's server process (repeatable)",
    )
    g.add_argument("--label-a", metavar="TEXT", help="--ab: A's label and folder prefix (default: a)")
    g.add_argument("--label-b", metavar="TEXT", help="--ab: B's label and folder prefix (default: b)")
    g.add_argument(
        "--pause",
        default="2s",
        metavar="DUR",
        help="--ab: idle time between runs or recordings (default: 2s)",
    )
    g.add_argument(
        "--until-decided",
        action="store_true",
        help="--ab: after each ABBA block (--interleave steps: each recording) compare A with B; stop when "
        "decided or at --max-repeats",
    )
    g.add_argument(
        "--max-repeats",
        metavar="N",
        help="--until-decided: at most N runs per side, or N recordings with --interleave steps "
        f"(default: {DEFAULT_MAX_REPEATS})",
    )
    g.add_argument(
        "--confidence",
        metavar="C",
        help=f"--until-decided: family confidence over all looks (default: {_confidence(None):g}; each look "
        "uses 1-(1-C)/looks)",
    )


def run(args) -> int:
    """Run ``headroom ramp`` from parsed arguments; returns the exit code."""
    from .search import find_options

    find = find_options(args)
    if args.ab:
        if find is not None:
            from .search_ab import run_ab_find

            return run_ab_find(args, find)
        from .ab import run_ab

        return run_ab(args)
    ab_only = [
        opt
        for opt, v in (
            ("--repeats", args.repeats),
            ("--interleave", args.interleave),
            ("--pairs-per-level", args.pairs_per_level),
            ("--cpu-pid-a", args.cpu_pid_a),
            ("--cpu-pid-b", args.cpu_pid_b),
            ("--label-a", args.label_a),
            ("--label-b", args.label_b),
            ("--until-decided", args.until_decided),
            ("--max-repeats", args.max_repeats),
            ("--confidence", args.confidence),
        )
        if v
    ]
    if ab_only:
        raise HeadroomError(f"{ab_only[0]} is for an A/B job: give --ab URL_A URL_B")
    if args.url is None:
        raise HeadroomError("give the URL to load (or --ab URL_A URL_B)")
    if find is not None:
        from .search import run_find

        return run_find(args, find)
    check_url(args.url)
    out = Path(args.output)
    rec = Recorder(args, out)  # validates every option and finds the generator
    if out.is_dir() and any(out.iterdir()) and not args.force:
        raise HeadroomError(f"{out}: folder exists and is not empty (use --force to write into it)")
    if out.exists() and not out.is_dir():
        raise HeadroomError(f"{out}: exists and is not a folder")
    rec.setup()
    prepare_output(out, args.force)
    return rec.record()
