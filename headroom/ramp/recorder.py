"""``headroom ramp``: record a ramp run by driving an existing load generator.

One generator run per step (hey by default; vegeta or oha on request), the
server's CPU sampled once a second with psutil, and a run folder that the
rest of headroom reads:

* ``perfResults.csv`` (or ``.csv.gz`` with ``--gzip``): one section per step,
  each starting with the header ``start-time,response-time,status-code``;
  start times RFC 3339 UTC with 9 fractional digits on one absolute time
  axis (the step's launch time plus the generator's relative offset, see
  ramp_engines.py), response times in seconds as the generator wrote them.
* ``cpuStats.csv``: ``timestamp,percentage`` (processes given with
  ``--cpu-pid`` and their children, percent of all the machine's cores) or one
  ``percentage`` column per CPU (the whole machine).
* ``generatorCpuStats.csv``: the load generator's own CPU, percent of one core.
* ``metadata.yml``: label (also as ``sha``), URL, engine and version, the ramp
  (``lower_concurrency``, ``upper_concurrency``, ``concurrency_step``,
  ``concurrency: [...]``), per-step requests, errors and times, CPU source and
  ``cpu_cores``, host, the generator's CPU and whether it was saturated,
  ``interrupted``.

Steps run back to back.  The metadata and the step sections are written
after every step, so the folder holds a valid run of the completed steps at
any moment.  Ctrl-C stops after the current step (a second Ctrl-C kills the
running generator and drops its partial step); the run is then marked
``interrupted: true`` and the exit code is 130.  Generators run in their own
session, so the terminal's Ctrl-C reaches headroom only, and each is killed
when it overruns its step's time limit.

Exit codes: 0 every step recorded; 1 the ramp stopped early (a generator
failed or overran, or a step got no response) but the completed steps are
recorded; 2 bad usage (bad URL, ramp spec, output folder, missing
generator, unreachable server); 130 interrupted (143 on SIGTERM).
"""

from __future__ import annotations

import gzip
import os
import platform
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..formats._scan import short
from ..model import HeadroomError, parse_duration
from ..profiles.capture import ProfileOptions, StepCapture, options_from_args
from ..profiles.capture import probe as probe_profiles
from .engines import Engine, Hey, StepPlan, StepRows, get_engine, rate_engine
from .metadata import HOST_FILE, foreign_summary, foreign_warning, levels_words, rfc3339_ns
from .metadata import build as build_metadata
from .metadata import write as write_metadata_file

#: files headroom ramp writes (removed first with --force)
OUTPUT_FILES = (
    "perfResults.csv",
    "perfResults.csv.gz",
    "cpuStats.csv",
    "generatorCpuStats.csv",
    "hostCpuStats.csv",
    "metadata.yml",
)
PERF_HEADER = "start-time,response-time,status-code\n"
#: the header of a run whose generator names its requests (Locust): every row's name last
PERF_HEADER_NAMED = "start-time,response-time,status-code,request-name\n"


def csv_field(text: str) -> str:
    """A request name as one CSV field: quoted when it holds a comma or a quote; line breaks as spaces
    (a row is one line)."""
    text = text.replace("\r", " ").replace("\n", " ")
    return f'"{text.replace(chr(34), chr(34) * 2)}"' if ("," in text or '"' in text) else text


# --------------------------------------------------------------------------
# parsing the options


