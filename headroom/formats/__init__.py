"""Input formats: one module per load generator behind one registry.

Every format is detected from the file's content (header, first line, magic
bytes, also inside gzip), never from its name alone; ``--format NAME``
overrides, and a forced format that does not fit the file is one line
naming the file and what was expected.  Each entry has, like xarray's
backends, a ``guess_can_open(head)`` that looks only at the first bytes,
a fidelity note, and a reader.  throughputramp and hey CSV
(:mod:`.throughputramp`, :mod:`.hey`) are streamed section by section by
:mod:`headroom.reading` (hey with relative offsets through its scan,
:func:`.hey.scan_csv`, spooled by :class:`headroom.reading.HeySource`); the other readers yield record batches
(``scan_*``, :mod:`._batch`) that :mod:`headroom.spooled` spools and
reduces, with the format's step plan (:mod:`._plans`); ``finish`` makes the
whole request table (:class:`~headroom.formats._common.Table`) of the same
rows for :func:`headroom.load_run`.

Adding a format: one module with ``guess_*``, ``scan_*``, ``finish`` (and a
plan class when its steps can be found batch by batch; without one its
spooled columns go through ``finish``), one entry in :data:`FORMATS` and
:data:`_SCANS`, one sample in ``tests/data/formats``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..model import HeadroomError
from . import ab, gatling, hey, jmeter, k6, oha, throughputramp, vegeta
from ._common import COARSE_MS, EXACT, SUMMARY, Table
from ._scan import first_line, head_bytes, is_text, read_bytes, short

__all__ = [
    "COARSE_MS",
    "EXACT",
    "FORMATS",
    "SUMMARY",
    "Format",
    "Table",
    "detect",
    "format_help",
    "head_bytes",
    "read_table",
    "resolve",
    "summary_only",
]


@dataclass(frozen=True)
class Format:
    """One input format: how to recognise it, how exact it is, how to read it and how to make it."""

    name: str
    tool: str
    fidelity: str
    guess_can_open: Callable[[bytes], bool]
    read: Callable[[Path, bytes], Table] | None  # None: streamed by headroom.reading
    export: str  # how to make this file
    expects: str  # what its beginning looks like, for "does not look like" messages
    scan: Callable | None = None  # (path, chunk_bytes=) -> _batch.Scan: record batches in bounded memory
    finish: Callable | None = None  # (scan, rows) -> Table: the whole-table steps of the joined rows
    plan: Callable | None = None  # (scan, spool) -> a step plan (_plans); None: the whole-table steps


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("throughputramp", throughputramp.TOOL, EXACT, throughputramp.guess_can_open, None,
               throughputramp.EXPORT, "a first line 'start-time,response-time'"),
        Format("hey", hey.TOOL, EXACT, hey.guess_can_open, None, hey.EXPORT,
               "hey's CSV header with response-time and offset (or start-time)"),
        Format("vegeta-csv", "vegeta", EXACT, vegeta.guess_csv, vegeta.read_csv,
               "vegeta attack ... | vegeta encode -to csv > results.csv",
               "headerless rows 'unix-ns,code,latency-ns,bytes-out,bytes-in,...'"),
        Format("vegeta-json", "vegeta", EXACT, vegeta.guess_json, vegeta.read_json,
               "vegeta attack ... | vegeta encode -to json > results.json",
               "JSON lines with attack, seq, code, timestamp and latency"),
        Format("k6-json", "k6", EXACT, k6.guess_json, k6.read_json, "k6 run --out json=results.json script.js",
               "JSON lines with type Metric or Point"),
        Format("k6-csv", "k6", EXACT, k6.guess_csv, k6.read_csv,
               "k6 run --out csv=fileName=results.csv,timeFormat=rfc3339_nano script.js",
               "a header 'metric_name,timestamp,metric_value,...'"),
        Format("jmeter-csv", "JMeter", COARSE_MS, jmeter.guess_csv, jmeter.read_csv,
               "jmeter -n -t plan.jmx -l results.jtl (CSV with header, thread_counts=true)",
               "a JTL header with timeStamp and elapsed"),
        Format("jmeter-xml", "JMeter", COARSE_MS, jmeter.guess_xml, jmeter.read_xml,
               "jmeter -n -t plan.jmx -l results.jtl -Jjmeter.save.saveservice.output_format=xml",
               "an XML <testResults> document"),
        Format("gatling", "Gatling", COARSE_MS, gatling.guess, gatling.read,
               "simulation.log of Gatling (3.0-3.12: text; 3.13-3.16: binary)",
               "tab-separated RUN/USER/REQUEST records, or a binary log starting with a RUN record"),
        Format("oha-csv", "oha", EXACT, oha.guess_csv, oha.read_csv,
               "oha --no-tui --output-format csv URL > results.csv", "a header 'request-start,...'"),
        Format("ab", ab.TOOL, ab.FIDELITY, ab.guess_tsv, ab.read_tsv, ab.EXPORT,
               "ab -g's header 'starttime<TAB>seconds<TAB>ctime<TAB>dtime<TAB>ttime<TAB>wait'"),
    )
}  # fmt: skip


def _plan_classes():
    return {"jmeter-csv": jmeter.JMeterPlan, "jmeter-xml": jmeter.JMeterPlan, "gatling": gatling.GatlingPlan,
            "vegeta-csv": vegeta.VegetaPlan, "vegeta-json": vegeta.VegetaPlan, "k6-csv": k6.K6Plan,
            "k6-json": k6.K6Plan, "oha-csv": oha.plan, "hey": hey.SectionPlan, "ab": ab.plan}  # fmt: skip


_SCANS = {  # (module, scan function, finish function) of the formats whose readers yield batches
    "jmeter-csv": (jmeter, "scan_csv", "finish"), "jmeter-xml": (jmeter, "scan_xml", "finish"),
    "gatling": (gatling, "scan", "finish"), "vegeta-csv": (vegeta, "scan_csv", "finish"),
    "vegeta-json": (vegeta, "scan_json", "finish"), "k6-csv": (k6, "scan_csv", "finish"),
    "k6-json": (k6, "scan_json", "finish"), "oha-csv": (oha, "scan_csv", "finish"),
    "hey": (hey, "scan_csv", "finish"),  # no finish: hey.read_requests reads it whole
    "ab": (ab, "scan_tsv", "finish"),
}  # fmt: skip


def _register() -> None:
    for name, (mod, scan, finish) in _SCANS.items():
        FORMATS[name] = replace(FORMATS[name], scan=getattr(mod, scan, None), finish=getattr(mod, finish, None),
                                plan=_plan_classes().get(name))  # fmt: skip


_register()


def scan_file(path: Path, fmt: str, chunk_bytes: int):
    """One pass over a request file as record batches (a format without a batch reader: its table, cut up)."""
    from ._batch import Batch, Scan

    f = FORMATS[fmt]
    if f.scan is not None:
        return f.scan(path, chunk_bytes=chunk_bytes)
    t = read_table(path, fmt)

    def batches(rows: int = 1 << 20):
        for a in range(0, len(t.start_ns), rows):
            cut = slice(a, a + rows)
            pick = lambda x, cut=cut: None if x is None else x[cut]  # noqa: E731
            yield Batch(t.start_ns[cut], t.latency_s[cut], pick(t.status), pick(t.ok), None, pick(t.line))

    return Scan(path, fmt, t.fidelity, relative=t.relative, warnings=list(t.warnings), side={"table": t},
                _gen=batches())  # fmt: skip


#: Aliases accepted by ``--format``: a tool name whose variant is detected (None), or a format.
ALIASES = {"hey-fork": "hey", "vegeta": None, "k6": None, "jmeter": None, "oha": "oha-csv"}
#: Formats read by the same streamed CSV reader (either name reads both).
CSV_FAMILY = ("throughputramp", "hey")


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
    if text.startswith(b"#[") and (b"StartTime" in text or b"BaseTime" in text):
        return ("looks like an HdrHistogram interval log (.hlog): per-interval histograms, not requests; "
                "not read yet: export per-request data instead")  # fmt: skip
    if text.startswith(b"Timestamp,User Count,Type,Name,Requests/s"):
        return ("looks like Locust's stats history (10 s sliding windows, rounded): not per request; "
                "Locust has no per-request export: use another generator")  # fmt: skip
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
        family = CSV_FAMILY if name in CSV_FAMILY else (name,)
        if any(FORMATS[f].guess_can_open(data) for f in family):
            return (
                name if name not in CSV_FAMILY else next(f for f in family if FORMATS[f].guess_can_open(data))
            )
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
    """Read a whole file of format ``fmt`` (not the streamed CSV family) into a request table."""
    from ._batch import join

    f = FORMATS[fmt]
    if f.read is None:
        raise ValueError(f"{fmt} is streamed by headroom.reading")
    if f.scan is not None and f.finish is not None:  # one pass in blocks, the rows joined
        scan = f.scan(path)
        return f.finish(scan, join(list(scan.batches())))
    return f.read(path, read_bytes(path))
