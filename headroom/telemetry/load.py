"""A run's telemetry when it is read: from Prometheus when asked, else from its folder."""

from __future__ import annotations

from pathlib import Path

from .files import MEM_NAME, read_mem_stats
from .model import Telemetry
from .prometheus import PromSource, fetch


def load_window(p) -> tuple[int, int]:
    """First request start to last response of a reduced run's partial (ns)."""
    spans = [(q.t0, q.t1) for q in p.steps.values() if q.n > 0]
    return min(a for a, _ in spans), max(b for _, b in spans)


def mem_stats_path(perf: Path) -> Path | None:
    """The ``memStats.csv`` beside a request file (``old_memStats.csv`` for an ``old_`` run)."""
    prefix = "old_" if perf.name.startswith("old_") else ""
    p = perf.parent / f"{prefix}{MEM_NAME}"
    return p if p.is_file() else None


def server_telemetry(files, fields: dict, p, source: PromSource | None, file_cpu):
    """(CPU samples, telemetry, metadata fields) of a run being read.

    With ``source`` the CPU and memory come from Prometheus over the load
    window, and the recorder's exact per-step CPU (``step_cpu_s``) is set
    aside, so that every figure is the source's.  Without it: the CPU file
    (``file_cpu()``) and the folder's ``memStats.csv``.
    """
    if source is not None:
        lo, hi = load_window(p)
        tel = fetch(source, lo, hi)
        fields = {k: v for k, v in fields.items() if k != "step_cpu_s"}
        return tel.cpu_samples(), tel, fields
    cpu = file_cpu()
    if files.cpu is not None and _saved_by_telemetry(Path(files.cpu)):
        # the recorder's exact per-step CPU is psutil's, not the saved source's
        fields = {k: v for k, v in fields.items() if k != "step_cpu_s"}
        if cpu is not None:
            import dataclasses

            cpu = dataclasses.replace(cpu, source=f"{cpu.source} (saved from prometheus)")
    mem = mem_stats_path(Path(files.perf))
    tel = read_mem_stats(mem) if mem is not None else None
    return cpu, tel, fields


def _saved_by_telemetry(cpu: Path) -> bool:
    from .files import CPU_NAME, read_info

    if cpu.name != CPU_NAME:
        return False
    info = read_info(cpu.parent)
    return info is not None and "cpu_cores" in info


def fetch_and_save(
    source: PromSource, folder, window: tuple[int, int], *, force: bool = False, keep_cpu: bool = False
) -> tuple[Telemetry, list[Path]]:
    """Fetch the telemetry of ``window`` and save it into ``folder`` (cpuStats.csv, memStats.csv,
    telemetry.json); an existing cpuStats.csv is refused unless ``force``, or kept as it is
    with ``keep_cpu`` (the recorder's exact psutil CPU)."""
    from .files import CPU_NAME, write_cpu_stats, write_info, write_mem_stats
    from .model import TelemetryError

    folder = Path(folder)
    tel = fetch(source, *window)
    written = []
    if (folder / CPU_NAME).exists() and not force and not keep_cpu:
        raise TelemetryError(
            f"{folder / CPU_NAME}: the run has CPU samples already: give --force to replace them with {source.describe()}'s"
        )
    cpu = None if keep_cpu else tel.get("cpu_cores")
    if cpu is not None:
        written.append(write_cpu_stats(folder, cpu))
    mem = write_mem_stats(folder, tel)
    if mem is not None:
        written.append(mem)
    info = {
        "source": source.url,
        "queries": {k: s.source.split(" ", 2)[-1] for k, s in tel.series.items()},
        "window_ns": [int(window[0]), int(window[1])],
        "step_s": source.step_s,
    }
    if cpu is not None:
        from .files import cpu_file_cores

        info["cpu_cores"] = cpu_file_cores(cpu)
    written.append(write_info(folder, info))
    return tel, written


def record_time(args, folder, window: tuple[int, int], warn, sampler=None) -> list[Path]:
    """What ``headroom ramp`` calls after a recording's load data is written.

    * With server PIDs (``--cpu-pid``): the resident memory psutil sampled beside the CPU,
      as ``memStats.csv`` (``sampler``: the recorder's :class:`headroom.ramp.cpu.CpuSampler`).
    * With ``--prometheus URL``: the server's telemetry over ``window`` (first request start,
      last response, ns), saved into the run folder; psutil's exact CPU is kept when the
      recorder followed the server's PIDs, else Prometheus' server CPU replaces the whole
      machine's.  Prometheus' memory (with the Go GC) replaces psutil's.

    Never raises: a failure is a warning (``warn(text)``), the load data being written already.
    """
    from .files import write_psutil_mem
    from .model import TelemetryError

    written = []
    has_pids = sampler is not None and getattr(sampler, "server", None) is not None
    try:
        if has_pids:
            p = write_psutil_mem(Path(folder), sampler)
            written += [p] if p is not None else []
        source = source_from_args(args)
        if source is not None:
            written += fetch_and_save(source, folder, window, force=True, keep_cpu=has_pids)[1]
    except (TelemetryError, OSError) as e:
        warn(f"server telemetry not saved (the load data is): {e}")
    return list(dict.fromkeys(written))  # memStats.csv once, when Prometheus' replaced psutil's


def source_from_args(args) -> PromSource | None:
    """The Prometheus source the command line asks for (None without ``--prometheus``)."""
    return sources_from_args(args, 1)[0]


def sources_from_args(args, n: int) -> list:
    """One Prometheus source per run of ``n`` (None each without ``--prometheus``), from the
    command line's --prometheus, --cpu-query, --memory-query, --prometheus-match, --prometheus-step."""
    return sources(
        getattr(args, "prometheus", None),
        cpu_query=getattr(args, "cpu_query", None),
        memory_query=getattr(args, "memory_query", None),
        matches=list(getattr(args, "prometheus_match", None) or []),
        step_s=float(getattr(args, "prometheus_step", None) or 1.0),
        n=n,
    )


def sources(url, *, cpu_query=None, memory_query=None, matches=(), step_s=1.0, n=1) -> list:
    """One :class:`PromSource` per run (``n`` runs; ``matches``: none, one for all, or one each);
    ``[None] * n`` without a URL."""
    from .model import TelemetryError

    if not url:
        return [None] * n
    matches = list(matches)
    if len(matches) not in (0, 1, n):
        raise TelemetryError(
            f"--prometheus-match given {len(matches)} times for {n} runs: give it once, or once per run"
        )
    if len(matches) <= 1:
        matches = (matches or [None]) * n
    return [PromSource(url, cpu_query, memory_query, m, step_s) for m in matches]


def window_of(run) -> tuple[int, int]:
    """A read run's load window: first request start to last response (ns)."""
    st = run.reduced.steps
    has = st.requests > 0
    return int(st.start_ns[has].min()), int(st.end_ns[has].max())
