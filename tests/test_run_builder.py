"""RunBuilder: the runs of equal level built batch by batch against a plain reference.

The reference sorts everything still waiting together with each new batch and settles what lies
before the batch's first start minus the margin (what RunBuilder did before it settled the waiting
rows that can no longer move first, and sorted only the rest with the batch).  Both must give the
same runs and the same ``exact`` verdict on varied inputs: one batch, ties, levels going down, a
level repeated, batches far out of order, zero and negative margins, batches of one row.
"""

from __future__ import annotations

import numpy as np
import pytest

from headroom import levels as L


def _reference(batches, margin_ns: int, t_end: int):
    """Runs (level, t0, t1, n) and exact, by a plain sort of all the waiting rows at every batch."""
    wait_t: list[int] = []
    wait_l: list[int] = []
    settled: list[tuple[int, int]] = []  # (t, level) in settled order
    max_lat, exact, last_t = 0, True, None
    for t, lv, end in batches:
        if not len(t):
            continue
        max_lat = max(max_lat, max(int(e) - int(s) for s, e in zip(t, end)))
        w = min(int(x) for x in t)
        if last_t is not None and w < last_t:
            exact = False
        rows = list(zip(wait_t, wait_l)) + list(zip((int(x) for x in t), (int(x) for x in lv)))
        rows = sorted(rows, key=lambda r: r[0])  # stable: ties in file order
        limit = w - margin_ns - 2 * max_lat
        done = [r for r in rows if r[0] < limit]
        rest = [r for r in rows if r[0] >= limit]
        settled += done
        if done:
            last_t = done[-1][0]
        wait_t, wait_l = [r[0] for r in rest], [r[1] for r in rest]
    settled += list(zip(wait_t, wait_l))
    if wait_t:
        last_t = wait_t[-1]
    runs: list[list[int]] = []  # [level, t0, n]
    for t, lv in settled:
        if runs and runs[-1][0] == lv:
            runs[-1][2] += 1
        else:
            runs.append([lv, t, 1])
    t1 = [r[1] for r in runs[1:]] + ([max(int(t_end), last_t + 1)] if runs else [])
    return [(r[0], r[1], b, r[2]) for r, b in zip(runs, t1)], exact


def _built(batches, margin_ns: int, t_end: int):
    rb = L.RunBuilder(margin_ns=margin_ns)
    for t, lv, end in batches:
        rb.add(t, lv, end)
    r_lv, r_t0, r_t1, r_n = rb.finish(t_end)
    return list(zip(r_lv.tolist(), r_t0.tolist(), r_t1.tolist(), r_n.tolist())), rb.exact


def _ramp(rng, n: int, shape: str):
    """Starts (ns), levels and ends of ``n`` requests in completion (file) order."""
    start = np.sort(rng.integers(0, 40 * 10**9, n))
    if shape == "one level":
        lv = np.full(n, 4)
    elif shape == "down":
        lv = 20 - (start // (2 * 10**9))
    elif shape == "repeated":
        lv = np.array([1, 2, 1, 3, 2, 3])[(start // (3 * 10**9)) % 6]
    else:
        lv = 1 + start // (10**9)
    lat = rng.integers(0, 80 * 10**6, n)
    if shape == "ties":
        start = (start // 10**8) * 10**8  # many equal starts
    end = start + lat
    o = np.argsort(end, kind="stable")
    return start[o], lv[o], end[o]


def _split(rng, n: int, k: int):
    if k <= 1:
        return [np.arange(n)]
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(k, n) - 1, replace=False))
    return np.split(np.arange(n), cuts)


@pytest.mark.parametrize("shape", ["up", "down", "repeated", "one level", "ties"])
@pytest.mark.parametrize("k", [1, 3, 40, 900])
@pytest.mark.parametrize("margin_ns", [10**9, 0, 10**7, -(10**8)])
def test_runs_equal_the_plain_reference(shape, k, margin_ns):
    rng = np.random.default_rng(k * 7 + len(shape))
    t, lv, end = _ramp(rng, 3000, shape)
    batches = [(t[p], lv[p], end[p]) for p in _split(rng, len(t), k)]
    t_end = int(end.max())
    assert _built(batches, margin_ns, t_end) == _reference(batches, margin_ns, t_end)


@pytest.mark.parametrize("margin_ns", [10**9, 0])
def test_batches_out_of_order_and_of_one_row(margin_ns):
    rng = np.random.default_rng(5)
    t, lv, end = _ramp(rng, 400, "up")
    parts = _split(rng, len(t), 30)
    rng.shuffle(parts)  # batches far out of start order: not exact, the same runs as the reference
    batches = [(t[p], lv[p], end[p]) for p in parts]
    batches += [(t[:0], lv[:0], end[:0])] + [(t[i : i + 1], lv[i : i + 1], end[i : i + 1]) for i in range(5)]
    t_end = int(end.max())
    got = _built(batches, margin_ns, t_end)
    assert got == _reference(batches, margin_ns, t_end)
    assert got[1] is False
