"""Input formats: one module per load generator behind one registry.

Every format is one :class:`~headroom.formats._protocol.Reader` declared in
its module (like xarray's backends): ``guess_can_open(head)`` looks only at
the first bytes (also inside gzip), ``scan`` reads the file as record
batches (:mod:`._batch`) in bounded memory, and ``plan`` finds the steps
incrementally (:mod:`._plans`).  :data:`FORMATS` lists the readers, one line
each, in the order detection tries them.  Every format is detected from
the file's content, never from its name alone; ``--format NAME`` overrides,
and a forced format that does not fit the file is one line naming the file
and what was expected.  :mod:`headroom.spooled` and :mod:`headroom.reading`
read every format through its reader (throughputramp and hey CSV, the
``sections`` layout, streamed section by section); a whole file in memory
is :meth:`Reader.table`, the scan as one batch.

Adding a format: one module declaring its ``Reader``, one line in
:data:`FORMATS`, its tests (docs/formats.md, "Adding a format").
"""

from __future__ import annotations

from pathlib import Path

from ..model import HeadroomError
from . import ab, gatling, hey, hlog, jmeter, k6, locust, locust_history, oha, throughputramp, vegeta
from ._common import COARSE_MS, EXACT, SUMMARY, Table
from ._protocol import Reader
from ._scan import BOM, bare_cr, first_line, head_bytes, is_text, short

__all__ = [
    "COARSE_MS",
    "EXACT",
    "FORMATS",
    "SUMMARY",
    "Format",
    "Reader",
    "Table",
    "detect",
    "format_help",
    "head_bytes",
    "read_table",
    "reader_for",
    "resolve",
    "summary_only",
]


#: The registry: one line per format, in the order detection tries them.
FORMATS: dict[str, Reader] = {
    r.name: r
    for r in (
        hey.THROUGHPUTRAMP,
        hey.READER,
        vegeta.CSV_READER,
        vegeta.JSON_READER,
        k6.JSON_READER,
        k6.CSV_READER,
        jmeter.CSV_READER,
        jmeter.XML_READER,
        gatling.READER,
        oha.READER,
        ab.READER,
        hlog.READER,
        locust.READER,
    )
}
#: The former name of a registry entry.
Format = Reader


#: Aliases accepted by ``--format``: a tool name whose variant is detected (None), or a format.
ALIASES = {"hey-fork": "hey", "vegeta": None, "k6": None, "jmeter": None, "oha": "oha-csv"}


def format_help() -> str:
    """The list of ``--format`` names for the command-line help."""
    return ", ".join(FORMATS)


def summary_only(head: bytes) -> str | None:
    """Files that hold one summary per run (or a binary log): which tool, and what to export instead."""
    text = head[:16384]
    if text[:4] == b"\xff\x96\x7f\x03" or (
        b"Result" in text[:64] and b"Attack" in text[:128] and not is_text(text)
    ):
        return ("looks like vegeta's binary (gob) output of 'vegeta attack': convert it with "
                "'vegeta encode -to csv' (or -to json) and read that")  # fmt: skip
    if text[:1] == b"\x00" and b"simulation" in text[:512].lower() and not gatling.guess(text):
        return ("looks like a binary Gatling simulation.log, but not one headroom reads: Gatling 3.12 and "
                "earlier write text, and the binary log of 3.13-3.16 starts with a RUN record holding the "
                "Gatling version (a damaged file?)")  # fmt: skip
    if text.lstrip().startswith(b"{"):
        if b'"summary"' in text and (b'"successRate"' in text or b'"requestsPerSec"' in text):
            return ("looks like oha's JSON summary (one summary per run, no requests): run oha with "
                    "--output-format csv for one row per request")  # fmt: skip
        if b'"latencies"' in text and b'"status_codes"' in text:
            return ("looks like a 'vegeta report -type=json' summary: give the results instead "
                    "('vegeta encode -to csv')")  # fmt: skip
        if b'"root_group"' in text or (b'"metrics"' in text and b'"http_req_duration"' in text):
            return ("looks like k6's end-of-test summary (--summary-export): run k6 with "
                    "--out json=results.json or --out csv=fileName=results.csv,timeFormat=rfc3339_nano")  # fmt: skip
    if b"Summary:" in text[:200] and b"Requests/sec:" in text:
        return ("looks like hey's text summary (one summary per run, no requests): run hey with "
                "-o csv for one row per request")  # fmt: skip
    if b"Percentage served" in text[:200]:
        return ("looks like 'ab -e' output (one percentile table per run): run ab with -g FILE "
                "for one row per request")  # fmt: skip
    if ab.looks_like_summary(text):
        return ("looks like ApacheBench's text summary (one summary per run, no requests): run ab with "
                "-g FILE for one row per request and give that file")  # fmt: skip
    if (
        (b"Running " in text[:200] and b"threads and" in text)
        or b"Thread Stats" in text
        or b"Requests/sec:" in text
    ):
        return ("looks like wrk/wrk2 text output (one summary per run): record per-request data with "
                "hey -o csv, vegeta or oha --output-format csv instead")  # fmt: skip
    why = locust_history.summary_only(text)
    if why:
        return why
    return None


