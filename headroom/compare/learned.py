"""Noise learned from earlier runs of an unchanged build (``--noise-from``).

* Runs recorded apart: the between-run spread of each metric's run-level
  value over the levels this comparison uses (:class:`headroom.noise.LearnedNoise`).
* Interleaved recordings: earlier interleaved A/A recordings (a-NN and b-NN
  of ``headroom ramp --ab --interleave steps``), each fitted across load as a
  comparison would be, their per-pair noise pooled by degrees of freedom
  (:class:`headroom.compare.across_load.PairNoise`): the prior of the pair noise.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..model import HeadroomError, Run
from ..noise import LearnedNoise, canonical, default, spread
from ..summary import Summary, analyze
from .across_load import learned_noise
from .pairing import levels, pair_steps
from .specs import Spec, series
from .tests import pair_cells

#: learned noise with fewer degrees of freedom than this is pooled with the default, with a warning
MIN_LEARNED_DF = 4
DESIGN = "interleaved steps"


def as_summaries(side, **kw) -> list[Summary]:
    """A run or summary, or a sequence of them, as summaries (runs analysed with ``kw``)."""
    items = [side] if isinstance(side, (Run, Summary)) else list(side)
    if not items:
        raise ValueError("each side needs at least one run")
    return [it if isinstance(it, Summary) else analyze(it, **kw) for it in items]


def _run_matrix(summaries: list[Summary], lv: list[float], key: str) -> np.ndarray:
    """(runs, levels) log values of a metric; levels missing or unusable in any run dropped
    (a repeated level: the mean of its steps' logs)."""
    cols = []
    for c in lv:
        col = []
        for s in summaries:
            idx = levels(s.table).get(c)
            v = series(s.table, key)[idx] if idx else np.array([np.nan])
            col.append(float(np.mean(np.log(v))) if np.all(v > 0) else np.nan)
        if np.all(np.isfinite(col)):
            cols.append(col)
    return np.array(cols, dtype=np.float64).T.reshape(len(summaries), len(cols))


def learn_noise(
    runs: Sequence[Run | Summary], specs: list[Spec], pairs, mask, **kw
) -> tuple[LearnedNoise, list[str]]:
    """Between-run noise of each metric from earlier runs of one unchanged build.

    Each run's value is the mean log value over the concurrency levels this
    comparison uses for the metric that every earlier run has; with fewer
    than 3 such levels, over the levels the earlier runs share (the notes
    say so).
    """
    summaries = as_summaries(runs, **kw)
    if len(summaries) < 2:
        raise HeadroomError("--noise-from needs at least 2 runs of one unchanged build")
    common = sorted(set.intersection(*(set(levels(s.table)) for s in summaries)))
    ss, df, notes = {}, {}, []
    for spec in specs:
        want = [p[0] for p, m in zip(pairs, mask) if (m or spec.pairs == "all") and p[0] is not None]
        want = list(dict.fromkeys(want))  # a replicated level once
        y = _run_matrix(summaries, [c for c in want if c in common], spec.key)
        if y.shape[1] < 3:
            own = common[-max(3, len(common) // 3) :] if spec.pairs == "plateau" else common
            y = _run_matrix(summaries, own, spec.key)
            notes.append(f"noise of {spec.name} learned at the earlier runs' own levels (the plans differ)")
        key = canonical(spec.out)
        ss[key], df[key] = spread(y.mean(axis=1)) if y.shape[1] >= 3 else (0.0, 0.0)
    src = f"learned from {len(summaries)} earlier runs of an unchanged build (--noise-from)"
    return LearnedNoise(ss, df, src), sorted(set(notes))


def for_runs(noise_from, specs, pairs, mask, kw) -> tuple[LearnedNoise | None, list[str]]:
    """Learned noise of a comparison of runs: given, learned from runs, or none."""
    if noise_from is None or isinstance(noise_from, LearnedNoise):
        return noise_from, []
    return learn_noise(noise_from, specs, pairs, mask, **kw)


def few_df(learned: LearnedNoise | None) -> tuple[LearnedNoise | None, list[str]]:
    """Learned noise whose metrics rest on too few df: those metrics pooled with the default, said."""
    if learned is None:
        return None, []
    few = {k: d for k, d in learned.df.items() if 0 < d < MIN_LEARNED_DF}
    if not few:
        return learned, []
    ss, df = dict(learned.ss), dict(learned.df)
    for k in few:
        dflt = default(k)
        ss[k] += dflt.sd * dflt.sd * dflt.df
        df[k] += dflt.df
    names = ", ".join(f"{k} ({d:g} df)" for k, d in sorted(few.items()))
    warn = (
        f"--noise-from: the noise of {names} rests on fewer than {MIN_LEARNED_DF} degrees of freedom "
        "(too few runs of one build, or a history whose releases had no repeats): pooled with the "
        "defaults for a shared machine instead of trusted alone"
    )
    return LearnedNoise(ss, df, learned.source + " + the default (too few df)"), [warn]


def aa_recordings(summaries: list[Summary]) -> list[dict]:
    """The interleaved recordings among ``summaries``: [{"a": summary, "b": summary}]."""
    groups: dict = {}
    for s in summaries:
        ab = (s.run.meta.fields if s.run.meta is not None else {}).get("ab") or {}
        if ab.get("design") == DESIGN and ab.get("side") in ("a", "b"):
            groups.setdefault((ab.get("job"), ab.get("recording")), {})[ab["side"]] = s
    return [g for g in groups.values() if len(g) == 2]


def for_pairs(noise_from, specs: list[Spec], kw) -> tuple[dict | None, str]:
    """Per-pair noise of earlier interleaved A/A recordings (``--noise-from``), fitted across load."""
    if isinstance(noise_from, LearnedNoise):
        return None, (
            "--noise-from: a history's between-run noise does not apply to interleaved recordings "
            "(their replicates are the level pairs); not used"
        )
    recs = aa_recordings(as_summaries(noise_from, **kw))
    if not recs:
        return None, (
            "--noise-from: no interleaved A/A recordings among the runs (a-NN and b-NN of "
            "'headroom ramp --ab --interleave steps'); only this comparison's pairs are used"
        )
    source = f"{len(recs)} earlier interleaved A/A recording(s) (--noise-from)"
    out = {}
    for spec in specs:
        cells = []
        for g in recs:
            try:
                pairs, _ = pair_steps([g["a"].table], [g["b"].table])
            except HeadroomError:  # a recording stopped early on one side: nothing to learn from it
                continue
            cells.append(pair_cells([[g["a"]], [g["b"]]], pairs, spec.key, [(0, 0)])[0])
        pn = learned_noise(cells, spec.out, source)
        if pn is not None:
            out[canonical(spec.out)] = pn
    n = len(recs)
    return (
        out or None,
        f"--noise-from: noise of the level pairs pooled from {n} earlier interleaved A/A recording(s)",
    )
