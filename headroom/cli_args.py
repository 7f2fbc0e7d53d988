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
