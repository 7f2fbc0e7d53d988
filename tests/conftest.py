import datetime
import gzip
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "data" / "runs"
RUN_NAMES = ["nginx-no-keepalive", "nginx-keepalive", "nginx-keepalive-repeat"]


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
