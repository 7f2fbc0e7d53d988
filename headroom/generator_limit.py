"""The load generator as the ceiling: when a run's capacity figures are the generator's, not the server's.

A ramp measures the server only while the load generator keeps up.  Any
engine can be the bottleneck (hey, vegeta, oha and Locust all run on the
same few cores as everything else, and Locust's Python users are slow): on a
busy machine Locust delivered 255-369 req/s to an nginx using 2.4 % of its
CPU, and the summary still printed "modelled capacity 381 req/s" as the
server's (issue 49).  Like a stop, the limit is a property of a **step**:

* **generator CPU**: ``headroom ramp`` records the generator's own CPU per
  step (``generator_cpu.per_step_percent`` in metadata.yml, percent of one
  core, and ``cores_available``); a step where it used at least
  :data:`CPU_SHARE` of what it may use was paced by the generator;
* **the generator busier than an idle server**: the server used under
  :data:`SERVER_IDLE_PCT` of one core while the generator used at least
  :data:`BUSIER` times as much, and at least :data:`GENERATOR_BUSY_PCT` (Locust
  at 37-54 % of a core beside an nginx at 1.5-16 %, recorded here on a busy
  machine): it gets what the others leave, and it was the one working; (a
  light generator beside a light nginx proxy whose upstream was the limit,
  hey at 28-44 % and the proxy at 14-20 %, is not flagged: the upstream's
  CPU is not the server's);
* **client-paced while the server idles**: the clients spent time outside
  requests (Little's law, ``StepTable.client_paced``) while the server's CPU
  stayed under :data:`SERVER_IDLE_PCT` of one core (runs without the
  generator's CPU: imported k6, JMeter, ... files).

A run is **generator-limited** when most of its highest-throughput steps
(:data:`TOP` of them, where its capacity figures come from) are: every
capacity figure is then a lower bound of the generator's, and every surface
says so first, with what to do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: a step whose generator used at least this share of the CPU it may use was paced by the generator
CPU_SHARE = 0.85
#: a server using less than this (% of one core) in a step was not what held its throughput down, when
#: the generator worked harder (BUSIER times its CPU) or the clients spent time outside requests
SERVER_IDLE_PCT = 25.0
BUSIER = 3.0
#: ... and the generator itself busy: at least this (% of one core); a light generator beside a light
#: server waits on something else (an nginx proxy's upstream, which its CPU does not include)
GENERATOR_BUSY_PCT = 25.0
#: the highest-throughput steps a run's capacity figures come from; most of them limited: the run is
TOP = 3


@dataclass(frozen=True)
class GeneratorLimit:
    """Why a run's capacity figures are the load generator's: the steps, the evidence, the remedy."""

    engine: str | None
    steps: tuple[int, ...]  # limited steps among the top ones (0-based step indices)
    top: tuple[int, ...]  # the run's highest-throughput steps
    evidence: str  # what was seen, one clause

    @property
    def status(self) -> str:
        return "generator_limited"

    def sentence(self) -> str:
        """The sentence said first on every surface."""
        who = self.engine or "the load generator"
        steps = ", ".join(str(k + 1) for k in self.steps)
        return (
            f"GENERATOR-LIMITED: {who} set the ceiling, not the server ({self.evidence}; steps {steps}: "
            f"{len(self.steps)} of the {len(self.top)} with the most throughput): every capacity figure is a "
            f"lower bound of the generator's; {self.remedy()}"
        )

    def remedy(self) -> str:
        """What to do, for the engine that was the ceiling."""
        if self.engine == "locust":
            return (
                "record again with more Locust processes (--engine-arg=--processes=N) or a lighter engine "
                "(hey, oha)"
            )
        return (
            "record again with the generator on cores of its own (or more of them, or another machine), "
            "or with more connections where it waited on the clients"
        )

    def to_dict(self) -> dict:
        return {
            "status": self.status,
            "engine": self.engine,
            "steps": [k + 1 for k in self.steps],
            "evidence": self.evidence,
            "sentence": self.sentence(),
        }


def _generator_cpu(run) -> tuple[np.ndarray | None, float | None]:
    """(generator CPU per step, % of one core) and what it may use (% of one core), from metadata."""
    fields = run.meta.fields if run.meta is not None else {}
    g = fields.get("generator_cpu") if isinstance(fields, dict) else None
    if not isinstance(g, dict):
        return None, None
    pct, cores = g.get("per_step_percent"), g.get("cores_available")
    if not isinstance(pct, list) or not isinstance(cores, (int, float)) or cores <= 0:
        return None, None
    try:
        return np.array([np.nan if v is None else float(v) for v in pct]), 100.0 * float(cores)
    except (TypeError, ValueError):
        return None, None


def _engine(run) -> str | None:
    fields = run.meta.fields if run.meta is not None else {}
    for key in ("engine", "tool"):
        v = fields.get(key) if isinstance(fields, dict) else None
        if isinstance(v, str) and v:
            return v
    return None


def limited_steps(run, table) -> tuple[np.ndarray, list[str]]:
    """Per step of ``table``: paced by the generator or not, and the evidence found (clauses)."""
    n = len(table)
    out = np.zeros(n, dtype=bool)
    evidence: list[str] = []
    gen, cap = _generator_cpu(run)
    gen = gen if gen is not None and len(gen) == n else None
    # the server's CPU per step in % of one core (cpu_pct is % busy of the run's cpu_cores)
    server = np.asarray(table.cpu_pct, dtype=float) * float(getattr(table, "cpu_cores", 1.0) or 1.0)
    known = np.isfinite(server)
    idle = known & (server < SERVER_IDLE_PCT)
    if gen is not None:
        hot = np.isfinite(gen) & (gen >= CPU_SHARE * cap)
        if hot.any():
            evidence.append(
                f"its own CPU at {float(np.nanmax(gen[hot])):.0f} % of the {cap:.0f} % it may use"
            )
        busier = (
            idle & np.isfinite(gen) & (gen >= BUSIER * np.maximum(server, 0.0)) & (gen >= GENERATOR_BUSY_PCT)
        )
        if busier.any():
            evidence.append(
                f"its own CPU {float(np.nanmin(gen[busier])):.0f}-{float(np.nanmax(gen[busier])):.0f} % of a core "
                f"while the server used {float(np.nanmin(server[busier])):.1f}-{float(np.nanmax(server[busier])):.1f} %"
            )
        out |= hot | busier
    paced = table.client_paced & idle
    if paced.any():
        evidence.append(
            f"clients outside requests (Little's law) while the server used at most "
            f"{float(np.nanmax(server[paced])):.1f} % of a core"
        )
    out |= paced
    return out, evidence


def generator_limit(run, table) -> GeneratorLimit | None:
    """The run's generator limit (:class:`GeneratorLimit`) when most of its top steps were paced by the
    generator; None when the server (or nothing known) set the ceiling."""
    rps = np.asarray(table.rps, dtype=float)
    ok = np.flatnonzero(np.isfinite(rps) & (rps > 0))
    if len(ok) == 0:
        return None
    top = tuple(int(k) for k in ok[np.argsort(-rps[ok], kind="stable")][:TOP])
    limited, evidence = limited_steps(run, table)
    hit = tuple(k for k in sorted(top) if limited[k])
    if 2 * len(hit) <= len(top) or not evidence:
        return None
    return GeneratorLimit(_engine(run), hit, tuple(sorted(top)), "; ".join(evidence))
