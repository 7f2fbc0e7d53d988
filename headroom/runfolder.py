"""A run's files: locating them, its metadata (labels, ramp parameters) and its CPU samples.

A run is a throughputramp folder (``perfResults.csv[.gz]``, ``cpuStats.csv``,
``metadata.yml``, also with the historic ``old_`` prefix), a single request
file of any format, a folder of request files (one per step, or one per
load generator), or several request files given together.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from .formats._checks import CPU_TOLERANCE, MAX_TIME_NS, MIN_TIME_NS, check_finite, fmt_ns
from .formats._scan import TS_UTC, Buffer, diagnose, first_null, line_at, np_column, sections, short
from .model import CpuSamples, HeadroomError

PERF_NAMES = ("perfResults.csv", "perfResults.csv.gz")
CPU_NAMES = ("cpuStats.csv", "cpuStats.csv.gz")
META_NAMES = ("metadata.yml", "metadata.yaml")
#: metadata.yml limits: size, nesting depth; aliases (``*name``) are refused, never expanded.
MAX_METADATA_BYTES = 1 << 20
MAX_METADATA_DEPTH = 32

_NOT_REQUESTS = re.compile(
    r"^(cpuStats|generatorCpuStats|hostCpuStats|memStats|metadata|README|\.)"
    r"|\.(md|rst|html?|png|jpe?g|gif|svg|pdf|ipynb|py|ya?ml)$",  # documents, pictures, notebooks, code
    re.IGNORECASE,
)
# Go's Time.String(): "2016-12-15 15:00:47.575579693 -0800 PST [m=+0.001]".
_GO_STRING_RE = re.compile(
    r"^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d(?:\.\d{1,9})?) ([+-]\d\d)(\d\d)(?: [A-Za-z0-9+-]+)?(?: m=[+-]\d+(?:\.\d+)?)?$"
)


@dataclass(frozen=True)
class RunFiles:
    """The files that make up one run.

    ``steps`` holds the request files when there are several (a folder of
    one file per step or per load generator, or files given together); then
    ``perf`` is the first of them.
    """

    perf: Path
    cpu: Path | None
    meta: Path | None
    name: str  # folder name (or file stem) used as the fallback label
    steps: tuple[Path, ...] = ()

    @property
    def request_files(self) -> tuple[Path, ...]:
        """Every request file of the run."""
        return self.steps or (self.perf,)


def display_path(p: Path) -> Path:
    """A path as the user would type it: relative to the working folder when inside it."""
    if not p.is_absolute():
        return p
    try:
        return p.relative_to(Path.cwd())
    except ValueError:
        return p


def _request_files(folder: Path) -> list[Path]:
    """Request files of a folder without perfResults.csv, in natural order."""
    files = [f for f in folder.iterdir() if f.is_file() and not _NOT_REQUESTS.search(f.name)]

    def natural(f: Path):
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", f.name)]

    return sorted(files, key=natural)


def step_concurrency_from_names(paths) -> list[int] | None:
    """``c4``, ``conc-4``, ``concurrency_4`` in every file name gives that step's concurrency."""
    out = []
    for f in paths:
        m = re.search(r"(?:^|[^a-z])c(?:onc(?:urrency)?)?[-_]?(\d+)", f.stem.lower())
        if not m:
            return None
        out.append(int(m[1]))
    return out


def _first_existing(folder: Path, prefix: str, names: tuple[str, ...]) -> Path | None:
    for n in names:
        p = folder / (prefix + n)
        if p.is_file():
            return p
    return None


def _with_companions(folder: Path, prefix: str, perf: Path, name: str) -> RunFiles:
    cpu = _first_existing(folder, prefix, CPU_NAMES)
    return RunFiles(perf, cpu, _first_existing(folder, prefix, META_NAMES), name)


def _locate_folder(p: Path) -> RunFiles:
    for pre in ("", "old_"):
        if all((p / (pre + n)).is_file() for n in PERF_NAMES):
            raise HeadroomError(
                f"{p}: both {pre}perfResults.csv and {pre}perfResults.csv.gz: which one is the run? "
                "remove or rename the other (or give the file itself)"
            )
    for pre in ("", "old_"):
        perf = _first_existing(p, pre, PERF_NAMES)
        if perf is not None:
            return _with_companions(p, pre, display_path(perf), p.resolve().name)
    files = [display_path(f) for f in _request_files(p)]
    if files:
        cpu, meta = _first_existing(p, "", CPU_NAMES), _first_existing(p, "", META_NAMES)
        return RunFiles(files[0], cpu, meta, p.resolve().name, tuple(files))
    raise HeadroomError(
        f"{p}: not a run folder: no perfResults.csv or perfResults.csv.gz in this folder and no "
        "load-generator file (documents, pictures and notebooks are not read)"
    )


