"""Argument types and output shared by the command-line modules (cli, cli_history, ramp)."""

from __future__ import annotations

import argparse
import sys

from .model import HeadroomError, parse_objective


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text!r}")
    return v


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return v


def objective(text: str):
    try:
        return parse_objective(text)
    except HeadroomError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def fraction(text: str) -> float:
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 10% or 0.1, got {text!r}") from None
    if v > 1 and not t.endswith("%"):
        v /= 100  # "10" means 10 %
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"must be between 0% and 100%, got {text!r}")
    return v


def emit(text: str, doc: dict, warnings, json_target: str | None) -> None:
    """The command's table on stdout (unless its JSON goes there), warnings on stderr, the JSON file."""
    from .io import write_json

    if json_target != "-":
        sys.stdout.write(text)
    for w in warnings:
        print(f"headroom: warning: {w}", file=sys.stderr)
    if json_target:
        write_json(doc, json_target)


def telemetry_options(p: argparse.ArgumentParser) -> None:
    """--prometheus and its queries: the server's CPU and memory from Prometheus (docs/telemetry.md)."""
    g = p.add_argument_group("server telemetry from Prometheus (docs/telemetry.md)")
    g.add_argument(
        "--prometheus",
        metavar="URL",
        help="read the server's CPU and memory from this Prometheus (e.g. http://127.0.0.1:9090) over "
        "the run's load window, instead of the run's cpuStats.csv / memStats.csv",
    )
    g.add_argument(
        "--cpu-query",
        metavar="PROMQL",
        help="the server's CPU seconds, a counter (default: process_cpu_seconds_total{MATCH}); "
        "rate(...) is read as cores",
    )
    g.add_argument(
        "--memory-query",
        metavar="PROMQL",
        help="the server's resident memory in bytes (default: process_resident_memory_bytes{MATCH})",
    )
    g.add_argument(
        "--prometheus-match",
        metavar="LABELS",
        action="append",
        default=[],
        help="label matchers for the default queries, e.g. 'job=\"api\"' (compare: once, or once per "
        "run, baseline first)",
    )
    g.add_argument(
        "--prometheus-step",
        type=positive_float,
        default=1.0,
        metavar="SECONDS",
        help="resolution of the range queries (default: 1)",
    )


def telemetry_sources(args, n: int) -> list:
    """One Prometheus source per run (``n`` runs; None each without --prometheus)."""
    from .telemetry.load import sources_from_args

    return sources_from_args(args, n)
