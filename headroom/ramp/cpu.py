"""CPU sampling for ``headroom ramp``: the server's and the load generator's.

A background thread takes one sample every ``interval`` seconds (1 s by
default) and one more when it is stopped.  Each sample is the CPU busy
percentage *since the previous sample*, stamped with the time it was taken,
which is what ``cpuStats.csv`` means (see FORMATS.md).

* Processes (``--cpu-pid``): the CPU time (user + system, from
  ``psutil.Process.cpu_times``) of the given processes and all their
  descendants, summed, as percent of the machine's cores (100 % = all of them busy).  A
  process that appears between two samples counts with all its CPU time; one
  that exits takes its last
  partial interval with it (for nginx workers this does not happen during a
  run).  A process is the same one while its pid and creation time are.  Resolution: the kernel's clock tick (10 ms, so 1 % per 1 s sample).
* The whole machine (no ``--cpu-pid``): busy share of each CPU from
  ``psutil.cpu_times(percpu=True)`` deltas (what ``psutil.cpu_percent`` does),
  one ``percentage`` column per CPU; 100 % in their mean is all CPUs.
* Resident memory (``--cpu-pid``): the RSS of the same process tree (sum of
  ``memory_info().rss``; pages shared between processes count once per process, as
  ``ps`` shows them), read with the CPU times, in ``memStats.csv``
  (:func:`headroom.telemetry.files.write_psutil_mem`).
* The load generator: the current generator process and its descendants, as
  percent of one core, in ``generatorCpuStats.csv``.  The exact CPU time of a
  whole step comes from ``getrusage(RUSAGE_CHILDREN)`` around it (see recorder.py).
* Foreign load (``hostCpuStats.csv``): the machine's busy CPU time (all CPUs,
  ``psutil.cpu_times()``, steal excluded) minus what the sampled server
  processes (and, in an A/B job, the other side's server), the generator and
  headroom itself used, as percent of the whole machine (all cores = 100),
  with the kernel's steal time beside it (null where the kernel does not
  report it).  A sample whose subtraction comes out below zero (clock-tick
  rounding, the generator's last CPU time arriving one sample late) is written
  as 0.  Without ``--cpu-pid`` the server is not known, so it is inside the
  foreign share.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import psutil

from ..model import HeadroomError


def _per_cpu_busy() -> list[tuple[float, float]]:
    """(busy, total) CPU seconds per CPU since boot, as psutil.cpu_percent counts them.

    Busy is everything but idle and iowait; guest time is already inside user
    time on Linux, so it is taken out of the total.  (psutil.cpu_percent itself
    keeps its baseline per thread, which is why the deltas are taken here.)
    """
    out = []
    for t in psutil.cpu_times(percpu=True):
        total = sum(t)
        total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
        idle = t.idle + getattr(t, "iowait", 0.0)
        out.append((total - idle, total))
    return out


def _machine_times() -> tuple[float, float, float | None]:
    """(busy without steal, total, steal) CPU seconds of all CPUs together since boot.

    ``steal`` is None where the kernel does not report it.
    """
    t = psutil.cpu_times()
    total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    steal = getattr(t, "steal", None)
    busy = total - t.idle - getattr(t, "iowait", 0.0) - (steal or 0.0)
    return busy, total, steal


@dataclass
class HostSample:
    """Foreign CPU and steal over one sampling interval, percent of the whole machine."""

    start_ns: int
    end_ns: int
    foreign_pct: float
    steal_pct: float | None


def overlap_mean(rows: list[HostSample], start_ns: int, end_ns: int, attr: str) -> float | None:
    """Mean of ``attr`` over (start_ns, end_ns], each sample weighted by its overlap with it."""
    num = den = 0.0
    for r in rows:
        w = min(r.end_ns, end_ns) - max(r.start_ns, start_ns)
        v = getattr(r, attr)
        if w > 0 and v is not None:
            num += w * v
            den += w
    return num / den if den > 0 else None


class HostLoad:
    """CPU of the machine used by processes other than ours, between calls."""

    def __init__(self, others: ProcessTree | None):
        self.others = others  # servers sampled too but not this run's (the other side of an A/B job)
        self.me = psutil.Process(os.getpid())
        self.rows: list[HostSample] = []
        self.restart()

    def _my_cpu(self) -> float:
        t = self.me.cpu_times()
        return t.user + t.system

    def restart(self) -> None:
        """Take the baselines now: the next sample covers the interval from here."""
        self._prev_machine = _machine_times()
        self._prev_me = self._my_cpu()
        self._prev_ns = time.time_ns()
        if self.others is not None:
            self.others.delta()

    def sample(self, ours_s: float) -> None:
        """Record one interval; ``ours_s``: CPU seconds of the server and generator in it."""
        busy, total, steal = _machine_times()
        me = self._my_cpu()
        ts = time.time_ns()
        b0, t0, s0 = self._prev_machine
        dt = total - t0
        others = self.others.delta() if self.others is not None else 0.0
        foreign = (busy - b0) - ours_s - (me - self._prev_me) - others
        if dt > 0:
            self.rows.append(
                HostSample(
                    self._prev_ns,
                    ts,
                    max(0.0, 100.0 * foreign / dt),
                    None if steal is None else max(0.0, 100.0 * (steal - s0) / dt),
                )
            )
        self._prev_machine, self._prev_me, self._prev_ns = (busy, total, steal), me, ts


class ProcessTree:
    """CPU seconds of some processes and their descendants, between calls."""

    def __init__(self, pids: list[int], *, strict: bool = True, option: str = "--cpu-pid"):
        self.roots: list[psutil.Process] = []
        for pid in pids:
            try:
                self.roots.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                if strict:
                    raise HeadroomError(f"{option} {pid}: no such process") from None
            except psutil.AccessDenied:
                raise HeadroomError(f"{option} {pid}: access denied") from None
        self._prev: dict[int, tuple[float, float]] = {}  # pid -> (create_time, cpu seconds)
        self.lost: set[int] = set()
        self.counted = 0.0  # CPU seconds handed out by delta() so far
        self.rss_bytes = 0  # resident memory of the tree at the last read (sum over its processes)
        self._prev = self._read()

    def _read(self) -> dict[int, tuple[float, float]]:
        cur: dict[int, tuple[float, float]] = {}
        rss = 0
        for root in self.roots:
            try:
                procs = [root, *root.children(recursive=True)]
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                self.lost.add(root.pid)
                continue
            for p in procs:
                try:
                    t = p.cpu_times()
                    cur[p.pid] = (p.create_time(), t.user + t.system)
                    rss += p.memory_info().rss
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    continue
        self.rss_bytes = rss
        return cur

    def delta(self) -> float:
        """CPU seconds used since the previous call (or since creation)."""
        cur = self._read()
        total = 0.0
        for pid, (created, cpu) in cur.items():
            old = self._prev.get(pid)
            if old is not None and abs(old[0] - created) < 0.01:
                total += max(0.0, cpu - old[1])
            else:  # born since the last sample: all its CPU time is new
                total += cpu
        self._prev = cur
        self.counted += total
        return total

    def pids(self) -> list[int]:
        return sorted(self._prev)


def _schedstat(pid: int) -> dict[int, tuple[int, int]]:
    """Per thread of ``pid``: (ns on a CPU, ns waiting on a run queue), from /proc/PID/task/TID/schedstat."""
    out: dict[int, tuple[int, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                run, wait, _slices = f.read().split()
            out[int(tid)] = (int(run), int(wait))
        except (OSError, ValueError):
            continue
    return out


class RunDelay:
    """How long the server's threads waited for a CPU while they could run, over a step.

    Linux's per-thread schedstat (``/proc/PID/task/TID/schedstat``: time on a CPU and time
    runnable but waiting on a run queue), summed over the ``--cpu-pid`` trees' threads between
    :meth:`start` and :meth:`stop`.  The waiting share, wait / (run + wait), measures how much
    the machine's other work held the server back during the step, whatever the server's own
    demand.  A thread that exits during the step loses its counts (rare for servers).
    """

    def __init__(self, tree: ProcessTree | None):
        self.tree = tree
        self._start: dict[tuple[int, int], tuple[int, int]] = {}
        self.available = tree is not None and os.path.exists("/proc/self/task")

    def _read(self) -> dict[tuple[int, int], tuple[int, int]]:
        cur: dict[tuple[int, int], tuple[int, int]] = {}
        for pid in self.tree.pids() if self.tree is not None else []:
            for tid, v in _schedstat(pid).items():
                cur[(pid, tid)] = v
        return cur

    def start(self) -> None:
        if self.available:
            self._start = self._read()

    def stop(self) -> tuple[float, float] | None:
        """(seconds on a CPU, seconds waiting for one) of the tree's threads since :meth:`start`."""
        if not self.available:
            return None
        run = wait = 0
        for key, (r, w) in self._read().items():
            r0, w0 = self._start.get(key, (0, 0))  # a thread born during the step: all of it is new
            run += max(0, r - r0)
            wait += max(0, w - w0)
        return run / 1e9, wait / 1e9