def parse_levels(text: str, option: str) -> tuple[int, int, int | None, list[int]]:
    """``LOW:HIGH:STEP`` (or ``LOW:HIGH``, step 1, or ``N``), or a list ``1,2,4,8`` (step None) ->
    (low, high reached, step, levels)."""
    t = (text or "").strip()
    if "," in t:  # a list, as summary --concurrency takes it: the levels in the order given
        try:
            levels = [int(x) for x in t.split(",")]
        except ValueError:
            levels = []
        if not levels or min(levels) < 1:
            raise HeadroomError(
                f"bad {option} {short(text, 40)!r}: expected a list of whole numbers >= 1 (1,2,4,8)"
            )
        if len(levels) > 1000:
            raise HeadroomError(f"bad {option} {short(text, 40)!r}: {len(levels)} steps (at most 1000)")
        return min(levels), max(levels), None, levels
    m = re.fullmatch(r"\s*(\d+)\s*(?::\s*(\d+)\s*(?::\s*(\d+)\s*)?)?", t)
    if not m:
        raise HeadroomError(
            f"bad {option} {short(text, 40)!r}: expected LOW:HIGH:STEP such as 1:40:3 (or LOW:HIGH, one "
            "number, or a list such as 1,2,4,8)"
        )
    low, high, step = int(m[1]), int(m[2] or m[1]), int(m[3] or 1)
    if low < 1:
        raise HeadroomError(f"bad {option} {text!r}: LOW must be at least 1")
    if high < low:
        raise HeadroomError(f"bad {option} {text!r}: HIGH ({high}) is below LOW ({low})")
    if step < 1:
        raise HeadroomError(f"bad {option} {text!r}: STEP must be at least 1")
    levels = list(range(low, high + 1, step))
    if len(levels) > 1000:
        raise HeadroomError(f"bad {option} {text!r}: {len(levels)} steps (at most 1000)")
    return low, levels[-1], step, levels


def check_url(url: str) -> str:
    try:
        u = urllib.parse.urlsplit(url)
    except ValueError as e:
        raise HeadroomError(f"bad URL {url!r}: {e}") from None
    if u.scheme not in ("http", "https") or not u.hostname:
        raise HeadroomError(f"bad URL {url!r}: expected http://HOST[:PORT]/PATH or https://...")
    try:
        u.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        raise HeadroomError(f"bad URL {url!r}: bad port") from None
    return url


def _duration(text: str, option: str) -> float:
    try:
        return parse_duration(text)
    except HeadroomError as e:
        raise HeadroomError(f"{option}: {e}") from None


def _positive(text: str | None, option: str) -> int | None:
    if text is None:
        return None
    try:
        v = int(text)
    except ValueError:
        raise HeadroomError(f"bad {option} {text!r}: expected a whole number") from None
    if v < 1:
        raise HeadroomError(f"bad {option} {text!r}: must be at least 1")
    return v


def _pids(values: list[str], option: str = "--cpu-pid") -> list[int]:
    out = []
    for v in (x.strip() for value in values for x in value.split(",")):
        try:
            pid = int(v)
        except ValueError:
            raise HeadroomError(f"bad {option} {v!r}: expected a process id") from None
        if pid < 1:
            raise HeadroomError(f"bad {option} {v!r}: expected a process id")
        out.append(pid)
    return out


def prepare_output(path: Path, force: bool) -> Path:
    if path.exists() and not path.is_dir():
        raise HeadroomError(f"{path}: exists and is not a folder")
    if path.is_dir() and any(path.iterdir()):
        if not force:
            raise HeadroomError(f"{path}: folder exists and is not empty (use --force to write into it)")
        for name in OUTPUT_FILES:
            (path / name).unlink(missing_ok=True)
    path.mkdir(parents=True, exist_ok=True)
    return path


def preflight(url: str, timeout: float = 5.0) -> str | None:
    """One GET to see the server answers; returns a warning for a non-2xx answer."""
    import ssl  # here, not at the top: every headroom command imports this module for its parser
    import urllib.error
    import urllib.request

    handlers: list = [urllib.request.ProxyHandler({})]  # loopback servers: never through a proxy
    if url.startswith("https:"):
        handlers.append(urllib.request.HTTPSHandler(context=ssl._create_unverified_context()))
    opener = urllib.request.build_opener(*handlers)
    req = urllib.request.Request(url, headers={"User-Agent": f"headroom-ramp/{__version__}"})
    try:
        with opener.open(req, timeout=timeout) as r:
            r.read(1 << 20)
            return None
    except urllib.error.HTTPError as e:
        return f"{url} answered HTTP {e.code} before the ramp: those responses count as errors"
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise HeadroomError(f"cannot reach {url}: {reason}") from None


# --------------------------------------------------------------------------
# host facts


def host_info() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        os_name = platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except OSError:
        os_name = ""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "hostname": socket.gethostname(),
        "cores": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "os": os_name or platform.platform(),
        "python": platform.python_version(),
        "loadavg_at_start": load,
    }


def _affinity() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


# --------------------------------------------------------------------------
# time and rows


