"""Per run of a release history: its summary document, cached and reduced in parallel.

``history`` (headroom/history.py) follows every figure of many runs as a
series; this is how it gets each run's figures without reading every run
every time: a run's summary (``summary.py``'s JSON document) is computed in
local processes or on a Dask cluster and cached as a versioned JSON file
named by a content hash of the run's files, the analysis settings and the
package's schema and version, so adding a release reads one run, not all of
them.  A stat index (size and mtime per file) spares a warm cache the
hashing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .model import HeadroomError

CACHE_SCHEMA = 2  # the per-run cache entries (summary documents); 2: the step a server died in is a step


@dataclass(frozen=True)
class Settings:
    """What a run's cached summary depends on, besides its files."""

    objective: str = ""
    cpu_cores: float = 0.0
    #: a Prometheus source (headroom.telemetry.PromSource as a dict's items) to read CPU and memory from
    telemetry: tuple = ()
    #: only the requests of this name (an endpoint: ``--name``); "" for all
    name: str = ""

    def as_dict(self) -> dict:
        d = {"objective": self.objective, "cpu_cores": self.cpu_cores}
        if self.telemetry:  # only then: the cache keys of runs read without it stay what they were
            d["telemetry"] = [list(kv) for kv in self.telemetry]
        if self.name:  # likewise
            d["name"] = self.name
        return d


def run_files(path: str | os.PathLike) -> list[Path]:
    """The files a run's summary is computed from: every request file (a folder of one file per
    step or per load generator has several), the CPU samples and the metadata."""
    from .runfolder import locate_run
    from .telemetry.load import mem_stats_path

    f = locate_run(path)
    mem = mem_stats_path(Path(f.perf))
    return [*f.request_files, *(p for p in (f.cpu, f.meta, mem) if p is not None)]


def cache_key(path: str | os.PathLike, settings: Settings) -> str:
    """Content hash of the run's files, the settings and the schema: the cache file's name."""
    from ._version import __version__
    from .model import SCHEMA_VERSION

    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps([SCHEMA_VERSION, __version__, settings.as_dict()]).encode())
    for p in run_files(path):
        h.update(p.name.encode() + b"\0")
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()


def summarize(path: str, settings: Settings) -> dict:
    """Read and analyse one run; its summary JSON document (what the cache stores)."""
    from .io import reduce_run
    from .model import parse_objective
    from .stopped import run_stop
    from .summary import analyze, to_json
    from .telemetry import PromSource

    source = PromSource(**dict(settings.telemetry)) if settings.telemetry else None
    from .options import ReadOptions

    opts = ReadOptions(name=settings.name or None)
    run = reduce_run(
        path, cpu_cores=settings.cpu_cores or None, progress=False, telemetry=source, options=opts
    )
    obj = parse_objective(settings.objective) if settings.objective else None
    s = analyze(run, objective=obj)
    doc = to_json(s)
    doc["path"] = str(path)
    st = run_stop(s, str(path))  # the ramp stopped because the server stopped answering
    if st is not None:
        doc["stopped"] = st.to_dict()
    return doc


def _map_local(fn: Callable, paths: list[str], settings: Settings, jobs: int) -> list[dict]:
    if jobs <= 1 or len(paths) <= 1:
        return [fn(p, settings) for p in paths]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(fn, paths, [settings] * len(paths)))


def _map_dask(fn: Callable, paths: list[str], settings: Settings, address) -> list[dict]:
    try:
        from distributed import Client
    except ImportError:
        raise HeadroomError(
            "--dask needs the dask extra: python3 -m pip install 'headroom-plot[dask]'"
        ) from None
    client = address if hasattr(address, "map") else Client(address)
    try:
        futures = client.map(fn, paths, settings=settings, pure=False)
        return client.gather(futures)
    finally:
        if client is not address:
            client.close()


def summaries(
    paths: Sequence[str | os.PathLike],
    settings: Settings,
    *,
    cache: str | os.PathLike | None = None,
    jobs: int = 1,
    dask=None,
) -> tuple[list[dict], int]:
    """Summary documents of every run (from the cache where present): (documents, runs read).

    ``dask``: a scheduler address or a ``distributed.Client`` to reduce on.
    """
    paths = [str(p) for p in paths]
    cdir = Path(cache) if cache else None
    keys = _keys(paths, settings, cdir)
    docs: list[dict | None] = [None] * len(paths)
    if cdir is not None:
        for i, k in enumerate(keys):
            docs[i] = _cache_read(cdir / f"{k}.json", k)
    todo = [i for i, d in enumerate(docs) if d is None]
    if todo:
        todo_paths = [paths[i] for i in todo]
        if dask is not None:
            fresh = _map_dask(summarize, todo_paths, settings, dask)
        else:
            fresh = _map_local(summarize, todo_paths, settings, jobs)
        for i, d in zip(todo, fresh):
            docs[i] = d
            if cdir is not None:
                _cache_write(cdir, keys[i], d)
    for i, d in enumerate(docs):
        d["path"] = paths[i]
    return docs, len(todo)


def _keys(paths: list[str], settings: Settings, cdir: Path | None) -> list[str]:
    """Every run's cache key; a run whose files have the same size and mtime as when it was
    last hashed reuses that hash (the cache's index), so a warm history hashes nothing."""
    index_path = cdir / "stat-index" if cdir is not None else None  # JSON: path -> size, mtime, key
    index = {}
    if index_path is not None:
        try:
            index = json.loads(index_path.read_text())
        except (OSError, ValueError):
            index = {}
    sig = json.dumps(settings.as_dict())
    keys = []
    for p in paths:
        stat = [[str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns] for f in run_files(p)]
        entry = index.get(f"{sig} {Path(p).resolve()}")
        if entry and entry["files"] == stat:
            keys.append(entry["key"])
            continue
        key = cache_key(p, settings)
        index[f"{sig} {Path(p).resolve()}"] = {"files": stat, "key": key}
        keys.append(key)
    if index_path is not None:
        try:
            cdir.mkdir(parents=True, exist_ok=True)
            index_path.write_text(json.dumps(index))
        except OSError as e:
            raise HeadroomError(f"{cdir}: cannot write the cache ({e.strerror})") from None
    return keys


def _cache_read(path: Path, key: str) -> dict | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if doc.get("kind") != "headroom-cache" or doc.get("schema") != CACHE_SCHEMA or doc.get("key") != key:
        return None
    return doc["summary"]


def _cache_write(cdir: Path, key: str, summary: dict) -> None:
    try:
        cdir.mkdir(parents=True, exist_ok=True)
        tmp = cdir / f"{key}.{os.getpid()}.json.partial"  # two writers of one cache never share it
        doc = {"schema": CACHE_SCHEMA, "kind": "headroom-cache", "key": key, "summary": summary}
        tmp.write_text(json.dumps(doc, allow_nan=False))
        tmp.replace(cdir / f"{key}.json")
    except OSError as e:
        raise HeadroomError(f"{cdir}: cannot write the cache ({e.strerror})") from None
