"""Linux ``perf`` for servers that are not Go: ``perf record -F 99 -g`` on a PID, kept as collapsed stacks.

One ``perf record -p PID -F 99 -g -- sleep N`` per step, then ``perf script``,
whose stacks are folded here into ``root;caller;leaf COUNT`` lines (the
format of flamegraph's stackcollapse-perf), under a ``#`` header with the
window's start and length so the file can be normalised per request like a
pprof profile.  ``perf`` must be allowed to sample the process
(``/proc/sys/kernel/perf_event_paranoid``, CAP_PERFMON, a container's
seccomp policy): :func:`check_perf` makes one real attempt and says in one
line why it failed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from ..model import HeadroomError

_FRAME = re.compile(r"^\s*[0-9a-f]+\s+(.+?)(?:\+0x[0-9a-f]+)?\s+\((.*)\)\s*$")


def _perf() -> str:
    path = shutil.which("perf")
    if path is None:
        raise HeadroomError("--perf-pid: 'perf' is not installed (Debian: apt-get install linux-perf)")
    return path


def _record(pid: int, seconds: float, data: Path) -> tuple[int, str]:
    cmd = [
        _perf(),
        "record",
        "-F",
        "99",
        "-g",
        "-p",
        str(pid),
        "-o",
        str(data),
        "--",
        "sleep",
        f"{seconds:g}",
    ]
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=seconds + 15, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return -1, f"perf record did not end within {seconds + 15:g}s"
    lines = [x.strip() for x in done.stderr.splitlines() if x.strip() and not x.startswith("[ perf record")]
    return done.returncode, (lines[0] if lines else "")


def why_perf_fails(pid: int) -> str | None:
    """None when a real 0.2 s ``perf record`` of ``pid`` works, else one line why not."""
    try:
        _perf()
    except HeadroomError as e:
        return str(e).split(": ", 1)[1]
    with tempfile.TemporaryDirectory(prefix="headroom-perf-") as tmp:
        rc, msg = _record(pid, 0.2, Path(tmp) / "perf.data")
        if rc != 0:
            paranoid = Path("/proc/sys/kernel/perf_event_paranoid")
            level = paranoid.read_text().strip() if paranoid.exists() else "?"
            return (
                f"perf record -p {pid} failed (exit {rc}: {msg or 'no message'}; perf_event_paranoid={level})"
            )
    return None


def check_perf(pid: int) -> None:
    """Exit 2 (HeadroomError) when perf cannot sample ``pid`` here."""
    why = why_perf_fails(pid)
    if why:
        raise HeadroomError(f"--perf-pid {pid}: {why}")


def collapse(script: str) -> Counter:
    """``perf script`` text -> Counter of 'root;...;leaf' stacks."""
    stacks: Counter = Counter()
    frames: list[str] = []
    for line in script.splitlines() + [""]:
        if not line.strip():
            if frames:
                stacks[";".join(reversed(frames))] += 1
            frames = []
            continue
        if line[0] in " \t":
            m = _FRAME.match(line)
            if m:
                name = m[1]
                frames.append(name if name != "[unknown]" else f"[{Path(m[2]).name or 'unknown'}]")
    return stacks


def record_collapsed(pid: int, seconds: int) -> bytes | str:
    """Collapsed stacks of ``seconds`` of ``pid``'s CPU, or one line saying why not."""
    with tempfile.TemporaryDirectory(prefix="headroom-perf-") as tmp:
        data = Path(tmp) / "perf.data"
        t0 = time.time_ns()
        rc, msg = _record(pid, seconds, data)
        if rc != 0:
            return f"perf record -p {pid} failed (exit {rc}: {msg})"
        try:
            out = subprocess.run(
                [_perf(), "script", "-i", str(data)], capture_output=True, text=True, timeout=60
            )
        except subprocess.TimeoutExpired:
            return "perf script did not end within 60s"
        if out.returncode != 0:
            return f"perf script failed (exit {out.returncode})"
    stacks = collapse(out.stdout)
    if not stacks:  # nothing to show: said, not written as an empty profile
        return (f"perf record -p {pid} caught no sample in {seconds} s (the process was off CPU then: "
                "the step's load had ended, or not begun)")  # fmt: skip
    head = f"# headroom perf: pid={pid} start_ns={t0} duration_s={seconds} frequency_hz=99\n"
    return (head + "".join(f"{s} {n}\n" for s, n in sorted(stacks.items()))).encode()