class CpuSampler(threading.Thread):
    """Samples the server's CPU (processes or per-CPU) and the generator's, once per interval."""

    def __init__(self, pids: list[int] | None, interval_s: float = 1.0, other_pids: list[int] | None = None):
        super().__init__(name="headroom-cpu", daemon=True)
        self.interval_s = interval_s
        self.server = ProcessTree(pids) if pids else None
        self.host = HostLoad(ProcessTree(other_pids) if other_pids else None)
        self.n_cpus = psutil.cpu_count() or 1
        self.server_rows: list[tuple[int, list[float]]] = []
        #: (time ns, resident bytes of the server's process tree) per sample: memStats.csv
        self.rss_rows: list[tuple[int, int]] = []
        self.generator_rows: list[tuple[int, float]] = []
        self.server_pids_seen: set[int] = set()
        self._generator: ProcessTree | None = None
        self._generator_pid: int | None = None
        self._lock = threading.Lock()
        self._pending = 0.0
        self._halt = threading.Event()
        self._sampling = threading.Lock()  # the thread's samples and mark() from the recorder
        self.busy_s = 0.0  # server CPU seconds (whole machine: busy CPU seconds) counted so far
        self._last_mono = time.monotonic()
        self._cpu_prev: list[tuple[float, float]] = []
        if self.server is not None:
            self.server_pids_seen.update(self.server.pids())

    @property
    def columns(self) -> int:
        return 1 if self.server is not None else self.n_cpus

    def set_generator(self, pid: int | None, total_cpu_s: float | None = None) -> None:
        """Follow the generator process ``pid`` (and its children) from now on.

        ``None``: the generator exited; ``total_cpu_s`` is its exact CPU time
        (getrusage), and what the samples have not yet seen of it is added to
        the next sample, so that the time series adds up to the exact total.
        """
        with self._lock:
            if pid is None:
                if self._generator is not None and total_cpu_s is not None:
                    self._pending += max(0.0, total_cpu_s - self._generator.counted)
                self._generator, self._generator_pid = None, None
                return
            try:
                tree = ProcessTree([pid], strict=False)
            except HeadroomError:
                tree = None
            if tree is not None:
                tree._prev = {}  # count what it used before we started following it
            self._generator, self._generator_pid = tree, pid

    def mark(self) -> float:
        """Take a sample now (a step's edge) and return the server's CPU seconds counted so far.

        The difference between the marks at a step's launch and end is the
        step's exact CPU time (processes: user + system of the tree; no PIDs:
        busy seconds of all CPUs), not a share of the 1 s samples around it.
        """
        with self._sampling:
            self._sample()
            return self.busy_s

    def _sample(self) -> None:
        now_mono = time.monotonic()
        wall = now_mono - self._last_mono
        self._last_mono = now_mono
        ts = time.time_ns()
        if wall <= 0:
            return
        busy = 0.0
        if self.server is not None:
            busy = self.server.delta()
            self.busy_s += busy
            self.server_pids_seen.update(self.server.pids())
            # percent of the whole machine (100 % = every core), as cpu_cores in metadata says:
            # a multi-process server can use more than one core
            self.server_rows.append((ts, [100.0 * busy / wall / self.n_cpus]))
            self.rss_rows.append((ts, self.server.rss_bytes))
        else:
            cur = _per_cpu_busy()
            pct = []
            for (b0, t0), (b1, t1) in zip(self._cpu_prev, cur):
                dt = t1 - t0
                self.busy_s += max(0.0, b1 - b0)
                pct.append(min(100.0, max(0.0, 100.0 * (b1 - b0) / dt)) if dt > 0 else 0.0)
            self._cpu_prev = cur
            self.server_rows.append((ts, pct))
        with self._lock:
            gen = self._generator
            gen_busy = (gen.delta() if gen is not None else 0.0) + self._pending
            self._pending = 0.0
        self.generator_rows.append((ts, 100.0 * gen_busy / wall))
        self.host.sample(busy + gen_busy)

    def start(self) -> None:
        """Take the baselines now (the first sample covers the interval from here) and start."""
        self._last_mono = time.monotonic()
        if self.server is not None:
            self.server.delta()
            self.server.counted = 0.0
        else:
            self._cpu_prev = _per_cpu_busy()
        self.host.restart()
        super().start()

    def run(self) -> None:
        nxt = time.monotonic() + self.interval_s
        while not self._halt.wait(max(0.0, nxt - time.monotonic())):
            with self._sampling:
                self._sample()
            nxt += self.interval_s
            if nxt < time.monotonic():  # fell behind (suspended machine): do not burst
                nxt = time.monotonic() + self.interval_s

    def finish(self) -> None:
        """Stop the thread and take a last sample over the partial interval."""
        self._halt.set()
        if self.is_alive():
            self.join(timeout=10)
        with self._sampling:
            if time.monotonic() - self._last_mono > 0.05:
                self._sample()

    def mean_between(self, start_ns: int, end_ns: int, rows=None) -> float | None:
        """Time-weighted mean aggregate CPU % of the samples whose interval ends in (start, end]."""
        rows = self.server_rows if rows is None else rows
        vals = []
        for ts, v in rows:
            if start_ns < ts <= end_ns:
                vals.append(v if isinstance(v, float) else sum(v) / len(v))
        return sum(vals) / len(vals) if vals else None
