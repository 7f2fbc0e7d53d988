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