@dataclass
class Step:
    """One recorded step."""

    index: int
    concurrency: int | None
    rate: float | None
    launch_ns: int
    end_ns: int
    wall_s: float
    requests: int
    requested: int | None
    errors: int | None
    non2xx: int
    first_start_ns: int
    last_end_ns: int
    generator_cpu_pct: float
    warnings: list[str] = field(default_factory=list)
    cpu_s: float | None = None  # the server's CPU seconds from launch to exit (None: not sampled)
    rowless_errors: int | None = 0  # failed requests without a row in perfResults.csv (None: unknown)
    error_kinds: dict | None = None  # failed requests by kind (refused, reset, timeout, ...)
    #: (seconds on a CPU, seconds waiting on a run queue) of the server's threads (None: not measured)
    sched: tuple[float, float] | None = None

    @property
    def throughput(self) -> float:
        span = (self.last_end_ns - self.first_start_ns) / 1e9
        return self.requests / span if span > 0 and self.requests >= 2 else 0.0


class _Signals:
    """SIGINT: stop after this step (twice: now); SIGTERM: now.  Handlers only set flags."""

    def __init__(self):
        self.stop = False
        self.abort = False
        self.signum: int | None = None
        self.count = 0
        self._announced = 0
        self._old: dict[int, object] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()

    def _handle(self, signum, frame) -> None:
        self.count += 1
        self.signum = signum if self.signum is None or signum == signal.SIGTERM else self.signum
        if signum == signal.SIGTERM or self.stop:
            self.abort = True
        self.stop = True

    def announce(self, out) -> None:
        if self.count == self._announced or out is None:
            return
        self._announced = self.count
        if self.abort:
            print("headroom ramp: stopping now; the running step is dropped", file=out, flush=True)
        else:
            print(
                "headroom ramp: stopping after this step (Ctrl-C again to stop now and drop it)",
                file=out,
                flush=True,
            )


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def _kinds_text(kinds: dict | None) -> str:
    """``48,734 connection refused, 2 timeout`` (or ``kind unknown``)."""
    if not kinds:
        return "kind unknown"
    return ", ".join(f"{n:,} {k}" for k, n in kinds.items())


def _first_line(path: Path) -> str:
    try:
        for line in path.read_text(errors="replace").splitlines():
            if line.strip():
                return line.strip()[:200]
    except OSError:
        pass
    return ""


# --------------------------------------------------------------------------
# the recorder


#: a ramp step's length when --step-duration is not given (a search's probes: search.DEFAULT_PROBE)
DEFAULT_STEP = "3s"


