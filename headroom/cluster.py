"""A run's reduction on a Dask cluster, every load-generator file parsed once.

Load generators of one ramp are aligned on the wall clock: a step's frame
(its first start and last response across all files) is known only when
every file's spans are.  So a file is read in two tasks, and the first one
keeps what it parsed on its worker:

1. :func:`prepare_task` parses the file on a worker, keeps its parsed form
   (:func:`keep`: a spooled file's prepared spool, a CSV
   file's accepted rows) in this module's registry under a token, and
   returns the file's spans and the worker's address;
2. once the client has merged the frames, :func:`reduce_task` runs pinned
   to that worker and reduces from what was kept, then frees it.

If the worker no longer holds the token (it restarted, or left the cluster
and the task went elsewhere) the second task parses the file again: the
result is the same, bit for bit, only slower.  What was kept is freed on
errors too (:meth:`DaskRunner.release`).
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field

_LOCK = threading.Lock()
_KEPT: dict[str, object] = {}  # token -> a kept file (this worker's)
_DROPPED: set[str] = set()  # tokens dropped before their first task ended (an interrupted run)
_COUNTS = {"parses": 0, "fallbacks": 0}


def _count(name: str) -> None:
    with _LOCK:
        _COUNTS[name] += 1


def keep(src) -> tuple:
    """A file's spans, and what reduces it in shared frames without parsing it again (``.reduce(frames)``,
    ``.close()``): a CSV file's accepted rows (its source's ``spans_kept``), a spooled file's source
    itself (its prepared spool)."""
    spans_kept = getattr(src, "spans_kept", None)
    return spans_kept() if spans_kept is not None else (src.spans(), src)


def prepare_task(src, token: str):
    """On a worker: parse ``src``, keep it under ``token``; (its spans, this worker's address)."""
    from distributed import get_worker

    _count("parses")
    spans, kept = keep(src)
    with _LOCK:
        late = token in _DROPPED
        _DROPPED.discard(token)
        if not late:
            _KEPT[token] = kept
    if late:  # the run was given up while this task ran
        kept.close()
    return spans, get_worker().address


def reduce_task(src, token: str, frames: dict):
    """On the worker that kept ``token``: ``src`` reduced in ``frames`` from what it kept (then freed),
    or, when this worker does not hold it, parsed again."""
    with _LOCK:
        kept = _KEPT.pop(token, None)
    if kept is None:
        _count("parses")
        _count("fallbacks")
        kept = src
    try:
        return kept.reduce(frames)
    finally:
        kept.close()


def drop(tokens: list[str], mark: bool = False) -> int:
    """On a worker: free what ``tokens`` keep; with ``mark``, also those whose first task is still
    running (it frees its file when it ends).  The number freed."""
    with _LOCK:
        found = [_KEPT.pop(t) for t in tokens if t in _KEPT]
        if mark:
            _DROPPED.update(t for t in tokens)
    for kept in found:
        kept.close()
    return len(found)


def worker_stats() -> dict:
    """On a worker: files parsed, parsed again (no kept form), and kept now."""
    with _LOCK:
        return {**_COUNTS, "kept": len(_KEPT)}


@dataclass
class Kept:
    """Files read once: their spans, tokens and workers (in the order of ``sources``)."""

    sources: list
    spans: list = field(default_factory=list)
    tokens: list = field(default_factory=list)
    workers: list = field(default_factory=list)


class DaskRunner:
    """Runs a run's tasks on a Dask cluster; results come back in submission order."""

    #: Seconds between checks that a pinned task's worker is still there.
    CHECK_S = 2.0

    def __init__(self, client):
        self.client = client

    def map(self, fn, *iterables):
        futures = self.client.map(fn, *iterables, pure=False)
        return self.client.gather(futures)

    def prepare(self, sources: list) -> Kept:
        """Every source parsed on a worker and kept there; their spans."""
        from distributed import wait

        kept = Kept(list(sources), tokens=[uuid.uuid4().hex for _ in sources])
        futures = self.client.map(prepare_task, kept.sources, kept.tokens, pure=False)
        try:
            wait(futures)
        except BaseException:  # interrupted: what is still running frees its file when it ends
            self.client.cancel(futures)
            self.client.run(drop, kept.tokens, True, on_error="ignore")
            raise
        done = [f.result() if f.status == "finished" else (None, None) for f in futures]
        kept.spans, kept.workers = [d[0] for d in done], [d[1] for d in done]
        if any(f.status != "finished" for f in futures):
            self.release(kept)
            self.client.gather(futures)  # raises the first file's error
        return kept

    def reduce(self, kept: Kept, frames: list[dict]) -> list:
        """Every kept source reduced in its frames, on the worker that kept it (else parsed again)."""
        jobs = list(zip(kept.sources, kept.tokens, frames))
        futures = [
            self.client.submit(reduce_task, *job, workers=[w], allow_other_workers=False, pure=False)
            for job, w in zip(jobs, kept.workers)
        ]
        try:
            self._wait_pinned(futures, jobs, kept.workers)
            return self.client.gather(futures)
        except BaseException:
            self.client.cancel(futures)
            raise

    def _wait_pinned(self, futures: list, jobs: list, workers: list) -> None:
        """Wait for pinned tasks; one whose worker left the cluster goes anywhere (and parses again)."""
        from distributed import wait

        while True:
            try:
                wait(futures, timeout=self.CHECK_S)
                return
            except TimeoutError:
                pass
            alive = set(self.client.scheduler_info()["workers"])
            for i, w in enumerate(workers):
                if w not in alive and not futures[i].done():
                    self.client.cancel([futures[i]])
                    futures[i] = self.client.submit(reduce_task, *jobs[i], pure=False)

    def release(self, kept: Kept) -> None:
        """Free whatever the workers still keep of these files (none after :meth:`reduce`)."""
        alive = set(self.client.scheduler_info()["workers"])
        where = sorted({w for w in kept.workers if w in alive})
        if where:
            self.client.run(drop, kept.tokens, workers=where, on_error="ignore")
