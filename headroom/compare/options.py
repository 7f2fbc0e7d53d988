"""What a comparison is asked, in one object carried whole through the stages.

Built once by :func:`headroom.compare.compare_runs` from its keywords (the
CLI, the report and the notebooks give the same keywords), then read by the
pairing, the tests, the error budget and the decision; nothing copies its
fields into parameters on the way down.  ``to_dict``/``from_dict`` carry it
as plain values (papermill parameters, JSON).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a light module: the CLI reads its defaults without the analysis
    from ..model import Objective

#: smallest rise of the error rate (a fraction: 0.001 is 0.1 points) called a regression
ERROR_THRESHOLD = 0.001


@dataclass(frozen=True)
class CompareOptions:
    """The comparison's settings.

    Attributes
    ----------
    objective
        Latency objective: its percentile is the tail metric, and the throughput at it is shown.
    threshold
        Practical threshold: a smaller relative change is never called (0.10 = 10 %).
    error_threshold
        Smallest rise of the error rate (a fraction) called a regression.
    confidence
        Family-wide confidence: the chance that no metric is called changed when none changed.
    bucket_s
        Time bucket width for runs not yet analysed (does not change the decision).
    """

    objective: Objective | None = None
    threshold: float = 0.10
    error_threshold: float = ERROR_THRESHOLD
    confidence: float = 0.95
    bucket_s: float = 1.0

    @property
    def alpha(self) -> float:
        """The family's error budget, 1 - confidence."""
        return 1.0 - self.confidence

    def analyze_kwargs(self) -> dict:
        """Keywords for :func:`headroom.summary.analyze` of a run not yet analysed."""
        return {"objective": self.objective, "bucket_s": self.bucket_s}

    def to_dict(self) -> dict:
        return {
            "objective": None if self.objective is None else str(self.objective),
            "threshold": self.threshold,
            "error_threshold": self.error_threshold,
            "confidence": self.confidence,
            "bucket_s": self.bucket_s,
        }

    @classmethod
    def from_dict(cls, d: dict | None) -> CompareOptions:
        from ..model import parse_objective

        d = dict(d or {})
        obj = d.pop("objective", None)
        extra = sorted(set(d) - {"threshold", "error_threshold", "confidence", "bucket_s"})
        if extra:
            raise ValueError(f"unknown comparison option(s): {', '.join(extra)}")
        return cls(objective=parse_objective(obj) if obj else None, **d)