class Recorder:
    def __init__(self, args, out: Path):
        self.args = args
        self.out = out
        self.url = check_url(args.url)
        self.force = args.force
        self.open_loop = args.rate is not None
        if args.rate is not None and args.concurrency is not None:
            raise HeadroomError("give --concurrency or --rate, not both")
        if self.open_loop:
            self.low, self.high, self.step, self.levels = parse_levels(args.rate, "--rate")
        else:
            self.low, self.high, self.step, self.levels = parse_levels(
                args.concurrency or "1:40:3", "--concurrency"
            )
        self.step_duration = _duration(args.step_duration or DEFAULT_STEP, "--step-duration")
        self.requests_per_step = _positive(args.requests_per_step, "--requests-per-step")
        self.request_timeout = _duration(args.timeout, "--timeout")
        self.cpu_interval = _duration(args.cpu_interval, "--cpu-interval")
        self.max_workers = _positive(args.max_workers, "--max-workers")
        self.pids = _pids(args.cpu_pid)
        # an A/B job: the other side's server; --exclude-pid: the rest of the system under test
        self.other_pids: list[int] = _pids(getattr(args, "exclude_pid", None) or [], "--exclude-pid")
        self.extra_metadata: dict = {}  # an A/B job: its ``ab`` block
        if self.requests_per_step is not None:
            if self.open_loop:
                raise HeadroomError("--requests-per-step is for a closed-loop (--concurrency) ramp")
            if self.requests_per_step < self.high:
                raise HeadroomError(
                    f"--requests-per-step {self.requests_per_step} is below the highest concurrency "
                    f"{self.high}: every worker needs at least one request"
                )
        if args.step_timeout is not None:
            self.step_limit = _duration(args.step_timeout, "--step-timeout")
        elif self.requests_per_step is not None:
            self.step_limit = 300.0
        else:
            self.step_limit = self.step_duration + self.request_timeout + 10.0
        self.engine: Engine = (
            rate_engine(args.engine) if self.open_loop else get_engine(args.engine or "hey", args)
        )
        if self.requests_per_step is not None and not self.engine.supports_requests:
            raise HeadroomError(f"{self.engine.name} has no request count: use --step-duration (or hey, oha)")
        self.label = args.label or out.resolve().name
        # the release the run belongs to (metadata sha, what history groups repeats by); an A/B job
        # sets it to the side's label (or job/side) so that its runs are repeats of one build
        self.release: str | None = None
        self.steps: list[Step] = []
        self.warnings: list[str] = []
        self.interrupted = False
        self.stopped_early: str | None = None
        #: where and why the ramp ended early: {step, concurrency or rate, reason, by, requests, errors, ...}
        self.stopped: dict | None = None
        self.start_ns = 0
        self.end_ns = 0
        self.engine_version = ""
        self.host: dict = {}
        self.affinity = _affinity()
        self.sampler = None
        self._step_cpu_s: float | None = None
        self._step_sched: tuple[float, float] | None = None
        self._perf = None
        self._named = False  # perfResults.csv carries request names (set by its first section)
        self.progress = sys.stderr if (args.progress or sys.stderr.isatty()) else None
        # CPU profiles per step (--pprof, --perf-pid); an A/B job sets each side's own
        self.profile_opts = ProfileOptions() if getattr(args, "ab", None) else options_from_args(args)
        self.capture: StepCapture | None = None

    # ---- plan of a step

    def plan(self, level: int) -> StepPlan:
        return StepPlan(
            concurrency=None if self.open_loop else level,
            rate=float(level) if self.open_loop else None,
            duration_s=None if self.requests_per_step is not None else self.step_duration,
            requests=self.requests_per_step,
            timeout_s=self.request_timeout,
            max_workers=self.max_workers,
        )

    # ---- one step

    def _run_generator(self, plan: StepPlan, workdir: Path, signals: _Signals):
        """Run the generator for one step, bounded by the step limit.

        Returns (outcome, exit code, launch ns, end ns, wall s, generator CPU s);
        outcome: ok, aborted (second Ctrl-C) or overran (killed at the limit).  The
        server's CPU seconds from launch to exit are left in ``_step_cpu_s``.
        """
        self.engine.prepare(self.url, workdir)
        cmd = self.engine.command(self.url, plan, workdir, self.args.engine_arg)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(workdir / "out", "wb") as out, open(workdir / "err", "wb") as err:
            cpu0 = self.sampler.mark()
            self._delay.start()
            t0 = time.monotonic()
            launch_ns = time.time_ns()
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True
            )
        self.sampler.set_generator(proc.pid)
        outcome, rc = "ok", None
        while True:
            try:
                rc = proc.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                pass
            signals.announce(self.progress or sys.stderr)
            if signals.abort:
                _kill_group(proc, signal.SIGKILL)
                proc.wait()
                outcome = "aborted"
                break
            if time.monotonic() - t0 > self.step_limit:
                _kill_group(proc, signal.SIGINT)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    _kill_group(proc, signal.SIGKILL)
                    proc.wait()
                outcome = "overran"
                break
        wall = time.monotonic() - t0
        end_ns = time.time_ns()
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        gen_cpu_s = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        self.sampler.set_generator(None, gen_cpu_s)
        self._step_cpu_s = self.sampler.mark() - cpu0
        self._step_sched = self._delay.stop()
        return outcome, rc, launch_ns, end_ns, wall, gen_cpu_s

    def run_step(
        self, k: int, level: int, tmp: Path, signals: _Signals
    ) -> tuple[str, Step | None, StepRows | None]:
        """Run step k; returns (outcome, step, rows); outcome: ok, aborted, overran, failed, empty.

        With profiles, the step's profile is taken in a thread from the step's launch and
        waited for (bounded) after it; a missing or late profile is a warning only."""
        if self.capture is None:
            return self._run_step(k, level, tmp, signals)
        self.capture.start(k, level)
        step = None
        try:
            outcome, step, rows = self._run_step(k, level, tmp, signals)
        finally:
            self.warnings.extend(self.capture.finish(keep=step is not None))
            self.extra_metadata.update(self.capture.metadata())
        return outcome, step, rows

    def _run_step(
        self, k: int, level: int, tmp: Path, signals: _Signals
    ) -> tuple[str, Step | None, StepRows | None]:
        plan = self.plan(level)
        workdir = tmp / f"step{k + 1:03d}"
        workdir.mkdir()
        outcome, rc, launch_ns, end_ns, wall, gen_cpu_s = self._run_generator(plan, workdir, signals)
        what = f"step {k + 1} ({self._level_text(level)})"
        if outcome == "aborted":
            return outcome, None, None
        if outcome == "overran":
            self.stopped_early = (
                f"{what}: {self.engine.name} ran longer than the step limit of {self.step_limit:g}s and was "
                "stopped; the step is dropped and the ramp ends there"
            )
            self._stop(k, level, "generator", self.stopped_early, 0, None, None)
            return outcome, None, None
        if rc != 0:
            msg = _first_line(workdir / "err") or _first_line(workdir / "out")
            self.stopped_early = f"{what}: {self.engine.name} exited with code {rc}: {msg}"
            self._stop(k, level, "generator", self.stopped_early, 0, None, None)
            return "failed", None, None
        try:
            self.engine.postprocess(workdir, timeout=max(30.0, self.step_limit))
            rows = self.engine.parse(workdir, launch_ns, plan)
        except (HeadroomError, OSError, subprocess.SubprocessError) as e:
            self.stopped_early = f"{what}: cannot read {self.engine.name}'s output: {e}"
            self._stop(k, level, "generator", self.stopped_early, 0, None, None)
            return "failed", None, None
        if len(rows) == 0:
            n = rows.transport_errors
            if n:
                self.stopped_early = (
                    f"{what}: the server stopped answering: all {n:,} requests failed "
                    f"({_kinds_text(rows.error_kinds)}); the ramp ends there"
                )
            else:
                self.stopped_early = (
                    f"{what}: no response recorded (is the server down?); the ramp ends there"
                )
            self._stop(k, level, "server", self.stopped_early, n or 0, n, rows.error_kinds)
            return "empty", None, None
        step = self._step_of(k, plan, (launch_ns, end_ns, wall, gen_cpu_s), rows, what)
        if self._server_stopped(k, level, what, step, rows):
            return "stopped", step, rows
        return "ok", step, rows

    def _step_of(self, k: int, plan, timing: tuple, rows: StepRows, what: str) -> Step:
        """The step as recorded: its requests, errors, span, and the generator's CPU."""
        launch_ns, end_ns, wall, gen_cpu_s = timing
        non2xx, errors, rowless = self._errors(rows)
        first = min(rows.start_ns)
        last_end = max(s + round(float(r) * 1e9) for s, r in zip(rows.start_ns, rows.response_time))
        return Step(
            index=k,
            concurrency=plan.concurrency,
            rate=plan.rate,
            launch_ns=launch_ns,
            end_ns=end_ns,
            wall_s=wall,
            requests=len(rows),
            requested=Hey.requested(plan) if self.engine.name == "hey" else plan.requests,
            errors=errors,
            non2xx=non2xx,
            first_start_ns=first,
            last_end_ns=last_end,
            generator_cpu_pct=100.0 * gen_cpu_s / wall if wall > 0 else 0.0,
            warnings=[f"{what}: {w}" for w in rows.warnings],
            cpu_s=self._step_cpu_s,
            sched=self._step_sched,
            rowless_errors=rowless,
            error_kinds=rows.error_kinds or None,
        )

    def _server_stopped(self, k: int, level: int, what: str, step: Step, rows: StepRows) -> bool:
        """Whether the server stopped answering in this step (the step is kept, the ramp ends)."""
        errors, rowless, transport = step.errors, step.rowless_errors, rows.transport_errors
        if transport is None and not self.answering():
            # the generator does not count its failed requests (oha -z): a server that no longer
            # answers stopped in this step, whose failures are unknown
            self.stopped_early = (
                f"{what}: the server stopped answering: {len(rows):,} responses, failed requests not counted "
                f"by {self.engine.name}, and it did not answer a request after the step; the step is kept "
                "and the ramp ends there"
            )
            self._stop(k, level, "server", self.stopped_early, None, None, None)
            return True
        if (transport or (errors and errors == len(rows))) and not self.answering():
            self.stopped_early = (
                f"{what}: the server stopped answering: {errors:,} of {len(rows) + rowless:,} requests "
                f"failed ({_kinds_text(rows.error_kinds)}) and it did not answer a request after the step; "
                "the step is kept and the ramp ends there"
            )
            self._stop(k, level, "server", self.stopped_early, len(rows) + rowless, errors, rows.error_kinds)
            return True
        return False

    def _errors(self, rows: StepRows) -> tuple[int, int | None, int | None]:
        """(non-2xx rows, failed requests, failed requests without a row); None: unknown."""
        non2xx = sum(1 for c in rows.status if not 200 <= c <= 299)
        transport = rows.transport_errors
        if transport is None:
            return non2xx, None, None
        if self.engine.name == "vegeta":
            return non2xx, non2xx, 0  # vegeta's transport errors are rows with code 0, already non-2xx
        return non2xx, non2xx + transport, transport

    def answering(self) -> bool:
        """After a step with failed requests: does the server still answer one GET (any status)?"""
        try:
            preflight(self.url, timeout=min(5.0, max(1.0, self.request_timeout)))
        except HeadroomError:
            return False
        return True

    def _stop(self, k: int, level, by: str, reason: str, requests: int | None, errors, kinds) -> None:
        """``stopped`` in metadata.yml: where the ramp ended and why (``by``: server or generator);
        ``requests`` None: the step is kept, but how many of its requests failed is unknown."""
        key = "rate" if self.open_loop else "concurrency"
        self.stopped = {
            "step": k + 1,
            key: float(level) if self.open_loop else level,
            "by": by,
            "reason": reason,
            "requests": requests,  # every request of that step, failed ones included
            "errors": errors,  # its failed requests (None: unknown)
            "error_kinds": kinds or None,
            # it has responses: a step of perfResults.csv
            "step_kept": requests is None or requests > (errors or 0),
        }

    def _level_text(self, level) -> str:
        return f"{level:g} req/s" if self.open_loop else f"concurrency {level}"

    # ---- writing

    def write_section(self, rows: StepRows) -> None:
        """One step's rows as a section of perfResults.csv; with a generator that names its requests
        (Locust), every row's name in a fourth column, request-name (every section alike)."""
        if self._perf is None:
            self._named = rows.name is not None
            self._perf = open(self.out / "perfResults.csv", "w", encoding="utf-8" if self._named else "ascii",
                              newline="")  # fmt: skip
        f = self._perf
        if not self._named:
            f.write(PERF_HEADER)
            f.writelines(
                f"{rfc3339_ns(s)},{r},{c}\n"
                for s, r, c in zip(rows.start_ns, rows.response_time, rows.status)
            )
        else:
            names = rows.name if rows.name is not None else [""] * len(rows)
            f.write(PERF_HEADER_NAMED)
            f.writelines(f"{rfc3339_ns(s)},{r},{c},{csv_field(n)}\n"
                         for s, r, c, n in zip(rows.start_ns, rows.response_time, rows.status, names))  # fmt: skip
        f.flush()

    def write_cpu(self) -> None:
        s = self.sampler
        if s is None:
            return
        ncol = s.columns
        with open(self.out / "cpuStats.csv", "w", encoding="ascii", newline="") as f:
            f.write("timestamp," + ",".join(["percentage"] * ncol) + "\n")
            for ts, vals in s.server_rows:
                f.write(rfc3339_ns(ts) + "," + ",".join(f"{v:.6f}" for v in vals) + "\n")
        with open(self.out / "generatorCpuStats.csv", "w", encoding="ascii", newline="") as f:
            f.write("timestamp,percentage\n")
            for ts, v in s.generator_rows:
                f.write(f"{rfc3339_ns(ts)},{v:.6f}\n")
        with open(self.out / HOST_FILE, "w", encoding="ascii", newline="") as f:
            f.write("timestamp,foreign_pct,steal_pct\n")
            for r in s.host.rows:
                steal = "" if r.steal_pct is None else f"{r.steal_pct:.3f}"
                f.write(f"{rfc3339_ns(r.end_ns)},{r.foreign_pct:.3f},{steal}\n")

    def metadata(self) -> dict:
        return build_metadata(self)

    def foreign_summary(self) -> dict | None:
        return foreign_summary(self)

    def write_metadata(self) -> None:
        write_metadata_file(self)

    # ---- the generator as the ceiling

    def _saturation(self) -> list[str]:
        """Warnings when the load generator (or the whole machine), not the server, was the limit."""
        steps = self.steps
        if not steps:
            return []
        cap = 100.0 * len(self.affinity)
        out = []
        pegged = [s for s in steps if s.generator_cpu_pct >= 0.9 * cap]
        if pegged:
            worst = max(pegged, key=lambda s: s.generator_cpu_pct)
            out.append(
                f"the load generator was saturated: {self.engine.name} used {worst.generator_cpu_pct:.0f}% CPU "
                f"of the {cap:.0f}% its {len(self.affinity)} core(s) allow at {len(pegged)} step(s) "
                f"(first: step {pegged[0].index + 1}): the client, not the server, set the ceiling"
            )
        best = max(s.throughput for s in steps)
        tail = steps[-3:]
        flat = len(steps) >= 4 and best > 0 and all(s.throughput >= 0.95 * best for s in tail)
        if flat and not pegged:
            busy = [s.generator_cpu_pct for s in tail]
            if min(busy) >= 0.75 * cap:
                out.append(
                    f"throughput stayed flat at about {best:,.0f} req/s over the last {len(tail)} steps while "
                    f"{self.engine.name} used {min(busy):.0f}-{max(busy):.0f}% CPU of its {cap:.0f}%: "
                    "the load generator may have set the ceiling"
                )
            if not self.pids and self.sampler is not None:
                machine = [self.sampler.mean_between(s.launch_ns, s.end_ns) for s in tail]
                if all(x is not None and x >= 95 for x in machine):
                    out.append(
                        f"the whole machine was busy ({min(machine):.0f}% of all CPUs) while throughput stayed "
                        "flat: server and generator compete for the same cores"
                    )
        return out

    # ---- the run

    def progress_line(self, step: Step) -> None:
        if self.progress is None:
            return
        n = len(self.levels)
        lvl = f"rate {step.rate:>7g}" if self.open_loop else f"concurrency {step.concurrency:>4}"
        err = "unknown" if step.errors is None else f"{step.errors:,}"
        if step.errors is None and step.non2xx:
            err = f"{step.non2xx:,} non-2xx + unknown"
        who = f"{self.label}  " if self.extra_metadata else ""  # an A/B job: whose step
        print(
            f"{who}step {step.index + 1:>{len(str(n))}}/{n}  {lvl}  {step.requests:>10,} req  "
            f"{step.throughput:>9,.0f} req/s  errors {err}  generator CPU {step.generator_cpu_pct:.0f}%",
            file=self.progress,
            flush=True,
        )

    def setup(self) -> None:
        """Check the PIDs and the server, and note versions, before anything is written."""
        from .cpu import CpuSampler, RunDelay

        self.sampler = CpuSampler(self.pids, self.cpu_interval, other_pids=self.other_pids)
        self._delay = RunDelay(self.sampler.server)  # the server's run-queue waits, per step
        w = preflight(self.url)
        if w:
            self.warnings.append(w)
        if self.profile_opts.any:
            step_s = None if self.requests_per_step is not None else self.step_duration
            self.capture = StepCapture(self.profile_opts, self.out, step_s)  # refuses steps too short
            probe_profiles(self.profile_opts)
            self.extra_metadata.update(self.capture.metadata())
        self.engine_version = self.engine.version()
        self.host = host_info()

    def announce(self) -> None:
        """One line on the terminal: what this ramp will do."""
        say = self.progress
        if say is None:
            return
        what = (
            f"rates {levels_words(self.low, self.high, self.step, self.levels)} req/s"
            if self.open_loop
            else f"concurrency {levels_words(self.low, self.high, self.step, self.levels)}"
        )
        each = f"{self.requests_per_step} requests" if self.requests_per_step else f"{self.step_duration:g} s"
        cpu = (
            f"CPU of PID(s) {' '.join(map(str, self.pids))} and children"
            if self.pids
            else "CPU of the whole machine"
        )
        print(
            f"headroom ramp: {len(self.levels)} steps ({what}, {each} each) against {self.url} with "
            f"{self.engine.name} {self.engine_version}; {cpu}; writing {self.out}",
            file=say,
            flush=True,
        )

    def begin(self) -> None:
        """Start the clock and the CPU sampler (after :meth:`setup`)."""
        self.start_ns = time.time_ns()
        self.sampler.start()

    def step_once(self, k: int, tmp: Path, signals: _Signals) -> bool:
        """Record step ``k`` (of ``self.levels``) and write it; False when the ramp ends here."""
        outcome, step, rows = self.run_step(k, self.levels[k], tmp, signals)
        shutil.rmtree(tmp / f"step{k + 1:03d}", ignore_errors=True)
        if step is None:
            self.end_ns = time.time_ns()
            self.write_metadata()
            return False
        self.write_section(rows)
        self.steps.append(step)
        self.warnings.extend(step.warnings)
        self.end_ns = time.time_ns()
        self.write_metadata()
        self.progress_line(step)
        return outcome == "ok"

    def end(self, signals: _Signals) -> None:
        """Stop the sampler and write the CPU files and the final metadata (also after a failure)."""
        self.sampler.finish()
        if self._perf is None and self.stopped is not None and self.stopped["by"] == "server":
            # the server answered nothing at all: a request file of one empty section, so that the run
            # is read (and judged: it stopped answering in step 1), not refused as no run
            (self.out / "perfResults.csv").write_text(PERF_HEADER, encoding="ascii")
        if self._perf is not None:
            self._perf.close()
        self.interrupted = signals.signum is not None
        if not self.end_ns:
            self.end_ns = time.time_ns()
        self.warnings.extend(self._saturation())
        w = foreign_warning(self)
        if w:
            self.warnings.append(w)
        self.write_cpu()
        self.write_metadata()
        if self.args.gzip and (self.out / "perfResults.csv").exists():
            src = self.out / "perfResults.csv"
            with (
                open(src, "rb") as fi,
                gzip.open(self.out / "perfResults.csv.gz", "wb", compresslevel=9) as fo,
            ):
                shutil.copyfileobj(fi, fo, 1 << 20)
            src.unlink()
        self._telemetry()

    def _telemetry(self) -> None:
        """psutil's RSS of the --cpu-pid tree, and --prometheus telemetry: never an error."""
        from ..telemetry.load import record_time

        if self.steps:
            window = (min(s.first_start_ns for s in self.steps), max(s.last_end_ns for s in self.steps))
            for path in record_time(self.args, self.out, window, self.warnings.append, self.sampler):
                print(f"headroom ramp: wrote {path}", file=sys.stderr)

    def record(self, signals: _Signals | None = None) -> int:
        """Record the ramp; ``signals``: an A/B job's handler, already installed (else our own)."""
        own = signals is None
        signals = _Signals() if own else signals
        self.announce()
        if own:
            signals.install()
        self.begin()
        try:
            with tempfile.TemporaryDirectory(prefix="headroom-ramp-") as tmpname:
                tmp = Path(tmpname)
                for k in range(len(self.levels)):
                    if signals.stop or not self.step_once(k, tmp, signals):
                        break
        finally:
            if own:
                signals.restore()
            self.end(signals)
        return self.finish(signals)

    def finish(self, signals: _Signals) -> int:
        for w in self.warnings:
            print(f"headroom: warning: {w}", file=sys.stderr)
        n = sum(s.requests for s in self.steps)
        if self.steps:
            best = max(self.steps, key=lambda s: s.throughput)
            print(
                f"headroom ramp: wrote {self.out}: {len(self.steps)} of {len(self.levels)} steps, {n:,} requests, "
                f"max step throughput {best.throughput:,.0f} req/s at {self._level_text(best.rate if self.open_loop else best.concurrency)}",
                file=sys.stderr,
            )
        else:
            print(f"headroom ramp: no step completed; {self.out} holds no requests", file=sys.stderr)
        if self.interrupted:
            print("headroom ramp: interrupted; metadata.yml says interrupted: true", file=sys.stderr)
            return 143 if signals.signum == signal.SIGTERM else 130
        if self.stopped_early:
            print(f"headroom ramp: stopped early: {self.stopped_early}", file=sys.stderr)
            return 1
        return 0
