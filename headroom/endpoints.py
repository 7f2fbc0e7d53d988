"""Request names (endpoints) of a run: what every step's requests of each name did.

Generators that drive several endpoints name each request (Locust ``name``, k6's ``name`` tag
else ``url``, JMeter ``label``, Gatling's request name, vegeta's ``method url``).  A reader that
has names gives every row a small integer code into its scan's names (a dictionary column: a
format or file without names stores nothing, see :class:`NameCodes`), and the spooled reduction
counts, in one more pass over the rows it already holds, every (step, name): its kept requests'
exact latency histogram and its failed requests (:func:`count_endpoints`).  Those counts add up
over the files of a run like its steps do (:meth:`EndpointCounts.remapped`, :func:`add_counts`).

This module is the reduction's side; :mod:`headroom.endpoint_view` analyses the counts
(per-endpoint step tables, throughput at an objective) and :mod:`headroom.compare.endpoints`
judges them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .binning import encode_latency


class NameCodes:
    """Request names met while a file is read, and every row's code into them.

    A pyarrow dictionary column gives each parsed block its own dictionary; :meth:`codes` maps a
    block's dictionary onto the file's names (new ones appended), so a row's code costs one take.
    """

    def __init__(self, names: list[str]):
        self.names = names  # the scan's list: appended to in place
        self._index = {n: i for i, n in enumerate(names)}

    def of_values(self, values: Iterable) -> np.ndarray:
        """Codes of a block's dictionary values (None or "" as the name "")."""
        out = []
        for v in values:
            v = "" if v is None else str(v)
            i = self._index.get(v)
            if i is None:
                i = self._index[v] = len(self.names)
                self.names.append(v)
            out.append(i)
        return np.asarray(out, np.int32)

    def of_dictionary(self, column) -> np.ndarray:
        """Every row's code from a pyarrow (chunked) dictionary or string column (pyarrow.compute only
        for a string column or one with nulls)."""
        values, idx = _dictionary_parts(_encoded(column))
        lut = self.of_values(values)
        return lut[idx] if len(lut) else np.zeros(len(idx), np.int32)

    def of_column(self, column) -> np.ndarray:
        """:meth:`of_dictionary` of a string or binary column, a block of one value (a run of one
        endpoint) found by a compare of its bytes instead of a dictionary's hashing."""
        one = _only_value(column)
        if one is None:
            return self.of_dictionary(column)
        return np.full(len(column), self.of_values([one])[0], np.int32)

    def of_pairs(self, first, second, sep: str = " ") -> np.ndarray:
        """Every row's code of the name ``first + sep + second`` from two string, binary or dictionary
        columns (vegeta's method and url): the strings joined once per distinct pair present, not per
        row; a block whose rows all hold one pair (a run of one endpoint) costs a compare of its bytes."""
        one = [_only_value(c) for c in (first, second)]
        if all(v is not None for v in one):
            n = len(first)
            return (
                np.full(n, self.of_values([joined(*one, sep)])[0], np.int32) if n else np.zeros(0, np.int32)
            )
        (v1, i1), (v2, i2) = (_dictionary_parts(_encoded(c)) for c in (first, second))
        if not len(i1):
            return np.zeros(0, np.int32)
        pair = i1.astype(np.int64) * max(len(v2), 1) + i2
        present = np.unique(pair)
        lut = np.zeros(int(present[-1]) + 1, np.int32)
        n2 = max(len(v2), 1)
        lut[present] = self.of_values([joined(v1[p // n2], v2[p % n2], sep) for p in present.tolist()])
        return lut[pair]


def _only_value(column) -> str | None:
    """The one value of a pyarrow (chunked) binary or string column whose every row holds it (no nulls),
    found by comparing its bytes (no hashing); None otherwise."""
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        vals = {_only_value(c) for c in column.chunks}
        return vals.pop() if len(vals) == 1 else None
    if column.null_count or not (pa.types.is_binary(column.type) or pa.types.is_string(column.type)):
        return None
    n = len(column)
    if n == 0:
        return ""
    off = np.frombuffer(column.buffers()[1], np.int32, count=n + 1, offset=column.offset * 4)
    width = int(off[1] - off[0])
    if off[-1] - off[0] != width * n or (width and (np.diff(off) != width).any()):
        return None
    data = column.buffers()[2]
    raw = np.frombuffer(data, np.uint8, count=int(off[-1] - off[0]), offset=int(off[0])) if width else None
    if width and not (raw.reshape(n, width) == raw[:width]).all():
        return None
    return bytes(raw[:width]).decode("utf-8", "replace") if width else ""


def joined(first, second, sep: str = " ") -> str:
    """``first sep second`` of two name parts, an empty part left out (a file without them: "")."""
    return sep.join(str(x) for x in (first, second) if x)


def _encoded(column):
    """A pyarrow (chunked) string, binary or dictionary column as one dictionary array, nulls as ""
    (pyarrow.compute only for a string or binary column or one with nulls)."""
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not column.null_count and pa.types.is_dictionary(column.type):
        return column
    import pyarrow.compute as pc

    if column.null_count and pa.types.is_binary(column.type):
        column = pc.fill_null(column, b"")
    if column.null_count:
        plain = column.cast(pa.string()) if pa.types.is_dictionary(column.type) else column
        column = pc.fill_null(plain, "")
    return column if pa.types.is_dictionary(column.type) else pc.dictionary_encode(column)


def _dictionary_parts(column) -> tuple[list, np.ndarray]:
    """A pyarrow dictionary array's values (a list) and its indices (a numpy view: to_numpy would
    import pandas)."""
    ind = column.indices
    width = ind.type.bit_width // 8
    idx = np.frombuffer(ind.buffers()[1], np.dtype(f"i{width}"), count=len(ind), offset=ind.offset * width)
    return _words(column.dictionary), idx


def _words(words) -> list[str]:
    """A small pyarrow string or binary array's values as str, bytes that are not UTF-8 replaced (as the
    other readers do: pyarrow's JSON reader lets them through), read off its buffers (a cast would import
    pyarrow.compute)."""
    import pyarrow as pa

    plain = pa.types.is_string(words.type) or pa.types.is_binary(words.type)
    if not plain or words.null_count:
        return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in words.to_pylist()]
    n = len(words)
    off = np.frombuffer(words.buffers()[1], np.int32, count=n + 1, offset=words.offset * 4).tolist()
    data = words.buffers()[2]
    raw = b"" if data is None else data.to_pybytes()
    return [raw[a:b].decode("utf-8", "replace") for a, b in zip(off[:-1], off[1:])]


@dataclass(frozen=True, eq=False)
class EndpointCounts:
    """Every (step, name)'s kept requests as an exact latency histogram, and its failed requests.

    ``group = step * len(names) + name``; entries ``(group, index, count)`` sorted by group, then
    index, into ``values`` (seconds, ascending, distinct); ``failed`` is (n_steps, names) int64.
    """

    names: tuple[str, ...]
    n_steps: int
    group: np.ndarray
    index: np.ndarray
    count: np.ndarray
    values: np.ndarray
    failed: np.ndarray

    @property
    def requests(self) -> np.ndarray:
        """Kept requests per (step, name), (n_steps, names) int64."""
        m = len(self.names)
        n = np.bincount(self.group, weights=self.count, minlength=self.n_steps * m)
        return n.astype(np.int64).reshape(self.n_steps, m)

    def remapped(
        self, steps: dict[int, int], n_steps: int, names: tuple[str, ...], drop: np.ndarray | None = None
    ) -> EndpointCounts:
        """These counts on another run's steps (``steps``: this step -> that one; steps not in it are
        dropped) and names (``names`` holds every one of these but those ``drop`` marks: names of no
        request)."""
        m, m2 = len(self.names), len(names)
        gone = np.zeros(m, bool) if drop is None else drop
        to_name = np.array([-1 if g else names.index(n) for n, g in zip(self.names, gone)], np.int64)
        to_step = np.full(self.n_steps, -1, np.int64)
        for k, j in steps.items():
            if k < self.n_steps:
                to_step[k] = j
        st, nm = self.group // max(m, 1), self.group % max(m, 1)
        new_step = to_step[st] if len(st) else st
        keep = new_step >= 0
        failed = np.zeros((n_steps, m2), np.int64)
        for k in range(self.n_steps):
            if to_step[k] >= 0:
                failed[to_step[k], to_name[~gone]] += self.failed[k][~gone]
        return _counted(names, n_steps, new_step[keep] * m2 + to_name[nm[keep]], self.values[self.index[keep]],
                        self.count[keep], failed)  # fmt: skip


def _counted(names, n_steps, group, latency_s, count, failed) -> EndpointCounts:
    """Counts of (group, latency) pairs with weights ``count``, duplicates added, sorted."""
    codes = encode_latency(np.asarray(latency_s, np.float64))
    values = codes.values
    g = np.asarray(group, np.int64)
    key = g * max(len(values), 1) + codes.codes.astype(np.int64)
    uk, inv = np.unique(key, return_inverse=True)
    c = np.bincount(inv, weights=np.asarray(count, np.float64), minlength=len(uk)).astype(np.int64)
    nv = max(len(values), 1)
    return EndpointCounts(tuple(names), int(n_steps), (uk // nv).astype(np.int64), (uk % nv).astype(np.int64), c,
                          values, np.asarray(failed, np.int64))  # fmt: skip


def count_endpoints(rows, names: list[str], n_steps: int) -> EndpointCounts:
    """One pass over a file's rows and their step keys (``rows``: ``(chunk, key)`` pairs with the chunk's
    ``latency_s`` and ``name``; key ``k`` a kept request of step k, ``-2 - k`` a failed one)."""
    m = max(len(names), 1)
    groups, lats, failed = [], [], np.zeros((n_steps, m), np.int64)
    for c, key in rows:
        key = np.asarray(key, np.int64)
        name = np.asarray(c["name"], np.int64)
        kept = key >= 0
        groups.append(key[kept] * m + name[kept])
        lats.append(c["latency_s"][kept])
        bad = key <= -2
        if bad.any():
            np.add.at(failed, (-2 - key[bad], name[bad]), 1)
    g = np.concatenate(groups) if groups else np.zeros(0, np.int64)
    lat = np.concatenate(lats) if lats else np.zeros(0)
    out = _counted(names, n_steps, g, lat, np.ones(len(g), np.int64), failed)
    used = (out.requests.sum(axis=0) + failed.sum(axis=0)) > 0  # a dictionary also holds other rows' names
    if used.all():
        return out
    kept = tuple(n for n, u in zip(names, used) if u)
    return out.remapped({k: k for k in range(n_steps)}, n_steps, kept, drop=~used)


def counts_of_steps(name: str, steps: dict, n_steps: int, failed: np.ndarray | None) -> EndpointCounts:
    """The counts of a file whose every request has one name, from its reduced steps (``steps``: step ->
    :class:`headroom.reduce.StepPart`, whose bucket histograms hold the same kept requests): no pass
    over the rows of its own, so a run of one name costs what a run without names does."""
    groups, lats, counts = [], [], []
    for k, p in steps.items():
        for h in (p.hist, p.loose):
            if h is not None and len(h.count):
                groups.append(np.full(len(h.count), k, np.int64))
                lats.append(h.values[h.index])
                counts.append(h.count)
    cat = lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dt)  # noqa: E731
    fail = np.zeros((n_steps, 1), np.int64)
    if failed is not None:
        fail[: len(failed), 0] = failed[:n_steps]
    return _counted(
        (name,), n_steps, cat(groups, np.int64), cat(lats, np.float64), cat(counts, np.int64), fail
    )


def add_counts(
    parts: list[EndpointCounts | None], maps: list[dict[int, int]], n_steps: int
) -> EndpointCounts | None:
    """Counts of several files on one run's steps (``maps[i]``: file i's step -> the run's); None unless
    every file had names."""
    if not parts or any(p is None for p in parts):
        return None
    names: list[str] = []
    for p in parts:
        names += [n for n in p.names if n not in names]
    names_t = tuple(names)
    moved = [p.remapped(mp, n_steps, names_t) for p, mp in zip(parts, maps)]
    return _counted(names_t, n_steps,
                    np.concatenate([q.group for q in moved]),
                    np.concatenate([q.values[q.index] for q in moved]),
                    np.concatenate([q.count for q in moved]),
                    sum(q.failed for q in moved))  # fmt: skip


def only_name(scan, name: str | None):
    """A scan's batches of one request name only (``--name``): a filter on the rows' name codes, for a
    reader whose batches carry them; the kept share said in a warning, none kept an error."""
    if name is None:
        return scan
    from .formats._common import fail, short

    gen = scan._gen

    def kept_only():
        total = kept = 0
        for b in gen:
            total += len(b)
            code = scan.names.index(name) if name in scan.names else -1
            m = b.name == code if b.name is not None else np.zeros(len(b), bool)
            if m.any():
                kept += int(m.sum())
                yield b if m.all() else b.take(m)
        if total and not kept:
            raise fail(scan.path, None, f"--name {short(name, 60)}: no request of that name in this file")
        if total:
            scan.warnings.append(f"{scan.path}: --name {short(name, 60)}: {kept:,} of its {total:,} requests")

    scan._gen = kept_only()
    return scan
