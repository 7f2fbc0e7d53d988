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


def _index_of(ids: np.ndarray, wanted: np.ndarray, path) -> np.ndarray:
    """Positions in ``ids`` of every id in ``wanted`` (the last of equal ids, as a dict keeps it)."""
    n = len(ids)
    if n and ids[0] == 1 and ids[-1] == n and (ids[1:] - ids[:-1] == 1).all():  # 1..n, as Go writes
        at = (wanted - np.uint64(1)).view(np.int64)  # id 0 wraps around to -1: out of range
        if at.size and not 0 <= at.min() <= at.max() < n:
            raise _bad(path, "a broken pprof profile (a sample names a location it does not have)")
        return at
    order = np.argsort(ids, kind="stable")
    pos = np.searchsorted(ids[order], wanted, side="right") - 1
    if (pos < 0).any() or (ids[order[pos]] != wanted).any():
        raise _bad(path, "a broken pprof profile (a sample names a location it does not have)")
    return order[pos]


def _function_keys(c, table: list[str]) -> np.ndarray:
    """Per function the string table index of its name; a function without a name gets its
    system name, else a ``0x<id>`` name appended to ``table`` (as the walk names them)."""
    from .proto import Unfit  # loaded already (by _read_pprof)

    name, nst = c.function_name, len(table)
    if len(name) and not 0 <= name.min() <= name.max() < nst or table.count("") != 1:
        raise Unfit("a name outside the string table, or empty strings besides the first")
    keys = name.copy()
    for f in np.flatnonzero(name == 0).tolist():  # Go names every function: rarely taken
        sys_at = c.function_system_name
        if len(sys_at) != len(name) or not 0 <= sys_at[f] < nst:
            raise Unfit("system names left out or outside the string table")
        keys[f] = sys_at[f] if sys_at[f] else len(table)
        if not sys_at[f]:
            table.append(f"0x{int(c.function_id[f]):x}")
    return keys


def _line_names(path, c, st) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(name id of every line, lines per location, names): a location without lines is one line
    named by its address; name ids count in order of first appearance in the location table."""
    table = list(st)
    fkeys = _function_keys(c, table)
    keys = fkeys[_index_of(c.function_id, c.line_function, path)]
    lines = c.location_lines
    if not lines.all():  # unsymbolized locations: one line each, named by the address
        bare = np.flatnonzero(lines == 0)
        keys = np.insert(keys, (np.cumsum(lines) - lines)[bare], len(table) + np.arange(bare.size))
        table += [f"0x{int(a):x}" for a in c.location_address[bare]]
        lines = np.where(lines == 0, 1, lines)
    uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # the names in order of first appearance
    names = list(map(table.__getitem__, uniq[order].tolist()))
    rank = np.empty(len(uniq), np.int64)
    rank[order] = np.arange(len(uniq))
    if len(set(names)) < len(names):  # one name at several string indices: the first counts
        ids: dict[str, int] = {}
        rank = np.array([ids.setdefault(x, len(ids)) for x in names], np.int64)[rank]
        names = list(ids)
    return rank[inverse], lines, names


def _from_columns(path, c, ci: int) -> StepProfile:
    """The stacks of every sample in function names, from the columns, without a Python loop
    over samples, locations or lines."""
    from .proto import Unfit  # loaded already (by _read_pprof)

    head = c.header
    st = head.string_table
    si = next((i for i, t in enumerate(head.sample_type) if st[t.type] == "samples"), None)
    period = head.period or 0
    ns, width = len(c.sample_depth), len(head.sample_type)
    if len(c.sample_values) != ns * width:  # a sample without all its values: the walk says so
        raise Unfit("a sample does not give one value per sample type")
    values = c.sample_values.reshape(ns, width)
    cpu = values[:, ci]
    counts = values[:, si] if si is not None else (cpu // period if period else np.ones(ns, np.int64))
    line_name, lines, names = _line_names(path, c, st)
    li = _index_of(c.location_id, c.sample_locations, path)  # location of every sample frame
    per = lines[li]  # its lines: the frames it stands for
    ends = np.cumsum(per)
    at = np.repeat((np.cumsum(lines) - lines)[li] - (ends - per), per) + np.arange(ends[-1] if ends.size else 0)
    frames = line_name[at]
    offsets = np.concatenate(([0], ends))[np.concatenate(([0], np.cumsum(c.sample_depth)))]
    used = np.flatnonzero(np.bincount(frames, minlength=len(names)))  # this profile's functions
    local = np.zeros(len(names), np.int64)
    local[used] = np.arange(len(used))
    t0 = head.time_nanos or None
    dur = head.duration_nanos / 1e9 if head.duration_nanos else None
    return _aggregate(
        path, "pprof", [names[i] for i in used.tolist()], local[frames], offsets, counts, cpu, period, t0, dur
    )


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
            names = [fn[ln.function_id] for ln in x.line] or [f"0x{x.address:x}"]
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
    depth = np.diff(offsets)
    has = depth > 0
    leaf = frames[offsets[:-1][has]]
    # a function counts once per stack however often it recurses: (stack, function) pairs, once
    pairs = np.sort(np.repeat(np.arange(len(depth), dtype=np.int64), depth) * max(nf, 1) + frames)
    pairs = pairs[np.concatenate(([True], pairs[1:] != pairs[:-1]))] if pairs.size else pairs
    cum_f, cum_k = pairs % max(nf, 1), pairs // max(nf, 1)

    def add(where, what) -> np.ndarray:  # sums of integers, exact below 2**53
        return np.rint(np.bincount(where, weights=what, minlength=nf)).astype(np.int64)

    fn, cn = add(leaf, counts[has]), add(cum_f, counts[cum_k])
    # Go (and perf) write every sample's CPU as its count times the period: then the
    # CPU per function is its samples times the period
    if period and np.array_equal(cpu, counts * period):
        fv, cv = fn * (period / 1e9), cn * (period / 1e9)
    else:
        fv, cv = add(leaf, cpu[has]) / 1e9, add(cum_f, cpu[cum_k]) / 1e9
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