def locate_run(path: str | os.PathLike | list | tuple) -> RunFiles:
    """Find the request, CPU and metadata files of a run.

    Parameters
    ----------
    path
        A run folder, a ``perfResults.csv[.gz]`` file (with or without a
        prefix such as ``old_``), a file prefix such as ``runs/x/old_``, any
        other request file, or a list of request files (load generators of
        one ramp, or one file per step).
    """
    if isinstance(path, list | tuple):
        if len(path) == 1:
            return locate_run(path[0])
        parts = [locate_run(p) for p in path]
        if any(f.steps for f in parts):
            raise HeadroomError(f"{path[0]}: give several request files, or one folder, not both")
        first = parts[0]
        return RunFiles(first.perf, first.cpu, first.meta, first.name, tuple(f.perf for f in parts))
    p = Path(path)
    if p.is_dir():
        return _locate_folder(p)
    if p.is_file():
        for n in PERF_NAMES:
            if p.name.endswith(n):
                prefix = p.name[: -len(n)]
                name = p.parent.resolve().name + (f"/{prefix.rstrip('_')}" if prefix else "")
                return _with_companions(p.parent, prefix, display_path(p), name)
        return RunFiles(display_path(p), None, None, p.name.split(".")[0])
    folder, prefix = p.parent, p.name  # a common file prefix such as runs/x/old_
    perf = _first_existing(folder, prefix, PERF_NAMES) if folder.is_dir() else None
    if perf is not None:
        name = folder.resolve().name + f"/{prefix.rstrip('_')}"
        return _with_companions(folder, prefix, display_path(perf), name)
    raise HeadroomError(f"{p}: no such file or folder")


# --------------------------------------------------------------------------
# metadata


def run_label(fields: dict, fallback: str) -> str:
    """The label of a run: its ``sha`` or ``version`` in metadata, else the folder name."""
    for key in ("sha", "version", "label", "name"):
        v = fields.get(key)
        if v is not None and str(v).strip():
            return str(v).strip()
    return fallback


def _metadata_text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_METADATA_BYTES:
            raise HeadroomError(
                f"{path}: {size:,} bytes: metadata is limited to {MAX_METADATA_BYTES:,} bytes (labels, not data)"
            )
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise HeadroomError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_metadata(path: Path) -> dict:
    """Read ``metadata.yml`` with PyYAML's safe loader; several documents merge."""
    import yaml

    text = _metadata_text(path)
    try:
        docs = list(yaml.load_all(text, Loader=_metadata_loader()))
    except yaml.MarkedYAMLError as e:
        # the context mark is where the broken construct began (an unclosed quote
        # or bracket); the problem mark is where the parser gave up
        mark = e.context_mark or e.problem_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = (e.problem or "invalid YAML").strip()
        if e.context and e.problem_mark is not None:
            problem = f"{e.context.strip()}: {problem} (line {e.problem_mark.line + 1})"
        raise HeadroomError(f"{path}{line}: bad YAML: {problem}") from None
    except yaml.YAMLError as e:
        raise HeadroomError(f"{path}: bad YAML: {str(e).splitlines()[0]}") from None
    merged: dict = {}
    for d in docs:
        if d is None:
            continue
        if not isinstance(d, dict):
            raise HeadroomError(f"{path}: expected a mapping of keys to values, got {type(d).__name__}")
        merged.update({str(k): v for k, v in d.items()})
    _check_metadata_values(path, text, merged)
    return merged


def _metadata_loader():
    import yaml
    from yaml.composer import ComposerError

    class Loader(yaml.SafeLoader):
        _depth = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise ComposerError(None, None, "aliases (*name) are not allowed in metadata", mark)
            self._depth += 1
            try:
                if self._depth > MAX_METADATA_DEPTH:
                    mark = self.peek_event().start_mark
                    raise ComposerError(None, None, f"nested deeper than {MAX_METADATA_DEPTH} levels", mark)
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return Loader


