"""``headroom history``: the CLI layer over :mod:`headroom.history`."""

from __future__ import annotations

import argparse
import os
import sys

EPILOG = """\
examples:
  headroom history runs/v1.0 runs/v1.1 runs/v1.2 runs/v1.3          # oldest release first
  headroom history runs/* --order time --json history.json -o history.html
  headroom history runs/* --objective 'p99<=20ms' --threshold 5% --jobs 2
  headroom history runs/* --dask tcp://scheduler:8786               # reduce on a Dask cluster
  headroom history data/endpoints/ep-go-aa-45/a-0* --name /api/v2/cart --cache none   # one endpoint

Runs with the same label (metadata sha) are repeats of one release. Per release:
plateau throughput, USL capacity, throughput at the objective, p50/p99 and CPU per
request at the concurrency levels every run shares, error rate, each with an interval
from the release-to-release noise. Change points: binary segmentation (ruptures) on
each series, kept when the change is at least the threshold; the latest release is also
tested against the releases since the last change. A series of fewer than 5 releases
is too short for change points: its latest release is compared with the previous ones
with the compare statistics (noise learned from the series), and the verdict says so.
The JSON stores each metric's release-to-release noise: 'headroom compare --noise-from
history.json' learns from it. Reduced runs are cached (content hash + settings) in
--cache, so a new release reads one run.

exit codes:
  0  no regression starts at the latest release
  1  a regression starts at the latest release (a gate for "this release")
  2  bad usage or bad input
  3  not judged: a short series whose latest release could still be worse by the threshold
"""


def add_parser(sub) -> argparse.ArgumentParser:
    """The ``history`` subparser."""
    from . import helptext
    from .cli_args import fraction as _fraction
    from .cli_args import objective as _objective
    from .cli_args import positive_float as _positive_float
    from .cli_args import positive_int as _positive_int

    d = helptext.history_defaults()

    p = sub.add_parser(
        "history",
        help="capacity across many releases, change points, exit 1 when the latest release regressed",
        description="Follow capacity and latency across releases and find where they changed.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="runs, oldest release first")
    p.add_argument("--objective", type=_objective, metavar="OBJ", help="latency objective, e.g. 'p99<=20ms'")
    p.add_argument(
        "--threshold",
        type=_fraction,
        default=d["threshold"],
        metavar="PCT",
        help="smallest change to report " + helptext.default_help(d["threshold"]),
    )
    p.add_argument(
        "--run-noise",
        type=_fraction,
        default=d["run_noise"],
        metavar="PCT",
        help="release-to-release noise floor per run " + helptext.default_help(d["run_noise"]),
    )
    p.add_argument(
        "--order",
        choices=("given", "time"),
        default="given",
        help="release order: as given (default) or by each run's start time",
    )
    p.add_argument("--json", metavar="FILE", help="also write the history as JSON (- for stdout)")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the HTML trend report")
    p.add_argument(
        "--cache",
        metavar="DIR",
        help="folder of cached run summaries (default: .headroom-cache beside the first run; 'none' to disable)",
    )
    p.add_argument("--jobs", type=_positive_int, default=1, metavar="N", help="local processes (default: 1)")
    p.add_argument("--dask", metavar="ADDRESS", help="reduce on this Dask scheduler instead (needs [dask])")
    p.add_argument(
        "--cpu-cores",
        type=_positive_float,
        metavar="N",
        help="cores that 100%% in a single-column cpuStats.csv stands for (default: metadata cpu_cores, else 1)",
    )
    p.add_argument(
        "--name",
        dest="request_name",
        metavar="NAME",
        help="follow one endpoint: only the requests of this name in every run (Locust, k6, JMeter ... "
        "and headroom ramp --engine locust runs), e.g. --name /api/v2/cart",
    )
    p.add_argument("--debug", action="store_true", help="show a traceback on errors")
    from .cli_args import telemetry_options

    telemetry_options(p)
    return p


def default_cache(runs: list[str]) -> str:
    first = os.path.abspath(runs[0])
    return os.path.join(os.path.dirname(first.rstrip(os.sep)), ".headroom-cache")


def _history_report(h, args, cache) -> None:
    """The HTML report of a computed history: the notebook shows the same history, from its JSON."""
    import json
    import tempfile
    from pathlib import Path

    from .history import to_json
    from .report import run_notebook

    with tempfile.TemporaryDirectory(prefix="headroom-history-") as tmp:
        doc = Path(tmp) / "history.json"
        doc.write_text(json.dumps(to_json(h)))
        params = {
            "run_paths": [str(p) for r in h.releases for p in r.paths],
            "objective": h.objective,
            "threshold": float(args.threshold),
            "run_noise": float(args.run_noise),
            "order": "given",  # run_paths are already in release order
            "cache": cache or "",
            "title": "",
            "history_json": str(doc),
        }
        out = run_notebook("history_report.ipynb", params, args.output)
    print(f"headroom: wrote {out}", file=sys.stderr)


def run(args) -> int:
    """Run ``headroom history``; returns the exit code."""
    from .cli_args import emit, telemetry_sources
    from .history import history, to_json
    from .history_view import format_history
    from .model import HeadroomError

    for out in (args.json, args.output):
        if out and out != "-" and not os.path.isdir(os.path.dirname(os.path.abspath(out))):
            raise HeadroomError(f"{out}: the folder to write it in does not exist")
    cache = None if (args.cache or "").lower() == "none" else (args.cache or default_cache(args.runs))
    h = history(
        args.runs,
        objective=args.objective,
        threshold=args.threshold,
        run_noise=args.run_noise,
        order=args.order,
        cache=cache,
        jobs=args.jobs,
        dask=args.dask,
        cpu_cores=args.cpu_cores,
        telemetry=telemetry_sources(args, 1)[0],
        name=args.request_name,
    )
    emit(format_history(h), to_json(h), h.warnings, args.json)
    if args.output:
        _history_report(h, args, cache)
    return h.exit_code
