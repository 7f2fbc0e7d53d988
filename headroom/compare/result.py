"""The comparison's result objects: a metric's judgement, a step pair, the noise used, the comparison.

Small frozen objects (the JSON of :mod:`headroom.compare.schema` and
:mod:`headroom.serialize` writes and reads them); nothing here computes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._json import SCHEMAS
from ..model import Objective, render_html
from ..noise import NoiseEstimate

COMPARE_SCHEMA = SCHEMAS["comparison"]
EXIT_CODES = {"improved": 0, "no change": 0, "no regression": 0, "regressed": 1, "inconclusive": 3}


@dataclass(frozen=True)
class LevelChange:
    """A metric's change at one load level (interleaved recordings).

    ``change`` is the change fitted across load (candidate / baseline - 1) at ``load``,
    ``ci`` its simultaneous interval (Scheffe: every level's at once, at the metric's Holm
    level); ``raw`` the level's own mean paired log ratio as a relative change, ``raw_ci`` its
    Bonferroni-simultaneous interval (what "worse at c=1" is judged on: it does not lean on the
    line); ``pairs`` the pairs measured there.
    """

    load: float
    change: float
    ci: tuple[float, float]
    raw: float
    pairs: int
    kind: str = "concurrency"  # or "rate" (req/s of an open loop), "step" (load unknown: its position)
    raw_ci: tuple[float, float] | None = None  # the level's own mean: Bonferroni-simultaneous interval

    def where(self) -> str:
        """``c=4``, ``500 req/s`` or ``step 3``."""
        if self.kind == "rate":
            return f"{self.load:g} req/s"
        return f"step {self.load:g}" if self.kind == "step" else f"c={self.load:g}"


@dataclass(frozen=True)
class Metric:
    """One compared quantity: both sides' values, the relative change and its interval.

    ``ci`` is the interval at ``level``, the confidence at which the
    weighted Holm procedure tested this metric (so it excludes no change
    exactly when the test found a change); ``bound`` is the one-sided 95 %
    bound of the change in the worse direction (the non-inferiority check);
    ``mdc`` the smallest change this design detects with 80 % power.
    ``levels`` (interleaved recordings) the change at every load level from
    the model across load, with simultaneous intervals; ``test`` one line on
    how "changed at all" was tested.
    """

    key: str
    name: str
    unit: str
    better: str  # "lower" or "higher"
    decides: bool
    baseline: float | None
    candidate: float | None
    change: float | None  # candidate / baseline - 1 (for the error rate: the difference)
    ci: tuple[float, float] | None
    threshold: float
    decision: str  # worse, better, same, unclear, not judged, shown
    note: str = ""
    pairs: int = 0
    noise: NoiseEstimate | None = None  # noise used for this metric
    level: float | None = None
    bound: float | None = None
    mdc: float | None = None
    pvalue: float | None = None
    se: float | None = None  # standard error of the log change
    weight: float | None = None  # share of the family's error budget it started the Holm procedure with
    levels: tuple[LevelChange, ...] = ()
    test: str = ""
    decided_at: float | None = None  # the load of the level whose own change decided worse/better

    def decided_level(self) -> LevelChange | None:
        """The level whose own change decided the metric (None: the average decided, or none did)."""
        if self.decided_at is None:
            return None
        return next((lc for lc in self.levels if lc.load == self.decided_at), None)

    @property
    def run_noise(self) -> float | None:
        return None if self.noise is None else self.noise.sd

    def largest(self, worse: bool = True) -> LevelChange | None:
        """The level whose fitted change is largest (in the worse direction, or in size)."""
        if not self.levels:
            return None
        sign = 1.0 if self.better == "lower" else -1.0
        key = (lambda lc: sign * lc.change) if worse else (lambda lc: abs(lc.change))
        return max(self.levels, key=key)


@dataclass(frozen=True)
class StepPair:
    """A baseline step matched with a candidate step (one per run of each side)."""

    concurrency: float | None
    baseline_steps: tuple[int, ...]
    candidate_steps: tuple[int, ...]
    plateau: bool
    baseline: dict  # key -> value (geometric mean over the side's runs)
    candidate: dict

    def change(self, key: str) -> float | None:
        b, c = self.baseline.get(key), self.candidate.get(key)
        if b is None or c is None or not (b > 0):
            return None
        return c / b - 1.0


@dataclass(frozen=True)
class Noise:
    """How between-run noise entered the intervals: the source of each metric's noise."""

    source: str  # "default", "learned", "repeats", "interleaved[, learned]"
    runs: tuple[int, int]

    def describe(self) -> str:
        """How between-run noise entered the intervals, in one sentence."""
        if self.source.startswith("interleaved"):
            n = self.runs[0]
            learned = " and earlier interleaved A/A recordings" if "learned" in self.source else ""
            return (
                f"between-run noise: none to account for: A and B alternated within every load level of "
                f"{n} interleaved recording{'s' if n > 1 else ''}; the change of each metric is fitted across "
                f"load and judged against the spread of the pairs at the same level and of the levels around "
                f"the fit (measured here{learned})"
            )
        if self.source not in ("default", "learned", "repeats"):  # read from an older schema
            return f"between-run noise: {self.source} (a comparison of an older schema)"
        if self.source == "default":
            return (
                "between-run noise: per-metric defaults for a shared CI machine (docs/ci.md); "
                "--noise-from A/A runs or repeat runs would measure it"
            )
        if self.source == "learned":
            extra = f" and the {self.runs[0]} + {self.runs[1]} repeat runs" if max(self.runs) > 1 else ""
            return f"between-run noise: learned from earlier runs of an unchanged build{extra}"
        return (
            f"between-run noise: measured from the {self.runs[0]} + {self.runs[1]} repeat runs, pooled with "
            "the per-metric defaults (--noise-from A/A runs replaces the defaults)"
        )


@dataclass(frozen=True)
class Comparison:
    """The outcome of :func:`headroom.compare.compare_runs`."""

    verdict: str
    reason: str
    metrics: list[Metric]
    pairs: list[StepPair]
    pairing: str
    baseline_labels: list[str]
    candidate_labels: list[str]
    threshold: float
    error_threshold: float
    confidence: float
    noise: Noise
    objective: Objective | None
    notes: list[str]
    warnings: list[str] = field(default_factory=list)
    runs_needed: int | None = None  # runs per side that would most likely decide an inconclusive verdict
    primary: str = ""
    holm_weights: dict = field(default_factory=dict)
    design: str = "runs"  # "runs" (run-level test) or "interleaved steps" (paired levels)
    stopped: list = field(default_factory=list)  # headroom.stopped.Stop of every run that stopped answering
    # where the CPU went: headroom.profiles.diff.ProfileDiff when both sides have step profiles
    profile_diff: object = None
    #: every request name both sides carry, judged (headroom.compare.endpoints.EndpointVerdict), the most
    #: requested first; empty when a side's requests carry fewer than two names
    endpoints: list = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def weights(self) -> dict:
        """The weighted Holm procedure's starting weights (shares of the family's error budget)."""
        from .budget import WEIGHTS

        return dict(self.holm_weights) if self.holm_weights else dict(WEIGHTS)

    def metric(self, key: str) -> Metric:
        return next(m for m in self.metrics if m.key == key)

    def __repr__(self) -> str:
        return f"<Comparison {self.verdict}: {self.reason}>"

    def _repr_html_(self) -> str:
        return render_html("Comparison", self)
