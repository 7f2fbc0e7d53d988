"""Numbers quoted by the docs and by ``--help`` against the code that uses them (issue 30, item 2).

Every quoted weight, default noise, threshold, confidence and format list is
compared with the declaration it describes: ``headroom/metrics.py`` (default
noise per metric), ``headroom/compare/across_load.py`` DEFAULT_PAIR_SD (noise of a pair),
``compare.power_weights`` planned as a comparison plans it (Holm weights),
the keyword defaults of ``compare_runs`` / ``history.analyse``, and the
format registry.  The text side is read two ways:

* **sentences**, anywhere in docs/ci.md, docs/report.md, README.md and the
  rendered ``--help`` of every command: a sentence about Holm or weights
  quotes weights (decimals next to a metric name); a sentence about the
  default or assumed noise quotes noise (``N %`` next to a metric name, or
  ``N % per run``); ``threshold (N %)``, ``--confidence ... N %`` and ``the
  N % error budget`` quote the defaults.  A metric name and a number in the
  same clause (between ``, ; : ( )``) belong together, so rewording a
  sentence keeps it checked, and a wrong number fails.
* **anchors** for what a sentence rule cannot read: an HTML comment
  ``<!-- checked: KIND ... -->`` on the line before a block (a paragraph or a
  table, up to the next blank line) checks the block as KIND: ``noise``
  (table rows: metric, then its default), ``pair-noise``, ``weights``,
  ``formats`` (every tool of the registry named).

A number that cannot be matched to a metric is not checked; a check that
found nothing to compare fails (see the minimum counts), so the test cannot
pass by reading nothing.  scripts/plant_defects.sh plants a changed weight
and a changed default noise and shows this file failing.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from headroom import compare, history, metrics
from headroom.compare import across_load
from headroom.formats import FORMATS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("docs/ci.md", "docs/report.md", "README.md")

# --------------------------------------------------------------------------
# the code's values (computed here from the declarations, not through headroom.helptext)

#: how prose names each metric (longest first, so "plateau throughput" wins over "throughput")
ALIASES = (
    (r"CPU per request|CPU/request|CPU/req", ("cpu_s_per_req",)),
    (r"plateau throughput|throughput", ("plateau_rps",)),
    (r"error rate", ("error_rate",)),
    (r"\bp50\b|median latency", ("p50_s",)),
    (r"\bp90\b", ("p90_s",)),
    (r"\bp99\b|tail latency|\btail\b", ("p99_s",)),
    (r"\blatency\b", ("p50_s", "p99_s")),  # "latency" alone: every deciding latency
)


def metrics_in(clause: str) -> set[str]:
    """The metric keys a clause names ("latency" alone only when no percentile is named)."""
    found: set[str] = set()
    for pattern, keys in ALIASES:
        if re.search(pattern, clause, re.IGNORECASE):
            if keys == ("p50_s", "p99_s") and found & {"p50_s", "p90_s", "p99_s"}:
                continue
            found.update(keys)
        clause = re.sub(pattern, " ", clause, flags=re.IGNORECASE)
    return found


def code_noise() -> dict[str, float]:
    return {m.key: m.noise for m in metrics.METRICS if m.noise is not None}


def code_weights(has_cpu: bool) -> dict[str, float]:
    """Holm starting weights of one run a side at compare_runs' defaults, errors judged."""
    keys = ["paired_plateau_rps", "p50_s", "p99_s"] + (["cpu_s_per_req"] if has_cpu else [])
    planned = {k: compare.planned_se(k, 0, compare.Design(), (1, 1)) for k in keys}
    d = compare_defaults()
    w = compare.power_weights(planned, True, d["threshold"], 1.0 - d["confidence"])
    return {("plateau_rps" if k == "paired_plateau_rps" else k): v for k, v in w.items()}


def compare_defaults() -> dict[str, float]:
    import inspect

    sig = inspect.signature(compare.compare_runs).parameters
    return {k: sig[k].default for k in ("threshold", "confidence", "error_threshold")}


# --------------------------------------------------------------------------
# reading numbers out of text

NUM = r"(\d+(?:\.\d+)?)(?:\s?-\s?(\d+(?:\.\d+)?))?"


@dataclass(frozen=True)
class Quote:
    where: str  # file or command, and the sentence
    what: str  # metric key or setting
    low: float  # the number as written (a range: low-high)
    high: float
    code: float  # the code's value, in the same unit as the quote

    @property
    def ok(self) -> bool:
        decimals = max(_decimals(self.low), _decimals(self.high))
        tol = 0.5 * 10.0**-decimals + 1e-9
        return self.low - tol <= self.code <= self.high + tol

    def __str__(self) -> str:
        said = f"{self.low:g}" if self.low == self.high else f"{self.low:g}-{self.high:g}"
        return f"{self.where}: {self.what} quoted as {said}, the code uses {self.code:.4g}"


