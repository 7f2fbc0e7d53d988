"""Interleaved A/B recording (``headroom ramp --ab``) and its sequential second stage.

Two servers are up at the same time, the baseline A and the candidate B.  One
job records them alternately in ABBA order (A B B A A B B A ...): every pair
of neighbouring runs has one of each side, and each block of four is
symmetric in time, so a linear drift of the machine over the block falls
equally on both sides instead of on whichever side was recorded later.  Each
run is a normal run folder (``DIR/a-01``, ``DIR/b-01``, ``DIR/b-02``,
``DIR/a-02`` ...) with an ``ab`` block in its metadata; ``DIR/ab.yml`` lists
the job.

``--until-decided`` compares the runs so far after every ABBA block (two runs
a side) and stops when the verdict is not "inconclusive" or at
``--max-repeats`` runs a side.  Looking several times at accumulating data
and stopping at the first decision raises the error rate; each look is made
at the confidence ``1 - (1 - C) / L`` for L possible looks (Bonferroni over
the looks), so the probability that any look errs stays at most ``1 - C``.
"""

from __future__ import annotations

import copy
import math
import re
import shlex
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..model import HeadroomError
from ..profiles.capture import options_from_args
from .recorder import (
    DEFAULT_STEP,
    Recorder,
    _duration,
    _pids,
    _positive,
    _Signals,
    check_url,
    preflight,
    prepare_output,
)

JOB_FILE = "ab.yml"
DEFAULT_REPEATS = 2
DEFAULT_MAX_REPEATS = 6
DEFAULT_STEP_REPEATS = 1  # --interleave steps: one recording is a whole comparison
#: --interleave steps: A/B pairs at every level (ABBA at one level, BAAB at the next): two pairs of one
#: level measure the pairs' noise apart from any change that varies with load (compare's model across
#: load); the cost is twice the steps of one pair per level
DEFAULT_PAIRS_PER_LEVEL = 2
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def abba_order(repeats: int) -> list[str]:
    """Sides in recording order for ``repeats`` runs a side: a b b a a b b a ..."""
    return [("a", "b", "b", "a")[k % 4] for k in range(2 * repeats)]


def interleaved_order(repeats: int) -> list[str]:
    """Sides of the first step of every interleaved recording: a, b, a, b ... (then alternating by level)."""
    return [("a", "b")[k % 2] for k in range(repeats)]


def level_order(recording: int, level_index: int, pair: int = 0) -> tuple[str, str]:
    """Which side runs first in pair ``pair`` (0-based) of a level of recording ``recording`` (1-based).

    One pair per level: AB, BA, AB ... by level, the first level of every other recording starting
    with B.  Several pairs per level alternate within the level too: ABBA at one level, BAAB at the
    next (two pairs), so that a linear drift over a level falls on both sides equally.
    """
    return ("a", "b") if (recording - 1 + level_index + pair) % 2 == 0 else ("b", "a")


def step_orders(recording: int, levels: int, pairs: int) -> list[str]:
    """The order of every step pair of a recording, level by level: ["AB", "BA", "BA", "AB", ...]."""
    return ["".join(level_order(recording, k, j)).upper() for k in range(levels) for j in range(pairs)]


def per_look_confidence(confidence: float, max_looks: int) -> float:
    """The confidence of one look so that ``max_looks`` looks keep the family at ``confidence``."""
    return 1.0 - (1.0 - confidence) / max_looks


@dataclass
class Side:
    key: str  # "a" or "b"
    url: str
    pids: list[int]
    label: str
    runs: list[Path] = field(default_factory=list)


def _confidence(text: str | None) -> float:
    if text is None:
        return 0.95
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise HeadroomError(f"bad --confidence {text!r}: expected a number such as 0.95 or 95%") from None
    if not 0.5 <= v < 1:
        raise HeadroomError(f"bad --confidence {text!r}: must be at least 0.5 and below 1")
    return v


def _label(text: str | None, default: str, option: str) -> str:
    v = default if text is None else text
    if not LABEL.fullmatch(v):
        raise HeadroomError(
            f"bad {option} {v!r}: a folder-name prefix of letters, digits, '.', '_', '+', '-' (at most 64)"
        )
    return v


