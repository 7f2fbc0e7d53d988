"""A run's step profiles, normalised per request.

For every profiled step: each function's flat and cumulative CPU seconds
divided by the requests the server answered while the profile ran.  A
profile covers part of its step (``seconds=N`` fitted inside it), so the
requests are the step's requests times the share of the step's time the
profile window overlaps (throughput is steady within a step); the step's
measured CPU (``step_cpu_s``) over the same share says what part of the
server's CPU the profile accounts for (``cpu_share``: near 1 when the profile
sees the whole server; below 1 when other processes or cgo/kernel time
were not sampled).

Profiles are found in ``RUN/profiles/`` (or a folder given), one file per
step, named by step (``step-003...``, ``step3.pb.gz``) or by concurrency
(``c8.pb.gz``, ``concurrency-8.pprof``), pprof (gzip or not) or perf's
collapsed stacks.  ``pprof -normalize`` scales totals away; this never does.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..model import HeadroomError
from .read import StepProfile, read_profile

PROFILES_DIR = "profiles"
SCHEMA = 1  # of the ``profiles`` JSON document (ProfileSet.to_json)
TOP = 10
_BY_STEP = re.compile(r"(?:^|[^a-z])step[-_]?0*(\d+)", re.I)
_BY_LEVEL = re.compile(r"(?:^|[^a-z])(?:c|concurrency)[-_]?0*(\d+)(?=[^0-9]|$)", re.I)
_SKIP = re.compile(r"\.(allocs|heap)\.", re.I)  # heap/allocs profiles taken at a step's end
#: a profile may run this much longer than its step (a share of the step, plus seconds)
#: before it is refused as not a profile of that step
LATE_SHARE, LATE_S = 0.1, 0.1


@dataclass(frozen=True, eq=False)
class ProfiledStep:
    """One step's profile, per request.  ``step`` is 1-based."""

    step: int
    concurrency: int | None
    requests: int  # requests the step served
    requests_in_profile: float  # of those, while the profile ran (estimated by time share)
    window_share: float  # share of the step's time the profile window covers
    step_cpu_s: float | None
    profile: StepProfile

    @property
    def cpu_share(self) -> float | None:
        """Profile CPU over the server's measured CPU in the same window (None: not measured)."""
        if not self.step_cpu_s or self.window_share <= 0:
            return None
        return self.profile.cpu_s / (self.step_cpu_s * self.window_share)

    @property
    def cpu_s_per_request(self) -> float:
        return self.profile.cpu_s / self.requests_in_profile if self.requests_in_profile else float("nan")

    def per_request(self, measure: str = "cum") -> np.ndarray:
        """CPU seconds per request of every function (``profile.functions`` order)."""
        v = self.profile.cum_cpu_s if measure == "cum" else self.profile.flat_cpu_s
        return v / self.requests_in_profile if self.requests_in_profile else v * np.nan

    def top(self, n: int = TOP, measure: str = "cum") -> list[dict]:
        """``profile_top``: the n functions with the most CPU per request."""
        p = self.profile
        key = p.cum_cpu_s if measure == "cum" else p.flat_cpu_s
        order = np.argsort(-key, kind="stable")[:n]
        r = self.requests_in_profile or float("nan")
        return [
            {
                "function": p.functions[i],
                "flat_cpu_s_per_request": float(p.flat_cpu_s[i] / r),
                "cum_cpu_s_per_request": float(p.cum_cpu_s[i] / r),
                "flat_samples": int(p.flat_samples[i]),
                "cum_samples": int(p.cum_samples[i]),
            }
            for i in order
        ]


@dataclass(frozen=True, eq=False)
class ProfileSet:
    """The step profiles of one run (:func:`headroom.profiles`)."""

    label: str
    folder: str
    steps: tuple[ProfiledStep, ...]
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def __repr__(self) -> str:
        levels = ", ".join(str(s.concurrency) for s in self.steps)
        return f"<ProfileSet {self.label}: {len(self.steps)} profiled step(s), concurrency {levels or '-'}>"

    def _repr_html_(self) -> str:
        from ..model import render_html  # by name: the renderer imports this module

        return render_html("ProfileSet", self)

    def level(self, concurrency: int) -> ProfiledStep | None:
        return next((s for s in self.steps if s.concurrency == concurrency), None)

    def to_json(self, top: int = TOP) -> dict:
        return {
            "schema": SCHEMA,
            "kind": "profiles",
            "label": self.label,
            "folder": self.folder,
            "steps": [step_doc(s, top) for s in self.steps],
            "warnings": list(self.warnings),
        }


def step_doc(s: ProfiledStep, top: int = TOP) -> dict:
    """One step's JSON: its figures and ``profile_top``."""
    share = s.cpu_share
    return {
        "step": s.step,
        "concurrency": s.concurrency,
        "profile": Path(s.profile.path).name,
        "profile_kind": s.profile.kind,
        "profile_duration_s": s.profile.duration_s,
        "samples": s.profile.samples,
        "requests": s.requests,
        "requests_in_profile": round(s.requests_in_profile, 1),
        "profile_cpu_s": round(s.profile.cpu_s, 6),
        "cpu_s_per_request": s.cpu_s_per_request,
        "cpu_share": None if share is None else round(share, 4),
        "profile_top": s.top(top),
    }


# --------------------------------------------------------------------------
# finding a run's facts and files


