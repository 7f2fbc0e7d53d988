"""``headroom ramp``: record a ramp by driving a load generator (being written)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``ramp`` subcommand to the CLI's subparsers."""
    return sub.add_parser("ramp", help="record a ramp run (not implemented yet)")


def run(args) -> int:
    """Run ``headroom ramp`` from parsed arguments; returns the exit code."""
    raise NotImplementedError("headroom ramp is being written")