class AbJob:
    """The options of an A/B job, checked before anything is written."""

    def __init__(self, args):
        self.args = args
        self.out = Path(args.output)
        for opt, v in (("URL", args.url), ("--cpu-pid", args.cpu_pid), ("--label", args.label)):
            if v:
                hint = {"URL": "give both URLs to --ab", "--cpu-pid": "use --cpu-pid-a/--cpu-pid-b"}
                raise HeadroomError(f"{opt} is not for --ab: " + hint.get(opt, "use --label-a/--label-b"))
        url_a, url_b = (check_url(u) for u in args.ab)
        self.a = Side(
            "a", url_a, _pids(args.cpu_pid_a, "--cpu-pid-a"), _label(args.label_a, "a", "--label-a")
        )
        self.b = Side(
            "b", url_b, _pids(args.cpu_pid_b, "--cpu-pid-b"), _label(args.label_b, "b", "--label-b")
        )
        if self.a.label == self.b.label:
            raise HeadroomError(f"--label-a and --label-b are both {self.a.label!r}: the folders would clash")
        zero = re.fullmatch(r"\s*0+(\.0*)?\s*(s|ms)?\s*", args.pause or "")
        self.pause = 0.0 if zero else _duration(args.pause, "--pause")
        self.confidence = _confidence(args.confidence)
        self.until_decided = bool(args.until_decided)
        self.steps = getattr(args, "interleave", None) == "steps"  # A and B within every level
        pairs = getattr(args, "pairs_per_level", None)
        if pairs is not None and not self.steps:
            raise HeadroomError("--pairs-per-level is for --interleave steps")
        self.pairs = (_positive(pairs, "--pairs-per-level") or DEFAULT_PAIRS_PER_LEVEL) if self.steps else 1
        if self.pairs > 8:
            raise HeadroomError(f"--pairs-per-level {self.pairs}: at most 8 pairs per level")
        if self.until_decided:
            if args.repeats is not None:
                raise HeadroomError("--repeats is not for --until-decided: give --max-repeats N")
            self.repeats = _positive(args.max_repeats, "--max-repeats") or DEFAULT_MAX_REPEATS
            if self.repeats < 2 and not self.steps:
                raise HeadroomError("--max-repeats must be at least 2 (one ABBA block)")
            # a look after every ABBA block, or after every interleaved recording
            self.max_looks = self.repeats if self.steps else math.ceil(self.repeats / 2)
            self.look_confidence = per_look_confidence(self.confidence, self.max_looks)
        else:
            for opt, v in (("--max-repeats", args.max_repeats), ("--confidence", args.confidence)):
                if v is not None:
                    raise HeadroomError(f"{opt} is for --until-decided")
            default = DEFAULT_STEP_REPEATS if self.steps else DEFAULT_REPEATS
            self.repeats = _positive(args.repeats, "--repeats") or default
            self.max_looks = 0
            self.look_confidence = None
        if self.repeats > 100:
            raise HeadroomError(f"--repeats/--max-repeats {self.repeats}: at most 100 runs a side")
        self.order = interleaved_order(self.repeats) if self.steps else abba_order(self.repeats)
        self.looks: list[dict] = []
        self.records: list[dict] = []

    def side(self, key: str) -> Side:
        return self.a if key == "a" else self.b

    def recorder(self, key: str, n: int) -> Recorder:
        """The recorder of run ``n`` (1-based) of side ``key``; validates every ramp option."""
        s, other = (self.a, self.b) if key == "a" else (self.b, self.a)
        a = copy.copy(self.args)
        a.url, a.cpu_pid, a.label = s.url, [str(p) for p in s.pids], f"{s.label}-{n:02d}"
        matches = list(getattr(self.args, "prometheus_match", None) or [])
        if len(matches) == 2:  # one per side: A's, then B's
            a.prometheus_match = [matches[0 if key == "a" else 1]]
        elif len(matches) > 2:
            raise HeadroomError("--prometheus-match: give it once, or twice with --ab (A's, then B's)")
        rec = Recorder(a, self.out / a.label)
        if self.pairs > 1:  # every level repeated: steps of one level are its pairs' replicates
            rec.levels = [lv for lv in rec.levels for _ in range(self.pairs)]
        given = (self.args.label_a if key == "a" else self.args.label_b) is not None
        # history groups runs by sha: the side's own label when given; else the job folder and side,
        # so that a-01 of two jobs are never taken for repeats of one release
        rec.release = s.label if given else f"{self.out.resolve().name}/{key}"
        rec.other_pids = list(dict.fromkeys(rec.other_pids + other.pids))
        rec.profile_opts = options_from_args(self.args, key)
        return rec

    def check(self) -> None:
        """Every option, the generator, both servers and all PIDs, before anything is written."""
        from ..steps import MIN_STEP_S
        from .cpu import ProcessTree

        rec = self.recorder("a", 1)
        if self.until_decided and rec.requests_per_step is None and rec.step_duration <= MIN_STEP_S:
            # A step's span (first request to last response) comes out a few ms under the
            # generator's duration, and compare leaves steps under MIN_STEP_S out as short: with
            # such steps each look would compare nothing (inconclusive) or, when only some steps
            # happen to reach MIN_STEP_S, refuse the runs (their usable steps differ).
            raise HeadroomError(
                f"--step-duration {self.args.step_duration or DEFAULT_STEP}: compare leaves steps shorter than "
                f"{MIN_STEP_S:g} s out, so no look of --until-decided could use them: give longer steps (1s or more)"
            )
        for s in (self.a, self.b):
            ProcessTree(s.pids, option=f"--cpu-pid-{s.key}")  # no such process -> exit 2
        for s in (self.a, self.b):
            preflight(s.url)
        if self.out.exists() and not self.out.is_dir():
            raise HeadroomError(f"{self.out}: exists and is not a folder")
        if self.out.is_dir() and any(self.out.iterdir()) and not self.args.force:
            raise HeadroomError(f"{self.out}: folder exists and is not empty (use --force to write into it)")

    def ab_metadata(self, key: str, position: int, levels: int = 0) -> dict:
        other = self.b if key == "a" else self.a
        doc = {
            "job": str(self.out),
            "side": key,
            "side_label": self.side(key).label,
            "position": position,
            "order": "".join(self.order).upper(),
            "design": "interleaved steps" if self.steps else "interleaved runs (ABBA)",
            "other_url": other.url,
            "other_cpu_pids": other.pids or None,
            "sequential": self.sequential_doc(),
        }
        if self.steps:
            doc["recording"] = position
            doc["pair"] = f"{other.label}-{position:02d}"
            doc["pairs_per_level"] = self.pairs
            doc["step_order"] = step_orders(position, levels, self.pairs)
        return {"ab": doc}

    def sequential_doc(self) -> dict | None:
        if not self.until_decided:
            return None
        after = "every interleaved recording" if self.steps else "every ABBA block"
        return {
            "rule": f"compare after {after}; stop when the verdict is not inconclusive",
            "max_repeats": self.repeats,
            "max_looks": self.max_looks,
            "family_confidence": self.confidence,
            "per_look_confidence": round(self.look_confidence, 6),
            "correction": "Bonferroni over the looks: per look 1 - (1 - family) / max_looks",
        }

    def compare_command(self) -> str:
        """The headroom compare command for the runs recorded so far."""
        q = shlex.quote
        sides = []
        for s in (self.a, self.b):
            glob = f"{q(str(self.out))}/{q(s.label)}-*"
            clash = [p for p in self.out.glob(f"{s.label}-*") if p not in s.runs] if self.out.is_dir() else []
            sides.append(glob if not clash and s.runs else " ".join(q(str(p)) for p in s.runs))
        return f"headroom compare --baseline {sides[0]} --candidate {sides[1]}"

    def write_job(self, status: str) -> None:
        import yaml

        doc = {
            "tool": "headroom ramp --ab",
            "status": status,
            "order": "".join(self.order).upper(),
            "design": "interleaved steps" if self.steps else "interleaved runs (ABBA)",
            "a": {"url": self.a.url, "label": self.a.label, "cpu_pids": self.a.pids or None},
            "b": {"url": self.b.url, "label": self.b.label, "cpu_pids": self.b.pids or None},
            "repeats": None if self.until_decided else self.repeats,
            "sequential": self.sequential_doc(),
            "runs": self.records,
            "looks": self.looks or None,
            "compare_command": self.compare_command(),
        }
        tmp = self.out / f".{JOB_FILE}.tmp"
        tmp.write_text("---\n" + yaml.safe_dump(doc, sort_keys=False, width=100), encoding="utf-8")
        tmp.replace(self.out / JOB_FILE)


