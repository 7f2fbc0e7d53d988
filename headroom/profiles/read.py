"""Read one CPU profile: Go pprof (gzip or not) or perf's collapsed stacks.

A profile becomes a :class:`StepProfile`: the distinct stacks with their
sample counts and CPU nanoseconds, and per function the flat (the function
itself is the leaf) and cumulative (the function is anywhere on the stack,
counted once per stack) samples and CPU seconds.  Sample counts are kept
because they are what is Poisson: a function seen in n samples has a
standard error of sqrt(n) samples, whatever the CPU seconds per sample.

The pprof bytes are decoded by the protobuf library against the schema in
:mod:`headroom.profiles.proto`, through its column views: every sample's
location ids, every location's lines, every function's name index come out
as numpy arrays, and the stacks, names, flat and cumulative figures are
computed on those arrays, with no Python loop over samples, locations or
lines (:func:`_from_columns`).  A profile the columns do not fit (what Go
never writes: locations without lines, functions without names or not
numbered in order of their first line, one name twice) is read by walking
the library's message objects (:func:`_read_pprof_walk`), with the same
result, as is any file that does not decode, so that the walk says what is
wrong.  Functions are numbered in order of their first line in the location
table.  Anything that is not a CPU profile is refused in one line naming
the file.
"""

from __future__ import annotations

import gzip
import re
import zlib
from dataclasses import dataclass
from operator import itemgetter
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


def _read_pprof(path, data: bytes) -> StepProfile:
    """A pprof profile from its columns (:func:`headroom.profiles.proto.columns`); a profile
    whose columns do not fit, or that does not decode at all, is walked message by message
    (:func:`_read_pprof_walk`), which gives the same result or says what is wrong."""
    from google.protobuf.message import DecodeError

    from .proto import Unfit, columns

    if not data:
        raise _bad(path, "empty file; not a profile")
    try:
        c = columns(data)
    except (DecodeError, Unfit):
        return _read_pprof_walk(path, data)
    head = c.header
    ci = _cpu_index(path, head, head.string_table)
    try:
        return _from_columns(path, c, ci)
    except Unfit:
        return _read_pprof_walk(path, data)


def _positions(ids: np.ndarray, wanted: np.ndarray, path) -> np.ndarray:
    """Positions in ``ids`` of every id in ``wanted``, -1 for its 0 terminators (the last of
    equal ids, as a dict keeps it); an id that is not there is a broken profile."""
    n = len(ids)
    at = wanted.view(np.int64) - 1
    if not (n and ids[-1] == n and (ids == np.arange(1, n + 1, dtype=np.uint64)).all()):
        order = np.argsort(ids, kind="stable")  # ids other than 1..n (Go writes 1..n)
        found = np.searchsorted(ids[order], wanted, side="right") - 1
        ok = (found >= 0) & (ids[order[found]] == wanted)
        at = np.where(ok, order[found], np.where(wanted == 0, -1, n))
    if at.size and not -1 <= at.min() <= at.max() < n:
        raise _bad(path, "a broken pprof profile (a sample names a location it does not have)")
    return at


def _frames(path, c, fi: np.ndarray, ns: int) -> tuple[np.ndarray, np.ndarray]:
    """(function of every frame of every sample, leaf first; where each sample's frames start),
    from ``fi``: the function of every line, -1 after each location's lines."""
    from .proto import Unfit, ends  # loaded already (by _read_pprof)

    nl = len(c.location_id)
    last = np.empty(nl + 1, np.int64)  # where each location's lines end; and a location of none
    last[:nl] = ends(fi + 1, nl)
    last[nl] = 0
    lines = last.copy()
    lines[1:nl] -= last[: nl - 1] + 1
    lines[nl] = 0
    if nl and not lines[:nl].min():  # a location without lines: named by its address, by the walk
        raise Unfit("an unsymbolized location")
    li = _positions(c.location_id, c.sample_locations, path)  # location of every sample slot, -1: end
    per = lines[li]  # frames of each slot (none for the -1 that ends a sample)
    upto = np.cumsum(per)
    start = (last - lines)[li] - upto + per  # slot's first line, less the frames before it
    frames = fi[np.repeat(start, per) + np.arange(upto[-1] if upto.size else 0)]
    offsets = np.zeros(ns + 1, np.int64)
    offsets[1:] = upto[ends(li + 1, ns)]
    return frames, offsets


