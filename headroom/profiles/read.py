"""Read one CPU profile: Go pprof (gzip or not) or perf's collapsed stacks.

A profile becomes a :class:`StepProfile`: the distinct stacks with their
sample counts and CPU nanoseconds, and per function the flat (the function
itself is the leaf) and cumulative (the function is anywhere on the stack,
counted once per stack) samples and CPU seconds.  Sample counts are kept
because they are what is Poisson: a function seen in n samples has a
standard error of sqrt(n) samples, whatever the CPU seconds per sample.

The pprof bytes are decoded by the protobuf library against the schema in
:mod:`headroom.profiles.proto`; this module only walks the decoded message.
Anything that is not a CPU profile is refused in one line naming the file.
"""

from __future__ import annotations

import gzip
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..model import HeadroomError

_BINARY = re.compile(rb"[\x00-\x08\x0e-\x1f]")
PERF_HZ = 99  # perf record -F 99: one sample every 1/99 s of CPU

#: sample types of Go's other profiles, to say what a file is when it is not CPU
OTHER_KINDS = {
    "alloc_objects": "a heap (allocs) profile",
    "alloc_space": "a heap (allocs) profile",
    "inuse_objects": "a heap profile",
    "inuse_space": "a heap profile",
    "contentions": "a mutex or block profile",
    "delay": "a mutex or block profile",
    "goroutine": "a goroutine profile",
}


@dataclass(frozen=True, eq=False)
class StepProfile:
    """One CPU profile, aggregated by function.

    ``functions[i]`` has ``flat_samples[i]`` / ``cum_samples[i]`` samples and
    ``flat_cpu_s[i]`` / ``cum_cpu_s[i]`` CPU seconds; the distinct stacks are kept
    as ``frames``/``offsets`` (function indices, leaf first) and ``stack_samples``.
    ``time_ns``/``duration_s``: when the profile ran (None when it does not say).
    """

    path: str
    kind: str  # "pprof" or "perf"
    functions: tuple[str, ...]
    flat_samples: np.ndarray
    cum_samples: np.ndarray
    flat_cpu_s: np.ndarray
    cum_cpu_s: np.ndarray
    frames: np.ndarray  # function indices of every stack, leaf first, stack after stack
    offsets: np.ndarray  # stack k is frames[offsets[k]:offsets[k + 1]]
    stack_samples: np.ndarray
    samples: int
    cpu_s: float
    period_ns: int
    time_ns: int | None
    duration_s: float | None

    def __repr__(self) -> str:
        d = "?" if self.duration_s is None else f"{self.duration_s:g} s"
        return (
            f"<StepProfile {Path(self.path).name}: {self.kind}, {d}, {self.samples:,} samples, "
            f"{self.cpu_s:.3f} CPU s, {len(self.functions):,} functions>"
        )


def _bad(path, why: str) -> HeadroomError:
    return HeadroomError(f"{path}: {why}")