def _decimals(x: float) -> int:
    s = f"{x:g}"
    return len(s.split(".")[1]) if "." in s else 0


#: a line that starts a new piece of text: a heading, a list item, a table row, an option of --help
NEW_PIECE = re.compile(r"\s*(#|\d+\.\s|[-*]\s|\||-{1,2}[a-z])")


def pieces(text: str) -> list[str]:
    """Paragraphs, list items, table rows and --help options, each on its own."""
    out: list[list[str]] = []
    for para in re.split(r"\n\s*\n", text):
        for line in para.splitlines():
            if not out or NEW_PIECE.match(line) or not out[-1]:
                out.append([])
            out[-1].append(line)
        out.append([])
    return ["\n".join(p) for p in out if p]


def sentences(text: str) -> list[str]:
    """Sentences of prose (lines joined; a period inside a number does not end one)."""
    out = []
    for piece in pieces(text):
        flat = re.sub(r"\s+", " ", piece.replace("`", ""))
        out += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(*])", flat) if s.strip()]
    return out


def clauses(sentence: str) -> list[str]:
    return [c for c in re.split(r"[,;:()]|\band\b(?=[^,;:]*\d)", sentence) if c.strip()]


def _ranges(clause: str, percent: bool) -> list[tuple[float, float]]:
    out = []
    for m in re.finditer(NUM + r"(\s?%)?", clause):
        if bool(m.group(3)) != percent or (not percent and "." not in m.group(0)):
            continue
        if clause[max(0, m.start() - 1) : m.start()] in ("-", "+", "x"):  # r = -0.99, +0.45
            continue
        low = float(m.group(1))
        out.append((low, float(m.group(2)) if m.group(2) else low))
    return out


def metric_quotes(where: str, sentence: str, percent: bool, values) -> list[Quote]:
    """Every (metric, number) pair in the clauses of ``sentence``; ``values(clause)`` gives the code's."""
    out = []
    for clause in _joined_clauses(sentence):
        keys, nums = metrics_in(clause), _ranges(clause, percent)
        code = values(clause)
        for key in sorted(keys & set(code)):
            for low, high in nums[:1]:
                out.append(Quote(f"{where}: {sentence[:160]!r}", key, low, high, code[key]))
    return out


HAS_NUMBER = re.compile(r"(?<![\w.])\d")  # a number, not the 50 of p50


def _joined_clauses(sentence: str) -> list[str]:
    """Clauses, a metric-only clause joined to the number-only one after it ("p50 and tail latency 0.15")."""
    out, parts = [], clauses(sentence)
    for i, c in enumerate(parts):
        nxt = next((p for p in parts[i + 1 :] if HAS_NUMBER.search(p)), None)
        if metrics_in(c) and not HAS_NUMBER.search(c) and nxt is not None and not metrics_in(nxt):
            out.append(c + " " + nxt)
        else:
            out.append(c)
    return out


def weight_values(sentence: str):
    """The weights a clause speaks of: without the server's CPU after "without", else with it."""
    cut = sentence.lower().find("without")
    return lambda clause: code_weights(not (cut >= 0 and sentence.lower().find(clause.lower()) > cut))


def sentence_quotes(where: str, text: str) -> list[Quote]:
    """Quotes found by the sentence rules (weights, default noise, threshold, confidence)."""
    out = []
    d = compare_defaults()
    for s in sentences(text):
        low = s.lower()
        if re.search(r"holm|weight|share of", low):
            out += metric_quotes(where, s, False, weight_values(s))
        if "noise" in low and ("default" in low or "assumed" in low):
            out += metric_quotes(where, s, True, lambda c: {k: 100 * v for k, v in code_noise().items()})
            for m in re.finditer(NUM + r"\s?% (?:per run|a run)", s):
                if not metrics_in(s[max(0, m.start() - 40) : m.start()]):
                    out.append(_any_default_noise(where, s, float(m.group(1))))
        for m in re.finditer(r"threshold\s*\((?:default:?\s*)?" + NUM + r"\s?%\)", s, re.IGNORECASE):
            out.append(Quote(f"{where}: {s[:160]!r}", "threshold", float(m.group(1)), float(m.group(1)),
                             100 * d["threshold"]))  # fmt: skip
        out += _confidence_quotes(f"{where}: {s[:160]!r}", s, d["confidence"])
        for m in re.finditer(r"(\d+)\s?% error budget|--confidence[^.]*?\(" + NUM + r"\s?%\)", s):
            q = float(m.group(1) or m.group(2))
            code = 100 * (1 - d["confidence"]) if m.group(1) else 100 * d["confidence"]
            out.append(Quote(f"{where}: {s[:160]!r}", "confidence", q, q, code))
    return out


