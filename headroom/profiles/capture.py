"""Take a CPU profile of the server during every step of ``headroom ramp``.

``--pprof BASE_URL``: at each step's launch a thread asks the Go server for
``BASE_URL/debug/pprof/profile?seconds=N`` (N whole seconds, Go's endpoint
takes no fractions, fitted inside the step and centred in it) and keeps the
answer as served (gzip) in ``RUN/profiles/step-003-c9.pb.gz``.  With
``--pprof-heap`` an allocs profile follows at the step's end
(``step-003-c9.allocs.pb.gz``).  ``--perf-pid PID`` runs ``perf record -F 99
-g`` on PID for the same window and keeps collapsed stacks
(``step-003-c9.perf.txt``).

Before the ramp the endpoint is asked once (``/debug/pprof/``): a 404, a
refusal or no answer within the timeout is bad usage (exit 2).  During the
ramp a profile that fails, is not a CPU profile, or has not arrived a few
seconds after its step ended is a warning; the step's load data is always
written, and a late profile is dropped, never written afterwards.
"""

from __future__ import annotations

import math
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from ..model import HeadroomError
from .steps import PROFILES_DIR

PROBE_TIMEOUT_S = 5.0
GRACE_S = 3.0  # a profile may arrive this long after its window before it is late
MIN_STEP_S = 1.5  # the shortest step a 1 s profile fits in


@dataclass(frozen=True)
class ProfileOptions:
    """The recording options of one side: where to ask, and for how long each step."""

    pprof: str | None = None  # base URL of the Go server (its /debug/pprof/ is asked)
    heap: bool = False
    perf_pid: int | None = None
    timeout_s: float = 10.0

    @property
    def any(self) -> bool:
        return bool(self.pprof or self.perf_pid)


def options_from_args(args, side: str | None = None) -> ProfileOptions:
    """The profile options of ``headroom ramp`` (``side``: "a"/"b" of an --ab job)."""
    get = lambda name: getattr(args, name, None)  # noqa: E731
    if side is None:
        url, perf = get("pprof"), get("perf_pid")
        for opt in ("pprof_a", "pprof_b"):
            if get(opt):
                raise HeadroomError(f"--{opt.replace('_', '-')} is for an A/B job (--ab): give --pprof URL")
    else:
        if get("pprof"):
            raise HeadroomError("--pprof is not for --ab: give --pprof-a URL and --pprof-b URL")
        if get("perf_pid"):
            raise HeadroomError("--perf-pid is not for --ab: profile one server with a plain ramp")
        url, perf = get(f"pprof_{side}"), None
    if get("pprof_heap") and not (url or get("pprof_a") or get("pprof_b")):
        raise HeadroomError("--pprof-heap needs --pprof URL (or --pprof-a/--pprof-b)")
    if url:
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise HeadroomError(f"bad --pprof URL {url!r}: expected http://HOST:PORT of the Go server")
    pid = None
    if perf is not None:
        try:
            pid = int(perf)
        except ValueError:
            raise HeadroomError(f"bad --perf-pid {perf!r}: expected a process id") from None
    return ProfileOptions(pprof=url or None, heap=bool(get("pprof_heap")), perf_pid=pid)


def endpoint(base: str, what: str = "profile", seconds: int | None = None) -> str:
    """``BASE/debug/pprof/WHAT[?seconds=N]`` (a base already ending in /debug/pprof/ is kept)."""
    u = base.rstrip("/")
    if not u.endswith("/debug/pprof"):
        u += "/debug/pprof"
    u += f"/{what}" if what else "/"
    return u + (f"?seconds={seconds}" if seconds else "")


def fit(step_s: float | None) -> tuple[int, float]:
    """(profile seconds N, delay after the step's launch): N whole seconds centred in the step."""
    if step_s is None:
        raise HeadroomError(
            "--pprof/--perf-pid need steps of a known length: give --step-duration, not --requests-per-step"
        )
    if step_s < MIN_STEP_S:
        raise HeadroomError(
            f"--step-duration {step_s:g}s is too short for a profile: steps of at least {MIN_STEP_S:g}s "
            "take a profile of 1 s (Go's endpoint counts whole seconds)"
        )
    n = max(1, math.floor(step_s - 0.5))
    return n, (step_s - n) / 2


def _opener():
    import urllib.request

    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(url: str, timeout: float) -> bytes:
    """GET ``url``; HeadroomError in one line on anything but a 200 within ``timeout``."""
    import urllib.error

    try:
        with _opener().open(url, timeout=timeout) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        hint = " (is net/http/pprof registered? see docs/profiles.md)" if e.code == 404 else ""
        raise HeadroomError(f"{url} answered HTTP {e.code}{hint}") from None
    except TimeoutError:
        raise HeadroomError(f"{url} did not answer within {timeout:g}s") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        if isinstance(reason, TimeoutError):
            raise HeadroomError(f"{url} did not answer within {timeout:g}s") from None
        raise HeadroomError(f"{url}: {reason}") from None


