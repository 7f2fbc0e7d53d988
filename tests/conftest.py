import datetime
import gzip
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "data" / "runs"
RUN_NAMES = ["nginx-no-keepalive", "nginx-keepalive", "nginx-keepalive-repeat"]


# --------------------------------------------------------------------------
# outside tools: a test that needs one skips without it, unless the tools are required
# (HEADROOM_REQUIRE_TOOLS=1, set by .ci/run): then a missing tool fails the test.  The two
# older flags still require their own tools.

TOOL_INSTALL = {
    "nginx": "apt-get install nginx",
    "hey": "apt-get install hey",
    "ab": "apt-get install apache2-utils",
    "chromium": "apt-get install chromium",
    "go": "https://go.dev/dl/ into /usr/local/go",
    "vegeta": "go install github.com/tsenart/vegeta/v12@latest",
    "oha": "cargo install --locked oha",
    "perf": "apt-get install linux-perf",
    "prometheus": "apt-get install prometheus",
}
#: where a tool may be installed without being on PATH (Debian's sbin, go install, cargo install)
TOOL_DIRS = {
    "nginx": ["/usr/sbin", "/usr/local/sbin"],
    "go": ["/usr/local/go/bin"],
    "vegeta": [str(Path(os.environ.get("GOPATH", Path.home() / "go")) / "bin")],
    "oha": [str(Path.home() / ".cargo" / "bin")],
}
_LEGACY_FLAGS = {"HEADROOM_REQUIRE_NGINX": ("nginx", "hey"), "HEADROOM_REQUIRE_CHROMIUM": ("chromium",)}


def tools_required(name: str) -> bool:
    """Whether a missing ``name`` fails the test (CI) rather than skipping it."""
    if os.environ.get("HEADROOM_REQUIRE_TOOLS") == "1":
        return True
    return any(os.environ.get(flag) == "1" and name in names for flag, names in _LEGACY_FLAGS.items())


def find_tool(name: str) -> str | None:
    """The tool on PATH, else in its usual install folder (chromium: PATH only)."""
    if name == "chromium":
        return shutil.which("chromium") or shutil.which("chromium-browser")
    found = shutil.which(name)
    if found is None and TOOL_DIRS.get(name):
        found = shutil.which(name, path=os.pathsep.join(TOOL_DIRS[name]))
    return found


def need_tool(name: str) -> str:
    """The path of ``name``; without it the test skips, or fails when tools are required."""
    import pytest

    if name not in SHARED_TOOLS:
        require_live(name)
    path = find_tool(name)
    if path is None:
        msg = f"{name} is not installed ({TOOL_INSTALL[name]}); .ci/run installs it"
        if tools_required(name):
            pytest.fail(msg + ", and HEADROOM_REQUIRE_TOOLS=1 says it must be there")
        pytest.skip(msg)
    return path


BASE = datetime.datetime(2024, 1, 2, 3, 4, 0, tzinfo=datetime.UTC)
BASE_NS = int(BASE.timestamp()) * 1_000_000_000


def ts(seconds: float, digits: int = 9) -> str:
    """An RFC 3339 time `seconds` after BASE, Go style (trailing zeros trimmed to `digits`)."""
    ns = round(seconds * 1e9)
    whole, frac = divmod(ns, 10**9)
    t = BASE + datetime.timedelta(seconds=whole)
    f = f"{frac:09d}"[:digits].rstrip("0")
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{f}" if f else "") + "Z"


def write_run(
    folder: Path, sections, *, cpu=None, meta=None, gz=False, prefix="", crlf=False, bom=False
) -> Path:
    """Write a throughputramp run folder from lists of (start_str, latency_str) rows."""
    folder.mkdir(parents=True, exist_ok=True)
    nl = "\r\n" if crlf else "\n"
    text = ""
    for sec in sections:
        text += "start-time,response-time" + nl
        text += "".join(f"{a},{b}{nl}" for a, b in sec)
    data = (("\ufeff" if bom else "") + text).encode()
    name = prefix + ("perfResults.csv.gz" if gz else "perfResults.csv")
    (folder / name).write_bytes(gzip.compress(data) if gz else data)
    if cpu is not None:
        (folder / (prefix + "cpuStats.csv")).write_text(cpu)
    if meta is not None:
        (folder / (prefix + "metadata.yml")).write_text(meta)
    return folder


@pytest.fixture
def runs_dir():
    return RUNS


# --------------------------------------------------------------------------
# test tiers: `python3 -m pytest` runs everything (the README's command, what CI runs);
# `python3 -m pytest -m "not slow"` is the fast tier.  Test files are not edited to mark
# tests slow: tests/slow_tests.txt lists them (test_tiers.py fails when it names a test
# that does not exist), and the fast tier, run whole, fails unless it imported every
# module of headroom.

SLOW_LIST = Path(__file__).resolve().parent / "slow_tests.txt"