def raw_bytes(path: str | Path) -> bytes:
    """The file's bytes, un-gzipped when they are gzip (a truncated gzip is refused)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise _bad(path, f"cannot read: {e.strerror or e}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise _bad(path, f"broken gzip (truncated or corrupt: {e}); not a readable profile") from None
    return data


def read_profile(path: str | Path) -> StepProfile:
    """Read a Go pprof CPU profile or a perf collapsed-stacks file (by content, not name)."""
    data = raw_bytes(path)
    # protobuf has control bytes (small lengths, field tags) in its first bytes; text has none
    if not _BINARY.search(data[:64]) and _looks_collapsed(data):
        return _read_collapsed(path, data)
    return _read_pprof(path, data)


def _looks_collapsed(data: bytes) -> bool:
    head = data[:4096]
    if not head or b"\0" in head:
        return False
    try:
        lines = [x for x in head.decode(errors="replace").splitlines() if x.strip() and not x.startswith("#")]
    except UnicodeDecodeError:
        return False
    if not lines:
        return head.startswith(b"# headroom perf:")
    first = lines[0]
    stack, _, count = first.rpartition(" ")
    return bool(stack) and count.strip().isdigit()


def _decode(path, data: bytes):
    from google.protobuf.message import DecodeError

    from .proto import Profile

    if not data:
        raise _bad(path, "empty file; not a profile")
    try:
        return Profile.FromString(data)
    except DecodeError:
        raise _bad(path, "not a pprof profile (the bytes do not decode as profile.proto)") from None


def _cpu_index(path, p, st) -> int:
    """Index of the CPU value in every sample (Go: ["samples","count"], ["cpu","nanoseconds"])."""
    types = [(st[t.type], st[t.unit]) for t in p.sample_type] if len(st) else []
    if not types or not st or st[0] != "":
        raise _bad(path, "not a pprof profile (no sample types or string table)")
    for i, (t, u) in enumerate(types):
        if t == "cpu" and u == "nanoseconds":
            return i
    names = ", ".join(t for t, _ in types)
    what = next((OTHER_KINDS[t] for t, _ in types if t in OTHER_KINDS), "a profile of another kind")
    raise _bad(path, f"{what} ({names}), not a CPU profile: give /debug/pprof/profile, not heap or allocs")


#: (build id or file of the mapping, address) -> global function ids (innermost inlined first).
#: Step profiles of one binary share their addresses, so after the first profile a location
#: is one dictionary look-up, without reading its lines and functions again.
_SYMBOLS: dict[tuple, tuple[int, ...]] = {}
_NAMES: list[str] = []  # global function id -> name
_NAME_ID: dict[str, int] = {}


def _global_ids(names) -> tuple[int, ...]:
    out = []
    for name in names:
        i = _NAME_ID.get(name)
        if i is None:
            i = _NAME_ID[name] = len(_NAMES)
            _NAMES.append(name)
        out.append(i)
    return tuple(out)


def _location_functions(p, st) -> tuple[list[int], list[tuple[int, ...]]]:
    """Location ids and their global function ids (innermost inlined first)."""
    maps = {m.id: st[m.build_id] or st[m.filename] for m in p.mapping}
    one = next(iter(maps.values())) if len(maps) == 1 else None  # Go: one static binary
    fn = None
    ids: list[int] = []
    funcs: list[tuple[int, ...]] = []
    get = _SYMBOLS.get
    for location in p.location:
        key = (one if one is not None else maps.get(location.mapping_id, ""), location.address)
        got = get(key)
        if got is None:
            if fn is None:
                fn = {f.id: st[f.name] or st[f.system_name] or f"0x{f.id:x}" for f in p.function}
            got = _global_ids([fn[ln.function_id] for ln in location.line] or [f"0x{location.address:x}"])
            if key[0] and key[1]:  # symbolized against a known binary: the same in every profile
                _SYMBOLS[key] = got
        ids.append(location.id)
        funcs.append(got)
    return ids, funcs


def _read_pprof(path, data: bytes) -> StepProfile:
    p = _decode(path, data)
    st = p.string_table
    ci = _cpu_index(path, p, st)
    si = next((i for i, t in enumerate(p.sample_type) if st[t.type] == "samples"), None)
    period = p.period or 0
    try:
        loc_ids, loc_funcs = _location_functions(p, st)
        loc = dict(zip(loc_ids, loc_funcs))
        # list() of a repeated field is one bulk copy; iterating it element by element is ~10x slower
        stacks = [(list(s.location_id), list(s.value)) for s in p.sample]
        # one profile holds tens to a few thousand stacks: plain Python beats numpy's per-call cost
        frames: list[int] = []
        offsets = [0]
        counts: list[int] = []
        cpu: list[int] = []
        for ids, v in stacks:
            for lid in ids:
                frames += loc[lid]
            offsets.append(len(frames))
            counts.append(v[si] if si is not None else (v[ci] // period if period else 1))
            cpu.append(v[ci])
    except (KeyError, IndexError):
        raise _bad(path, "a broken pprof profile (a sample names a location it does not have)") from None
    used = sorted(set(frames))  # global ids -> this profile's 0..n-1
    local = {g: i for i, g in enumerate(used)}
    names = [_NAMES[g] for g in used]
    t0 = p.time_nanos or None
    dur = p.duration_nanos / 1e9 if p.duration_nanos else None
    fr = list(map(local.__getitem__, frames))
    return _aggregate(path, "pprof", names, fr, offsets, counts, cpu, period, t0, dur)


def _read_collapsed(path, data: bytes) -> StepProfile:
    """``root;caller;leaf COUNT`` per line (perf script | stackcollapse, or headroom's own)."""
    names: list[str] = []
    index: dict[str, int] = {}
    frames: list[int] = []
    offsets = [0]
    counts: list[int] = []
    period = round(1e9 / PERF_HZ)
    t0 = dur = None
    for k, line in enumerate(data.decode(errors="replace").splitlines(), 1):
        if line.startswith("# headroom perf:"):  # the window, written by headroom.profiles.perf
            facts = dict(x.split("=", 1) for x in line.split(":", 1)[1].split() if "=" in x)
            t0 = int(facts.get("start_ns", 0)) or None
            dur = float(facts.get("duration_s", 0)) or None
            continue
        if not line.strip() or line.startswith("#"):
            continue
        stack, _, count = line.rpartition(" ")
        if not stack or not count.strip().isdigit():
            raise _bad(path, f"line {k}: not collapsed stacks ('frame;frame;leaf COUNT'): {line[:80]!r}")
        for name in reversed(stack.split(";")):
            i = index.get(name)
            if i is None:
                i = index[name] = len(names)
                names.append(name)
            frames.append(i)
        offsets.append(len(frames))
        counts.append(int(count))
    return _aggregate(
        path, "perf", names, frames, offsets, counts, [c * period for c in counts], period, t0, dur
    )


def _aggregate(path, kind, names, frames, offsets, counts, cpu, period, t0, dur) -> StepProfile:
    """Flat and cumulative samples and CPU per function from the stacks (plain lists)."""
    nf = len(names)
    flat_n, cum_n = [0] * nf, [0] * nf
    # Go (and perf) write every sample's CPU as its count times the period: then the
    # CPU per function is its samples times the period, and only counts need adding up
    exact = bool(period) and all(x == c * period for c, x in zip(counts, cpu))
    flat_v, cum_v = ([0] * nf, [0] * nf) if not exact else (None, None)
    for k, c in enumerate(counts):
        stack = frames[offsets[k] : offsets[k + 1]]
        if not stack:
            continue
        flat_n[stack[0]] += c
        for f in set(stack):  # a function counts once per stack however often it recurses
            cum_n[f] += c
        if not exact:
            x = cpu[k]
            flat_v[stack[0]] += x
            for f in set(stack):
                cum_v[f] += x
    fn, cn = np.array(flat_n, np.int64), np.array(cum_n, np.int64)
    if exact:
        fv, cv = fn * (period / 1e9), cn * (period / 1e9)
    else:
        fv, cv = np.array(flat_v, np.float64) / 1e9, np.array(cum_v, np.float64) / 1e9
    return StepProfile(
        path=str(path),
        kind=kind,
        functions=tuple(names),
        flat_samples=fn,
        cum_samples=cn,
        flat_cpu_s=fv,
        cum_cpu_s=cv,
        frames=np.array(frames, np.int64),
        offsets=np.array(offsets, np.int64),
        stack_samples=np.array(counts, np.int64),
        samples=sum(counts),
        cpu_s=sum(cpu) / 1e9,
        period_ns=int(period),
        time_ns=t0,
        duration_s=dur,
    )
