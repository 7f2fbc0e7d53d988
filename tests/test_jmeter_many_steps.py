"""JMeter CSV ramps of many short steps (levels going up and down, held twice, one step only).

The spooled reading (:class:`headroom.formats.jmeter.JMeterPlan`: held levels found batch by batch,
their notes counted by the assign pass) in chunks of 1,777 rows on disk is held against the same
file as one batch in memory (the levels of the whole array at once), and the "held at two separate
times" note against a plain count of the steps' levels.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from headroom import levels as L
from headroom import spool
from headroom.cli import main as cli_main
from headroom.formats import _batch

HEADER = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,success,allThreads\n"


def _ramp(levels: list[int], per: int, step_ms: int, seed: int) -> list[str]:
    """Rows in completion order: ``per`` requests a step, the first few at the level before (start-up)."""
    rng = np.random.default_rng(seed)
    rows, t0, prev = [], 1_700_000_000_000, levels[0]
    for k, lv in enumerate(levels):
        start = t0 + k * step_ms
        ts = np.sort(rng.integers(start, start + step_ms, per))
        lvl = np.full(per, lv)
        lvl[:3] = prev
        el = rng.integers(0, 25, per)
        code = np.where(rng.random(per) < 0.05, 503, 200)
        rows += list(zip((ts + el).tolist(), ts.tolist(), el.tolist(), code.tolist(), lvl.tolist()))
        prev = lv
    rows.sort(key=lambda r: r[0])
    return [
        f"{t},{e},home,{c},{'OK' if c == 200 else 'Service Unavailable'},t 1-1,{str(c == 200).lower()},{lv}\n"
        for _, t, e, c, lv in rows
    ]


SHAPES = {
    "one step": [5] * 4,
    "up": list(range(1, 61)),
    "up and down": [*range(1, 41), *range(39, 0, -1)],
    "a level repeated": [1, 2, 2, 3, 1, 3, 4, 4, 4, 2] * 6,
    "going down": list(range(80, 0, -2)),
}


def _summary(path, capsys, extra=()):
    assert cli_main(["summary", str(path), "--json", "-", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("step_ms", [600, 1500])
def test_many_short_steps_spooled_equals_the_whole_table(shape, step_ms, tmp_path, capsys, monkeypatch):
    p = tmp_path / "ramp.csv"
    p.write_text(HEADER + "".join(_ramp(SHAPES[shape], 300, step_ms, seed=len(shape) + step_ms)))
    monkeypatch.setattr(spool, "BUDGET_BYTES", 5000 * 41)
    monkeypatch.setattr(spool, "CHUNK_ROWS", 1777)
    streamed = _summary(p, capsys)

    monkeypatch.setattr(spool, "BUDGET_BYTES", 1 << 40)  # the whole file as one batch in memory
    monkeypatch.setattr(spool, "CHUNK_ROWS", 1 << 22)
    monkeypatch.setattr(_batch, "CHUNK_BYTES", 1 << 30)
    assert streamed == _summary(p, capsys)
    if shape != "one step":
        assert len(streamed["steps"]) > 1


def _twice_by_loop(levels) -> list[float]:
    out = []
    for v in levels:
        n = 0
        for w in levels:
            if float(w) == float(v):
                n += 1
        if n > 1 and float(v) not in out:
            out.append(float(v))
    return sorted(out)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_levels_held_twice_note_equals_a_plain_count(shape):
    rows = _ramp(SHAPES[shape], 200, 1200, seed=3)
    end = np.array([int(r.split(",")[0]) for r in rows], np.int64) * 1_000_000
    lat = np.array([int(r.split(",")[1]) for r in rows], np.int64) * 1_000_000
    lv = np.array([int(r.rsplit(",", 1)[1]) for r in rows], np.int64)
    inf = L.steps_from_levels(end - lat, lv, end_ns=end, min_dwell_s=0.5, transients="next")
    twice = _twice_by_loop(inf.levels)
    said = [n for n in inf.notes if "held at two separate times" in n]
    if twice:
        assert said == [
            f"level(s) {', '.join(f'{v:g}' for v in twice)} held at two separate times: two steps each"
        ]
    else:
        assert said == []
