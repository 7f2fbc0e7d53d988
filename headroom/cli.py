"""Command-line interface: argument parsing, printing, exit codes.

Exit codes: 0 success, 2 usage or input error.
"""

from __future__ import annotations

import argparse
import sys

from ._version import __version__
from .cli_args import emit, telemetry_options, telemetry_sources
from .cli_args import fraction as _fraction
from .cli_args import objective as _objective
from .cli_args import positive_float as _positive_float
from .cli_args import positive_int as _positive_int
from .model import HeadroomError, parse_duration
from .options import ReadOptions, VerdictOptions

EPILOG_SUMMARY = """\
examples:
  headroom summary data/runs/nginx-keepalive
  headroom summary data/runs/nginx-keepalive --objective 'p99<=5ms' --json out.json
  headroom summary runs/old_perfResults.csv --bucket 500ms --bin-width 1000
  headroom summary hey.csv --objective 'p99.9<=50ms' --current-load 8000 --target-load 50000
  headroom summary data/endpoints/ep-go-cart2x-45/b-01 --endpoints --objective 'p99<=20ms'

exit codes: 0 success, 2 bad usage or bad input (one line on stderr naming the file and line)
"""

EPILOG_REPORT = """\
examples:
  headroom report data/runs/nginx-keepalive -o report.html
  headroom report data/runs/nginx-no-keepalive data/runs/nginx-keepalive -o report.html
  headroom report old/ new/ -o release-1.2.html --objective 'p99<=20ms' --title 'Release 1.2'
  headroom report runs/il/a-01 runs/il/b-01 -o r.html --exit-code   # gate and attach in one step
  headroom report --baseline ab/a-01 ab/a-02 --candidate ab/b-01 ab/b-02 --noise-from aa/a-01 aa/b-01 -o r.html
  headroom report run/ -o r.html --keep-notebook r.ipynb   # also keep the executed notebook
  headroom report old/ new/ -o r.html --figure-format svg --log-latency   # sharp figures, whole tail

One run gives the single-run report; two (or --baseline/--candidate with one or more runs each)
give baseline against candidate, with the verdict `headroom compare` gives for the same runs and
options (--objective, --threshold, --confidence, --error-threshold, --noise-from). The figures and
tables show the first run of each side. The HTML is one self-contained file: figures embedded (PNG,
or SVG with --figure-format svg), no network resources, no JavaScript. The output paths are checked
before the notebook runs.

exit codes: 0 report written, 1 a report cell failed (its error is printed; no HTML is written),
2 bad usage or bad input.
With --exit-code (comparison only), the verdict's exit code once the report is written, as
`headroom compare` gives it: 0 improved, no change or no regression, 1 regressed, 3 inconclusive;
2 bad usage, bad input, or a report cell that failed (no HTML is written)
"""


