"""CPU profiles per load step, per request, and where the CPU went between releases.

    import headroom
    ps = headroom.profiles("runs/candidate")        # a ProfileSet (notebook: a table)
    d = headroom.profiles.diff_runs("runs/base", "runs/candidate")   # a ProfileDiff, or None

``headroom.profiles(run)`` takes a Run, a Summary or a run folder and reads
its ``profiles/`` (see :mod:`headroom.profiles.steps`); the module itself is
callable for that, so the package keeps its submodules (read, diff, capture,
perf, plot, html, text) under the same name.  docs/profiles.md has the how-to.
"""

from __future__ import annotations

import sys
import types

from .diff import FunctionChange, ProfileDiff, diff_profiles
from .read import StepProfile, read_profile
from .steps import ProfiledStep, ProfileSet, load

__all__ = [
    "FunctionChange",
    "ProfileDiff",
    "ProfileSet",
    "ProfiledStep",
    "StepProfile",
    "diff_runs",
    "diff_profiles",
    "load",
    "read_profile",
]


def diff_runs(baseline, candidate, *, confidence: float = 0.95) -> ProfileDiff | None:
    """Where the CPU went between runs (each a Run, Summary, folder, ProfileSet or a list of them)."""
    sides = []
    for side in (baseline, candidate):
        items = side if isinstance(side, list | tuple) else [side]
        sides.append([x if isinstance(x, ProfileSet) else load(x) for x in items])
    return diff_profiles(sides[0], sides[1], confidence=confidence)


class _Profiles(types.ModuleType):
    """``headroom.profiles(run)``: the module, callable."""

    def __call__(self, run, folder=None) -> ProfileSet:
        return load(run, folder)


sys.modules[__name__].__class__ = _Profiles