def run_facts(run) -> tuple[str, Path | None, dict]:
    """(label, folder, metadata fields) of a Run, a Summary or a run folder path.

    The folder is None for a run that was not read from a file (built in memory)."""
    run = getattr(run, "run", run)  # a Summary
    meta = getattr(run, "meta", None)
    if meta is not None:
        src = Path(str(meta.source or ""))
        if not str(meta.source or "") or not src.exists():
            return meta.label, None, dict(meta.fields)
        return meta.label, (src if src.is_dir() else src.parent), dict(meta.fields)
    folder = Path(run)
    if not folder.is_dir():
        raise HeadroomError(f"{folder}: not a run folder")
    fields = {}
    md = folder / "metadata.yml"
    if md.is_file():
        import yaml

        try:
            fields = yaml.safe_load(md.read_text()) or {}
        except yaml.YAMLError as e:
            raise HeadroomError(f"{md}: not readable YAML: {str(e).splitlines()[0]}") from None
    return str(fields.get("label") or folder.resolve().name), folder, fields


def profile_files(folder: Path) -> list[Path]:
    """The CPU profile files in ``folder`` (heap/allocs profiles left out)."""
    if not folder.is_dir():
        return []
    return sorted(
        p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".") and not _SKIP.search(p.name)
    )


def _step_of(path: Path, levels: list) -> int | None:
    """0-based step of a file named by step or by concurrency; None when its name says neither."""
    m = _BY_STEP.search(path.name)
    if m:
        return int(m[1]) - 1
    m = _BY_LEVEL.search(path.name)
    if m and int(m[1]) in levels:
        return levels.index(int(m[1]))
    return None


def _ns(text) -> int | None:
    if not text:
        return None
    try:
        t = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return round(t.timestamp() * 1e9)


def _window_share(prof: StepProfile, start_ns, end_ns, path: Path, k: int) -> float:
    """Share of step k's time the profile ran; refuses a profile longer than its step."""
    if start_ns is None or end_ns is None or end_ns <= start_ns:
        return 1.0
    wall = (end_ns - start_ns) / 1e9
    if prof.duration_s is not None and prof.duration_s > wall * (1 + LATE_SHARE) + LATE_S:
        raise HeadroomError(
            f"{path}: the profile covers {prof.duration_s:.1f} s but step {k + 1} lasted {wall:.1f} s: "
            "it is not a profile of that step (take seconds=N shorter than the step)"
        )
    if prof.time_ns is not None and prof.duration_s:
        lo = max(start_ns, prof.time_ns)
        hi = min(end_ns, prof.time_ns + round(prof.duration_s * 1e9))
        if hi > lo:
            return (hi - lo) / 1e9 / wall
    if prof.duration_s:
        return min(1.0, prof.duration_s / wall)
    return 1.0


def load(run, folder: str | Path | None = None) -> ProfileSet:
    """The profiled steps of ``run`` (a Run, a Summary or a run folder).

    ``folder``: where the step profiles are (default ``RUN/profiles``).
    """
    label, run_folder, fields = run_facts(run)
    if folder is None and run_folder is None:
        return ProfileSet(label, "", (), (f"{label}: not read from a folder: no step profiles",))
    where = Path(folder) if folder is not None else run_folder / PROFILES_DIR
    levels = list(fields.get("concurrency") or [])
    requests = list(fields.get("step_requests") or [])
    starts = [_ns(t) for t in fields.get("step_start_times") or []]
    ends = [_ns(t) for t in fields.get("step_end_times") or []]
    cpu = list(fields.get("step_cpu_s") or [])
    warnings: list[str] = []
    steps: dict[int, ProfiledStep] = {}
    for path in profile_files(where):
        k = _step_of(path, levels)
        if k is None:
            warnings.append(f"{path}: its name gives no step (step-N...) or concurrency (cN...): left out")
            continue
        if k >= len(requests):
            warnings.append(f"{path}: the run has no step {k + 1} (it recorded {len(requests)}): left out")
            continue
        prof = read_profile(path)
        share = _window_share(prof, _at(starts, k), _at(ends, k), path, k)
        served = int(requests[k] or 0)
        steps[k] = ProfiledStep(
            step=k + 1,
            concurrency=_at(levels, k),
            requests=served,
            requests_in_profile=served * share,
            window_share=share,
            step_cpu_s=_at(cpu, k),
            profile=prof,
        )
        if not served:
            warnings.append(f"{path}: step {k + 1} served no request: no CPU per request")
    if not requests and profile_files(where):
        warnings.append(
            f"{run_folder}: metadata.yml gives no step_requests: the profiles cannot be per request"
        )
    return ProfileSet(
        label, str(run_folder or where), tuple(steps[k] for k in sorted(steps)), tuple(warnings)
    )


def _at(values: list, k: int):
    return values[k] if k < len(values) else None


def grouped_per_request(step: ProfiledStep, functions: list[str]) -> dict[str, float]:
    """CPU seconds per request of the step split among ``functions`` and "other".

    Each sample goes to the chosen function nearest the root of its stack (a chosen
    function's callees count as its own, as in its cumulative CPU), else to "other": the
    parts add up to the step's whole CPU per request, so they can be stacked.
    """
    p = step.profile
    chosen = {f: i for i, f in enumerate(functions)}
    col = np.array([chosen.get(f, -1) for f in p.functions] or [-1], np.int64)
    out = np.zeros(len(functions) + 1)
    cpu = p.stack_samples * (p.period_ns / 1e9) if p.period_ns else p.stack_samples * 0.0
    for k in range(len(p.offsets) - 1):
        hit = col[p.frames[p.offsets[k] : p.offsets[k + 1]]]
        first = np.flatnonzero(hit >= 0)
        out[hit[first[-1]] if first.size else -1] += cpu[k]
    r = step.requests_in_profile or float("nan")
    return {**{f: out[i] / r for f, i in chosen.items()}, "other": out[-1] / r}
