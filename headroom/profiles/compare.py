"""The profile part of ``headroom compare``: load both sides' step profiles and diff them.

Kept here so that :mod:`headroom.compare` gains two short calls.  A run
without ``profiles/`` leaves the comparison without a profile diff; a bad
profile file turns into a warning of the comparison (the verdict does not
rest on profiles); ``headroom profiles RUN`` is where a bad file exits 2.
"""

from __future__ import annotations

from ..model import HeadroomError
from .diff import ProfileDiff, diff_profiles, rows_json
from .steps import PROFILES_DIR, load, profile_files, run_facts


def side_diff(sides, confidence: float) -> tuple[ProfileDiff | None, list[str]]:
    """(diff or None, warnings) for the summaries of both sides."""
    loaded, warnings = [], []
    for side in sides:
        sets = []
        for s in side:
            label, folder, _ = run_facts(s)
            if folder is None or not profile_files(folder / PROFILES_DIR):
                continue
            try:
                ps = load(s)
            except HeadroomError as e:
                warnings.append(f"profiles of {label} not used: {e}")
                continue
            warnings += list(ps.warnings)
            if ps.steps:
                sets.append(ps)
        loaded.append(sets)
    if not loaded[0] or not loaded[1]:
        if loaded[0] or loaded[1]:
            which = "baseline" if loaded[0] else "candidate"
            warnings.append(f"only the {which} has step profiles: no profile diff")
        return None, warnings
    d = diff_profiles(loaded[0], loaded[1], confidence=confidence)
    if d is None:
        warnings.append("the step profiles of the two sides share no concurrency level: no profile diff")
    return d, warnings


def diff_docs(d: ProfileDiff) -> dict:
    """The JSON keys of a comparison's profile diff."""
    return {
        "profile_diff": rows_json(d.cum),
        "profile_diff_flat": rows_json(d.flat),
        "profile_diff_info": d.to_json(),
    }


def summary_doc(summary) -> dict:
    """``{"profiles": ...}`` for a summary's JSON when its run has step profiles (else ``{}``).

    Per step ``profile_top`` (``{function, flat_cpu_s_per_request, cum_cpu_s_per_request}``);
    a bad profile file gives ``{"profiles": {"error": "<one line>"}}`` rather than failing.
    """
    _, folder, _ = run_facts(summary)
    if folder is None or not profile_files(folder / PROFILES_DIR):
        return {}
    try:
        return {"profiles": load(summary).to_json()}
    except HeadroomError as e:
        return {"profiles": {"error": str(e)}}