def detect(path: Path, head: bytes | None = None) -> str:
    """The name of the format of ``path``, from its first bytes; else a one-line error saying what was tried."""
    if head is None:
        head = head_bytes(path)
    data = head.lstrip(b"\xef\xbb\xbf")
    if not data.strip():
        raise HeadroomError(f"{path}: the file is empty")
    why = summary_only(data)
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
    raise HeadroomError(
        f"{path}:1: unknown format, first line '{short(first_line(data), 60)}': tried "
        + ", ".join(FORMATS)
        + " (docs/formats.md; --format NAME forces one)"
    )


def _not_the_forced_format(name: str, path: Path, head: bytes) -> str:
    """One line, about 200 characters besides the path: the forced format, and what the file is instead."""
    f = FORMATS[name]
    try:
        found = detect(path, head)
    except HeadroomError as e:
        why = str(e).split(": ", 1)[-1]
        if why.startswith("looks like"):
            return f"{path}: --format {name}, but the file {short(why, 150)}"
        found = None
    if found is not None:
        tool = FORMATS[found].tool.split(" (")[0]
        return (
            f"{path}: --format {name} expects {f.expects}; the file is {tool} output: "
            f"leave --format out (or --format {found})"
        )
    line = short(first_line(head.lstrip(b"\xef\xbb\xbf")), 40)
    return (
        f"{path}: --format {name}, but the file does not look like {f.tool} output: expected {f.expects}, "
        f"first line '{line}'"
    )


def resolve(name: str, path: Path, head: bytes) -> str:
    """``--format NAME``: a format or a tool name (then the variant is detected), checked against the file."""
    name = ALIASES.get(name) or name
    if name in FORMATS:
        data = head.lstrip(b"\xef\xbb\xbf")
        if FORMATS[name].guess_can_open(data):
            return name
        if FORMATS[name].layout == "sections":  # one parser reads the family: either name reads both
            for f in FORMATS.values():
                if f.layout == "sections" and f.guess_can_open(data):
                    return f.name
        raise HeadroomError(_not_the_forced_format(name, path, head))
    if name in ALIASES:
        found = detect(path, head)
        if found.startswith(name):
            return found
        raise HeadroomError(
            f"{path}: --format {name}, but the file does not look like {name} output: it is "
            f"{FORMATS[found].tool} output ({found}); leave --format out (or --format {found})"
        )
    raise HeadroomError(f"unknown --format {name!r}: one of {', '.join([*FORMATS, *ALIASES])}")


def read_table(path: Path, fmt: str) -> Table:
    """Read a whole file of format ``fmt`` into a request table (:meth:`Reader.table`: its scan as one
    batch, its steps by its plan)."""
    return FORMATS[fmt].table(Path(path))


def reader_for(path: Path, option: str | None = None) -> Reader:
    """The reader of a request file: ``--format`` ``option`` (checked against the content) or detected."""
    head = head_bytes(path)
    if bare_cr(head.lstrip(BOM)):
        raise HeadroomError(
            f"{path}:1: lines end in a bare CR (old Mac line ends), so its rows run together: "
            f"convert it with `tr '\\r' '\\n' < FILE > FILE.new` and read that"
        )
    if option:
        return FORMATS[resolve(option, path, head)]
    if any(path.name.endswith(n) for n in throughputramp.PERF_NAMES):
        # a throughputramp run file: its own reader names what is wrong with it
        data = head.lstrip(BOM)
        why = summary_only(data) if data.strip() else None
        if why:
            raise HeadroomError(f"{path}: {why}")
        for f in FORMATS.values():
            if data.strip() and f.guess_can_open(data):
                return f
        return FORMATS["throughputramp"]
    return FORMATS[detect(path, head)]