def _confidence_quotes(where: str, s: str, confidence: float) -> list[Quote]:
    """``one-sided N %`` (the non-inferiority bound: the confidence) and the ``N % interval`` of *same*
    (two one-sided tests at 1 - confidence each: 1 - 2 (1 - confidence))."""
    out = []
    for m in re.finditer(r"one-sided " + NUM + r"\s?%", s):
        out.append(Quote(where, "confidence", float(m.group(1)), float(m.group(1)), 100 * confidence))
    for m in re.finditer(r"\bsame\b[^.]*?" + NUM + r"\s?% interval", s, re.IGNORECASE):
        q = float(m.group(1))
        out.append(Quote(where, "interval of same", q, q, 100 * (1 - 2 * (1 - confidence))))
    return out


def _any_default_noise(where: str, sentence: str, value: float) -> Quote:
    """``assumed N % per run`` with no metric named: N must be some metric's default."""
    code = min((100 * v for v in code_noise().values()), key=lambda v: abs(v - value))
    return Quote(f"{where}: {sentence[:160]!r}", "default noise of some metric", value, value, code)


# --------------------------------------------------------------------------
# anchored blocks in the docs


ANCHOR = re.compile(r"<!--\s*checked:\s*([\w\s-]+?)\s*-->")


def anchored(text: str) -> list[tuple[set[str], str]]:
    """``(kinds, block)`` for every ``<!-- checked: KIND ... -->`` anchor: alone on a line, the block
    is what follows up to a blank line; at the end of a line (a list item), that item."""
    return [(kinds, "\n".join(block)) for kinds, block, _ in _anchored_lines(text.splitlines())]


def _anchored_lines(lines: list[str]):
    for i, line in enumerate(lines):
        m = ANCHOR.search(line)
        if not m:
            continue
        inline = bool(ANCHOR.sub("", line).strip())
        block, start = ([ANCHOR.sub("", line)], i + 1) if inline else ([], i + 1)
        for nxt in lines[start:]:
            if not nxt.strip() or (inline and NEW_PIECE.match(nxt)):
                break
            block.append(nxt)
        yield set(m.group(1).split()), block, range(i, start + len(block) - (1 if inline else 0))


def unanchored(text: str) -> str:
    """``text`` without its anchored blocks (those are checked as their anchors say)."""
    lines = text.splitlines()
    drop = {j for _, _, rows in _anchored_lines(lines) for j in rows}
    return "\n".join("" if j in drop else line for j, line in enumerate(lines))


def block_quotes(where: str, kinds: set[str], block: str) -> list[Quote]:
    out = []
    rows = [
        r for r in block.splitlines() if r.lstrip().startswith("|") and not re.match(r"\s*\|[-:| ]+\|\s*$", r)
    ]
    pieces = [" ".join(r.split("|")[1:3]) for r in rows] if rows else sentences(block)
    for p in pieces:
        if "noise" in kinds:
            out += metric_quotes(where, p, True, lambda c: {k: 100 * v for k, v in code_noise().items()})
        if "pair-noise" in kinds:
            out += metric_quotes(
                where, p, True, lambda c: {k: 100 * v for k, v in across_load.DEFAULT_PAIR_SD.items()}
            )
        if "weights" in kinds:
            out += metric_quotes(where, p, False, weight_values(p))
    return out


def tool_words() -> dict[str, str]:
    """Every load generator of the registry, as prose names it: ``{format name: tool word}``."""
    out = {}
    for name, f in FORMATS.items():
        word = f.tool.split(" (")[0].removeprefix("Cloud Foundry ")
        out[name] = {"ApacheBench": "ApacheBench|\\bab\\b"}.get(word, re.escape(word))
    return out


def missing_tools(text: str) -> list[str]:
    return sorted({n for n, w in tool_words().items() if not re.search(w, text, re.IGNORECASE)})


# --------------------------------------------------------------------------
# the texts


def doc_text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def help_texts() -> dict[str, str]:
    """``{command: rendered --help}`` of ``headroom`` and every subcommand."""
    from headroom.cli import build_parser

    parser = build_parser()
    out = {"headroom": parser.format_help()}
    for name, sub in subparsers(parser).items():
        out[f"headroom {name}"] = sub.format_help()
    return out


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    act = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(act.choices)


def all_quotes() -> list[Quote]:
    out = []
    for name in DOCS:
        text = doc_text(name)
        out += sentence_quotes(name, unanchored(text))
        for kinds, block in anchored(text):
            out += block_quotes(f"{name} [anchored {' '.join(sorted(kinds))}]", kinds, block)
    for cmd, text in help_texts().items():
        out += sentence_quotes(f"{cmd} --help", text)
    return out


