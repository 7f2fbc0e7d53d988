"""``headroom ramp --ab URL_A URL_B --interleave steps --find OBJECTIVE``: both builds probed at the
same loads, A and B alternating at every probe (AB, then BA); each next load is chosen for the side
whose interval is wider, and the change in capacity at the objective is said at the end
(:mod:`headroom.compare.capacity`).  The one-side search itself is :mod:`headroom.ramp.search`."""

from __future__ import annotations

import math
import sys
import tempfile
import time
from pathlib import Path

from ..model import HeadroomError
from .recorder import _Signals, prepare_output
from .search import (
    MAX_PROBES,
    FindOptions,
    Next,
    _budget_text,
    _Clock,
    _foreign,
    _probe,
    _r,
    _say,
    _search_args,
    _side,
    _stop,
    result_line,
    search_doc,
)


def _ab_checks(args) -> None:
    if getattr(args, "interleave", None) != "steps":
        raise HeadroomError("--find with --ab probes both builds at the same loads: give --interleave steps")
    for opt, v in (
        ("--until-decided", args.until_decided),
        ("--pairs-per-level", args.pairs_per_level),
        ("--repeats", args.repeats),
        ("--max-repeats", args.max_repeats),
    ):
        if v:
            raise HeadroomError(
                f"{opt} is not for --find: the search chooses which loads to probe and how often"
            )


def _next_ab(sides: dict, clock: _Clock, signals: _Signals, turn: int) -> Next:
    """The next load for both sides: the proposal of the side whose interval is wider."""
    props = {k: s.propose() for k, s in sides.items()}
    broken = [p for p in props.values() if p.why == "broken" and p.load is None]
    live = {k: p for k, p in props.items() if p.load is not None}
    if broken or not live:
        for k, s in sides.items():
            _stop(s, props[k])
        return broken[0] if broken else Next(None, "done", "both sides stopped")

    def width(k):
        hw = sides[k].fit.half_width if sides[k].fit is not None else None
        return math.inf if hw is None else hw

    keys = sorted(live, key=lambda k: (-width(k), (k != "ab"[turn % 2])))
    nxt = live[keys[0]]
    ready = [s for s in sides.values() if s.dense_steps() is not None]
    if ready:  # the auto budget from the side whose estimate lies further out
        clock.rebudget(max(ready, key=lambda s: s.dense_steps()))
    if signals.stop:
        nxt = Next(None, "interrupted", "interrupted (Ctrl-C)")
    elif len(next(iter(sides.values())).probes) >= MAX_PROBES:
        nxt = Next(None, "probes", f"{MAX_PROBES} probes")
    elif not clock.fits():
        nxt = Next(None, "budget", f"{_budget_text(clock)} would be exceeded by another probe pair")
    if nxt.load is None:
        for k, s in sides.items():
            _stop(s, nxt if props[k].load is not None else props[k])
    return nxt


def run_ab_find(args, opts: FindOptions) -> int:
    """``--ab URL_A URL_B --interleave steps --find``: both builds probed at the same loads, A and B
    alternating at every probe; a-01 and b-01 are one interleaved recording.  Returns the exit code."""
    from .ab import AbJob

    _ab_checks(args)
    args = _search_args(args, opts)
    job = AbJob(args)
    job.check()
    job.out.mkdir(parents=True, exist_ok=True)
    recs = {key: job.recorder(key, 1) for key in ("a", "b")}
    for key, rec in recs.items():
        rec.extra_metadata.update(job.ab_metadata(key, 1, 0))
        rec.extra_metadata["ab"].update(pairs_per_level=None, step_order=[], search=True)
        rec.setup()
    for key, rec in recs.items():
        prepare_output(rec.out, args.force)
        job.side(key).runs.append(rec.out)
    sides = {key: _side(rec, opts) for key, rec in recs.items()}
    signals = _Signals()
    signals.install()
    clock = _Clock(opts.budget_s, 2 * recs["a"].step_duration, sides=2)
    _say(
        f"{opts.objective}, A = {job.a.url}, B = {job.b.url}, both at the same loads (A and B alternating): "
        f"{opts.load_key} from {opts.low} (at most {opts.high}); writing {job.out}"
    )
    for rec in recs.values():
        rec.begin()
    failed = False
    try:
        failed = _ab_loop(sides, clock, signals)
    finally:
        signals.restore()
        for s in sides.values():
            if s.stopped is None:
                s.stopped = "interrupted" if signals.signum is not None else "stopped early"
                s.reason = s.rec.stopped_early or "interrupted"
            s.rec.extra_metadata["search"] = search_doc(s, clock, True)
        for rec in recs.values():
            rec.end(signals)
    rcs = {key: rec.finish(signals) for key, rec in recs.items()}
    return _ab_end(job, sides, rcs, failed, opts)


