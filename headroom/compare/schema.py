"""The comparison's JSON document (schema 3: keys are added, never renamed)."""

from __future__ import annotations

from .._json import number
from .result import COMPARE_SCHEMA, Comparison, LevelChange, Metric, StepPair

_n = number


def _level_doc(lc: LevelChange) -> dict:
    return {
        "load": _n(lc.load),
        "kind": lc.kind,
        "change": _n(lc.change),
        "ci": [_n(lc.ci[0]), _n(lc.ci[1])],
        "raw_change": _n(lc.raw),
        "raw_ci": None if lc.raw_ci is None else [_n(lc.raw_ci[0]), _n(lc.raw_ci[1])],
        "pairs": lc.pairs,
    }


def metric_doc(m: Metric) -> dict:
    doc = {
        "key": m.key,
        "name": m.name,
        "unit": m.unit,
        "better": m.better,
        "decides": m.decides,
        "baseline": _n(m.baseline),
        "candidate": _n(m.candidate),
        "change": _n(m.change),
        "ci": None if m.ci is None else [_n(m.ci[0]), _n(m.ci[1])],
        "level": _n(m.level),
        "bound": _n(m.bound),
        "pvalue": _n(m.pvalue),
        "threshold": _n(m.threshold),
        "decision": m.decision,
        "pairs": m.pairs,
        "noise": None
        if m.noise is None
        else {"sd": _n(m.noise.sd), "df": _n(m.noise.df), "source": m.noise.source},
        "smallest_detectable_change": _n(m.mdc),
        "note": m.note,
    }
    # added within schema 3 (a reader of older comparisons finds them absent)
    if m.se is not None:
        doc["se_log"] = _n(m.se)
    if m.weight is not None:
        doc["weight"] = _n(m.weight)
    if m.test:
        doc["test"] = m.test
    if m.decided_at is not None:  # the level whose own change decided worse/better
        doc["decided_at"] = _n(m.decided_at)
    if m.levels:  # the change at every load level (interleaved recordings), simultaneous intervals
        doc["levels"] = [_level_doc(lc) for lc in m.levels]
    return doc


def pair_doc(p: StepPair) -> dict:
    side = lambda d: {k: (_n(v) if not isinstance(v, int) else v) for k, v in d.items()}  # noqa: E731
    return {
        "concurrency": _n(p.concurrency),
        "baseline_steps": list(p.baseline_steps),
        "candidate_steps": list(p.candidate_steps),
        "plateau": p.plateau,
        "baseline": side(p.baseline),
        "candidate": side(p.candidate),
    }


def to_json(c: Comparison) -> dict:
    """The versioned JSON document of a comparison (deterministic)."""
    from ..headline import headline

    return {
        "schema": COMPARE_SCHEMA,
        "kind": "comparison",
        "verdict": c.verdict,
        "exit_code": c.exit_code,
        "reason": c.reason,
        # added within schema 3: the answer in plain words, as the terminal and the report give it
        "headline": headline(c),
        "runs_needed": c.runs_needed,
        "baseline": c.baseline_labels,
        "candidate": c.candidate_labels,
        "settings": {
            "threshold": c.threshold,
            "error_threshold": c.error_threshold,
            "confidence": c.confidence,
            "weights": {k: round(v, 6) for k, v in c.weights.items()},
            **({"design": c.design} if c.design != "runs" else {}),
            "objective": None if c.objective is None else str(c.objective),
        },
        "primary": c.primary,
        "noise": {"source": c.noise.source, "runs": list(c.noise.runs)},
        "pairing": c.pairing,
        "metrics": [metric_doc(m) for m in c.metrics],
        "pairs": [pair_doc(p) for p in c.pairs],
        "notes": c.notes,
        "warnings": c.warnings,
        # added within schema 3: runs that stopped answering (absent when none did)
        **({"stopped": [x.to_dict() for x in c.stopped]} if c.stopped else {}),
        # added within schema 3: where the CPU went (absent when the runs have no step profiles)
        **(_profile_docs(c.profile_diff) if c.profile_diff is not None else {}),
        # added within schema 3: every request name judged (absent unless both sides carry two or more)
        **({"endpoints": [e.to_dict() for e in c.endpoints]} if getattr(c, "endpoints", None) else {}),
    }


def _profile_docs(d) -> dict:
    from ..profiles.compare import diff_docs

    return diff_docs(d)
