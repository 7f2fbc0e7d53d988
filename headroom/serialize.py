"""Reading headroom's JSON documents back: comparisons and histories, this schema and older ones.

Writing stays with each result (``summary.to_json``, ``compare.to_json``,
``history.to_json``, one number format in ``_json``); this module turns a
stored document into the result object again, so a CI job can keep the
small JSON and a notebook can show it without the runs:

* ``comparison`` schema 3 (per-metric noise, weighted Holm, "no regression")
  and schema 2 (one run-noise floor for every metric);
* ``history`` schema 2 (the latest-release check, release-to-release noise)
  and schema 1;
* ``summary`` documents stay dicts (a summary is rebuilt from its run).

A document of another kind, a newer schema or a broken shape is a
:class:`~headroom.model.HeadroomError` naming the file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ._json import SCHEMAS
from .model import HeadroomError

READS = {"comparison": (2, 3), "history": (1, 2), "summary": (2,)}


def read_json(path: str | Path):
    """The result stored in a JSON file: a Comparison, a History, or a summary dict."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise HeadroomError(f"{p}: not a readable JSON document ({e.__class__.__name__})") from None
    try:
        return from_json(doc)
    except (KeyError, TypeError, ValueError) as e:
        raise HeadroomError(f"{p}: not a headroom document of the shape its schema says ({e})") from None
    except HeadroomError as e:
        raise HeadroomError(f"{p}: {e}") from None


def from_json(doc: dict):
    """A stored document back as its result object (see the module docstring)."""
    if not isinstance(doc, dict) or doc.get("kind") not in READS:
        raise HeadroomError(f"no headroom document (kind must be one of {', '.join(READS)})")
    kind, schema = doc["kind"], doc.get("schema")
    if schema not in READS[kind]:
        newest = SCHEMAS[kind]
        raise HeadroomError(f"{kind} schema {schema!r} is not one this headroom reads (up to {newest})")
    if kind == "comparison":
        return comparison_from_json(doc)
    if kind == "history":
        return history_from_json(doc)
    return doc


def _noise(m: dict, schema: int):
    from .noise import NoiseEstimate

    if schema >= 3:
        nz = m.get("noise")
        return None if nz is None else NoiseEstimate(nz["sd"], nz["df"] or 0.0, nz["source"])
    rn = m.get("run_noise")  # schema 2: one floor per run, normal quantiles
    return None if rn is None else NoiseEstimate(rn, math.inf, "run noise floor (schema 2)")


def _metric(m: dict, schema: int):
    from .compare import Metric

    ci = m.get("ci")
    return Metric(
        key=m["key"],
        name=m["name"],
        unit=m["unit"],
        better=m["better"],
        decides=m["decides"],
        baseline=m["baseline"],
        candidate=m["candidate"],
        change=m["change"],
        ci=None if ci is None else (ci[0], ci[1]),
        threshold=m["threshold"],
        decision=m["decision"],
        note=m.get("note", ""),
        pairs=m.get("pairs", 0),
        noise=_noise(m, schema),
        level=m.get("level"),
        bound=m.get("bound"),
        mdc=m.get("smallest_detectable_change"),
        pvalue=m.get("pvalue"),
        se=m.get("se_log"),
        weight=m.get("weight"),
        levels=tuple(_level(x) for x in m.get("levels") or ()),
        test=m.get("test", ""),
        decided_at=m.get("decided_at"),
    )


def _level(x: dict):
    """A metric's change at one load level (interleaved recordings), from its JSON."""
    from .compare import LevelChange

    raw_ci = x.get("raw_ci")
    return LevelChange(
        load=x["load"],
        change=x["change"],
        ci=(x["ci"][0], x["ci"][1]),
        raw=x["raw_change"],
        pairs=x["pairs"],
        kind=x.get("kind", "concurrency"),
        raw_ci=None if raw_ci is None else (raw_ci[0], raw_ci[1]),
    )


def comparison_from_json(doc: dict):
    """A Comparison from its JSON document (schema 3, or 2)."""
    from .compare import Comparison, Noise, StepPair
    from .model import parse_objective

    schema = doc["schema"]
    st = doc["settings"]
    pairs = [
        StepPair(
            p["concurrency"],
            tuple(p["baseline_steps"]),
            tuple(p["candidate_steps"]),
            p["plateau"],
            p["baseline"],
            p["candidate"],
        )
        for p in doc["pairs"]
    ]
    nz = doc["noise"]
    source = nz["source"] if schema >= 3 else f"{nz['source']}, {nz.get('floor', 0):.0%} per run"
    return Comparison(
        verdict=doc["verdict"],
        reason=doc["reason"],
        metrics=[_metric(m, schema) for m in doc["metrics"]],
        pairs=pairs,
        pairing=doc["pairing"],
        baseline_labels=list(doc["baseline"]),
        candidate_labels=list(doc["candidate"]),
        threshold=st["threshold"],
        error_threshold=st["error_threshold"],
        confidence=st["confidence"],
        noise=Noise(source, tuple(doc["noise"]["runs"])),
        objective=parse_objective(st["objective"]) if st.get("objective") else None,
        notes=list(doc["notes"]),
        warnings=list(doc["warnings"]),
        runs_needed=doc.get("runs_needed"),
        primary=doc.get("primary", ""),
        holm_weights=dict(st.get("weights") or {}),
        design=st.get("design", "runs"),
    )


def history_from_json(doc: dict):
    """A History from its JSON document (schema 2, or 1)."""
    from .history import ALL_METRICS as METRICS
    from .history import ChangePoint, History, LatestCheck, Release

    releases = []
    for r in doc["runs"]:
        ms = r["metrics"]
        values = {k: ms[k]["value"] if k in ms else None for k, *_ in METRICS}
        ci = {k: tuple(ms[k]["ci"]) if k in ms and ms[k]["ci"] else None for k, *_ in METRICS}
        bound = {k: bool(ms[k].get("lower_bound")) if k in ms else False for k, *_ in METRICS}
        releases.append(
            Release(r["index"], r["label"], tuple(r["paths"]), values, ci, bound, r.get("stopped"))
        )
    cps = [
        ChangePoint(
            c["index"],
            c["label"],
            c["metric"],
            c["change"],
            c["direction"],
            c["before"],
            c["after"],
            c["pvalue"],
            c["source"],
        )
        for c in doc["change_points"]
    ]
    st, latest = doc["settings"], doc.get("latest")
    return History(
        releases=releases,
        change_points=cps,
        threshold=st["threshold"],
        run_noise=st["run_noise"],
        objective=st.get("objective") or "",
        order=st["order"],
        note=doc["note"],
        runs_read=doc.get("runs_read", 0),
        warnings=list(doc["warnings"]),
        latest=None if latest is None else LatestCheck(latest["verdict"], latest["reason"]),
        noise={k: dict(v) for k, v in (doc.get("noise") or {}).items()},
        unconfirmed=list(doc.get("unconfirmed") or []),
    )
