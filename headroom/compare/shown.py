"""Figures shown beside the verdict, never judged: peak step, the USL model's capacity and knee,
the throughput at the objective (means over each side's runs)."""

from __future__ import annotations

import numpy as np

from .result import Metric

ROWS = (
    ("peak_step_rps", "peak step throughput", "highest single step: the noisiest figure there is"),
    ("capacity_rps", "modelled capacity (USL)", "highest modelled throughput in the measured range"),
    ("knee_rps", "knee (USL, max power)", "where latency starts to cost more than throughput gains"),
    ("rps_at_objective", "throughput at the objective", "interpolated between steps"),
)


def _missing_note(sides) -> str:
    poor = any(s.capacity.model is not None and not s.capacity.model.trusted for side in sides for s in side)
    return (
        "a run's model fits poorly (R2 of log throughput below 0.5)"
        if poor
        else "not available for every run"
    )


def shown(sides) -> list[Metric]:
    """Run-level figures shown beside the verdict (means over a side's runs), not decisive."""
    out = []
    for key, name, note in ROWS:
        if key == "rps_at_objective" and sides[0][0].capacity.objective is None:
            continue
        vals = [[getattr(s.capacity, key) for s in side] for side in sides]
        if any(v is None for side in vals for v in side):
            b = c = ch = None
            note = _missing_note(sides)
        else:
            b, c = float(np.mean(vals[0])), float(np.mean(vals[1]))
            ch = c / b - 1.0 if b > 0 else None
        if key == "capacity_rps" and any(
            s.capacity.model is not None and not s.capacity.model.peak_reached for side in sides for s in side
        ):
            note += "; a run still rose at its last step (its capacity is a lower bound)"
        if key == "rps_at_objective":
            held = [
                role
                for role, side in zip(("the baseline", "the candidate"), sides)
                if any(s.capacity.at_objective and s.capacity.at_objective.lower_bound for s in side)
            ]
            if held:
                who = " and ".join(held)
                note += f"; {who} held the objective at every step ({'lower bounds' if len(held) > 1 else 'a lower bound'})"
        out.append(Metric(key, name, "req/s", "higher", False, b, c, ch, None, 0.0, "shown", note))
    return out