def slow_entries(path: Path = SLOW_LIST) -> list[str]:
    """The entries of slow_tests.txt: ``tests/file.py`` or ``tests/file.py::test`` (``::Class::test``)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            out.append(entry)
    return out


def is_slow(nodeid: str, entries: list[str]) -> bool:
    """Whether ``nodeid`` is an entry, or a test or parameter under one."""
    return any(nodeid == e or nodeid.startswith((e + "::", e + "[")) for e in entries)


def pytest_collection_modifyitems(config, items):
    entries = slow_entries()
    for item in items:
        if is_slow(item.nodeid, entries):
            item.add_marker(pytest.mark.slow)


def headroom_modules() -> list[str]:
    """Every module of the headroom package, from its files (importing nothing)."""
    pkg = ROOT / "headroom"
    out = []
    for f in sorted(pkg.rglob("*.py")):
        parts = f.relative_to(ROOT).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


#: modules no test imports in-process, on purpose (``python -m headroom`` runs the CLI at import;
#: headroom.locust imports Locust, whose import monkey-patches the process with gevent: it runs in
#: Locust's own processes, tests/test_locust_live.py)
NOT_IMPORTED = {
    "headroom.__main__",
    "headroom.locust",
    "headroom.locust.__main__",
    "headroom.locust.headroom_locust",
}


def _fast_tier_run(config) -> bool:
    """The fast tier run whole: -m 'not slow' over the default test paths."""
    whole = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    return whole and config.option.markexpr.replace(" ", "") == "notslow"


_UNTOUCHED = pytest.StashKey[list]()


_IMPORTED = pytest.StashKey[set]()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """Two workers (pytest-xdist): the controller gathers the headroom modules each worker imported."""
    got = getattr(node, "workeroutput", {}).get("headroom_imported", [])
    node.config.stash.setdefault(_IMPORTED, set()).update(got)


def pytest_sessionfinish(session, exitstatus):
    import sys

    if not _fast_tier_run(session.config):
        return
    config = session.config
    imported = {m for m in headroom_modules() if m in sys.modules}
    if hasattr(config, "workeroutput"):  # a worker: the controller judges the modules of them all
        config.workeroutput["headroom_imported"] = sorted(imported)
        return
    if config.pluginmanager.hasplugin("dsession"):  # the controller ran no test itself
        imported = config.stash.get(_IMPORTED, set())
    missing = [m for m in headroom_modules() if m not in imported and m not in NOT_IMPORTED]
    session.config.stash[_UNTOUCHED] = missing
    if missing and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    missing = config.stash.get(_UNTOUCHED, None)
    if missing is None:
        return
    n = len(headroom_modules()) - len(NOT_IMPORTED)
    if missing:
        terminalreporter.write_line(
            f"fast tier: {len(missing)} headroom modules never imported (FAILED): {', '.join(missing)}",
            red=True,
        )
    else:
        terminalreporter.write_line(
            f"fast tier: imported all {n} headroom modules (besides {', '.join(NOT_IMPORTED)})"
        )


# --------------------------------------------------------------------------
# two workers (pytest-xdist, ``-n 2 --dist loadfile`` in pyproject.toml's addopts), live tests alone.
# A test that drives a real server with a real load generator measures the machine: it must not share
# it with another test.  Such files are LIVE; their tests take the machine whole (an exclusive lock),
# every other test shares it with the other worker (a shared lock).  A turnstile taken before either
# lets a waiting live test in ahead of the next shared one (flock alone would let the other worker's
# stream of short tests starve it).  A test outside LIVE that asks for a load generator, a server or
# perf (need_tool, GoServer) fails, naming this list.

LIVE = {
    "test_ci_recipes.py", "test_endpoints.py", "test_generator_limit.py", "test_goserver.py",
    "test_locust_live.py", "test_profiles.py", "test_profiles_real.py", "test_ramp.py",
    "test_ramp_interleave.py", "test_run_delay.py", "test_search.py", "test_server_faults.py",
    "test_stop.py", "test_telemetry_prometheus.py", "test_telemetry_two_servers.py",
}  # fmt: skip
#: tools a test outside LIVE may use: nothing it measures depends on the machine's other work
SHARED_TOOLS = {"chromium"}
_running: list[str] = []  # the file of the test this worker runs


def require_live(what: str) -> None:
    """Fail a test outside LIVE that starts ``what`` while another worker may run beside it."""
    if os.environ.get("PYTEST_XDIST_WORKER") and _running and _running[-1] not in LIVE:
        pytest.fail(f"{_running[-1]} uses {what}: add it to LIVE in tests/conftest.py (it must run alone)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Setup, call and teardown of one test under the machine's lock (a worker of pytest-xdist only)."""
    import contextlib
    import fcntl
    import tempfile

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not os.environ.get("PYTEST_XDIST_WORKER") or not run:
        yield
        return
    name = item.path.name
    base = Path(tempfile.gettempdir()) / f"headroom-tests-{run}"
    with contextlib.ExitStack() as stack:
        turn = stack.enter_context(open(f"{base}.turn", "a"))
        machine = stack.enter_context(open(f"{base}.machine", "a"))
        fcntl.flock(turn, fcntl.LOCK_EX)
        fcntl.flock(machine, fcntl.LOCK_EX if name in LIVE else fcntl.LOCK_SH)
        fcntl.flock(turn, fcntl.LOCK_UN)
        _running.append(name)
        try:
            yield
        finally:
            _running.pop()
            fcntl.flock(machine, fcntl.LOCK_UN)


def pytest_unconfigure(config):
    """A worker that is done removes the lock files (the other worker, if still running, makes them anew:
    with one worker left there is nothing to keep apart)."""
    import tempfile

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if os.environ.get("PYTEST_XDIST_WORKER") and run:
        for end in ("turn", "machine"):
            Path(tempfile.gettempdir(), f"headroom-tests-{run}.{end}").unlink(missing_ok=True)