def _ab_loop(sides: dict, clock: _Clock, signals: _Signals) -> bool:
    """Probe both sides until the search stops; True when a step failed."""
    with tempfile.TemporaryDirectory(prefix="headroom-find-ab-") as tmpname:
        tmp = {key: Path(tmpname) / key for key in sides}
        for d in tmp.values():
            d.mkdir()
        nxt, turn = Next(sides["a"].opts.low, "start"), 0
        while True:
            t0 = time.monotonic()
            order = ("a", "b") if turn % 2 == 0 else ("b", "a")
            for key in order:
                if not _probe(sides[key], nxt.load, nxt.why, tmp[key], signals):
                    return True
            for s in sides.values():
                s.rec.extra_metadata["ab"]["step_order"].append("".join(order).upper())
            clock.timed(time.monotonic() - t0, full=sides["a"].probe_s(nxt.why) >= sides["a"].full_s)
            turn += 1
            nxt = _next_ab(sides, clock, signals, turn)
            for s in sides.values():
                s.rec.extra_metadata["search"] = search_doc(s, clock, nxt.load is None)
                s.rec.write_metadata()
            if nxt.load is None:
                return False


def _ab_end(job, sides: dict, rcs: dict, failed: bool, opts: FindOptions) -> int:
    """The change in capacity between the sides, said and written into ab.yml and both folders."""
    from ..compare.capacity import capacity_change

    for s in sides.values():
        _say(result_line(s) + _foreign(s.rec), s.rec.label)
    change = None
    if all(s.summary is not None for s in sides.values()):
        change = capacity_change([sides["a"].summary], [sides["b"].summary], recordings=[(0, 0)])
        _say(change_line(change))
    doc = change_doc(change)
    for s in sides.values():
        s.rec.extra_metadata["search"]["capacity_change"] = doc
        s.rec.write_metadata()
    job.records.extend(
        {
            "position": 1,
            "side": key,
            "folder": s.rec.out.name,
            "exit_code": rcs[key],
            "steps": len(s.rec.steps),
        }
        for key, s in sides.items()
    )
    job.looks = [{"capacity_change": doc}] if doc else []
    job.write_job("done" if not failed else "stopped early")
    print(job.compare_command() + f" --objective '{opts.objective}'", flush=True)
    if any(s.stopped == "broken" and len(s.probes) == 1 for s in sides.values()):
        print(
            f"headroom: error: {next(s.reason for s in sides.values() if s.stopped == 'broken')}",
            file=sys.stderr,
        )
        return 2
    return next((rc for rc in rcs.values() if rc != 0), 1 if failed else 0)


def change_doc(ch) -> dict | None:
    if ch is None:
        return None
    return {
        "baseline_rps": _r(ch.baseline_rps, 1),
        "candidate_rps": _r(ch.candidate_rps, 1),
        "change": _r(ch.change, 4),
        "low": _r(ch.ci[0], 4) if ch.ci else None,
        "high": _r(ch.ci[1], 4) if ch.ci else None,
        "pvalue": _r(ch.pvalue, 6),
        "confidence": ch.confidence,
        "design": ch.design,
        "pairs": ch.pairs,
        "note": ch.note,
    }


def change_line(ch) -> str:
    if ch.change is None:
        return f"change in capacity at the objective: not judged: {ch.note}"
    return (
        f"change in capacity at the objective: {100 * ch.change:+.1f} % (95 % interval "
        f"{100 * ch.ci[0]:+.1f} % to {100 * ch.ci[1]:+.1f} %, p = {ch.pvalue:.3g}; {ch.note})"
    )
