"""Telemetry kept in a run folder, so that the run reads the same offline.

* ``cpuStats.csv``: the server's CPU as throughputramp writes it (``timestamp,percentage``),
  100 % = one core; the cores 100 % stands for are in ``telemetry.json``.
* ``memStats.csv``: one row per interval ``(timestamp - interval_s, timestamp]``:
  resident memory and, for a Go server, heap in use, GC share, allocation rate and
  GC cycles; an empty cell is a value not known.  A first line
  ``# headroom memStats.csv schema 1`` says the version.
* ``telemetry.json``: where the two came from (source, queries, load window) and the schema.
"""

from __future__ import annotations

import csv
import datetime
import json
import math
from pathlib import Path

import numpy as np

from .model import KEYS, SCHEMA_VERSION, Series, Telemetry, TelemetryError

MEM_NAME = "memStats.csv"
CPU_NAME = "cpuStats.csv"
INFO_NAME = "telemetry.json"
MEM_KEYS = ("rss_bytes", "heap_inuse_bytes", "gc_cpu_share", "alloc_bytes_per_s", "gc_cycles_per_s")
#: a value above this is damage, not memory (1 PiB) or a rate (1 PiB/s)
ABSURD = 2.0**50
_HEADER = "# headroom memStats.csv schema"


def _iso(ns: int) -> str:
    s, frac = divmod(int(ns), 1_000_000_000)
    return datetime.datetime.fromtimestamp(s, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def _parse_iso(text: str) -> int:
    t = text.strip()
    if not t.endswith("Z") or "T" not in t:
        raise ValueError(text)
    head, _, frac = t[:-1].partition(".")
    whole = datetime.datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.UTC)
    return int(whole.timestamp()) * 1_000_000_000 + int((frac + "000000000")[:9] or 0)


def cpu_file_cores(cpu: Series) -> float:
    """The cores 100 % of a saved cpuStats.csv stands for: the busiest interval, rounded up."""
    v = cpu.values[np.isfinite(cpu.values)]
    return float(max(1, math.ceil(float(v.max())))) if len(v) else 1.0


def write_cpu_stats(folder: Path, cpu: Series) -> Path:
    """``cpuStats.csv`` from a CPU-cores series, 100 % = :func:`cpu_file_cores` cores (which
    telemetry.json records); missing intervals are left out (the format has no empty value)."""
    path = Path(folder) / CPU_NAME
    cores = cpu_file_cores(cpu)
    with open(path, "w", newline="") as f:
        f.write("timestamp,percentage\n")
        for b, v in zip(cpu.end_ns.tolist(), cpu.values.tolist()):
            if math.isfinite(v):
                f.write(f"{_iso(b)},{100.0 * v / cores:.6f}\n")
    return path


def write_mem_stats(folder: Path, tel: Telemetry) -> Path | None:
    """``memStats.csv`` from the memory and GC series of ``tel`` (None: it has none)."""
    have = [k for k in MEM_KEYS if tel.get(k) is not None and len(tel.get(k))]
    if "rss_bytes" not in have:
        return None
    rows: dict[int, dict] = {}
    for k in have:
        s = tel.get(k)
        for a, b, v in zip(s.start_ns.tolist(), s.end_ns.tolist(), s.values.tolist()):
            r = rows.setdefault(b, {"interval_s": (b - a) / 1e9})
            r[k] = v
    path = Path(folder) / MEM_NAME
    with open(path, "w", newline="") as f:
        f.write(f"{_HEADER} {SCHEMA_VERSION}\n")
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["timestamp", "interval_s", *MEM_KEYS])
        for b in sorted(rows):
            r = rows[b]
            cells = ["" if k not in r or not math.isfinite(r[k]) else f"{r[k]:.10g}" for k in MEM_KEYS]
            w.writerow([_iso(b), f"{r['interval_s']:.3f}", *cells])
    return path


def write_info(folder: Path, info: dict) -> Path:
    path = Path(folder) / INFO_NAME
    path.write_text(json.dumps({"schema": SCHEMA_VERSION, **info}, indent=2) + "\n")
    return path


def read_info(folder: Path) -> dict | None:
    path = Path(folder) / INFO_NAME
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise TelemetryError(
            f"{path}: not readable JSON ({e}): delete it or write it again with headroom telemetry"
        ) from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_VERSION:
        raise TelemetryError(f"{path}: schema {doc.get('schema') if isinstance(doc, dict) else '?'} is not {SCHEMA_VERSION}: "
                             "write it again with headroom telemetry")  # fmt: skip
    return doc


