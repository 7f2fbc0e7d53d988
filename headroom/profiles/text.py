"""Plain-text rendering of step profiles and of where the CPU went (terminal output)."""

from __future__ import annotations

from .diff import FunctionChange, ProfileDiff
from .steps import ProfileSet

TOP = 10


def _us(seconds: float, sign: bool = False) -> str:
    return f"{seconds * 1e6:+.1f}" if sign else f"{seconds * 1e6:.1f}"


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else "..." + name[-(width - 3) :]


def _row(r: FunctionChange) -> str:
    mark = "~" if r.within_uncertainty else ("+" if r.change > 0 else "-")
    rel = r.relative
    rel_text = "new" if r.baseline == 0 and r.candidate > 0 else ("" if rel is None else f"{rel:+.0%}")
    at = " / ".join(f"{v * 1e6:+.1f}" for _, _, v in r.by_load())
    return (
        f"  {mark} {_short(r.function):48s} {_us(r.baseline):>8s} {_us(r.candidate):>8s} "
        f"{_us(r.change, True):>8s}  {'[' + _us(r.low, True) + ', ' + _us(r.high, True) + ']':16s} {rel_text:>5s}  {at}"
    )


def levels_text(levels) -> str:
    """``1, 5, 9`` or, for many levels, ``1..25 (25 levels)``."""
    levels = list(levels)
    if len(levels) <= 6:
        return ", ".join(map(str, levels))
    return f"{levels[0]}..{levels[-1]} ({len(levels)} levels)"


def profile_diff_text(d: ProfileDiff | None, n: int = TOP) -> str:
    """Where the CPU went: the top ``n`` cumulative changes per request ('' when no diff)."""
    if d is None:
        return ""
    levels = levels_text(d.levels)
    groups = (
        " / ".join(f"{lo}-{hi}" if lo != hi else f"{lo}" for lo, hi, _ in d.cum[0].by_load()) if d.cum else ""
    )
    total = d.candidate_cpu_s_per_request - d.baseline_cpu_s_per_request
    lines = [
        "",
        f"where the CPU went (CPU profiles, cumulative, microseconds per request, mean over concurrency {levels}):",
        f"  all profiled CPU: {_us(d.baseline_cpu_s_per_request)} -> {_us(d.candidate_cpu_s_per_request)} us "
        f"per request ({_us(total, True)} us)",
        f"    {'function':48s} {'baseline':>8s} {'candidate':>8s} {'change':>8s}  "
        f"{d.confidence:.0%} interval         rel  by concurrency {groups}",
    ]
    lines += [_row(r) for r in d.cum[:n]]
    beyond = len(d.changed)
    lines.append(
        f"  {beyond} function(s) changed beyond the sampling uncertainty; '~' within it "
        f"(Poisson, simultaneous over {d.functions_compared} functions)"
        if beyond
        else f"  no function changed beyond the sampling uncertainty (Poisson, {d.functions_compared} functions)"
    )
    top = d.cum[0] if d.cum else None
    if top is not None and top.callers:
        lines.append(f"  {top.function} is reached through {', '.join(top.callers[:3])}")
    return "\n".join(lines) + "\n"


def profile_set_text(ps: ProfileSet, n: int = 5) -> str:
    """A run's profiled steps: CPU per request and the top functions of each."""
    lines = [f"CPU profiles of {ps.label}: {len(ps.steps)} profiled step(s)"]
    for s in ps.steps:
        share = s.cpu_share
        share_text = "" if share is None else f", profile/measured CPU {share:.0%}"
        lines.append(
            f"  step {s.step} (concurrency {s.concurrency}): {s.profile.samples:,} samples, "
            f"{_us(s.cpu_s_per_request)} us CPU per request{share_text}"
        )
        for t in s.top(n):
            lines.append(
                f"      {_short(t['function'], 56):56s} cum {_us(t['cum_cpu_s_per_request']):>7s} us  "
                f"flat {_us(t['flat_cpu_s_per_request']):>7s} us"
            )
    lines += [f"  warning: {w}" for w in ps.warnings]
    return "\n".join(lines) + "\n"
