"""Load generators that ``headroom ramp`` drives: hey, vegeta, oha, and Locust with your locustfile.

headroom does not send HTTP load itself.  Each engine knows how to build the
command line of one step (a fixed concurrency for a duration or a number of
requests, or a fixed total rate for a duration), and how to read what the
generator wrote into rows of the throughputramp file: absolute start time in
UTC nanoseconds, response time in seconds (as text, as the generator gave
it), and the HTTP status.

Time axis.  hey and oha write each request's start *relative* to their own
start (hey: ``offset``, seconds since the process's ``requester`` package was
initialised; oha: ``request-start``, seconds since its run started).  The
step's rows are placed on the absolute axis at ``launch_ns + offset``, where
``launch_ns`` is ``time.time_ns()`` taken just before the generator process
is launched.  The recorded starts are therefore early by the generator's
start-up time (exec and runtime start, a few milliseconds), the same for
every row of a step, and a step never overlaps the one before: it is
launched only after the previous generator has exited.  vegeta writes
absolute Unix-nanosecond timestamps; they are used as they are.

Errors.  hey and oha write no row for a transport error (connection refused,
reset, timeout).  hey's ``-o`` takes a Go template when it is neither empty nor
``csv`` (requester/print.go, ``newTemplate``): headroom passes hey's own CSV
template followed by a trailer with hey's result count and its error
distribution (``ErrorDist``: every failed request, by error text), so the
transport errors of every step are counted exactly, with a duration as with a
number of requests.  oha runs with ``--output-format json`` (its summary, with
``errorDistribution``) and ``--db-url`` (one row per successful request in
SQLite) and ``-w`` (requests in flight at the deadline are waited for, up to
the timeout, instead of aborted uncounted).  Output without that trailer or
summary (an older recording, a test) falls back to requested minus rows with
a number of requests, else unknown (None).  vegeta writes a row with code 0
and the error text: such rows are kept with status-code 0 (headroom counts
every non-2xx row as an error, never as a latency).  Non-2xx responses are
rows with their status everywhere.

Locust.  ``--engine locust --locustfile FILE`` runs the user's own locustfile at every step
(``locust -f FILE,PLUGIN --headless -u N -r 20N -t D --host URL``; ``--engine-arg=--processes=2``
for a master and workers), with headroom's listener (:mod:`headroom.locust`, given as a second
locustfile) writing every request with its absolute start; a step is read through
:mod:`headroom.formats.locust`.  A request Locust counted as a failure is an error: its status
when it has a non-2xx one, else 0 (no response, or the locustfile failed a 2xx answer: said in
a warning).  Locust has no fixed total rate and no request count: closed loop, by duration
(whole seconds, rounded up).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..model import HeadroomError

#: hey keeps at most this many results per run (requester/report.go, maxRes).
HEY_MAX_RESULTS = 1_000_000

INSTALL_HINT = {
    "hey": "install it with 'apt-get install hey' (Debian/Ubuntu) or 'go install github.com/rakyll/hey@latest'",
    "vegeta": "install it with 'go install github.com/tsenart/vegeta/v12@latest' (then put $(go env GOPATH)/bin on PATH)",
    "oha": "install it with 'cargo install oha' (or a release binary from github.com/hatoo/oha)",
    "locust": "install it with 'python3 -m pip install locust' (in the environment headroom runs in)",
}

ENGINES = ("hey", "vegeta", "oha", "locust")


@dataclass
class StepPlan:
    """What one step asks of the generator."""

    concurrency: int | None = None  # closed loop: workers / connections
    rate: float | None = None  # open loop: requests per second, all workers together
    duration_s: float | None = None  # run for this long ...
    requests: int | None = None  # ... or send this many requests (closed loop only)
    timeout_s: float = 10.0  # per-request timeout
    max_workers: int | None = None  # open loop: cap on workers / connections


@dataclass
class StepRows:
    """The rows of one step, ready to be written."""

    start_ns: list[int] = field(default_factory=list)
    response_time: list[str] = field(default_factory=list)  # seconds, as text
    status: list[int] = field(default_factory=list)
    name: list[str] | None = None  # every row's request name, for a generator that names requests (Locust)
    transport_errors: int | None = None  # failed requests the generator wrote no row for, when known
    error_kinds: dict[str, int] | None = None  # failed requests by kind (refused, reset, timeout, ...)
    warnings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.start_ns)


def go_duration(seconds: float) -> str:
    """A Go duration string for ``seconds`` (millisecond resolution): ``3s``, ``1500ms``."""
    ms = max(1, round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _run_quiet(cmd: list[str], timeout: float = 5.0) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (r.stdout or "") + (r.stderr or "") if r.returncode == 0 else ""


def _go_module_version(path: str) -> str:
    """The main module's version from a Go binary's build info (``go version -m``), if any."""
    if not shutil.which("go"):
        return ""
    for line in _run_quiet(["go", "version", "-m", path]).splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "mod" and parts[2] != "(devel)":
            return parts[2]
    return ""


def _debian_version(path: str) -> str:
    """``<version> (Debian package <name>)`` when dpkg owns the binary."""
    if not shutil.which("dpkg-query"):
        return ""
    real = os.path.realpath(path)
    owner = _run_quiet(["dpkg-query", "-S", real]).split(":", 1)[0].strip()
    if not owner or " " in owner:
        return ""
    v = _run_quiet(["dpkg-query", "-W", "-f=${Version}", owner]).strip()
    return f"{v} (Debian package {owner})" if v else ""


class Engine:
    """One load generator."""

    name = ""
    supports_rate = False
    supports_requests = True
    #: the generator's own limit on kept results per run, if it has one
    max_results: int | None = None

    def __init__(self, path: str):
        self.path = path

    @classmethod
    def find(cls, options=None) -> Engine:
        """The engine on PATH (``options``: the ramp's arguments, for engines that need more)."""
        path = shutil.which(cls.name)
        if path is None:
            raise HeadroomError(f"{cls.name} not found on PATH: {INSTALL_HINT[cls.name]}")
        return cls(path)

    def version(self) -> str:
        raise NotImplementedError

    def command(self, url: str, plan: StepPlan, workdir: Path, extra: list[str] | None = None) -> list[str]:
        """The command of one step (``extra``: more generator options); stdout goes to ``workdir / 'out'``."""
        raise NotImplementedError

    def prepare(self, url: str, workdir: Path) -> None:
        """Write what the step's command reads (vegeta: the targets file)."""

    def postprocess(self, workdir: Path, timeout: float) -> None:
        """Convert the generator's output after it exited (vegeta: encode to CSV)."""

    def parse(self, workdir: Path, launch_ns: int, plan: StepPlan) -> StepRows:
        raise NotImplementedError


#: hey's own CSV template (requester/print.go, ``csvTmpl``), byte for byte ...
HEY_CSV_TEMPLATE = (
    "{{ $connLats := .ConnLats }}{{ $dnsLats := .DnsLats }}{{ $dnsLats := .DnsLats }}"
    "{{ $reqLats := .ReqLats }}{{ $delayLats := .DelayLats }}{{ $resLats := .ResLats }}"
    "{{ $statusCodeLats := .StatusCodes }}{{ $offsets := .Offsets}}"
    "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset"
    "{{ range $i, $v := .Lats }}\n{{ formatNumber $v }},{{ formatNumber (index $connLats $i) }},"
    "{{ formatNumber (index $dnsLats $i) }},{{ formatNumber (index $reqLats $i) }},"
    "{{ formatNumber (index $delayLats $i) }},{{ formatNumber (index $resLats $i) }},"
    "{{ formatNumberInt (index $statusCodeLats $i) }},{{ formatNumber (index $offsets $i) }}{{ end }}"
)
HEY_TRAILER = b"\nheadroom-hey-results,"
#: ... and a trailer: every result hey counted (rows and errors) and its error distribution
HEY_TEMPLATE = (
    HEY_CSV_TEMPLATE + HEY_TRAILER.decode() + "{{ .NumRes }}"
    "{{ range $err, $num := .ErrorDist }}\nheadroom-hey-error,{{ $num }},{{ $err }}{{ end }}\n"
)


def error_kind(text: str) -> str:
    """A failed request's error text reduced to its kind: refused, reset, timeout, closed, other."""
    t = text.lower()
    if "refused" in t:
        return "connection refused"
    if "reset" in t or "broken pipe" in t:
        return "connection reset"
    if "timeout" in t or "deadline" in t or "timed out" in t:
        return "timeout"
    if "eof" in t or "closed" in t or "incomplete" in t:
        return "connection closed"
    return "other"


def _kinds(dist: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for text, n in dist.items():
        k = error_kind(text)
        out[k] = out.get(k, 0) + n
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def split_hey_trailer(path: Path) -> tuple[int, dict[str, int]] | None:
    """Cut headroom's trailer off hey's output (leaving hey's CSV) and read it: (results, error
    distribution); None when the output has no trailer (hey run with ``-o csv``)."""
    import mmap

    size = path.stat().st_size
    if size == 0:
        return None
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        at = m.rfind(HEY_TRAILER)
        if at < 0:
            return None
        tail = m[at + 1 :].decode("utf-8", "replace")
    lines = tail.splitlines()
    try:
        results = int(lines[0].split(",", 1)[1])
    except (IndexError, ValueError):
        raise HeadroomError(f"hey wrote an unreadable result count {lines[0][:80]!r}") from None
    dist: dict[str, int] = {}
    last = None
    for line in lines[1:]:
        if line.startswith("headroom-hey-error,"):
            n, _, text = line[len("headroom-hey-error,") :].partition(",")
            try:
                last = text
                dist[text] = dist.get(text, 0) + int(n)
            except ValueError:
                raise HeadroomError(f"hey wrote an unreadable error count {line[:80]!r}") from None
        elif line and last is not None:  # an error text with a newline in it
            dist[last + "\n" + line] = dist.pop(last)
            last = last + "\n" + line
    with open(path, "r+b") as f:
        f.truncate(at + 1)  # keep the last row's newline: a line without one reads as cut off
    return results, dist


class Hey(Engine):
    """hey (github.com/rakyll/hey): ``hey -z D -c N -o TEMPLATE URL`` or ``hey -n R -c N -o TEMPLATE URL``.

    The template is hey's CSV template plus a trailer (:data:`HEY_TEMPLATE`).  CSV
    columns: ``response-time,DNS+dialup,DNS,Request-write,Response-delay,
    Response-read,status-code,offset``, 4 decimals, in completion order; no row
    for a transport error (the trailer counts them); at most 1,000,000 rows per
    run.  With ``-n`` hey sends ``(R // N) * N`` requests (each worker sends ``R // N``).
    """

    name = "hey"
    max_results = HEY_MAX_RESULTS

    def version(self) -> str:
        # hey has no version flag; ask the package manager, then the Go build info
        return (
            _debian_version(self.path) or _go_module_version(self.path) or "unknown (hey has no version flag)"
        )

    def command(self, url: str, plan: StepPlan, workdir: Path, extra: list[str] | None = None) -> list[str]:
        if plan.concurrency is None:
            raise HeadroomError(
                "hey cannot hold a fixed total rate (its -q is per worker): use vegeta or oha"
            )
        cmd = [self.path]
        if plan.requests is not None:
            cmd += ["-n", str(plan.requests)]
        else:
            cmd += ["-z", go_duration(plan.duration_s or 1.0)]
        cmd += ["-c", str(plan.concurrency), "-t", str(max(1, round(plan.timeout_s))), "-o", HEY_TEMPLATE]
        return [*cmd, *(extra or []), url]

    @staticmethod
    def requested(plan: StepPlan) -> int | None:
        """How many requests hey sends with ``-n``: each of the N workers sends R // N."""
        if plan.requests is None or plan.concurrency is None:
            return None
        return (plan.requests // plan.concurrency) * plan.concurrency

    def parse(self, workdir: Path, launch_ns: int, plan: StepPlan) -> StepRows:
        from ..formats import hey

        path = workdir / "out"
        trailer = split_hey_trailer(path)
        with open(path, "rb") as f:
            header = f.readline().strip()
        cols = header.decode("utf-8", "replace").split(",")
        if not {"response-time", "status-code", "offset"} <= set(cols):
            raise HeadroomError(
                f"hey wrote an unexpected CSV header {header[:120].decode('utf-8', 'replace')!r}"
            )
        # hey writes 4 decimals: the same text again
        rows = rows_from_scan(path, hey.scan_csv, launch_ns, digits=4)
        requested = self.requested(plan)
        if trailer is not None:  # exact: hey's own count of failed requests
            results, dist = trailer
            rows.transport_errors = sum(dist.values())
            rows.error_kinds = _kinds(dist)
            kept = results - rows.transport_errors
            if kept < len(rows):
                raise HeadroomError(
                    f"hey counted {results} results with {rows.transport_errors} errors but wrote {len(rows)} rows"
                )
        elif requested is not None:
            rows.transport_errors = max(0, requested - len(rows))
        if len(rows) >= HEY_MAX_RESULTS:
            rows.warnings.append(
                f"hey keeps at most {HEY_MAX_RESULTS:,} results per run: this step was cut there "
                "(use shorter steps or --requests-per-step)"
            )
        return rows


class Vegeta(Engine):
    """vegeta (github.com/tsenart/vegeta): ``vegeta attack`` then ``vegeta encode -to csv``.

    Closed loop: ``-rate=0 -workers=N -max-workers=N`` (N workers sending back
    to back).  Open loop: ``-rate=R/1s``.  CSV (no header): Unix-ns timestamp
    of the request start, code, latency ns, bytes out, bytes in, error,
    base64 body, attack, seq, method, url, base64 headers.
    """

    name = "vegeta"
    supports_rate = True
    supports_requests = False

    def version(self) -> str:
        out = _run_quiet([self.path, "-version"])
        for line in out.splitlines():
            if line.startswith("Version:") and line.split(":", 1)[1].strip():
                return line.split(":", 1)[1].strip()
        return _go_module_version(self.path) or "unknown"

    def command(self, url: str, plan: StepPlan, workdir: Path, extra: list[str] | None = None) -> list[str]:
        cmd = [
            self.path,
            "attack",
            f"-targets={workdir / 'targets'}",
            f"-output={workdir / 'results.bin'}",
            f"-duration={go_duration(plan.duration_s or 1.0)}",
            f"-timeout={go_duration(plan.timeout_s)}",
            "-max-body=0",
        ]
        if plan.rate is not None:
            cmd.append(f"-rate={plan.rate:g}/1s")
            if plan.max_workers:
                cmd.append(f"-max-workers={plan.max_workers}")
        else:
            n = plan.concurrency or 1
            cmd += ["-rate=0", f"-workers={n}", f"-max-workers={n}"]
        return [*cmd, *(extra or [])]

    def prepare(self, url: str, workdir: Path) -> None:
        (workdir / "targets").write_text(f"GET {url}\n", encoding="utf-8")

    def postprocess(self, workdir: Path, timeout: float) -> None:
        with open(workdir / "out", "wb") as out:
            r = subprocess.run(
                [self.path, "encode", "-to", "csv", str(workdir / "results.bin")],
                stdout=out,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                start_new_session=True,  # a terminal's Ctrl-C must not kill it mid-step
            )
        if r.returncode != 0:
            msg = r.stderr.decode("utf-8", "replace").strip().splitlines()
            raise HeadroomError(f"vegeta encode failed: {msg[0] if msg else f'exit {r.returncode}'}")

    def parse(self, workdir: Path, launch_ns: int, plan: StepPlan) -> StepRows:
        from ..formats import vegeta

        rows = rows_from_scan(workdir / "out", vegeta.scan_csv, launch_ns)
        rows.transport_errors = sum(1 for c in rows.status if c == 0)
        if rows.transport_errors:
            rows.error_kinds = _kinds(_vegeta_errors(workdir / "out"))
        return rows


class Oha(Engine):
    """oha (github.com/hatoo/oha): ``oha -z D -c N --no-tui --output-format csv URL``.

    Open loop: ``-q R`` (all connections together) with ``--latency-correction``.
    CSV header ``request-start,DNS,DNS+dialup,Response-delay,request-duration,bytes,status``
    (seconds; start relative to the run), successful requests only, sorted by start.
    """

    name = "oha"
    supports_rate = True

    def version(self) -> str:
        out = _run_quiet([self.path, "--version"]).strip()
        return out.split()[-1] if out else "unknown"

    def command(self, url: str, plan: StepPlan, workdir: Path, extra: list[str] | None = None) -> list[str]:
        cmd = [self.path, "--no-tui", "--output-format", "csv", "-t", go_duration(plan.timeout_s)]
        if plan.requests is not None:
            cmd += ["-n", str(plan.requests)]
        else:
            cmd += ["-z", go_duration(plan.duration_s or 1.0)]
        if plan.rate is not None:
            cmd += ["-q", f"{plan.rate:g}", "--latency-correction", "-c", str(plan.max_workers or 200)]
        else:
            cmd += ["-c", str(plan.concurrency or 1)]
        return [*cmd, *(extra or []), url]

    def parse(self, workdir: Path, launch_ns: int, plan: StepPlan) -> StepRows:
        from ..formats import oha

        rows = rows_from_scan(workdir / "out", oha.scan_csv, launch_ns)
        if plan.requests is not None:
            rows.transport_errors = max(0, plan.requests - len(rows))
        return rows


#: headroom's listener as a locustfile of its own (not imported here: it imports Locust and gevent)
PLUGIN = Path(__file__).resolve().parent.parent / "locust" / "headroom_locust.py"


class Locust(Engine):
    """Locust (locust.io) running the user's locustfile, with headroom's listener (module docstring)."""

    name = "locust"
    supports_requests = False

    def __init__(self, path: str, locustfile: Path | None = None, prefix: list[str] | None = None):
        super().__init__(path)
        self.locustfile = locustfile
        self.prefix = prefix or [path]

    @classmethod
    def find(cls, options=None) -> Engine:
        import importlib.util
        import sys

        given = getattr(options, "locustfile", None)
        if not given:
            raise HeadroomError(
                "--engine locust needs --locustfile FILE (your locustfile: its users make the requests)"
            )
        lf = Path(given)
        if not lf.is_file():
            raise HeadroomError(f"--locustfile {given}: no such file")
        # this Python's Locust first: its listener (headroom.locust) must import this headroom
        if importlib.util.find_spec("locust") is not None:
            return cls(sys.executable, lf.resolve(), [sys.executable, "-m", "locust"])
        path = shutil.which("locust")
        if path is not None:
            return cls(path, lf.resolve())
        raise HeadroomError(f"locust not found: {INSTALL_HINT['locust']}")

    def version(self) -> str:
        out = _run_quiet([*self.prefix, "--version"], timeout=20.0).strip()
        return out.split(" from ")[0].replace("locust ", "") if out else "unknown"

    def command(self, url: str, plan: StepPlan, workdir: Path, extra: list[str] | None = None) -> list[str]:
        import math

        if plan.concurrency is None:
            raise HeadroomError("Locust cannot hold a fixed total rate: use --concurrency (or vegeta, oha)")
        n = plan.concurrency
        run_s = max(1, math.ceil(plan.duration_s or 1.0))
        return [
            *self.prefix, "-f", f"{self.locustfile},{PLUGIN}", "--headless", "--host", url.rstrip("/"),
            "-u", str(n), "-r", str(20 * n), "-t", f"{run_s}s", "--stop-timeout", "0",
            "--headroom-dir", str(workdir / "locust"), "--json-file", str(workdir / "locust-stats"),
            "--only-summary", "--exit-code-on-error", "0",
            "--loglevel", "WARNING", *(extra or []),
        ]  # fmt: skip

    def parse(self, workdir: Path, launch_ns: int, plan: StepPlan) -> StepRows:
        from ..formats import locust

        rows, failed_2xx = StepRows(name=[]), 0
        files = sorted((workdir / "locust").glob("locust*.csv"))
        if not files or not any(_has_request(f) for f in files):
            raise HeadroomError(f"Locust recorded no request{_task_error(workdir / 'err')}")
        kinds: dict[str, int] = {}
        for f in files:
            if not _has_request(f):  # a worker that ran no user at this level
                continue
            scan = locust.scan(f)
            for b in scan.batches():
                ok = b.ok
                status = np.where(~ok & (b.status >= 200) & (b.status <= 299), 0, b.status)
                failed_2xx += int((~ok & (b.status >= 200) & (b.status <= 299)).sum())
                rows.start_ns += b.start_ns.tolist()
                rows.response_time += [f"{x:.6f}" for x in b.latency_s.tolist()]
                rows.status += status.tolist()
                rows.name += [scan.names[i] for i in b.name.tolist()] if b.name is not None else [""] * len(b)
            rows.warnings += [w for w in scan.warnings if "truncated" in w]
            for text, n in _locust_errors(f).items():
                kinds[text] = kinds.get(text, 0) + n
        _same_as_locusts_count(workdir / "locust-stats.json", len(rows))
        rows.transport_errors = 0  # a failure without a response is a row with status 0
        rows.error_kinds = _kinds(kinds) if kinds else None
        if failed_2xx:
            rows.warnings.append(
                f"{failed_2xx:,} requests the locustfile failed on a 2xx answer are counted as errors with status 0"
            )
        return rows


def _same_as_locusts_count(stats: Path, rows: int) -> None:
    """Locust's own count of the step (its --json-file, written at exit, every worker's included) must be
    the listener's rows: else the step's files are incomplete (a worker's file lost, a process killed)."""
    import json

    try:
        counted = sum(int(e["num_requests"]) for e in json.loads(stats.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return  # no statistics (an older Locust): nothing to check against
    if counted != rows:
        raise HeadroomError(
            f"Locust counted {counted:,} requests but its listener wrote {rows:,} (a file missing?)"
        )


def _has_request(path: Path) -> bool:
    with open(path, "rb") as f:
        return any(line.startswith(b"request,") for line in f)


def _task_error(err: Path) -> str:
    """``: <the first error a task raised>`` from Locust's log, or a hint."""
    try:
        with open(err, encoding="utf-8", errors="replace") as f:
            for line in f:
                if "/ERROR/locust" in line:
                    return ": the locustfile's tasks raised " + line.split(": ", 1)[-1].strip()[:150]
    except OSError:
        pass
    return " (is the server down, or do the locustfile's users make no request?)"


def _locust_errors(path: Path) -> dict[str, int]:
    """The error texts of a headroom.locust file's failed requests, counted."""
    import csv

    dist: dict[str, int] = {}
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        for row in csv.reader(f):
            if len(row) > 9 and row[0] == "request" and row[6] == "0":
                dist[row[9]] = dist.get(row[9], 0) + 1
    return dist


def _vegeta_errors(path: Path) -> dict[str, int]:
    """vegeta's error texts (6th CSV column) of the rows with code 0, counted."""
    import csv

    dist: dict[str, int] = {}
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        for row in csv.reader(f):
            if len(row) > 5 and row[1] == "0":
                dist[row[5]] = dist.get(row[5], 0) + 1
    return dist


def rows_from_scan(path: Path, scan_csv, launch_ns: int, digits: int = 6) -> StepRows:
    """A step's rows as the format reader (``headroom.formats``) reads the generator's file; relative
    start times (hey, oha) placed after ``launch_ns``; latencies as text with ``digits`` decimals (6: to
    the microsecond); the status of every row (200 when the file has none)."""
    rows = StepRows()
    with open(path, "rb") as f:
        text = f.read(1 << 16)
    if not text.strip() or (b"request-start" in text and len(text.strip().splitlines()) == 1):
        return rows  # the generator wrote no request (its own error says why)
    scan = scan_csv(path)
    for b in scan.batches():
        start = b.start_ns + np.int64(launch_ns) if scan.relative else b.start_ns
        rows.start_ns += start.tolist()
        rows.response_time += [f"{x:.{digits}f}" for x in b.latency_s.tolist()]
        rows.status += b.status.tolist() if b.status is not None else [200] * len(b)
    return rows


def get_engine(name: str, options=None) -> Engine:
    """The engine called ``name``, found on PATH (exit 2 with an install hint otherwise); ``options``:
    the ramp's arguments (Locust's ``--locustfile``)."""
    cls = {"hey": Hey, "vegeta": Vegeta, "oha": Oha, "locust": Locust}.get(name)
    if cls is None:
        raise HeadroomError(f"unknown engine {name!r}: expected one of {', '.join(ENGINES)}")
    if getattr(options, "locustfile", None) and cls is not Locust:
        raise HeadroomError("--locustfile is for --engine locust")
    return cls.find(options)


def rate_engine(name: str | None) -> Engine:
    """The engine for an open-loop ``--rate`` ramp: vegeta or oha."""
    if name == "hey":
        raise HeadroomError(
            "--rate needs vegeta or oha: hey cannot hold a fixed total rate (its -q is per worker)"
        )
    if name == "locust":
        raise HeadroomError("--rate needs vegeta or oha: Locust cannot hold a fixed total rate")
    if name is not None:
        return get_engine(name)
    for cls in (Vegeta, Oha):
        if shutil.which(cls.name):
            return cls(shutil.which(cls.name))
    raise HeadroomError(
        "--rate needs vegeta or oha on PATH: install one with "
        "'go install github.com/tsenart/vegeta/v12@latest' or 'cargo install oha'"
    )
