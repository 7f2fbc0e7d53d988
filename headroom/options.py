"""How runs are read, in one object: built once from the command line, carried to the notebooks.

``summary``, ``compare``, ``report`` and ``history`` read runs with the same
options; before this module each route copied them by hand, which is how
``report`` came to refuse ``--hey-start``, ``--format`` and ``--steps``.
:class:`ReadOptions` is built from argparse's namespace, passed to
:func:`headroom.reduce_run` whole, and to papermill as a plain dict
(``to_dict``/``from_dict``), so a report reads exactly what the terminal read.
:func:`headroom.reduce_run` takes it whole (``options=``) and carries it to
the readers; nothing copies its fields into keyword parameters on the way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from .compare.options import CompareOptions as _CompareOptions


@dataclass(frozen=True)
class ReadOptions:
    """Reading options shared by every command (None: the reader's default).

    Attributes
    ----------
    cpu_cores
        Cores that 100 % in a single-column CPU file stands for.
    skip_bad_rows
        Drop unparsable request rows (counted in a warning) instead of failing.
    hey_start_ns
        Absolute start of a hey run whose offsets are relative, ns since the epoch.
    format
        Force a reader by name instead of detecting it from the content.
    steps
        Cut a run without steps of its own: a duration ("10s") or start times ("0,10,20").
    concurrency
        The concurrency of every step when the file does not say ("1:40:3" or "1,2,4").
    name
        Keep only the requests of this name (an endpoint: Locust's request name).
    """

    cpu_cores: float | None = None
    skip_bad_rows: bool = False
    hey_start_ns: int | None = None
    format: str | None = None
    steps: str | None = None
    concurrency: str | None = None
    name: str | None = None

    @classmethod
    def from_args(cls, args) -> ReadOptions:
        """From an argparse namespace (options a subcommand lacks stay default)."""
        return cls(
            cpu_cores=getattr(args, "cpu_cores", None) or None,
            skip_bad_rows=bool(getattr(args, "skip_bad_rows", False)),
            hey_start_ns=getattr(args, "hey_start", None),
            format=getattr(args, "format", None),
            steps=getattr(args, "steps", None),
            concurrency=getattr(args, "concurrency", None),
            name=getattr(args, "request_name", None),
        )

    def to_dict(self) -> dict:
        """Plain values (papermill writes them as Python literals; the history cache hashes them)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> ReadOptions:
        """Back from :meth:`to_dict` (unknown keys refused, missing ones default)."""
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        extra = sorted(set(d) - known)
        if extra:
            raise ValueError(f"unknown reading option(s): {', '.join(extra)}")
        return cls(**d)

    def reduce_kwargs(self) -> dict:
        """Keywords for :func:`headroom.reduce_run`: the options, whole (``options=self``)."""
        return {"options": self}


#: the library's defaults, declared once (headroom.compare.options; a light module)
_COMPARE = _CompareOptions()


@dataclass(frozen=True)
class VerdictOptions:
    """What the verdict is computed with: the options ``compare`` and ``report`` share.

    ``headroom report`` states the verdict ``headroom compare`` gives only when
    both compute it with the same settings; this object is built once from the
    command line and travels whole (as a plain dict) into the comparison
    notebook, where :func:`headroom.report.compare_sides` hands it to
    :func:`headroom.compare.compare_runs`.

    The latency objective is an analysis option (it changes the summaries as
    well as the tail metric); it travels beside this object.

    Attributes
    ----------
    threshold
        Smallest relative change worth calling.
    error_threshold
        Rise of the error rate (a fraction: 0.001 is 0.1 points) called a regression.
    confidence
        Family-wide confidence of the decision metrics.
    noise_from
        Earlier runs of one unchanged build, or one ``headroom history --json`` file.
    accept_mismatch
        Judge runs that do not measure the same thing (a truncated side, other URLs, generators or
        plans) instead of answering inconclusive (exit 3).
    """

    threshold: float = _COMPARE.threshold
    error_threshold: float = _COMPARE.error_threshold
    confidence: float = _COMPARE.confidence
    noise_from: tuple[str, ...] = ()
    accept_mismatch: bool = False

    def __post_init__(self):
        object.__setattr__(self, "noise_from", tuple(str(p) for p in self.noise_from))

    @classmethod
    def from_args(cls, args) -> VerdictOptions:
        """From an argparse namespace of ``compare`` or ``report`` (options it lacks stay default)."""
        d = cls()
        return cls(
            threshold=_given(args, "threshold", d.threshold),
            error_threshold=_given(args, "error_threshold", d.error_threshold),
            confidence=_given(args, "confidence", d.confidence),
            noise_from=tuple(getattr(args, "noise_from", None) or ()),
            accept_mismatch=bool(getattr(args, "accept_mismatch", False)),
        )

    def to_dict(self) -> dict:
        """Plain values (papermill writes them as Python literals)."""
        d = asdict(self)
        d["noise_from"] = list(self.noise_from)
        return d

    @classmethod
    def from_dict(cls, d: dict | None) -> VerdictOptions:
        """Back from :meth:`to_dict` (unknown keys refused, missing ones default)."""
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        extra = sorted(set(d) - known)
        if extra:
            raise ValueError(f"unknown verdict option(s): {', '.join(extra)}")
        return cls(**d)

    def compare_options(self, objective=None) -> _CompareOptions:
        """The library's options object (:class:`headroom.compare.CompareOptions`) with an objective."""
        return _CompareOptions(objective, self.threshold, self.error_threshold, self.confidence)


def _given(args, name: str, default: float) -> float:
    v = getattr(args, name, None)
    return default if v is None else float(v)
