"""The metrics of a verdict and of a history, declared once.

Each :class:`Metric` says what a number is (key, name, unit), which way is
better, the between-run noise assumed when no repeats measured it, and whether
it *decides* (a verdict or a history's exit code can turn on it) or is only
*shown* beside the verdict.  history, history_view, serialize, text, html and
plot read this table; headroom/compare/specs.py and noise.py's defaults are written so
that they can read it too (WIRING.md).  The next metric is one entry here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """One metric.

    Attributes
    ----------
    key
        The JSON key, with its unit in the name (``p99_s``, ``rss_bytes``).
    name
        What a reader sees ("CPU per request at matched steps").
    short
        A column header ("CPU/req").
    unit
        ``req/s``, ``s``, ``fraction``, ``bytes``.
    better
        ``"higher"`` or ``"lower"``.
    noise, noise_df
        Default between-run noise: the sd of a run's log value (a fraction) and its
        degrees of freedom, measured on a shared 2-core machine (noise.DEFAULTS, docs/ci.md);
        None where none is assumed.
    decides
        True: a verdict may turn on it; False: shown, never judged.
    history
        Whether a history follows it across releases.
    """

    key: str
    name: str
    short: str
    unit: str
    better: str
    noise: float | None = None
    noise_df: int | None = None
    decides: bool = True
    history: bool = True

    def __post_init__(self):
        if self.better not in ("higher", "lower"):
            raise ValueError(f"metric {self.key}: better must be 'higher' or 'lower', not {self.better!r}")

    def _repr_html_(self) -> str:
        from html import escape

        return f"<code>{escape(repr(self))}</code>"


#: every metric, in display order
METRICS: tuple[Metric, ...] = (
    Metric("plateau_rps", "plateau throughput", "plateau req/s", "req/s", "higher", 0.27, 11),
    Metric("capacity_rps", "modelled capacity (USL)", "USL cap req/s", "req/s", "higher"),
    Metric("rps_at_objective", "throughput at the objective", "at obj req/s", "req/s", "higher"),
    Metric("p50_s", "p50 latency at matched steps", "p50", "s", "lower", 0.27, 11),
    Metric(
        "p90_s", "p90 latency at matched steps", "p90", "s", "lower", 0.31, 11, decides=False, history=False
    ),
    Metric("p99_s", "p99 latency at matched steps", "p99", "s", "lower", 0.30, 11),
    Metric("cpu_s_per_req", "CPU per request at matched steps", "CPU/req", "s", "lower", 0.06, 11),
    Metric("error_rate", "error rate at matched steps", "errors", "fraction", "lower"),
    Metric("rss_bytes", "server resident memory at matched steps", "RSS", "bytes", "lower", decides=False),
)

BY_KEY = {m.key: m for m in METRICS}


def deciding(*, history: bool = False) -> tuple[Metric, ...]:
    """The metrics a verdict may turn on (``history``: those a history follows)."""
    return tuple(m for m in METRICS if m.decides and (m.history or not history))


def shown(*, history: bool = False) -> tuple[Metric, ...]:
    """The metrics shown beside a verdict, never judged (``history``: those a history follows)."""
    return tuple(m for m in METRICS if not m.decides and (m.history or not history))


def in_history() -> tuple[Metric, ...]:
    """Every metric a history follows, deciding or shown, in display order."""
    return tuple(m for m in METRICS if m.history)


def metric(key: str) -> Metric:
    """The declaration of ``key`` (KeyError naming the known keys)."""
    try:
        return BY_KEY[key]
    except KeyError:
        raise KeyError(f"unknown metric {key!r}; known: {', '.join(BY_KEY)}") from None


def noise_defaults() -> dict[str, tuple[float, int]]:
    """``{key: (sd, df)}`` of the metrics with a default noise (the shape of noise.DEFAULTS)."""
    return {m.key: (m.noise, m.noise_df) for m in METRICS if m.noise is not None and m.noise_df is not None}


def as_tuples(metrics=None) -> tuple[tuple[str, str, str, str], ...]:
    """``(key, name, unit, better)`` of the metrics (the shape history's METRICS has had)."""
    return tuple((m.key, m.name, m.unit, m.better) for m in (METRICS if metrics is None else metrics))