def _say(text: str) -> None:
    print(f"headroom ramp --ab: {text}", file=sys.stderr, flush=True)


def _record_one(job: AbJob, key: str, position: int, signals: _Signals) -> int:
    side = job.side(key)
    n = len(side.runs) + 1
    rec = job.recorder(key, n)
    rec.extra_metadata.update(job.ab_metadata(key, position))
    _say(f"run {position}/{len(job.order)}: {rec.label} ({key.upper()}, {side.url})")
    rec.setup()
    prepare_output(rec.out, job.args.force)
    side.runs.append(rec.out)
    t0 = time.time()
    rc = rec.record(signals)
    foreign = rec.foreign_summary() or {}
    job.records.append(
        {
            "position": position,
            "side": key,
            "folder": rec.out.name,
            "exit_code": rc,
            "steps": len(rec.steps),
            "foreign_cpu_mean_percent": foreign.get("mean_percent"),
            "started_unix_s": round(t0, 3),
            "seconds": round(time.time() - t0, 1),
        }
    )
    return rc


def _record_pair(job: AbJob, position: int, signals: _Signals) -> int:
    """One interleaved recording: A and B alternating within every level; returns the exit code."""
    import tempfile

    recs = {key: job.recorder(key, position) for key in ("a", "b")}
    levels = len(recs["a"].levels) // job.pairs  # recorder levels hold every level once per pair
    for key, rec in recs.items():
        rec.extra_metadata.update(job.ab_metadata(key, position, levels))
        rec.setup()
    _say(
        f"recording {position}/{len(job.order)}: {recs['a'].label} and {recs['b'].label}, "
        f"{levels} levels x {job.pairs} pair(s), A and B alternating within every level"
    )
    for key, rec in recs.items():
        prepare_output(rec.out, job.args.force)
        job.side(key).runs.append(rec.out)
    t0 = time.time()
    for rec in recs.values():
        rec.begin()
    try:
        with tempfile.TemporaryDirectory(prefix="headroom-ab-") as tmpname:
            tmp = {key: Path(tmpname) / key for key in recs}
            for d in tmp.values():
                d.mkdir()
            for k in range(levels * job.pairs):
                if signals.stop:
                    break
                order = level_order(position, k // job.pairs, k % job.pairs)
                if not all(recs[key].step_once(k, tmp[key], signals) for key in order):
                    break
    finally:
        for rec in recs.values():
            rec.end(signals)
    rcs = {key: rec.finish(signals) for key, rec in recs.items()}
    for key, rec in recs.items():
        foreign = rec.foreign_summary() or {}
        job.records.append(
            {
                "position": position,
                "side": key,
                "folder": rec.out.name,
                "exit_code": rcs[key],
                "steps": len(rec.steps),
                "foreign_cpu_mean_percent": foreign.get("mean_percent"),
                "started_unix_s": round(t0, 3),
                "seconds": round(time.time() - t0, 1),
            }
        )
    return next((rc for rc in rcs.values() if rc != 0), 0)


def _loop_steps(job: AbJob, signals: _Signals) -> tuple[int | None, int | None]:
    """Record interleaved recordings; a look after each with --until-decided (see :func:`_loop`)."""
    cache: dict = {}
    verdict_rc = None
    for pos in range(1, len(job.order) + 1):
        if pos > 1:
            _pause(job.pause, signals)
        if signals.stop:
            return (143 if signals.signum == signal.SIGTERM else 130), verdict_rc
        rc = _record_pair(job, pos, signals)
        job.write_job("recording")
        if rc != 0:
            return rc, verdict_rc
        if job.until_decided:
            verdict_rc = _look(job, cache)
            job.write_job("recording")
            if job.looks[-1]["verdict"] != "inconclusive":
                return None, verdict_rc
    return None, verdict_rc


def _say_foreign(job: AbJob) -> None:
    """One line: the mean foreign CPU of each side's runs (drift that fell on one side shows here)."""
    parts = []
    for key in ("a", "b"):
        v = [r["foreign_cpu_mean_percent"] for r in job.records if r["side"] == key]
        v = [x for x in v if x is not None]
        if v:
            parts.append(f"{key.upper()} {sum(v) / len(v):.0f} % (runs {min(v):.0f}-{max(v):.0f} %)")
    if parts:
        _say("foreign CPU during the load, mean of the runs (percent of the machine): " + ", ".join(parts))


def _pause(seconds: float, signals: _Signals) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not signals.stop:
        time.sleep(min(0.1, max(0.0, end - time.monotonic())))


def _look(job: AbJob, cache: dict) -> int:
    """Compare the runs so far at the per-look confidence; returns compare's exit code."""
    from ..compare import compare_runs
    from ..io import reduce_run

    def load(p: Path):
        if p not in cache:
            cache[p] = reduce_run(str(p))
        return cache[p]

    c = compare_runs(
        [load(p) for p in job.a.runs], [load(p) for p in job.b.runs], confidence=job.look_confidence
    )
    needed = getattr(c, "runs_needed", None)
    k = len(job.looks) + 1
    job.looks.append(
        {
            "look": k,
            "runs_per_side": [len(job.a.runs), len(job.b.runs)],
            "confidence": round(job.look_confidence, 6),
            "verdict": c.verdict,
            "exit_code": c.exit_code,
            "reason": c.reason,
            "runs_needed": needed,
        }
    )
    _say(
        f"look {k}/{job.max_looks} ({len(job.a.runs)} vs {len(job.b.runs)} runs, confidence "
        f"{100 * job.look_confidence:.2f} % per look): {c.verdict.upper()}: {c.reason}"
        + (f"; about {needed} runs per side would most likely decide it" if needed else "")
    )
    return c.exit_code


def _loop(job: AbJob, signals: _Signals) -> tuple[int | None, int | None]:
    """Record the job; returns (exit code of a failed or interrupted run, last look's exit code)."""
    cache: dict = {}
    verdict_rc = None
    for pos, key in enumerate(job.order, start=1):
        if pos > 1:
            _pause(job.pause, signals)
        if signals.stop:
            return (143 if signals.signum == signal.SIGTERM else 130), verdict_rc
        rc = _record_one(job, key, pos, signals)
        job.write_job("recording")
        if rc != 0:
            return rc, verdict_rc
        block_done = len(job.a.runs) == len(job.b.runs) and (pos % 4 == 0 or pos == len(job.order))
        if job.until_decided and block_done:
            verdict_rc = _look(job, cache)
            job.write_job("recording")
            if job.looks[-1]["verdict"] != "inconclusive":
                return None, verdict_rc
    return None, verdict_rc


def run_ab(args) -> int:
    """``headroom ramp --ab``: record the job; returns the exit code."""
    job = AbJob(args)
    job.check()
    job.out.mkdir(parents=True, exist_ok=True)
    signals = _Signals()
    signals.install()
    if job.steps:
        _say(
            f"{len(job.order)} interleaved recording(s) "
            + ("(at most; a look after each) " if job.until_decided else "")
            + f"into {job.out}; A = {job.a.url}, B = {job.b.url}"
        )
    else:
        _say(
            f"{len(job.order)} runs in the order {''.join(job.order).upper()} "
            + ("(at most; a look after every ABBA block) " if job.until_decided else "")
            + f"into {job.out}; A = {job.a.url}, B = {job.b.url}"
        )
    try:
        failed, verdict_rc = (_loop_steps if job.steps else _loop)(job, signals)
    except HeadroomError as e:  # compare refused the runs: say so in ab.yml, then exit 2
        job.write_job(f"compare failed: {e}")
        raise
    finally:
        signals.restore()
    status = "interrupted" if failed in (130, 143) else "stopped early" if failed else "done"
    if job.until_decided and failed is None:
        status = "decided" if job.looks and job.looks[-1]["verdict"] != "inconclusive" else "undecided"
    job.write_job(status)
    _say_foreign(job)
    _say(f"{status}: {len(job.a.runs)} run(s) of A, {len(job.b.runs)} of B; compare them with")
    print(job.compare_command(), flush=True)
    if failed is not None:
        if failed not in (130, 143):
            _say("a run stopped early (see above); the job stops there, completed runs are kept")
        return failed
    return verdict_rc if job.until_decided else 0
