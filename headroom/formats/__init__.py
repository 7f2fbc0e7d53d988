"""Input formats: one module per load generator behind one registry.

Every format is detected from the file's content (header, first line, magic
bytes, also inside gzip), never from its name alone; ``--format NAME``
overrides.  Each reader returns the same request table
(:class:`~headroom.formats._common.Table`) and declares its fidelity.  Like
xarray's backends, each entry has a ``guess_can_open(head)`` that looks only
at the first bytes.

throughputramp and hey CSV are read by :mod:`headroom.io` (streamed, chunk by
chunk, for files of any size); the other formats are read in memory (their
files are modest: a few million requests at most).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..model import HeadroomError
from . import gatling, jmeter, k6, oha, vegeta
from ._common import COARSE_MS, EXACT, SUMMARY, Table, head_bytes, is_text, read_bytes, short

__all__ = ["FORMATS", "Format", "Table", "detect", "read_table", "EXACT", "COARSE_MS", "SUMMARY"]


def _tr_guess(head: bytes) -> bool:
    line = head.lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0].rstrip(b"\r")
    return b"response-time" in line.split(b",")


@dataclass(frozen=True)
class Format:
    name: str
    tool: str
    fidelity: str
    guess_can_open: Callable[[bytes], bool]
    read: Callable[[Path, bytes], Table] | None  # None: read by headroom.io (streamed)
    export: str  # how to make this file


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("throughputramp", "Cloud Foundry throughputramp / hey (perfResults.csv, hey -o csv)", EXACT,
               _tr_guess, None, "throughputramp, or hey -o csv"),
        Format("vegeta-csv", "vegeta", EXACT, vegeta.guess_csv, vegeta.read_csv,
               "vegeta attack ... | vegeta encode -to csv > results.csv"),
        Format("vegeta-json", "vegeta", EXACT, vegeta.guess_json, vegeta.read_json,
               "vegeta attack ... | vegeta encode -to json > results.json"),
        Format("k6-json", "k6", EXACT, k6.guess_json, k6.read_json, "k6 run --out json=results.json script.js"),
        Format("k6-csv", "k6", EXACT, k6.guess_csv, k6.read_csv,
               "k6 run --out csv=fileName=results.csv,timeFormat=rfc3339_nano script.js"),
        Format("jmeter-csv", "JMeter", COARSE_MS, jmeter.guess_csv, jmeter.read_csv,
               "jmeter -n -t plan.jmx -l results.jtl (CSV with header, thread_counts=true)"),
        Format("jmeter-xml", "JMeter", COARSE_MS, jmeter.guess_xml, jmeter.read_xml,
               "jmeter -n -t plan.jmx -l results.jtl -Jjmeter.save.saveservice.output_format=xml"),
        Format("gatling", "Gatling 3.0-3.11", COARSE_MS, gatling.guess, gatling.read, "simulation.log of Gatling <= 3.11"),
        Format("oha-csv", "oha", EXACT, oha.guess_csv, oha.read_csv, "oha --no-tui --output-format csv URL > results.csv"),
    )
}  # fmt: skip

#: Aliases accepted by ``--format``.
ALIASES = {"hey": "throughputramp", "hey-fork": "throughputramp", "vegeta": None, "k6": None, "jmeter": None,
           "oha": "oha-csv"}  # fmt: skip


def _summary_only(head: bytes) -> str | None:
    """Files that hold one summary per run (or a binary log): which tool, and what to export instead."""
    text = head[:16384]
    if text[:4] == b"\xff\x96\x7f\x03" or (
        b"Result" in text[:64] and b"Attack" in text[:128] and not is_text(text)
    ):
        return ("looks like vegeta's binary (gob) output of 'vegeta attack': convert it with "
                "'vegeta encode -to csv' (or -to json) and read that")  # fmt: skip
    if gatling.looks_binary_gatling(text):
        return ("looks like the binary simulation.log of Gatling 3.12 or later, which headroom cannot read: "
                "use Gatling <= 3.11 (text simulation.log)")  # fmt: skip
    stripped = text.lstrip()
    if stripped.startswith(b"{"):
        if b'"summary"' in text and (b'"successRate"' in text or b'"requestsPerSec"' in text):
            return ("looks like oha's JSON summary (one summary per run, no requests): run oha with "
                    "--output-format csv for one row per request")  # fmt: skip
        if b'"latencies"' in text and b'"status_codes"' in text:
            return ("looks like a 'vegeta report -type=json' summary: give the results instead "
                    "('vegeta encode -to csv')")  # fmt: skip
        if b'"root_group"' in text or (b'"metrics"' in text and b'"http_req_duration"' in text):
            return ("looks like k6's end-of-test summary (--summary-export): run k6 with "
                    "--out json=results.json or --out csv=fileName=results.csv,timeFormat=rfc3339_nano")  # fmt: skip
    if b"Percentage served" in text[:200]:
        return ("looks like 'ab -e' output (one percentile table per run): ab cannot write per-request data; "
                "use hey -o csv, vegeta or oha --output-format csv")  # fmt: skip
    if (
        (b"Running " in text[:200] and b"threads and" in text)
        or b"Thread Stats" in text
        or b"Requests/sec:" in text
    ):
        return ("looks like wrk/wrk2 text output (one summary per run): record per-request data with "
                "hey -o csv, vegeta or oha --output-format csv instead")  # fmt: skip
    if b"Summary:" in text[:200] and b"Requests/sec:" in text:
        return "looks like hey's text summary: run hey with -o csv for one row per request"
    if text.startswith(b"#[") and (b"StartTime" in text or b"BaseTime" in text):
        return ("looks like an HdrHistogram interval log (.hlog): per-interval histograms, not requests; "
                "not read yet: export per-request data instead")  # fmt: skip
    if text.startswith(b"Timestamp,User Count,Type,Name,Requests/s"):
        return ("looks like Locust's stats history (10 s sliding windows, rounded): not per request; "
                "Locust has no per-request export: use another generator")  # fmt: skip
    return None


def detect(path: Path, head: bytes | None = None) -> str:
    """The name of the format of ``path``, from its first bytes."""
    if head is None:
        head = head_bytes(path)
    data = head.lstrip(b"\xef\xbb\xbf")
    if not data.strip():
        raise HeadroomError(f"{path}: the file is empty")
    why = _summary_only(data)
    if why:
        raise HeadroomError(f"{path}: {why}")
    for f in FORMATS.values():
        if f.guess_can_open(data):
            return f.name
    hint = jmeter.no_header_hint(data)
    if hint:
        raise HeadroomError(f"{path}: {hint}")
    if not is_text(data):
        raise HeadroomError(f"{path}:1: not a CSV text file (binary data in the first line)")
    first = data.split(b"\n", 1)[0]
    raise HeadroomError(
        f"{path}:1: unknown format, first line '{short(first, 80)}': expected throughputramp or hey CSV, "
        "vegeta, k6, JMeter, Gatling or oha output (see docs/formats.md; --format NAME forces one)"
    )


def resolve(name: str, path: Path, head: bytes) -> str:
    """``--format NAME``: a format name or a tool name (then the variant is detected)."""
    if name in FORMATS:
        return name
    if name in ALIASES:
        if ALIASES[name]:
            return ALIASES[name]
        found = detect(path, head)
        if found.startswith(name):
            return found
        raise HeadroomError(
            f"{path}: --format {name}, but the file does not look like {name} output ({found}?)"
        )
    raise HeadroomError(f"unknown --format {name!r}: one of {', '.join([*FORMATS, *ALIASES])}")


def read_table(path: Path, fmt: str) -> Table:
    f = FORMATS[fmt]
    if f.read is None:
        raise ValueError(f"{fmt} is read by headroom.io")
    return f.read(path, read_bytes(path))