def _names(c, st, fi: np.ndarray, frames: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """The names of the functions in ``frames``, in order of their first line in the location
    table (as the walk numbers them), and ``frames`` as indices into them."""
    from .proto import Unfit  # loaded already (by _read_pprof)

    nf = len(c.function_id)
    seen = np.maximum.accumulate(fi)  # Go numbers functions as their first lines come
    if fi.size and (seen[0] != 0 or seen[-1] != nf - 1 or (seen[1:] - seen[:-1] > 1).any()):
        raise Unfit("functions not numbered in order of their first line")
    at = c.function_name
    if nf and not 0 < at.min() <= at.max() < len(st):
        raise Unfit("a function without a name, or a name outside the string table")
    every = itemgetter(*at.tolist())(list(st)) if nf > 1 else tuple(st[i] for i in at.tolist())
    if "" in every or len(set(every)) < nf:  # empty names, or one name twice: the walk's way
        raise Unfit("empty or repeated function names")
    count = np.bincount(frames, minlength=nf)
    if count.all():  # every function is in some sample (Go's are)
        return every, frames
    used = np.flatnonzero(count)
    local = np.zeros(nf, np.int64)
    local[used] = np.arange(len(used))
    return tuple(every[i] for i in used.tolist()), local[frames]


def _from_columns(path, c, ci: int) -> StepProfile:
    """The stacks of every sample in function names, from the columns, without a Python loop
    over samples, locations or lines."""
    from .proto import Unfit  # loaded already (by _read_pprof)

    head = c.header
    st = head.string_table
    si = next((i for i, t in enumerate(head.sample_type) if st[t.type] == "samples"), None)
    period = head.period or 0
    ns, width = len(head.sample), len(head.sample_type)
    if len(c.sample_values) != ns * width:  # a sample without all its values: the walk says so
        raise Unfit("a sample does not give one value per sample type")
    values = c.sample_values.reshape(ns, width)
    cpu = values[:, ci]
    counts = values[:, si] if si is not None else (cpu // period if period else np.ones(ns, np.int64))
    fi = _positions(c.function_id, c.line_function, path)  # function of every line, -1: location end
    frames, offsets = _frames(path, c, fi, ns)
    names, frames = _names(c, st, fi, frames)
    t0 = head.time_nanos or None
    dur = head.duration_nanos / 1e9 if head.duration_nanos else None
    return _aggregate(path, "pprof", names, frames, offsets, counts, cpu, period, t0, dur)


def _read_pprof_walk(path, data: bytes) -> StepProfile:
    """A pprof profile the straightforward way: the library's message objects, one by one."""
    p = _decode(path, data)
    st = p.string_table
    ci = _cpu_index(path, p, st)
    si = next((i for i, t in enumerate(p.sample_type) if st[t.type] == "samples"), None)
    period = p.period or 0
    ids: dict[str, int] = {}
    try:
        fn = {f.id: st[f.name] or st[f.system_name] or f"0x{f.id:x}" for f in p.function}
        loc = {}
        for x in p.location:  # name ids in order of first appearance in the location table
            # a line of no function (id 0, as pprof reads it) is no frame; the columns never see it
            names = [fn[ln.function_id] for ln in x.line if ln.function_id] or [f"0x{x.address:x}"]
            loc[x.id] = [ids.setdefault(name, len(ids)) for name in names]
        frames: list[int] = []
        offsets = [0]
        counts: list[int] = []
        cpu: list[int] = []
        for s in p.sample:
            v = list(s.value)
            for lid in s.location_id:
                frames += loc[lid]
            offsets.append(len(frames))
            counts.append(v[si] if si is not None else (v[ci] // period if period else 1))
            cpu.append(v[ci])
    except (KeyError, IndexError):
        raise _bad(path, "a broken pprof profile (a sample names a location it does not have)") from None
    used = sorted(set(frames))
    local = {g: i for i, g in enumerate(used)}
    every = list(ids)
    t0 = p.time_nanos or None
    dur = p.duration_nanos / 1e9 if p.duration_nanos else None
    fr = [local[g] for g in frames]
    return _aggregate(path, "pprof", [every[g] for g in used], fr, offsets, counts, cpu, period, t0, dur)


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
    """Flat and cumulative samples and CPU per function from the stacks (arrays or lists)."""
    nf = len(names)
    frames = np.asarray(frames, np.int64)
    offsets = np.asarray(offsets, np.int64)
    counts = np.asarray(counts, np.int64)
    cpu = np.asarray(cpu, np.int64)
    depth = offsets[1:] - offsets[:-1]
    has = depth > 0
    every = has.all()
    leaf = frames[offsets[:-1]] if every else frames[offsets[:-1][has]]
    # a function counts once per stack however often it recurses: (stack, function) pairs
    # (stack << bits | function), sorted, each once
    bits = max(nf - 1, 1).bit_length()
    small = np.int32 if len(depth) << bits < 2**31 else np.int64  # int32 sorts twice as fast
    pairs = np.repeat(np.arange(len(depth), dtype=small) << bits, depth) | frames.astype(small)
    pairs.sort()
    if pairs.size:
        once = np.empty(pairs.size, bool)
        once[0] = True
        np.not_equal(pairs[1:], pairs[:-1], out=once[1:])
        pairs = pairs[once]
    cum_f, cum_k = pairs & ((1 << bits) - 1), pairs >> bits

    def add(where, what) -> np.ndarray:  # sums of integers: exact in float64 below 2**53
        return np.bincount(where, weights=what, minlength=nf).astype(np.int64)

    fn, cn = add(leaf, counts if every else counts[has]), add(cum_f, counts[cum_k])
    # Go (and perf) write every sample's CPU as its count times the period: then the
    # CPU per function is its samples times the period
    if period and (cpu == counts * period).all():
        fv, cv = fn * (period / 1e9), cn * (period / 1e9)
    else:
        fv, cv = add(leaf, cpu if every else cpu[has]) / 1e9, add(cum_f, cpu[cum_k]) / 1e9
    return StepProfile(
        path=str(path),
        kind=kind,
        functions=tuple(names),
        flat_samples=fn,
        cum_samples=cn,
        flat_cpu_s=fv,
        cum_cpu_s=cv,
        frames=frames,
        offsets=offsets,
        stack_samples=counts,
        samples=int(counts.sum()),
        cpu_s=int(cpu.sum()) / 1e9,
        period_ns=int(period),
        time_ns=t0,
        duration_s=dur,
    )