def probe(opts: ProfileOptions) -> None:
    """Before the ramp: does the pprof endpoint answer, does perf work on the PID? (exit 2 if not)"""
    if opts.pprof:
        http_get(endpoint(opts.pprof, ""), min(PROBE_TIMEOUT_S, opts.timeout_s))
    if opts.perf_pid:
        from .perf import check_perf

        check_perf(opts.perf_pid)


class StepCapture:
    """Profiles of one recorder's steps: :meth:`start` at launch, :meth:`finish` after the step."""

    def __init__(self, opts: ProfileOptions, out: Path, step_s: float | None):
        self.opts = opts
        self.dir = out / PROFILES_DIR
        self.seconds, self.delay = fit(step_s)
        self._job: _Job | None = None
        self.taken = 0
        self.failed = 0

    def start(self, k: int, level) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        stem = f"step-{k + 1:03d}-c{level}" if isinstance(level, int) else f"step-{k + 1:03d}"
        self._job = _Job(self, stem, k)
        self._job.thread.start()

    def finish(self, keep: bool = True) -> list[str]:
        """Wait (bounded) for this step's profile; warnings.  ``keep=False``: the step was dropped."""
        job, self._job = self._job, None
        if job is None:
            return []
        wait = job.t0 + self.delay + self.seconds + GRACE_S - time.monotonic()
        job.thread.join(max(0.0, wait))
        with job.lock:
            job.closed = True
            done, written, errors = not job.thread.is_alive(), list(job.written), list(job.errors)
        if not keep:
            for p in written:
                p.unlink(missing_ok=True)
            return []
        what = f"step {job.k + 1}"
        if not done:
            errors.append(f"no profile {GRACE_S:g}s after its {self.seconds}s window: left out (late)")
        if written and not errors:
            self.taken += 1
        if errors:
            self.failed += 1
        if keep and written and self.opts.heap and self.opts.pprof:
            errors += _heap(self, job)
        return [f"{what}: profile: {e}" for e in errors]

    def metadata(self) -> dict:
        return {
            "profiles": {
                "folder": PROFILES_DIR,
                "pprof": self.opts.pprof,
                "perf_pid": self.opts.perf_pid,
                "heap": self.opts.heap,
                "seconds": self.seconds,
                "delay_s": round(self.delay, 3),
                "taken": self.taken,
                "failed": self.failed,
            }
        }


class _Job:
    """One step's profile fetch in a thread; writes only while the step still waits for it."""

    def __init__(self, cap: StepCapture, stem: str, k: int):
        self.cap, self.stem, self.k = cap, stem, k
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.closed = False
        self.written: list[Path] = []
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self.run, daemon=True, name=f"headroom-profile-{stem}")

    def run(self) -> None:
        cap = self.cap
        time.sleep(cap.delay)
        results: list[tuple[str, bytes | str]] = []
        if cap.opts.pprof:
            results.append(("pprof", _fetch_cpu(cap.opts, cap.seconds)))
        if cap.opts.perf_pid:
            from .perf import record_collapsed

            results.append(("perf", record_collapsed(cap.opts.perf_pid, cap.seconds)))
        with self.lock:
            if self.closed:
                return
            for kind, got in results:
                if isinstance(got, str):
                    self.errors.append(got)
                    continue
                name = f"{self.stem}.pb.gz" if kind == "pprof" else f"{self.stem}.perf.txt"
                if kind == "pprof" and got[:2] != b"\x1f\x8b":
                    name = f"{self.stem}.pb"
                path = cap.dir / name
                path.write_bytes(got)
                self.written.append(path)


def _fetch_cpu(opts: ProfileOptions, seconds: int) -> bytes | str:
    """The CPU profile as served, or one line saying why not."""
    from .read import read_profile

    url = endpoint(opts.pprof, "profile", seconds)
    try:
        data = http_get(url, seconds + opts.timeout_s)
    except HeadroomError as e:
        return str(e)
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".pb.gz") as f:  # check it is a CPU profile before keeping it
        f.write(data)
        f.flush()
        try:
            read_profile(f.name)
        except HeadroomError as e:
            return f"{url}: {str(e).split(': ', 1)[-1]}"
    return data


def _heap(cap: StepCapture, job: _Job) -> list[str]:
    try:
        data = http_get(endpoint(cap.opts.pprof, "allocs"), cap.opts.timeout_s)
    except HeadroomError as e:
        return [f"allocs: {e}"]
    (cap.dir / f"{job.stem}.allocs.pb.gz").write_bytes(data)
    return []
