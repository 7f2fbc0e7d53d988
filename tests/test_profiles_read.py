"""Reading pprof profiles through column views: the same figures as a plain walk of the messages.

``read_profile`` reads the library's column views (:func:`headroom.profiles.proto.columns`)
and works on arrays.  Here its result is checked against computations that share none of
that code: a naive walk of the library's ``Profile`` message written in this file, the
module's own message walk (its fallback), and ``go tool pprof``, on the 104 real profiles
of data/profiles/ and on profiles built here with the library to have what Go never
writes (ids out of order, locations without lines, unnamed functions, recursion ...).
"""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from headroom.model import HeadroomError
from headroom.profiles import proto
from headroom.profiles.proto import Profile
from headroom.profiles.read import _cpu_index, _from_columns, _read_pprof_walk, raw_bytes, read_profile

DATA = Path(__file__).resolve().parent.parent / "data" / "profiles"
REAL = sorted(DATA.glob("*/profiles/*.pb.gz"))
ARRAYS = ("flat_samples", "cum_samples", "flat_cpu_s", "cum_cpu_s", "frames", "offsets", "stack_samples")


def naive(msg) -> dict:
    """Flat and cumulative samples and CPU per function name, the stacks as a multiset, totals:
    a walk of the message objects, one sample at a time."""
    st = msg.string_table
    types = [st[t.type] for t in msg.sample_type]
    ci = [i for i, t in enumerate(types) if st[msg.sample_type[i].unit] == "nanoseconds"][0]
    si = types.index("samples") if "samples" in types else None
    fn = {f.id: st[f.name] or st[f.system_name] or f"0x{f.id:x}" for f in msg.function}
    loc = {
        x.id: [fn[ln.function_id] for ln in x.line if ln.function_id] or [f"0x{x.address:x}"]
        for x in msg.location
    }
    flat: Counter = Counter()
    cum: Counter = Counter()
    flat_ns: Counter = Counter()
    cum_ns: Counter = Counter()
    stacks: Counter = Counter()
    samples = cpu = 0
    for s in msg.sample:
        n = s.value[si] if si is not None else s.value[ci] // msg.period
        names = [name for lid in s.location_id for name in loc[lid]]
        samples += n
        cpu += s.value[ci]
        stacks[tuple(names)] += n
        if names:
            flat[names[0]] += n
            flat_ns[names[0]] += s.value[ci]
        for name in set(names):
            cum[name] += n
            cum_ns[name] += s.value[ci]
    return {
        "flat": +flat,
        "cum": +cum,
        "flat_ns": +flat_ns,
        "cum_ns": +cum_ns,
        "stacks": +stacks,
        "samples": samples,
        "cpu_ns": cpu,
    }


def figures(p) -> dict:
    """The same figures from a StepProfile."""

    def by_name(values, scale=1):
        return Counter({f: round(float(v) * scale) for f, v in zip(p.functions, values) if v})

    stacks: Counter = Counter()
    for k, n in enumerate(p.stack_samples):
        stacks[tuple(p.functions[i] for i in p.frames[p.offsets[k] : p.offsets[k + 1]])] += int(n)
    return {
        "flat": by_name(p.flat_samples),
        "cum": by_name(p.cum_samples),
        "flat_ns": by_name(p.flat_cpu_s, 1e9),
        "cum_ns": by_name(p.cum_cpu_s, 1e9),
        "stacks": +stacks,
        "samples": p.samples,
        "cpu_ns": round(p.cpu_s * 1e9),
    }


def same_profile(a, b) -> None:
    """Two StepProfiles are the same, array for array and in the same function order."""
    assert a.functions == b.functions
    for name in ARRAYS:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert (a.samples, a.cpu_s, a.period_ns, a.time_ns, a.duration_s) == (
        b.samples,
        b.cpu_s,
        b.period_ns,
        b.time_ns,
        b.duration_s,
    )


# --------------------------------------------------------------------------
# the 104 real profiles


def test_the_real_profiles_are_there():
    assert len(REAL) == 104
    runs = {p.parent.parent.name for p in REAL}
    assert runs == {"base-01", "regexp-01", "busy-01", "busy-regexp-01", "long-01"}


