"""The spool gives back exactly the rows appended to it, whatever the way they are kept.

Each case appends random batches to a :class:`headroom.spool.Spool` and
compares what it reads back (``chunks`` in several sizes, ``column``) with
the same batches joined by numpy: counting columns kept as runs (file
lines), a counting column that stops counting after rows went to disk and
while others are held in memory, arrays given away (``own=True``) kept
uncopied, and views that must be copied.
"""

from __future__ import annotations

import numpy as np
import pytest

from headroom import spool as spool_mod
from headroom.spool import Spool

DT = {"start_ns": np.int64, "latency_s": np.float64, "line": np.int64}


def _batches(rng, n_batches, breaks_at=None):
    """Random batches: lines count up by one (with gaps between batches) except in batch ``breaks_at``."""
    out, line = [], 2
    for j in range(n_batches):
        n = int(rng.integers(1, 40_000))
        line += int(rng.integers(0, 3))  # a blank line between batches
        lines = np.arange(line, line + n, dtype=np.int64)
        if j == breaks_at and n > 2:
            lines[n // 2 :] += 1  # a blank line inside the batch: no longer counting by one
        line = int(lines[-1]) + 1
        out.append(
            {
                "start_ns": rng.integers(0, 10**15, n).astype(np.int64),
                "latency_s": rng.random(n),
                "line": lines,
            }
        )
    return out


def _read_back(sp: Spool, rows: int | None):
    parts = list(sp.chunks(("start_ns", "latency_s", "line"), rows=rows))
    return {k: np.concatenate([p[k] for p in parts]) for k in DT}


@pytest.mark.parametrize("budget", [1 << 30, 200_000])  # all in memory; most of it on disk
@pytest.mark.parametrize("breaks_at", [None, 0, 7, 11])
@pytest.mark.parametrize("own", [False, True])
def test_rows_come_back_exactly(monkeypatch, budget, breaks_at, own):
    monkeypatch.setattr(spool_mod, "BUDGET_BYTES", budget)
    monkeypatch.setattr(spool_mod, "CHUNK_ROWS", 1 << 14)
    rng = np.random.default_rng(7 + (breaks_at or 0))
    batches = _batches(rng, 12, breaks_at)
    want = {k: np.concatenate([b[k] for b in batches]) for k in DT}
    sp = Spool(DT, counting=("line",))
    for b in batches:
        sp.append(own=own, **{k: v.copy() for k, v in b.items()})
    try:
        assert sp.n == len(want["start_ns"])
        assert ("line" in sp.stored) == (breaks_at is not None)  # kept as runs until the count broke
        assert (sp.on_disk > 0) == (budget < 1 << 20)
        for rows in (None, 1000, 65_537):
            got = _read_back(sp, rows)
            for k in DT:
                np.testing.assert_array_equal(got[k], want[k], err_msg=f"{k}, chunks of {rows}")
        np.testing.assert_array_equal(sp.column("line"), want["line"])
    finally:
        sp.close()


def test_a_count_that_breaks_with_rows_on_disk_and_in_memory(monkeypatch):
    monkeypatch.setattr(spool_mod, "BUDGET_BYTES", 100_000)
    sizes, lines = (10_000, 1_000, 1_000), []
    sp = Spool(DT, counting=("line",))
    try:
        for j, n in enumerate(sizes):
            ln = np.arange(5 + sum(sizes[:j]), 5 + sum(sizes[: j + 1]), dtype=np.int64)
            if j == 2:
                ln[::2] += 3_000_000  # no longer counting by one
            lines.append(ln)
            sp.append(start_ns=np.arange(n, dtype=np.int64), latency_s=np.ones(n), line=ln)
            if j == 1:  # the first batch went to disk, the second is held in memory, lines as runs
                assert (sp.on_disk, sp.n, "line" in sp.stored) == (10_000, 11_000, False)
        assert "line" in sp.stored and sp.on_disk == 10_000
        np.testing.assert_array_equal(sp.column("line"), np.concatenate(lines))
        got = np.concatenate([c["line"] for c in sp.chunks(("line",), rows=777)])
        np.testing.assert_array_equal(got, np.concatenate(lines))
    finally:
        sp.close()


def test_given_arrays_are_kept_uncopied_and_views_are_copied(monkeypatch):
    monkeypatch.setattr(spool_mod, "BUDGET_BYTES", 1 << 30)
    st, lat = np.arange(100_000, dtype=np.int64), np.linspace(0, 1, 100_000).copy()
    sp = Spool({"start_ns": np.int64, "latency_s": np.float64})
    sp.append(own=True, start_ns=st, latency_s=lat)
    big = np.arange(300_000, dtype=np.int64)
    view = big[100_000:200_000]  # a view: keeping it would keep all of ``big`` alive
    sp.append(own=True, start_ns=view, latency_s=lat.copy())
    sp.append(start_ns=st.copy(), latency_s=lat.copy())  # not given: copied
    try:
        parts = list(sp._parts())
        assert np.shares_memory(parts[0]["start_ns"], st)  # given away: the same memory
        assert not any(np.shares_memory(p["start_ns"], big) for p in parts)
        assert not any(np.shares_memory(p["start_ns"], st) for p in parts[1:])
        got = sp.column("start_ns")
        np.testing.assert_array_equal(got, np.concatenate([st, view, st]))
    finally:
        sp.close()


def test_one_step_file_read_with_and_without_the_shortcut_agree(tmp_path, monkeypatch):
    """An ab file (one step) read by the one-step shortcut (statistics while parsing, steps computed
    from the rows) and by the general passes (a key spool, ``assign_steps``): the same run."""
    import gzip
    import shutil

    import headroom
    from headroom.formats import ab

    src = "tests/data/formats/real/ab-steps/ab-c8.tsv.gz"
    plain = tmp_path / "ab-c8.tsv"
    with gzip.open(src, "rb") as f, open(plain, "wb") as g:
        shutil.copyfileobj(f, g)
    monkeypatch.setattr(spool_mod, "BUDGET_BYTES", 50_000)  # most rows on disk
    fast = headroom.reduce_run(plain)
    from dataclasses import replace

    from headroom import formats, spooled

    passes = []
    assign = spooled.assign_steps
    monkeypatch.setattr(spooled, "assign_steps", lambda *a: passes.append(1) or assign(*a))
    monkeypatch.setitem(formats.FORMATS, "ab", replace(ab.READER, one_step=False))
    slow = headroom.reduce_run(plain)
    assert passes == [1]  # the general passes were taken
    from headroom.summary import analyze, to_json

    assert fast.n_requests == slow.n_requests > 1000
    assert to_json(analyze(fast)) == to_json(analyze(slow))