def _key_line(text: str, key: str) -> str:
    for i, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith(f"{key}:"):
            return f":{i}"
    return ""


def _check_metadata_values(path: Path, text: str, fields: dict) -> None:
    """Core counts and ramp parameters that would make numbers up: exit 2 with file and line."""
    v = fields.get("cpu_cores")
    if v is not None:
        ok = (
            isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v) and 0.01 <= v <= 100_000
        )
        if not ok:
            raise HeadroomError(
                f"{path}{_key_line(text, 'cpu_cores')}: cpu_cores {short(repr(v), 60)} must be a finite number "
                "of cores from 0.01 to 100000"
            )
    for key, low in (("lower_concurrency", 1), ("upper_concurrency", 1), ("concurrency_step", 0)):
        v = fields.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v) or v < low:
            raise HeadroomError(
                f"{path}{_key_line(text, key)}: {key} {short(repr(v), 60)} must be a whole number >= {low}"
            )


# --------------------------------------------------------------------------
# CPU


def _cpu_table(buf: Buffer, path: Path):
    """(table, column names, old Go time format) of a cpuStats.csv."""
    header, _, secs = sections(buf.data, path)
    if len(secs) > 1:
        raise HeadroomError(f"{path}:{line_at(buf.data, secs[1][0])}: a second header line in a CPU file")
    cols = [c.strip() for c in header.decode("utf-8").split(",")]
    if len(cols) < 2 or cols[0] != "timestamp" or any(c != "percentage" for c in cols[1:]):
        raise HeadroomError(
            f"{path}:1: unexpected CPU header '{short(header, 100)}': "
            "expected 'timestamp,percentage' (one percentage column per CPU)"
        )
    s, e = secs[0]
    chunk = buf.data[s:e]
    nl = bytes(chunk[:4096]).find(b"\n")
    first = bytes(chunk[nl + 1 : nl + 200]).split(b"\n")[0].decode("utf-8", "replace") if nl >= 0 else ""
    old_format = bool(re.match(r"^\d{4}-\d\d-\d\d \d", first))
    names = ["timestamp"] + [f"cpu{i}" for i in range(len(cols) - 1)]
    types = {n: pa.float64() for n in names[1:]}
    types["timestamp"] = pa.string() if old_format else TS_UTC
    checks = {n: "float" for n in names[1:]}
    if not old_format:
        checks["timestamp"] = "time"
    try:
        table = pacsv.read_csv(
            pa.BufferReader(buf.arrow_slice(s, e)),
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=1),
            parse_options=pacsv.ParseOptions(ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(
                column_types=types, null_values=[""], strings_can_be_null=False
            ),
        )
    except pa.ArrowInvalid as exc:
        raise diagnose(path, buf.raw, s, e, 1, names, checks, str(exc).splitlines()[0]) from None
    return table, names, old_format


def _cpu_columns(table, names, old_format: bool, path: Path) -> tuple[np.ndarray, np.ndarray]:
    if table.num_rows == 0:
        raise HeadroomError(f"{path}: no CPU samples (header only)")
    for n in names[1:]:
        if table.column(n).null_count:
            raise HeadroomError(f"{path}:{2 + first_null(table.column(n))}: empty percentage value")
    if table.column("timestamp").null_count:
        raise HeadroomError(f"{path}:{2 + first_null(table.column('timestamp'))}: empty timestamp")
    if old_format:
        time_ns = _parse_go_times(table.column("timestamp"), path)
    else:
        time_ns = np_column(table.column("timestamp"), np.int64)
    per = np.column_stack([np_column(table.column(n), np.float64) for n in names[1:]])
    for j in range(per.shape[1]):
        check_finite(per[:, j], path, lambda: 1, "percentage")
    return time_ns, per