# --------------------------------------------------------------------------
# the tests


@pytest.fixture(scope="module")
def quotes() -> list[Quote]:
    return all_quotes()


def test_every_quoted_number_is_the_codes(quotes):
    wrong = [str(q) for q in quotes if not q.ok]
    assert not wrong, "numbers the code does not use:\n" + "\n".join(wrong)


def test_the_quotes_cover_weights_noise_threshold_and_confidence(quotes):
    """The reading found what the docs and help do quote (so the test above is not vacuous)."""
    seen = {(q.where.split(":")[0].split(" [")[0], q.what) for q in quotes}
    must = {
        ("docs/ci.md", "cpu_s_per_req"), ("docs/ci.md", "error_rate"), ("docs/ci.md", "p50_s"),
        ("docs/ci.md", "p99_s"), ("docs/ci.md", "plateau_rps"), ("docs/ci.md", "threshold"),
        ("docs/report.md", "threshold"), ("docs/report.md", "cpu_s_per_req"), ("README.md", "confidence"),
        ("headroom compare --help", "cpu_s_per_req"), ("headroom compare --help", "error_rate"),
        ("headroom compare --help", "p99_s"),
        ("headroom compare --help", "threshold"), ("headroom compare --help", "confidence"),
        ("docs/ci.md", "interval of same"), ("docs/report.md", "interval of same"),
    }  # fmt: skip
    assert must <= seen, f"not found any more (reworded past the rules?): {sorted(must - seen)}"


@pytest.mark.parametrize("name", ["README.md", "headroom --help"])
def test_format_lists_name_every_registered_tool(name):
    """The format lists (README's anchored paragraph, the top-level help) name every tool read."""
    if name == "README.md":
        blocks = [b for kinds, b in anchored(doc_text(name)) if "formats" in kinds]
        assert blocks, "README.md has no <!-- checked: formats --> paragraph"
        text = "\n".join(blocks)
    else:
        text = help_texts()["headroom"]
    assert not missing_tools(text), f"{name} does not name: {missing_tools(text)}"


def test_format_option_help_is_the_registry():
    """``--format``'s help lists exactly the registry's names."""
    from headroom.cli import build_parser

    for cmd, sub in subparsers(build_parser()).items():
        for a in sub._actions:
            if "--format" in a.option_strings:
                listed = re.sub(r"\s+", "", a.help.split(":", 1)[1].split("(")[0]).split(",")
                assert listed == list(FORMATS), cmd


def _defaults_quoted(help_text: str) -> list[float]:
    out = []
    for m in re.finditer(r"default:?\s*" + NUM + r"\s?(%%|%)?", help_text.replace("%%", "%")):
        out.append(float(m.group(1)) / (100 if m.group(3) else 1))
    return out


def option_defaults() -> list[tuple[str, str, float, float]]:
    """``(command, option, quoted default, real default)`` of every option whose help quotes a number."""
    from headroom.cli import build_parser
    from headroom.ramp import ab

    real_none = {  # options whose default is resolved after parsing (None in argparse)
        ("ramp", "--confidence"): ab._confidence(None),
        ("ramp", "--max-repeats"): ab.DEFAULT_MAX_REPEATS,
        ("ramp", "--repeats"): ab.DEFAULT_REPEATS,
    }
    out = []
    for cmd, sub in subparsers(build_parser()).items():
        for a in sub._actions:
            if not a.help or not a.option_strings:
                continue
            real = (
                a.default
                if isinstance(a.default, int | float)
                else real_none.get((cmd, a.option_strings[-1]))
            )
            if real is None or isinstance(real, bool):  # a duration or a word: not a number to compare
                continue
            for q in _defaults_quoted(a.help)[:1]:
                out.append((cmd, a.option_strings[-1], q, real))
    return out


def test_option_help_quotes_its_own_default():
    found = option_defaults()
    wrong = [f for f in found if f[3] is None or not math.isclose(f[2], f[3], rel_tol=1e-9)]
    assert len(found) >= 8, found
    assert not wrong, f"(command, option, help says, default is): {wrong}"


def test_cli_defaults_are_the_librarys():
    """compare's and history's option defaults are compare_runs' and history.analyse's."""
    from headroom.cli import build_parser

    subs = subparsers(build_parser())
    lib = {"compare": compare_defaults(), "history": {"threshold": 0.10, "run_noise": history.RUN_NOISE}}
    import inspect

    lib["history"]["threshold"] = inspect.signature(history.analyse).parameters["threshold"].default
    for cmd, values in lib.items():
        dests = {a.dest: a.default for a in subs[cmd]._actions}
        for key, value in values.items():
            assert dests[key] == value, f"headroom {cmd} --{key.replace('_', '-')}"
