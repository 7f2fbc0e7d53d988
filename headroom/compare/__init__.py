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

from .budget import WEIGHTS, planned_se, power_weights, weighted_holm
from .learned import learn_noise
from .measure import measure_noise, measure_paired_noise
from .options import CompareOptions
from .pairing import pair_steps
from .pipeline import Design, compare_runs, partners
from .result import COMPARE_SCHEMA, EXIT_CODES, Comparison, LevelChange, Metric, Noise, StepPair
from .schema import to_json
from .tests import errors_unknown, run_level_test
from .wording import describe

__all__ = [
    "COMPARE_SCHEMA",
    "EXIT_CODES",
    "WEIGHTS",
    "CompareOptions",
    "Comparison",
    "Design",
    "LevelChange",
    "Metric",
    "Noise",
    "StepPair",
    "compare_runs",
    "describe",
    "errors_unknown",
    "learn_noise",
    "measure_noise",
    "measure_paired_noise",
    "pair_steps",
    "partners",
    "planned_se",
    "power_weights",
    "run_level_test",
    "to_json",
    "weighted_holm",
]