def _check_cpu_limits(time_ns: np.ndarray, per: np.ndarray, cores: float | None, path: Path) -> None:
    """A per-CPU column is at most 100 %, a single column at most 100 % x cores; times in 2000-2200."""
    limit = 100.0 * CPU_TOLERANCE * (1.0 if per.shape[1] > 1 else (cores if cores is not None else 1.0))
    over = per > limit
    if over.any():
        i = int(np.argmax(over.any(axis=1)))
        v = float(per[i][over[i]][0])
        hint = (
            ""
            if per.shape[1] > 1
            else " (100 % is one core unless --cpu-cores or metadata cpu_cores says more)"
        )
        raise HeadroomError(
            f"{path}:{i + 2}: CPU {v:.6g} % is above {limit / CPU_TOLERANCE:.6g} %{hint}: a damaged value"
        )
    bad_t = (time_ns < MIN_TIME_NS) | (time_ns >= MAX_TIME_NS)
    if bad_t.any():
        i = int(np.argmax(bad_t))
        raise HeadroomError(f"{path}:{i + 2}: timestamp {fmt_ns(int(time_ns[i]))} is outside 2000-2200")


def read_cpu(path: Path, *, cores: float | None = None) -> CpuSamples:
    """Read a ``cpuStats.csv`` (RFC 3339 or Go ``Time.String()`` timestamps)."""
    with Buffer(path) as buf:
        table, names, old_format = _cpu_table(buf, path)
        time_ns, per = _cpu_columns(table, names, old_format, path)
        _check_cpu_limits(time_ns, per, cores, path)
        order = np.argsort(time_ns, kind="stable")
        time_ns, per = time_ns[order], per[order]
    k = per.shape[1]
    pct = per.mean(axis=1) if k > 1 else per[:, 0].copy()
    return CpuSamples(
        time_ns=time_ns,
        pct=pct,
        per_cpu=per if k > 1 else None,
        cores=float(cores if cores is not None else k),
        source=str(path),
    )


def _parse_go_times(col: pa.ChunkedArray, path: Path) -> np.ndarray:
    values = col.to_pylist()
    iso = []
    for i, v in enumerate(values):
        m = _GO_STRING_RE.match(v.strip())
        if not m:
            raise HeadroomError(
                f"{path}:{i + 2}: bad timestamp '{short(v, 60)}' "
                "(expected RFC 3339 or Go's '2016-12-15 15:00:47.575579693 -0800 PST')"
            )
        iso.append(f"{m[1]}T{m[2]}{m[3]}:{m[4]}")
    try:
        arr = pa.array(iso, pa.string()).cast(TS_UTC)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        for i, v in enumerate(iso):
            try:
                pa.array([v], pa.string()).cast(TS_UTC)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise HeadroomError(
                    f"{path}:{i + 2}: bad timestamp '{short(values[i], 60)}' (impossible date, time or zone)"
                ) from None
        raise HeadroomError(f"{path}: bad timestamps (impossible date, time or zone)") from None
    return np_column(pa.chunked_array([arr]), np.int64).copy()


def cpu_for(
    files: RunFiles, fields: dict, cpu_cores: float | None, warnings: list | None = None
) -> CpuSamples | None:
    """The run's CPU samples (None without a CPU file), cores from the option or metadata."""
    if files.cpu is None:
        return None
    # a cpuStats.csv saved by ``headroom telemetry`` says its own cores (metadata's are the recorder's)
    cores = cpu_cores if cpu_cores is not None else _saved_cores(files.cpu)
    if cores is None and isinstance(fields.get("cpu_cores"), int | float):
        cores = float(fields["cpu_cores"])
    cpu = read_cpu(files.cpu, cores=cores)
    if cpu.per_cpu is None and cores is None and warnings is not None:
        warnings.append(
            f"{files.cpu}: no core count: 100 % taken as one core (--cpu-cores N, or cpu_cores: N in "
            "metadata.yml; Cloud Foundry's cpumonitor measures the whole machine)"
        )
    if cpu.per_cpu is not None and cpu_cores is not None:
        cpu = CpuSamples(cpu.time_ns, cpu.pct, cpu.per_cpu, float(cpu.per_cpu.shape[1]), cpu.source)
    return cpu


def _saved_cores(cpu: Path) -> float | None:
    """Cores whose 100 % a cpuStats.csv saved by ``headroom telemetry`` stands for (its telemetry.json)."""
    if cpu.name != "cpuStats.csv":
        return None
    from .telemetry.files import read_info

    info = read_info(cpu.parent)
    if info is None:
        return None
    v = info.get("cpu_cores")
    if not isinstance(v, int | float) or isinstance(v, bool) or not v > 0:
        return None
    return float(v)