@pytest.mark.parametrize("path", REAL, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_real_profile_agrees_with_a_naive_walk_and_the_module_walk(path):
    p = read_profile(path)
    msg = Profile.FromString(gzip.decompress(path.read_bytes()))
    assert figures(p) == naive(msg)
    same_profile(p, _read_pprof_walk(path, raw_bytes(path)))
    same_profile(p, fast(path, raw_bytes(path)))  # Go's profiles take the columns' way, not the walk


def fast(path, data: bytes):
    """The columns' way only (read_profile would walk the messages where the columns do not fit)."""
    c = proto.columns(data)
    return _from_columns(path, c, _cpu_index(path, c.header, c.header.string_table))


def test_busy_profiles_are_busy():
    """The bench's busy set: hundreds of stacks and locations per profile, inlined frames."""
    busy = [
        Profile.FromString(gzip.decompress(f.read_bytes())) for f in REAL if "busy" in f.parent.parent.name
    ]
    assert len(busy) == 50
    assert np.median([len(m.sample) for m in busy]) > 150
    assert np.median([len(m.location) for m in busy]) > 300
    assert all(sum(len(x.line) for x in m.location) > len(m.location) for m in busy)  # inlining


def test_columns_split_real_profiles_into_their_records():
    path = next(f for f in REAL if "busy-regexp" in str(f))
    data = gzip.decompress(path.read_bytes())
    msg = Profile.FromString(data)
    c = proto.columns(data)
    locations = [lid for s in msg.sample for lid in [*s.location_id, 0]]
    assert c.sample_locations.tolist() == locations
    assert c.sample_values.tolist() == [v for s in msg.sample for v in s.value]
    assert c.location_id.tolist() == [x.id for x in msg.location]
    assert c.line_function.tolist() == [
        f for x in msg.location for f in [*(ln.function_id for ln in x.line), 0]
    ]
    assert c.function_id.tolist() == [f.id for f in msg.function]
    assert c.function_name.tolist() == [f.name for f in msg.function]


def go_pprof_top(path: Path) -> dict[str, tuple[int, int]]:
    """function -> (flat, cum) samples, as ``go tool pprof -top`` prints them."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(go).exists() and not shutil.which("go"):
        pytest.skip("no go toolchain for go tool pprof")
    args = [go, "tool", "pprof", "-top", "-nodecount=1000000", "-nodefraction=0", "-edgefraction=0"]
    out = subprocess.run(
        [*args, "-sample_index=samples", str(path)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    rows = {}
    for line in out.stdout.splitlines():
        m = re.match(r"\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.+?)(?: \(inline\))?$", line)
        if m:
            rows[m[3]] = (int(m[1]), int(m[2]))
    return rows


@pytest.mark.parametrize(
    "name", ["busy-01/profiles/step-010-c10.pb.gz", "busy-regexp-01/profiles/step-020-c20.pb.gz"]
)
def test_real_profile_agrees_with_go_tool_pprof(name):
    path = DATA / name
    p = read_profile(path)
    ours = {f: (int(a), int(b)) for f, a, b in zip(p.functions, p.flat_samples, p.cum_samples)}
    assert go_pprof_top(path) == ours


# --------------------------------------------------------------------------
# profiles Go does not write: built here with the library (the columns' way where they fit,
# else the walk's; the same result either way)


def build(locations, samples, functions=None, *, period=10_000_000, strings=None, values=None) -> bytes:
    """A CPU profile: ``locations`` {id: [function ids, innermost first]} (address = id * 16),
    ``samples`` [(location ids leaf first, count)], ``functions`` {id: name}."""
    functions = (
        functions if functions is not None else {f: f"f{f}" for ids in locations.values() for f in ids}
    )
    table = list(strings) if strings is not None else ["", "samples", "count", "cpu", "nanoseconds"]
    index = {s: i for i, s in enumerate(table)}

    def at(s: str) -> int:
        if s not in index:
            index[s] = len(table)
            table.append(s)
        return index[s]

    msg = Profile(period=period, duration_nanos=10**9, time_nanos=1)
    msg.sample_type.add(type=at("samples"), unit=at("count"))
    msg.sample_type.add(type=at("cpu"), unit=at("nanoseconds"))
    for fid, name in functions.items():  # a name, or a string table index
        if isinstance(name, int):
            msg.function.add(id=fid, name=name, system_name=name)
        else:
            msg.function.add(
                id=fid, name=at(name) if name else 0, system_name=at(name.upper()) if name else 0
            )
    for lid, fids in locations.items():
        x = msg.location.add(id=lid, address=lid * 16, mapping_id=1)
        for f in fids:
            x.line.add(function_id=f, line=7)
    for k, (ids, n) in enumerate(samples):
        msg.sample.add(location_id=ids, value=values[k] if values else [n, n * period])
    msg.string_table.extend(table)
    return msg.SerializeToString()


CASES = {
    "ids 1..n": build({1: [1], 2: [2, 3], 3: [4]}, [([1, 2, 3], 5), ([2, 3], 2), ([3], 1)]),
    "ids out of order": build({30: [7], 10: [5, 9], 20: [9]}, [([30, 10, 20], 4), ([10], 1), ([20, 20], 2)]),
    "recursion": build({1: [1], 2: [2], 3: [1]}, [([1, 2, 3, 2], 3), ([3, 1], 1)]),
    "an empty stack": build({1: [1]}, [([], 4), ([1], 2)]),
    "no samples": build({1: [1]}, []),
    "a location without lines": build({1: [1], 2: []}, [([1, 2], 3), ([2], 1)]),
    "a function without a name": build({1: [1], 2: [2]}, [([1, 2], 3)], {1: "", 2: "main.main"}),
    "one name for two functions": build(
        {1: [1], 2: [2], 3: [3]}, [([1, 2, 3], 3), ([2], 1)], {1: "a", 2: "b", 3: "a"}
    ),
    "functions numbered as their lines come": build({1: [3], 2: [1, 2], 3: [2]}, [([1, 2, 3], 2), ([3], 1)]),
    "functions numbered otherwise": build(
        {1: [3], 2: [1, 2], 3: [2]}, [([1, 2, 3], 2), ([3], 1)], {1: "f1", 2: "f2", 3: "f3"}
    ),
    "a line of no function": build({1: [1, 0], 2: [0]}, [([1, 2], 3), ([2], 1)], {1: "f1"}),
    "an inlined line of no function": build({1: [1, 0], 2: [2]}, [([1, 2], 3)], {1: "f1", 2: "f2"}),
    "an unused function": build({1: [1]}, [([1], 2)], {1: "used", 2: "unused"}),
    "cpu not count times period": build({1: [1], 2: [2]}, [([1, 2], 3), ([2], 1)], values=[[3, 31], [1, 9]]),
    "one value missing": build({1: [1]}, [([1], 2), ([1], 1)], values=[[2, 20_000_000], [10_000_000]]),
    "one name at two string indices": build(
        {1: [1], 2: [2], 3: [3]},
        [([1, 2, 3], 1), ([2], 2)],
        {1: 5, 2: 6, 3: 5},
        strings=["", "x", "x", "x", "x", "g", "g"],
    ),
    "long stacks": build({i: [i] for i in range(1, 301)}, [(list(range(300, 0, -1)), 9), ([150, 1], 1)]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_built_profiles_agree_with_a_naive_walk(case, tmp_path):
    data = CASES[case]
    path = tmp_path / "step-1.pb"
    path.write_bytes(data)
    msg = Profile.FromString(data)
    try:
        want = naive(msg)
    except (KeyError, IndexError):
        want = None  # the naive walk cannot read it: read_profile must refuse it in one line
    if want is None:
        with pytest.raises(HeadroomError, match="broken pprof profile"):
            read_profile(path)
        return
    p = read_profile(path)
    assert figures(p) == want
    same_profile(p, _read_pprof_walk(path, data))


def test_what_go_never_writes_is_read_the_walks_way(tmp_path):
    """A location without lines is named by its address; an unnamed function by its system name."""
    p = tmp_path / "p.pb"
    p.write_bytes(CASES["a location without lines"])
    assert set(read_profile(p).functions) == {"f1", "0x20"}
    p.write_bytes(CASES["a function without a name"])
    assert set(read_profile(p).functions) == {"0x1", "main.main"}
    p.write_bytes(CASES["one name for two functions"])
    assert read_profile(p).functions == ("a", "b")
    p.write_bytes(CASES["a line of no function"])
    assert set(read_profile(p).functions) == {"f1", "0x20"}  # pprof reads function id 0 as none
    p.write_bytes(CASES["functions numbered otherwise"])
    assert read_profile(p).functions == ("f3", "f1", "f2")  # in order of their first line


@pytest.mark.parametrize(
    "case", ["ids 1..n", "ids out of order", "recursion", "an empty stack", "no samples"]
)
def test_the_columns_way_reads_what_go_could_write(case):
    assert fast("p", CASES[case]).functions == read_profile_bytes(CASES[case]).functions


def read_profile_bytes(data: bytes):
    return _read_pprof_walk("p", data)


@pytest.mark.parametrize(
    "locations,samples",
    [
        ({1: [1]}, [([2], 1)]),  # a sample names a location that is not there
        ({1: [1]}, [([0], 1)]),  # location id 0 (the columns' terminator)
        ({1: [5]}, [([1], 1)]),  # a line names a function that is not there
    ],
)
def test_broken_references_are_refused_in_one_line(tmp_path, locations, samples):
    path = tmp_path / "step-1.pb"
    path.write_bytes(build(locations, samples, {1: "f"}))
    with pytest.raises(HeadroomError, match=r"step-1\.pb: a broken pprof profile"):
        read_profile(path)
