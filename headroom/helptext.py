"""Help-text fragments that quote numbers, generated from the declarations they describe.

A number typed into a help text drifts away from the code (the compare epilog
once quoted Holm weights of 0.4/0.2/0.15/0.15/0.1 the code never used).  Every
fragment here reads the one place the number is declared:

* default between-run noise per metric: :data:`headroom.metrics.METRICS`
  (what :data:`headroom.noise.DEFAULTS` is built from);
* Holm starting weights: :func:`headroom.compare.power_weights` planned with
  :func:`headroom.compare.planned_se` (the computation a comparison runs), and
  the error rate's fixed share :data:`headroom.compare.WEIGHTS`;
* the defaults of ``--threshold``, ``--confidence``, ``--error-threshold`` and
  ``--run-noise``: the keyword defaults of :func:`headroom.compare.compare_runs`
  and :func:`headroom.history.analyse`;
* format names and tools: the registry :data:`headroom.formats.FORMATS`.

Nothing here is imported by ``import headroom``; the CLI calls these while it
builds its parser (tests/test_docs_numbers.py compares the docs with the same
sources).
"""

from __future__ import annotations

import inspect


def pct(x: float, *, argparse: bool = False) -> str:
    """A fraction as a percentage: ``0.27`` -> ``"27 %"`` (``argparse``: ``"27%%"`` for a help string)."""
    s = f"{100.0 * x:.1f}".removesuffix(".0")
    return f"{s}%%" if argparse else f"{s} %"


def metric_label(key: str) -> str:
    """What a reader calls a metric in prose: its declared name without "at matched steps"."""
    from .metrics import metric

    return metric(key).name.removesuffix(" at matched steps")


def noise_defaults() -> dict[str, float]:
    """``{key: sd}``: the default between-run noise of each deciding metric that declares one."""
    from .metrics import deciding

    return {m.key: m.noise for m in deciding() if m.noise is not None}


def noise_defaults_text() -> str:
    """The default noise of a run, per metric: "plateau throughput 27 %, p50 latency 27 %, ..."."""
    return ", ".join(f"{metric_label(k)} {pct(sd)}" for k, sd in noise_defaults().items())


def keyword_default(func, name: str):
    """The default of keyword ``name`` in ``func``'s signature (the library's default)."""
    return inspect.signature(func).parameters[name].default


def compare_defaults() -> dict[str, float]:
    """``threshold``, ``confidence``, ``error_threshold``: the defaults of compare_runs."""
    from .compare import compare_runs

    return {k: keyword_default(compare_runs, k) for k in ("threshold", "confidence", "error_threshold")}


def history_defaults() -> dict[str, float]:
    """``threshold``, ``run_noise``: the defaults of history.analyse."""
    from .history import analyse

    return {k: keyword_default(analyse, k) for k in ("threshold", "run_noise")}


def default_help(value: float) -> str:
    """``"(default: 10%%)"`` for an argparse help string of a fraction option."""
    return f"(default: {pct(value, argparse=True)})"


#: the metric keys of the weighted Holm family, as a comparison of runs (not interleaved) names them
_HOLM_KEYS = ("cpu_s_per_req", "paired_plateau_rps", "p50_s", "p99_s")


def planned_weights(*, has_cpu: bool = True, runs: tuple[int, int] = (1, 1)) -> dict[str, float]:
    """The Holm starting weights a comparison of ``runs`` runs a side plans at the default threshold
    and confidence, errors judged (the same calls :func:`headroom.compare.compare_runs` makes)."""
    from .compare import Design, planned_se, power_weights

    d = compare_defaults()
    keys = [k for k in _HOLM_KEYS if has_cpu or k != "cpu_s_per_req"]
    planned = {k: planned_se(k, 0, Design(), runs) for k in keys}
    return power_weights(planned, True, d["threshold"], 1.0 - d["confidence"])


def _weight_label(key: str) -> str:
    special = {"paired_plateau_rps": "plateau throughput", "error_rate": "error rate"}
    return special.get(key) or metric_label(key)


def weights_text(*, has_cpu: bool = True) -> str:
    """The planned weights, largest first: ``CPU per request 0.85, plateau throughput 0.04, ...``."""
    w = planned_weights(has_cpu=has_cpu)
    return ", ".join(f"{_weight_label(k)} {v:.2f}" for k, v in sorted(w.items(), key=lambda kv: -kv[1]))


def holm_sentences() -> str:
    """The compare epilog's sentences on the weighted Holm procedure (unwrapped)."""
    from .compare import WEIGHTS

    return (
        'A weighted Holm procedure keeps the chance of any false "changed" within 1-confidence; '
        "the shares maximise the worst-case power over CPU-, throughput-, latency- and tail-led "
        "regressions of the threshold's size, each relative to what the whole budget would give it "
        "(the output and the JSON show the shares used). Holm weights of one run a side at the defaults: "
        f"{weights_text()}; without the server's CPU: {weights_text(has_cpu=False)} "
        f"(the error rate keeps {WEIGHTS['error_rate']:g})."
    )


def noise_clause() -> str:
    """The compare epilog's clause on the default between-run noise (unwrapped)."""
    return f"a per-metric default measured on a loaded shared machine: {noise_defaults_text()} a run"


def wrap(text: str, width: int = 90) -> str:
    """``text`` wrapped for a RawDescriptionHelpFormatter epilog."""
    import textwrap

    return textwrap.fill(text, width=width, break_on_hyphens=False)


def format_names() -> list[str]:
    """Every ``--format`` name, in registry order."""
    from .formats import FORMATS

    return list(FORMATS)


def tool_names() -> list[str]:
    """The load generators the registry reads, each once, in registry order (short names)."""
    from .formats import FORMATS

    out: list[str] = []
    for f in FORMATS.values():
        name = short_tool(f.tool)
        if name not in out:
            out.append(name)
    return out


def short_tool(tool: str) -> str:
    """A registry ``tool`` as prose names it: "hey (hey -o csv, ...)" -> "hey"."""
    name = tool.split(" (")[0]
    return {"Cloud Foundry throughputramp": "throughputramp"}.get(name, name)


def tools_text() -> str:
    """The tools, as the top-level help lists them: ``throughputramp, hey, vegeta, ...``."""
    return ", ".join(tool_names())