def read_mem_stats(path: Path) -> Telemetry:
    """Read a ``memStats.csv``; one line naming the file and row for a bad value."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise TelemetryError(f"{path}: cannot read ({e})") from None
    first = 0
    if lines and lines[0].startswith("#"):
        version = lines[0][len(_HEADER) :].strip()
        if not lines[0].startswith(_HEADER) or version != str(SCHEMA_VERSION):
            raise TelemetryError(
                f"{path}:1: not a headroom memStats.csv of schema {SCHEMA_VERSION}: {lines[0][:60]!r}"
            )
        first = 1
    if len(lines) <= first:
        raise TelemetryError(f"{path}: empty: no header")
    header = [c.strip() for c in lines[first].split(",")]
    if (
        header[:2] != ["timestamp", "interval_s"]
        or "rss_bytes" not in header
        or set(header[2:]) - set(MEM_KEYS)
    ):
        raise TelemetryError(f"{path}:{first + 1}: unexpected header {lines[first][:100]!r}: expected "
                             f"'timestamp,interval_s,{','.join(MEM_KEYS)}'")  # fmt: skip
    cols: dict[str, list] = {k: [] for k in header}
    for i, line in enumerate(lines[first + 1 :], start=first + 2):
        if not line.strip():
            continue
        cells = line.split(",")
        if len(cells) != len(header):
            raise TelemetryError(f"{path}:{i}: {len(cells)} fields, the header has {len(header)}")
        for k, c in zip(header, cells):
            cols[k].append(_cell(path, i, k, c))
    if not cols["timestamp"]:
        raise TelemetryError(f"{path}: no samples (header only)")
    end = np.asarray(cols["timestamp"], np.int64)
    width = (np.asarray(cols["interval_s"], np.float64) * 1e9).astype(np.int64)
    series = {}
    for k in header[2:]:
        v = np.asarray(cols[k], np.float64)
        if np.isfinite(v).any():
            series[k] = Series(k, KEYS[k], end - width, end, v, str(path))
    return Telemetry(series, str(path))


def _cell(path: Path, line: int, key: str, text: str):
    t = text.strip()
    if key == "timestamp":
        try:
            return _parse_iso(t)
        except ValueError:
            raise TelemetryError(
                f"{path}:{line}: bad timestamp {t[:40]!r} (expected RFC 3339 UTC, ...Z)"
            ) from None
    if t == "":
        if key == "interval_s":
            raise TelemetryError(f"{path}:{line}: empty interval_s")
        return math.nan
    try:
        v = float(t)
    except ValueError:
        raise TelemetryError(f"{path}:{line}: {key} {t[:40]!r} is not a number") from None
    limit = 1.0 if key == "gc_cpu_share" else (3600.0 if key == "interval_s" else ABSURD)
    if not math.isfinite(v) or v < 0 or v > limit or (key == "interval_s" and v == 0):
        raise TelemetryError(
            f"{path}:{line}: {key} {t[:40]} is {'negative' if v < 0 else 'impossible'} "
            f"(expected 0 to {limit:g}): a damaged file; delete the row or record the telemetry again"
        )
    return v


def merge(*parts: Telemetry | None) -> Telemetry | None:
    """The series of several telemetries (earlier ones win a key)."""
    out: dict[str, Series] = {}
    sources, warnings = [], []
    for p in parts:
        if p is None:
            continue
        for k, s in p.series.items():
            out.setdefault(k, s)
        sources.append(p.source)
        warnings.extend(p.warnings)
    if not out:
        return None
    return Telemetry(out, " + ".join(sources), tuple(warnings))


def psutil_telemetry(rows: list[tuple[int, int]], source: str) -> Telemetry | None:
    """RSS samples ``(time ns, bytes)`` of ``headroom ramp``'s process sampler as telemetry."""
    if len(rows) < 2:
        return None
    t = np.asarray([r[0] for r in rows], np.int64)
    v = np.asarray([r[1] for r in rows], np.float64)
    width = int(np.median(np.diff(t)))
    s = Series("rss_bytes", "bytes", t - width, t, v, source)
    return Telemetry({"rss_bytes": s}, source)


def write_psutil_mem(folder: Path, sampler) -> Path | None:
    """``memStats.csv`` from a :class:`headroom.ramp.cpu.CpuSampler` that followed server PIDs
    (``headroom ramp --cpu-pid``); None when it sampled the whole machine."""
    rows = getattr(sampler, "rss_rows", None) or []
    pids = sorted(getattr(sampler, "server_pids_seen", ()) or ())
    tel = psutil_telemetry(rows, f"psutil pid {','.join(map(str, pids[:4]))}")
    return write_mem_stats(folder, tel) if tel is not None else None
