"""Build, start and stop the Go test server in ``testserver/`` (see testserver/README.md).

    from goserver import GoServer    # tests/ on sys.path, as under pytest; or: from tests.goserver import ...

    with GoServer(work=4000, delay=0.002, cpu=1) as srv:
        print(srv.url, srv.pid)      # http://127.0.0.1:PORT/ and the server's own PID

``build()`` compiles the server once per source version into a cache folder
(``$HEADROOM_GOSERVER_CACHE``, else ``$XDG_CACHE_HOME/headroom/goserver``, else
``~/.cache/headroom/goserver``) keyed by a hash of ``testserver/*.go``, ``go.mod`` and
``go.sum``. It raises :class:`GoMissing` when no ``go`` is found (on PATH, then
``/usr/local/go/bin/go``). Nothing here imports pytest, so scripts can use it too.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import weakref
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent.parent / "testserver"
GO_FALLBACK = Path("/usr/local/go/bin/go")
BUILD_TIMEOUT = 600.0  # the first build may download modules through the Go proxy
_LISTENING = re.compile(r"^listening on (http://(\S+):(\d+))\s*$")

__all__ = ["GoMissing", "GoServer", "build", "find_go", "source_hash"]


class GoMissing(RuntimeError):
    """No Go toolchain was found, so the test server cannot be built."""


def find_go() -> str:
    """The ``go`` command: on PATH, else /usr/local/go/bin/go; GoMissing if neither."""
    found = shutil.which("go")
    if found:
        return found
    if GO_FALLBACK.is_file() and os.access(GO_FALLBACK, os.X_OK):
        return str(GO_FALLBACK)
    raise GoMissing(
        f"the Go toolchain ('go') is needed to build the test server in {SOURCE_DIR}, "
        f"but it is neither on PATH nor at {GO_FALLBACK}; install Go >= 1.26 (https://go.dev/dl/)"
    )


def source_hash(source_dir: Path = SOURCE_DIR) -> str:
    """A hash of the server's sources: every *.go file, go.mod and go.sum."""
    files = sorted(source_dir.glob("*.go")) + [source_dir / "go.mod", source_dir / "go.sum"]
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _cache_root() -> Path:
    if os.environ.get("HEADROOM_GOSERVER_CACHE"):
        return Path(os.environ["HEADROOM_GOSERVER_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "headroom" / "goserver"


def build(dest_dir: str | os.PathLike | None = None) -> Path:
    """Build the server (once per source hash) and return the path of the binary.

    The binary is ``<dest_dir or cache root>/<source hash>/testserver``; an existing one
    is reused. The build goes to a temporary name first and is renamed into place, so
    concurrent builds (e.g. pytest-xdist workers) never see a half-written binary.
    """
    folder = Path(dest_dir) if dest_dir is not None else _cache_root()
    binary = folder / source_hash() / "testserver"
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    go = find_go()
    binary.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".testserver-", dir=binary.parent)
    os.close(fd)
    try:
        done = subprocess.run(
            [go, "build", "-trimpath", "-o", tmp, "."],
            cwd=SOURCE_DIR,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"'go build' of {SOURCE_DIR} failed (exit {done.returncode}):\n{done.stderr.strip()}"
            )
        os.replace(tmp, binary)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return binary


def built_or_skip() -> Path:
    """The test server's binary for a test fixture: built (cached), or the test skipped when Go is
    missing; under HEADROOM_REQUIRE_TOOLS=1 (CI) a missing Go fails the test instead."""
    import pytest

    try:
        return build()
    except GoMissing as e:
        if os.environ.get("HEADROOM_REQUIRE_TOOLS") == "1":
            pytest.fail(f"HEADROOM_REQUIRE_TOOLS=1 but: {e}")
        pytest.skip(str(e))


def _duration(value: float | str | None) -> str | None:
    """A Go duration flag value from seconds (float) or a Go duration string."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return f"{round(float(value) * 1e9)}ns"


_live: weakref.WeakSet[GoServer] = weakref.WeakSet()


@atexit.register
def _stop_forgotten() -> None:
    for server in list(_live):
        server.stop()


class GoServer:
    """One running test server process (a context manager; ``stop()`` is idempotent).

    Knobs map to the server's flags: ``work`` (-work, SHA-256 rounds), ``delay``
    (-delay; seconds as a float or a Go duration string), ``alloc`` (-alloc bytes),
    ``body`` (-body bytes, server default 1024), ``crash_at`` (-crash-at-concurrency),
    ``hang_at`` (-hang-at-concurrency), ``crash_after``, ``hang_after``, ``fail_after``
    (-crash-after-requests, -hang-after-requests, -fail-after-requests: the fault from request
    N+1 to / on), ``fail_at`` (-fail-at-concurrency: 503 to a request that makes C in flight),
    ``regexp_per_request`` (-regexp-per-request: the
    route regexp compiled on every request), ``pool`` (-pool: the -alloc buffer from a
    sync.Pool), ``max_lifetime`` (-max-lifetime, a safety net
    for forgotten servers), ``extra_args`` (more flags, verbatim). ``cpu`` pins the
    process to CPUs (an int, an iterable of ints or a taskset list such as "1" or
    "0-1") with ``os.sched_setaffinity`` before it execs, so every Go thread inherits
    it and GOMAXPROCS follows; ``env`` adds environment variables (e.g. GOMAXPROCS).

    After ``start()`` (or entering the ``with`` block): ``.pid``, ``.port``, ``.url``
    (``http://127.0.0.1:PORT/``), ``.base`` (the same without the slash), ``.proc``.
    """

    def __init__(
        self,
        work: int = 0,
        delay: float | str | None = None,
        alloc: int = 0,
        crash_at: int = 0,
        hang_at: int = 0,
        extra_args: Iterable[str] = (),
        cpu: int | str | Iterable[int] | None = None,
        *,
        crash_after: int = 0,
        hang_after: int = 0,
        fail_after: int = 0,
        fail_at: int = 0,
        body: int | None = None,
        regexp_per_request: bool = False,
        pool: bool = False,
        max_lifetime: float | str = "10m",
        env: Mapping[str, str] | None = None,
        binary: str | os.PathLike | None = None,
        start_timeout: float = 15.0,
    ):
        self.work, self.delay, self.alloc, self.body = work, delay, alloc, body
        self.crash_at, self.hang_at = crash_at, hang_at
        self.crash_after, self.hang_after, self.fail_after = crash_after, hang_after, fail_after
        self.fail_at = fail_at
        self.regexp_per_request, self.pool = regexp_per_request, pool
        self.extra_args = tuple(extra_args)
        self.cpus = _parse_cpus(cpu)
        self.max_lifetime = max_lifetime
        self.env = dict(env or {})
        self.binary = Path(binary) if binary is not None else None
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None
        self.port: int | None = None
        self.url: str | None = None
        self.base: str | None = None
        self._stderr: deque[str] = deque(maxlen=200)
        self._threads: list[threading.Thread] = []

    def args(self) -> list[str]:
        """The server's command line (binary first)."""
        a = [str(self.binary or build()), "-listen", "127.0.0.1:0"]
        if self.work:
            a += ["-work", str(int(self.work))]
        if self.delay is not None:
            a += ["-delay", _duration(self.delay)]
        if self.alloc:
            a += ["-alloc", str(int(self.alloc))]
        if self.body is not None:
            a += ["-body", str(int(self.body))]
        if self.crash_at:
            a += ["-crash-at-concurrency", str(int(self.crash_at))]
        if self.hang_at:
            a += ["-hang-at-concurrency", str(int(self.hang_at))]
        for flag, n in (
            ("-crash-after-requests", self.crash_after),
            ("-hang-after-requests", self.hang_after),
            ("-fail-after-requests", self.fail_after),
            ("-fail-at-concurrency", self.fail_at),
        ):
            if n:
                a += [flag, str(int(n))]
        if self.regexp_per_request:
            a.append("-regexp-per-request")
        if self.pool:
            a.append("-pool")
        a += ["-max-lifetime", _duration(self.max_lifetime)]
        return a + list(self.extra_args)

    def start(self) -> GoServer:
        if self.proc is not None:
            raise RuntimeError("this GoServer was already started")
        if os.environ.get("PYTEST_XDIST_WORKER"):  # in a test: one that must run alone
            from conftest import require_live

            require_live("the Go test server")
        args = self.args()
        cpus = self.cpus
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **self.env},
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
        )
        self.pid = self.proc.pid
        _live.add(self)
        listening = threading.Event()
        found: list[re.Match] = []

        def read_stdout(stream):
            for raw in stream:
                m = _LISTENING.match(raw.decode(errors="replace"))
                if m and not found:
                    found.append(m)
                    listening.set()
            listening.set()  # EOF: the process ended (or closed stdout) before listening

        def read_stderr(stream):
            for raw in stream:
                self._stderr.append(raw.decode(errors="replace").rstrip("\n"))

        for target, stream in ((read_stdout, self.proc.stdout), (read_stderr, self.proc.stderr)):
            t = threading.Thread(target=target, args=(stream,), daemon=True, name=f"goserver-{self.pid}")
            t.start()
            self._threads.append(t)

        if not listening.wait(self.start_timeout) or not found:
            ended = self.proc.poll()
            code = self.stop()
            why = f"it exited with code {ended}" if ended is not None else f"stopped it, code {code}"
            raise RuntimeError(
                f"test server {args} did not print 'listening on' within {self.start_timeout}s "
                f"({why}); stderr:\n{self.stderr}"
            )
        m = found[0]
        self.port = int(m.group(3))
        self.base = m.group(1)
        self.url = self.base + "/"
        return self

    @property
    def stderr(self) -> str:
        """The last 200 lines the server wrote to stderr."""
        return "\n".join(self._stderr)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the process to end by itself; its exit code (TimeoutExpired if it does not)."""
        assert self.proc is not None, "not started"
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM the PID, wait up to ``timeout``, then SIGKILL. Returns the exit code
        (negative: killed by that signal), or None if it was never started."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # SIGKILL to this PID
                self.proc.wait(timeout)
        for t in self._threads:
            t.join(2.0)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()
        _live.discard(self)
        return self.proc.returncode

    def __enter__(self) -> GoServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "not started" if self.proc is None else ("running" if self.alive() else "ended")
        return f"<GoServer pid={self.pid} url={self.url} {state}>"


def _parse_cpus(cpu) -> set[int] | None:
    """CPUs from an int, an iterable of ints or a taskset-style list ("1", "0-2,5")."""
    if cpu is None:
        return None
    if isinstance(cpu, int):
        return {cpu}
    if isinstance(cpu, str):
        out: set[int] = set()
        for part in cpu.split(","):
            lo, _, hi = part.strip().partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
        return out
    return {int(c) for c in cpu}
