"""Baseline against candidate at matched load: tests, an error budget and a gate's verdict.

The stages, one module each (data flows down the list):

* :mod:`.pairing` -- which baseline step is compared with which candidate
  step (by concurrency; replicates of a level pair j with j);
* :mod:`.specs` -- what is judged: plateau throughput, p50, the tail
  percentile, CPU per request (p90 shown), and each metric's value at a step;
* :mod:`.tests` -- each metric's change with its standard error and p-value:
  the run-level test for runs recorded apart, the model across load
  (:mod:`.across_load`) for interleaved recordings, the error rate's
  two-proportion test; :mod:`.learned` -- noise learned with ``--noise-from``;
* :mod:`.budget` -- the error budget: maximin weights over the kinds of
  regression, and the weighted Holm procedure;
* :mod:`.decision` -- each metric's judgement, the verdict, its exit code and
  the runs that would decide;
* :mod:`.wording` -- notes, warnings and phrases; :mod:`.schema` -- the JSON;
* :mod:`.pipeline` -- :func:`compare_runs`, the stages in order, with one
  :class:`.options.CompareOptions` carried whole.

How a verdict is reached, in short (docs/ci.md has it in full):

1. **Pairs.** Steps are paired by concurrency (the matched condition).
2. **Changes.** Runs recorded apart: per run and metric the mean log value
   over the matched pairs, the change the difference of the sides' means,
   its noise between runs (learned, repeats, or a default for a shared
   machine).  Interleaved recordings (A and B alternating within every level,
   usually two pairs per level): the paired log ratios fitted as a smooth
   function of log load, the noise measured from pairs at the same level and
   the levels around the fit, tested for "no change at any level".
3. **Error budget.** A weighted Holm procedure over CPU per request,
   throughput, p50, the tail percentile and the error rate, its weights
   maximising the worst-case power over CPU-, throughput-, latency- and
   tail-led regressions of the threshold's size.
4. **Decision** per metric, as in asv: worse/better needs Holm to find a
   change and a change of at least the threshold (on average, or at a level
   whose simultaneous interval excludes no change); same needs the interval
   inside +-threshold.
5. **Verdict**: regressed (exit 1), improved / no change / no regression
   (exit 0), or inconclusive (exit 3) with the runs that would decide.
"""

from __future__ import annotations

import importlib

#: the public names and the stage module each lives in, imported when first asked for (so that
#: ``headroom.compare.options`` can be read without the whole verdict machinery: the CLI's parent
#: process of ``headroom report`` never computes a verdict)
_WHERE = {
    "WEIGHTS": "budget",
    "planned_se": "budget",
    "power_weights": "budget",
    "weighted_holm": "budget",
    "learn_noise": "learned",
    "measure_noise": "measure",
    "measure_paired_noise": "measure",
    "CompareOptions": "options",
    "pair_steps": "pairing",
    "Design": "pipeline",
    "compare_runs": "pipeline",
    "partners": "pipeline",
    "COMPARE_SCHEMA": "result",
    "EXIT_CODES": "result",
    "Comparison": "result",
    "LevelChange": "result",
    "Metric": "result",
    "Noise": "result",
    "StepPair": "result",
    "to_json": "schema",
    "errors_unknown": "tests",
    "run_level_test": "tests",
    "describe": "wording",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