def _timestamp(text: str) -> int:
    """An RFC 3339 time as UTC nanoseconds."""
    import pyarrow as pa

    try:
        arr = pa.array([text.strip()]).cast(pa.timestamp("ns", tz="UTC"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise argparse.ArgumentTypeError(
            f"expected an RFC 3339 time such as 2024-01-02T03:04:00Z, got {text!r}"
        ) from None
    return int(arr.cast(pa.int64())[0].as_py())


#: an error message is one line of at most this many characters: input quoted in it (a 1 MB header) is cut
MESSAGE_MAX = 400


def one_line(message: str, limit: int = MESSAGE_MAX) -> str:
    """An error message as one bounded line: newlines as spaces, the middle cut with '...' when long
    (the start names the file and line, the end often says what was expected)."""
    text = " ".join(message.split("\n"))
    if len(text) <= limit:
        return text
    keep = limit - 5
    return f"{text[: keep * 3 // 4]} ... {text[-(keep - keep * 3 // 4) :]}"


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except HeadroomError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


EPILOG_COMPARE_EXAMPLES = """\
examples:
  headroom compare data/runs/nginx-no-keepalive data/runs/nginx-keepalive
  headroom compare old/ new/ --objective 'p99<=20ms' --threshold 5% --json verdict.json
  headroom compare old/ new/ --noise-from aa/run-*        # noise learned from A/A runs
  headroom compare old/ new/ --noise-from history.json    # ... or from 'headroom history --json'
  headroom compare --baseline a-01/ a-02/ a-03/ --candidate b-01/ b-02/ b-03/   # interleaved repeats
  headroom compare data/endpoints/ep-go-cart2x-45/a-01 data/endpoints/ep-go-cart2x-45/b-01   # per endpoint
  headroom ramp --ab URL_A URL_B --repeats 3 -o ab/ ...   # records such repeats (see ramp --help)
"""

EPILOG_COMPARE_EXIT = """\
exit codes:
  0  improved, no change, or no regression (primary metric shown within the threshold)
  1  regressed (some metric clearly worse by at least the threshold, or more errors)
  2  bad usage or bad input
  3  inconclusive (the primary metric could still be worse by the threshold, or nothing judged)
"""


def _epilog_compare() -> str:
    """compare's epilog; every number in it comes from the code (headroom.helptext)."""
    from . import helptext

    d = helptext.compare_defaults()
    how = helptext.wrap(
        "How the verdict is reached: steps are paired by concurrency (the matched condition of a "
        "ramp). Each run gives one value per metric: the mean log value over the matched steps "
        "(plateau throughput over the saturated steps, p50, p99 or the objective's percentile, "
        "CPU per request over all). The change is candidate / baseline of those values, tested "
        "against the between-run noise of that metric (learned with --noise-from, pooled with the "
        f"spread between repeat runs, else {helptext.noise_clause()}), with Student's t. Interleaved "
        "recordings (ramp --ab --interleave steps) are judged level by level instead: each metric's "
        "paired log ratios fitted as a line in log load, tested for no change at any level against "
        "the noise of pairs at the same level and of neighbouring levels (docs/ci.md). "
        f"{helptext.holm_sentences()} A metric is worse/better only when Holm finds a change AND it "
        f"is at least the threshold (default {helptext.pct(d['threshold'])}). With nothing worse or "
        'better, the gate passes ("no regression", exit 0) when the primary metric (CPU per request '
        "if measured, else plateau throughput) is shown not to be worse by the threshold or more "
        f"(one-sided {helptext.pct(d['confidence'])}); the output gives every metric's smallest "
        "detectable change and, when inconclusive, how many runs per side would decide."
    )
    return f"{EPILOG_COMPARE_EXAMPLES}\n{how}\n\n{EPILOG_COMPARE_EXIT}"


def _objective_option(p: argparse.ArgumentParser, extra: str = "") -> None:
    p.add_argument(
        "--objective",
        type=_objective,
        metavar="OBJ",
        help="latency objective, e.g. 'p99<=20ms' (default: none; the knee is reported)" + extra,
    )


def _bucket_options(p: argparse.ArgumentParser) -> None:
    """The time-bucket and throughput-bin view (headroom plot, bins table); capacity does not use it."""
    p.add_argument(
        "--bucket",
        type=_duration,
        default=1.0,
        metavar="DUR",
        help="time bucket per-second throughput is counted in, for the bins and the headroom plot (default: 1s)",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--bins", type=_positive_int, metavar="N", help="number of equal throughput bins")
    g.add_argument(
        "--bin-width",
        type=_positive_float,
        metavar="RPS",
        help="width of the throughput bins in req/s (default: round numbers, about 10 bins)",
    )


def _format_names() -> str:
    from .formats import format_help

    return format_help()


def _input_options(p: argparse.ArgumentParser) -> None:
    """How to read the input files, and --debug."""
    p.add_argument(
        "--cpu-cores",
        type=_positive_float,
        metavar="N",
        help="cores that 100%% in a single-column cpuStats.csv stands for (default: metadata cpu_cores, else 1)",
    )
    p.add_argument(
        "--hey-start",
        type=_timestamp,
        metavar="TIME",
        help="wall-clock start of a hey run with relative offsets, e.g. 2024-01-02T03:04:00Z "
        "(default: the file's modification time minus the run's length)",
    )
    p.add_argument(
        "--skip-bad-rows",
        action="store_true",
        help="drop unparsable request rows (counted in a warning naming the first) instead of failing",
    )
    p.add_argument(
        "--format",
        metavar="NAME",
        help=lambda: (
            "input format, instead of detecting it from the content: "
            + _format_names()
            + " (docs/formats.md)"
        ),
    )
    p.add_argument(
        "--steps",
        metavar="DURATION|T1,T2,...",
        help="cut a run without steps of its own into steps of DURATION (10s) or at times in seconds "
        "since its first request (0,10,20)",
    )
    p.add_argument(
        "--concurrency",
        metavar="LOW:HIGH:STEP|C1,C2,...",
        help="the concurrency of every step when the file does not say (a hey ramp, --steps): "
        "1:40:3 is 1, 4, ..., 40; or a list 1,2,4,8; one level per step",
    )
    p.add_argument(
        "--name",
        dest="request_name",
        metavar="NAME",
        help="only the requests of this name, e.g. --name /api/cart (an endpoint: Locust's name, k6's name "
        "tag else url, JMeter's label, the request-name of headroom ramp --engine locust)",
    )
    p.add_argument("--debug", action="store_true", help="show a traceback on errors")
    telemetry_options(p)


def _analysis_options(p: argparse.ArgumentParser) -> None:
    """Options of the commands that analyse one run or two: objective, buckets and bins, input."""
    _objective_option(p)
    _bucket_options(p)
    _input_options(p)


def _cpu_target(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cpu-target",
        type=_positive_float,
        default=70.0,
        metavar="PCT",
        help="CPU busy %% at which an instance is full (default: 70)",
    )


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose description, epilog and option help may be callables, made into text
    only when help is printed: building them imports most of headroom (the formats, the verdict's
    defaults and weights), which a command that runs does not need."""

    def resolve(self) -> _Parser:
        """Make every callable description, epilog and option help its text."""
        for name in ("description", "epilog"):
            if callable(getattr(self, name)):
                setattr(self, name, getattr(self, name)())
        for action in self._actions:
            if callable(action.help):
                action.help = action.help()
        return self

    def format_help(self) -> str:
        return self.resolve().format_help_text()

    def format_help_text(self) -> str:
        return super().format_help()

    def error(self, message: str):
        """One line and exit 2, not the whole usage: the command and what is wrong, and where the
        usage is (argparse prints its 20-line usage first)."""
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see '{self.prog} --help')\n")


def _add_ramp(sub) -> None:
    from .ramp import add_parser

    add_parser(sub)


def _add_history(sub) -> None:
    from .cli_history import add_parser

    add_parser(sub)


def _add_profiles(sub) -> None:
    from .profiles.cli import add_parser

    add_parser(sub)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line; ``only``: build just that subcommand (what ``main`` runs needs no other)."""
    from . import helptext

    p = _Parser(
        prog="headroom",
        description=lambda: (
            "Capacity and latency-vs-throughput analysis of load-test ramps "
            f"(the output of {helptext.tools_text()})."
        ),
    )
    p.add_argument("--version", action="version", version=f"headroom {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, add in _SUBCOMMANDS.items():
        if only in (None, name):
            add(sub)
    if only is None:  # the whole command line, as its help and the tests read it: every text made
        p.resolve()
        for parser in sub.choices.values():
            parser.resolve()
    return p


def _summary_parser(sub) -> None:
    s = sub.add_parser(
        "summary",
        help="steps, throughput bins with latency percentiles and CPU, capacity numbers of one run",
        description="Read one run and print its per-step table, its throughput bins (latency "
        "percentiles, CPU) and its capacity from the steps: the USL model's capacity and knee, "
        "plateau throughput, throughput at the latency objective and at the CPU target.",
        epilog=EPILOG_SUMMARY,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "run",
        metavar="RUN",
        nargs="+",
        help="run folder, perfResults.csv[.gz] file, old_ prefix, or request file of any format; "
        "several files are one run (load generators of one ramp when their times overlap, else steps)",
    )
    _analysis_options(s)
    s.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="reduce the run's files (or sections) on this Dask scheduler (needs [dask]); same result",
    )
    _cpu_target(s)
    s.add_argument(
        "--current-load",
        type=_positive_float,
        metavar="RPS",
        help="current production load, for the headroom figure",
    )
    s.add_argument(
        "--target-load", type=_positive_float, metavar="RPS", help="load to size the number of instances for"
    )
    s.add_argument("--label", help="label for the run (default: metadata sha, else folder name)")
    s.add_argument(
        "--endpoints",
        action="store_true",
        help="every request name (endpoint) step by step: requests, share, errors, req/s, exact "
        "percentiles (runs of Locust, k6, JMeter and headroom ramp --engine locust; the JSON has them always)",
    )
    s.add_argument("--json", metavar="FILE", help="also write the summary as JSON (- for stdout)")


def _report_parser(sub) -> None:
    r = sub.add_parser(
        "report",
        help="one self-contained HTML report of one run, or of a baseline against a candidate",
        description="Execute the report notebook (papermill) for one run or two and export "
        "it as one self-contained HTML file (nbconvert, code hidden). A comparison report states "
        "the verdict and exit code `headroom compare` gives for the same runs and options.",
        epilog=EPILOG_REPORT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument(
        "runs", nargs="*", metavar="RUN", help="one run, or BASELINE CANDIDATE (or --baseline/--candidate)"
    )
    _sides_options(r)
    r.add_argument("-o", "--output", required=True, metavar="FILE", help="the HTML file to write")
    _analysis_options(r)
    _cpu_target(r)
    _verdict_options(r)
    r.add_argument(
        "--exit-code",
        action="store_true",
        help="exit with the verdict's exit code (0, 1 or 3, as compare) once the report is written: "
        "one CI step gates and attaches",
    )
    r.add_argument("--title", default="", help="report title (default: from the run labels)")
    r.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="TEXT",
        help="label for a run, in order (repeat for the second run)",
    )
    r.add_argument("--keep-notebook", metavar="FILE", help="also write the executed notebook")
    r.add_argument(
        "--figure-format",
        choices=("png", "svg"),
        default="png",
        help="image format of the figures (default: png); svg is sharp at any zoom, inlined in the one HTML file",
    )
    r.add_argument(
        "--log-latency",
        action="store_true",
        help="logarithmic latency axes: long tails shown instead of cut at 1.2 x the highest p99",
    )


def _sides_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--baseline",
        nargs="+",
        action="extend",
        default=[],
        metavar="RUN",
        help="baseline run(s): repeats of one build (the flag may be repeated: the runs add up)",
    )
    p.add_argument(
        "--candidate", nargs="+", action="extend", default=[], metavar="RUN", help="candidate run(s)"
    )


def _verdict_options(p: argparse.ArgumentParser) -> None:
    """What the verdict is computed with (headroom.options.VerdictOptions): compare and report alike."""
    from . import helptext

    # compare_runs' own defaults (a test holds them equal), without importing the verdict's machinery
    o = VerdictOptions()
    d = {"threshold": o.threshold, "confidence": o.confidence, "error_threshold": o.error_threshold}
    p.add_argument(
        "--threshold",
        type=_fraction,
        default=d["threshold"],
        metavar="PCT",
        help="smallest change worth calling " + helptext.default_help(d["threshold"]),
    )
    p.add_argument(
        "--confidence",
        type=_fraction,
        default=d["confidence"],
        metavar="PCT",
        help="confidence of the intervals, for all decision metrics together "
        + helptext.default_help(d["confidence"]),
    )
    p.add_argument(
        "--noise-from",
        nargs="+",
        action="extend",
        default=[],
        metavar="RUN",
        help="earlier runs of one unchanged build (A/A runs, unchanged commits), or a "
        "'headroom history --json' file: each metric's between-run noise is learned from them "
        "(default: repeat runs measure it, else per-metric defaults for a shared CI machine); "
        "given several times, the runs add up",
    )
    p.add_argument(
        "--accept-mismatch",
        action="store_true",
        help="judge runs that do not measure the same thing (a side with fewer steps than its own "
        "plan, other URLs, load generators or plans); by default they are inconclusive (exit 3)",
    )
    p.add_argument(
        "--error-threshold",
        type=_fraction,
        default=d["error_threshold"],
        metavar="PCT",
        help="rise in the error rate called a regression, in points "
        + helptext.default_help(d["error_threshold"]),
    )


def _compare_parser(sub) -> None:
    c = sub.add_parser(
        "compare",
        help="baseline against candidate: verdict with confidence intervals, exit code for CI",
        description="Compare a baseline run (or repeat runs) with a candidate at matched load and "
        "give a verdict: improved, no change, regressed or inconclusive.",
        epilog=_epilog_compare,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument(
        "runs", nargs="*", metavar="RUN", help="BASELINE CANDIDATE (or use --baseline/--candidate)"
    )
    _sides_options(c)
    _objective_option(c, "; its percentile is compared too")
    _input_options(c)
    _verdict_options(c)
    c.add_argument("--json", metavar="FILE", help="also write the comparison as JSON (- for stdout)")


#: every subcommand and the function that adds its parser, in the order --help lists them
_SUBCOMMANDS = {
    "summary": _summary_parser,
    "report": _report_parser,
    "compare": _compare_parser,
    "telemetry": lambda sub: _telemetry_parser(sub),
    "ramp": _add_ramp,
    "history": _add_history,
    "profiles": _add_profiles,
}


def _command_of(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names (its first word that is not an option), when it is one."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in _SUBCOMMANDS else None


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser:
    """The subcommand's parser (its usage is what a typo there should print), else ``parser``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(only=_command_of(argv))
    args, extra = parser.parse_known_args(argv)
    sub = _subparser(parser, args.command)
    if extra:  # an unknown option belongs to the subcommand: print its usage, not the top level's
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        parser.print_help()
        return 2
    try:
        if args.command == "summary":
            return _summary(args)
        if args.command == "report":
            return _report(args, sub)
        if args.command == "compare":
            return _compare(args, sub)
        if args.command == "ramp":
            from .ramp import run as run_ramp

            return run_ramp(args)
        if args.command == "telemetry":
            return _telemetry(args)
        if args.command == "profiles":
            from .profiles.cli import run as run_profiles

            return run_profiles(args)
        if args.command == "history":
            from .cli_history import run as run_history

            return run_history(args)
    except HeadroomError as e:
        if getattr(args, "debug", False):
            raise
        print(f"headroom: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("headroom: interrupted", file=sys.stderr)
        return 130
    return 2


def report_parameters(args) -> tuple[str, dict]:
    """The notebook and papermill parameters ``headroom report`` uses for ``args``."""
    from .report import notebook_parameters

    return notebook_parameters(args.runs, **_report_options(args))


def _report_options(args) -> dict:
    return {
        "baseline": args.baseline,
        "candidate": args.candidate,
        "labels": args.label,
        "objective": str(args.objective) if args.objective else "",
        "bucket": f"{args.bucket:g}s",
        "bins": args.bins or 0,
        "bin_width": args.bin_width or 0.0,
        "cpu_target": args.cpu_target,
        "read_options": ReadOptions.from_args(args).to_dict(),
        "verdict_options": VerdictOptions.from_args(args).to_dict(),
        "title": args.title,
        "figure_format": args.figure_format,
        "log_latency": bool(args.log_latency),
        "telemetry": _telemetry_params(args),
    }


def _telemetry_params(args) -> list[dict]:
    """The Prometheus sources of the report's runs as plain dicts (papermill parameters)."""
    from dataclasses import asdict

    n = len(args.runs) or len(args.baseline) + len(args.candidate)
    return [asdict(t) for t in telemetry_sources(args, n) if t is not None]


def _report(args, parser) -> int:
    from .report import ReportError, render

    _check_sides(args, parser, "report", single=True)
    comparison = bool(args.baseline) or len(args.runs) == 2
    if args.exit_code and not comparison:
        parser.error("--exit-code needs a baseline and a candidate: it gives the verdict's exit code")
    if not comparison and (args.noise_from or args.baseline or args.candidate):
        parser.error("--noise-from belongs to a comparison: give a baseline and a candidate")
    said: list[dict] = []
    try:
        out = render(
            args.runs,
            args.output,
            keep_notebook=args.keep_notebook,
            on_warning=_warn,
            on_verdict=said.append,
            **_report_options(args),
        )
    except ReportError as e:
        if args.debug:
            raise
        print(f"headroom: error: {e}", file=sys.stderr)
        return 2 if args.exit_code else 1
    print(f"headroom: wrote {out}", file=sys.stderr)
    if said:  # the verdict the page states, as compare prints its last line
        print(f"headroom: verdict: {said[0]['verdict'].upper()} (exit {said[0]['exit_code']}): {said[0]['reason']}",
              file=sys.stderr)  # fmt: skip
    if args.exit_code:
        return int(said[0]["exit_code"]) if said else 2
    return 0


def _warn(text: str) -> None:
    print(f"headroom: warning: {text}", file=sys.stderr)


def _check_sides(args, parser, command: str, *, single: bool = False) -> None:
    """RUN RUN or --baseline/--candidate (``single``: one RUN too), in one line when neither."""
    if args.runs and (args.baseline or args.candidate):
        parser.error("give BASELINE CANDIDATE or --baseline/--candidate, not both")
    if args.runs:
        if len(args.runs) != 2 and not (single and len(args.runs) == 1):
            what = "one run or two (baseline, candidate)" if single else "two runs, BASELINE CANDIDATE"
            raise HeadroomError(f"{command} needs {what}, not {len(args.runs)}")
    elif not args.baseline or not args.candidate:
        parser.error(f"{command} needs a baseline and a candidate")


def _compare(args, parser) -> int:
    from .compare import to_json
    from .io import reduce_run
    from .report import compare_sides
    from .text import format_comparison

    _check_sides(args, parser, "compare")
    base, cand = (args.runs[:1], args.runs[1:]) if args.runs else (args.baseline, args.candidate)
    if args.json and args.json != "-":
        from .report import check_output

        check_output(args.json, "the JSON")  # before the work, not after the verdict

    read = ReadOptions.from_args(args)
    tb, tc = telemetry_sources(args, 2)
    base_runs = [reduce_run(p, telemetry=tb, **read.reduce_kwargs()) for p in base]
    cand_runs = [reduce_run(p, telemetry=tc, **read.reduce_kwargs()) for p in cand]
    c = compare_sides(
        base_runs,
        cand_runs,
        objective=str(args.objective) if args.objective else "",
        verdict_options=VerdictOptions.from_args(args),
        read_options=read,
    )
    from .telemetry.steps import compare_run_memory, memory_doc
    from .text import format_memory_comparison

    mem = compare_run_memory(base_runs, cand_runs)
    doc = to_json(c)
    if mem is not None:
        doc["memory"] = memory_doc(mem)
    from .profiles.text import profile_diff_text

    text = format_comparison(c) + format_memory_comparison(mem) + profile_diff_text(c.profile_diff)
    emit(text, doc, c.warnings, args.json)
    return c.exit_code


def _locust_history(args):
    """A Locust stats history given to summary: its steps (None: not one); options needing requests refused."""
    from pathlib import Path

    from .formats import head_bytes
    from .formats.locust_history import is_history, read_history, refused

    path = Path(args.run[0])
    if len(args.run) != 1 or not path.is_file() or not is_history(head_bytes(path)):
        return None
    for flag, value in (("--objective", args.objective), ("--bins", args.bins), ("--bin-width", args.bin_width),
                        ("--current-load", args.current_load), ("--target-load", args.target_load),
                        ("--dask", args.dask), ("--steps", args.steps), ("--prometheus", args.prometheus),
                        ("--bucket", None if args.bucket == 1.0 else args.bucket)):  # fmt: skip
        if value is not None:
            raise refused(path, flag)
    return read_history(path, args.request_name)


def _summary(args) -> int:
    from .io import reduce_run
    from .summary import analyze, to_json
    from .text import format_summary

    history = _locust_history(args)
    if history is not None:
        emit(history.text(), history.to_json(), history.notes, args.json)
        return 0
    run = reduce_run(
        args.run,
        client=args.dask,
        bucket_s=args.bucket,
        label=args.label,
        telemetry=telemetry_sources(args, 1)[0],
        **ReadOptions.from_args(args).reduce_kwargs(),
    )
    s = analyze(
        run,
        objective=args.objective,
        bucket_s=args.bucket,
        bins=args.bins,
        bin_width=args.bin_width,
        cpu_target_pct=args.cpu_target,
        current_load_rps=args.current_load,
        target_load_rps=args.target_load,
    )
    if args.endpoints and s.endpoints is None:
        raise HeadroomError(
            f"{run.meta.source}: --endpoints: its requests carry no names ({_named_formats()})"
        )
    emit(format_summary(s, endpoints=args.endpoints), to_json(s), s.warnings, args.json)
    return 0


def _named_formats() -> str:
    from .formats import FORMATS

    return "formats that name requests: " + ", ".join(
        r.name for r in FORMATS.values() if "name" in r.scan_options
    )


TELEMETRY_EPILOG = """examples:
  headroom telemetry runs/k6-v2 --prometheus http://127.0.0.1:9090 --prometheus-match 'job="api"'
  headroom telemetry runs/v2 --prometheus http://prom:9090 \\
      --cpu-query 'sum(namedprocess_namegroup_cpu_seconds_total{groupname="api"})' \\
      --memory-query 'namedprocess_namegroup_memory_bytes{groupname="api",memtype="resident"}'

Writes cpuStats.csv, memStats.csv and telemetry.json into the run folder (docs/telemetry.md);
afterwards summary, compare, report and history read them without Prometheus.
"""


def _telemetry_parser(sub) -> None:
    t = sub.add_parser(
        "telemetry",
        help="save the server's CPU and memory from Prometheus into a run folder",
        description="Fetch the server's CPU, resident memory and Go GC over a run's load window from "
        "Prometheus and save them into the run folder, so that the run reads the same offline.",
        epilog=TELEMETRY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t.add_argument("run", metavar="RUN", help="run folder (or a request file in it)")
    t.add_argument("--force", action="store_true", help="replace a cpuStats.csv the run already has")
    _input_options(t)


def _telemetry(args) -> int:
    from pathlib import Path

    from .io import reduce_run
    from .telemetry.load import fetch_and_save, window_of

    source = telemetry_sources(args, 1)[0]
    if source is None:
        raise HeadroomError("headroom telemetry needs --prometheus URL (docs/telemetry.md)")
    path = Path(args.run)
    folder = path if path.is_dir() else path.parent
    run = reduce_run(args.run, progress=False, **ReadOptions.from_args(args).reduce_kwargs())
    tel, written = fetch_and_save(source, folder, window_of(run), force=args.force)
    for w in tel.warnings:
        _warn(w)
    for f in written:
        print(f"headroom: wrote {f}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
