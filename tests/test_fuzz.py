"""Seeded mutation fuzzing of every reader (issue 14).

Mechanically damaged copies of bundled runs and of a sample of every
supported format (byte flips, cut files, dropped and repeated lines, values
swapped or replaced by hostile ones, odd encodings and line ends, hostile
metadata, gzip) are read and analysed in-process.  Each mutant must end in one
of two ways:

* a HeadroomError: one line, at most 300 characters, naming the file (exit 2);
* a result whose per-step request and error counts and per-step p50/p99 match
  an independent reader of the same bytes (tests/reference.py and the csv/json
  /xml readers of tests/test_formats.py), or differ only by a row the warnings
  say was dropped.

Anything else is a failure: another exception (a traceback), a run longer
than 20 s (a hang), a numpy RuntimeWarning (leaks to stderr), an oversized
message, or a silently different number.  CI runs ``HEADROOM_FUZZ`` mutants
(default 180, about 15 s); ``HEADROOM_FUZZ=5000 pytest tests/test_fuzz.py``
for a long run, which prints its counts.
"""

from __future__ import annotations

import csv
import gzip
import math
import os
import random
import shutil
import signal
import warnings
from pathlib import Path

import numpy as np
import plan_reader
import pytest
import reference
from conftest import ROOT
from test_formats import SAMPLES, ref_oha

import headroom
from headroom.io import load_run, reduce_run
from headroom.model import HeadroomError

csv.field_size_limit(1 << 30)  # the references read a 200,000-byte field as headroom does
N_MUTANTS = int(os.environ.get("HEADROOM_FUZZ", "180"))
#: at least this share of the mutants must be accepted and checked number by number
MIN_CHECKED = 0.3
SEED = int(os.environ.get("HEADROOM_FUZZ_SEED", "14"))
FORMATS = ROOT / "tests" / "data" / "formats"

HOSTILE = [
    "", "nan", "NaN", "-1", "-0.002", "1e308", "99999999999", "inf", "0", "1e-300", "\u0661\u0662",
    "2200-01-01T00:00:00Z", "1970-01-01T00:00:00Z", "2024-02-30T00:00:00Z", "2024-01-02T25:00:00Z",
    "20000000000000000000", "x" * 5000, '"', "'", "\x00", "\ufeff", "🙂", ",,,", "\t",
]  # fmt: skip

HOSTILE_META = [
    "x: " + "[" * 5000 + "]" * 5000 + "\n",
    "a: &a [1,2,3,4,5,6,7,8,9]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n",
    "cpu_cores: .nan\n", "cpu_cores: .inf\n", "cpu_cores: 0\n", "cpu_cores: -2\n", "cpu_cores: 1e-300\n",
    "lower_concurrency: -5\nconcurrency_step: 1\n", "concurrency_step: -3\nlower_concurrency: 1\n",
    "!!python/object/apply:os.system ['true']\n", "- just\n- a list\n", "sha: [unclosed\n", "\xff\xfe",
    "note: '" + "y" * (2 << 20) + "'\n",
]  # fmt: skip


# --------------------------------------------------------------------------
# sources


def _small_throughputramp(dst: Path) -> Path:
    """The first three steps of nginx-no-keepalive, 1,500 rows each, with its CPU and metadata."""
    src = ROOT / "data" / "runs" / "nginx-no-keepalive"
    dst.mkdir(parents=True)
    text = reference.read_text(next(src.glob("perfResults.csv*")))
    out, header, count, steps = [], None, 0, 0
    for line in text.split("\n"):
        if header is None:
            header = line
        if line == header:
            steps += 1
            if steps > 3:
                break
            count = 0
            out.append(line)
            continue
        if line and count < 1500:
            out.append(line)
            count += 1
    (dst / "perfResults.csv").write_text("\n".join(out) + "\n")
    shutil.copy(next(src.glob("cpuStats.csv*")), dst / "cpuStats.csv")
    shutil.copy(src / "metadata.yml", dst / "metadata.yml")
    return dst


def _sources(tmp: Path) -> list[tuple[str, Path, Path]]:
    """(kind, path to read, the file to damage)."""
    out = []
    tr = _small_throughputramp(tmp / "src-throughputramp")
    out += [("throughputramp", tr, tr / "perfResults.csv"), ("throughputramp", tr, tr / "cpuStats.csv"),
            ("throughputramp", tr, tr / "metadata.yml")]  # fmt: skip
    rr = tmp / "src-ramp"
    shutil.copytree(ROOT / "data" / "runs" / "nginx-large-buffering-off", rr)
    perf = next(rr.glob("perfResults.csv*"))
    if perf.suffix == ".gz":
        (rr / "perfResults.csv").write_bytes(gzip.decompress(perf.read_bytes()))
        perf.unlink()
    out.append(("ramp", rr, rr / "perfResults.csv"))
    ramp = tmp / "src-oha-ramp"  # a folder of one file per step
    shutil.copytree(FORMATS / "oha-ramp", ramp)
    out.append(("oha-ramp", ramp, ramp / "oha-c2.csv"))
    for name in SAMPLES:
        d = tmp / f"src-{name}"
        d.mkdir()
        shutil.copy(FORMATS / name, d / name)
        out.append((name, d / name, d / name))
    for name, (keep_every, _, _) in REAL.items():
        d = tmp / f"src-real-{name}"
        d.mkdir()
        path = d / name.removesuffix(".gz")
        path.write_bytes(_thinned(plan_reader.REAL / name, keep_every))
        out.append((f"real:{name}", path, path))
    return out


#: real samples of tests/data/formats/real/ -> (keep every n-th request row, the independent
#: reader (plan_reader.py), latency unit in s): thinned so that a mutant reads in well under a second
REAL = {
    "jmeter-stacked.csv.gz": (100, plan_reader.jmeter_csv, 1e-3),
    "jmeter-stepping.csv.gz": (30, plan_reader.jmeter_csv, 1e-3),
    "gatling-OpenRampSimulation.log.gz": (1, lambda p: plan_reader.gatling(p).requests, 1e-3),
    "k6-ramping-vus.json.gz": (1, lambda p: plan_reader.k6_json(p).requests, 1e-3),
    "k6-ramping-arrival-rate.csv.gz": (1, lambda p: plan_reader.k6_csv(p).requests, 1e-3),
    "vegeta-rates.csv.gz": (10, plan_reader.vegeta_csv, 1e-9),
}


def _thinned(path: Path, keep_every: int) -> bytes:
    """The sample unzipped, with every ``keep_every``-th data row of a CSV (headers kept)."""
    lines = gzip.decompress(path.read_bytes()).split(b"\n")
    if keep_every == 1:
        return b"\n".join(lines)
    head = 1 if path.name.startswith("jmeter") else 0
    rows = lines[head:-1] if lines[-1] == b"" else lines[head:]
    return b"\n".join(lines[:head] + rows[::keep_every]) + b"\n"


# --------------------------------------------------------------------------
# mutations


def _lines(b: bytes) -> list[bytes]:
    return b.split(b"\n")


def mutate(data: bytes, rnd: random.Random, is_meta: bool) -> tuple[str, bytes]:
    if is_meta and rnd.random() < 0.5:
        return "hostile metadata", rnd.choice(HOSTILE_META).encode("utf-8", "surrogateescape")
    kind = rnd.choice(
        ["flip", "flip", "truncate", "drop-line", "dup-line", "swap-lines", "value", "value", "value",
         "crlf", "cr-only", "bom", "gzip", "gzip-cut", "latin1", "empty", "long-line", "move-time"]
    )  # fmt: skip
    if not data:
        return "empty", data
    if kind == "flip":
        b = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(b))
            b[i] = rnd.randrange(256)
        return kind, bytes(b)
    if kind == "truncate":
        return kind, data[: rnd.randrange(len(data))]
    lines = _lines(data)
    if kind in ("drop-line", "dup-line", "swap-lines", "value", "long-line", "move-time") and len(lines) > 2:
        i = rnd.randrange(len(lines) - 1)
        if kind == "drop-line":
            del lines[i]
        elif kind == "dup-line":
            lines.insert(i, lines[i])
        elif kind == "swap-lines":
            j = rnd.randrange(len(lines) - 1)
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "long-line":
            lines[i] = lines[i] + b"A" * rnd.choice([200, 200_000])
        elif kind == "move-time":
            lines[i] = _move_time(lines[i], rnd)
        else:
            sep = b"\t" if b"\t" in lines[i] else b","
            fields = lines[i].split(sep)
            j = rnd.randrange(len(fields))
            fields[j] = rnd.choice(HOSTILE).encode("utf-8")
            lines[i] = sep.join(fields)
        return kind, b"\n".join(lines)
    if kind == "crlf":
        return kind, data.replace(b"\n", b"\r\n")
    if kind == "cr-only":
        return kind, data.replace(b"\n", b"\r")
    if kind == "bom":
        return kind, b"\xef\xbb\xbf" + data
    if kind == "gzip":
        return kind, gzip.compress(data)
    if kind == "gzip-cut":
        z = gzip.compress(data)
        return kind, z[: rnd.randrange(10, len(z))]
    if kind == "latin1":
        return kind, data.decode("utf-8", "replace").encode("latin-1", "replace") + b"\xe9\n"
    if kind == "empty":
        return kind, b""
    return "flip", data


def _move_time(line: bytes, rnd: random.Random) -> bytes:
    """Move a timestamp-looking field by an hour, a day or to another century."""
    import re

    m = re.search(rb"20\d\d-\d\d-\d\dT\d\d", line)
    if m:
        new = rnd.choice(
            [b"2024-01-03T03", b"1971-01-01T00", b"2199-12-31T23", line[m.start() : m.start() + 11] + b"23"]
        )
        return line[: m.start()] + new[:13] + line[m.start() + 13 :]
    m = re.search(rb"\b1[6-9]\d{11,17}\b", line)
    if m:
        v = int(m.group())
        scale = 10 ** (len(m.group()) - 10)
        return (
            line[: m.start()]
            + str(v + rnd.choice([3600, 86400, -(10**9)]) * scale).encode()
            + line[m.end() :]
        )
    return line


# --------------------------------------------------------------------------
# the independent reading of a mutant


class Unchecked(str):
    """Why a mutant has no independent reading (a damaged gzip stream, bytes that are not UTF-8,
    a format without a reference): counted apart, never as numerically checked."""


def _reference(kind: str, target: Path, read_path: Path):
    """Per step (successes, errors, sorted latencies), or Unchecked(why).

    Any other exception of the reference propagates: a reference that cannot read what headroom
    accepted is a failure of the check, never a pass.
    """
    data = target.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            return Unchecked("damaged gzip stream")
    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # CR-only line ends are line ends too
    if not data.endswith(b"\n"):  # the readers drop a last line without a line end
        data = data[: data.rfind(b"\n") + 1]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Unchecked("not UTF-8")
    text = text.lstrip("\ufeff")
    tmp = target.with_name(target.name + ".ref")
    tmp.write_text(text)
    try:
        if kind == "throughputramp":
            if target.name != "perfResults.csv":
                tmp = read_path / "perfResults.csv"
            secs = reference.read_perf(tmp)
            return [(len(s), None, sorted(lat for _, lat in s)) for s in secs]
        if kind == "oha-ramp":  # one file per step, by the concurrency in its name
            files = sorted(read_path.glob("oha-c*.csv"), key=lambda f: int(f.stem.split("c")[-1]))
            steps = [ref_oha(tmp if f == target else f)[0][0] for f in files]
            return [
                (
                    sum(not b for *_, b in rows),
                    sum(b for *_, b in rows),
                    sorted(lat for _, lat, b in rows if not b),
                )
                for rows in steps
            ]
        if kind == "ramp":
            return Unchecked("no independent reader of the status-column throughputramp file")
        if kind.startswith("real:"):  # steps inferred from levels: compare the whole run
            _, read, unit = REAL[kind[5:]]
            r = read(tmp)
            good = sorted(lat * unit for lat, ok in zip(r.latency, r.ok) if ok)
            return ("run", sum(r.ok), len(r.ok) - sum(r.ok), good)
        _, ref = SAMPLES[kind]
        steps, _conc = ref(tmp)
        return [
            (
                sum(not b for *_, b in rows),
                sum(b for *_, b in rows),
                sorted(lat for _, lat, b in rows if not b),
            )
            for rows in steps
        ]
    finally:
        if tmp.name.endswith(".ref"):
            tmp.unlink(missing_ok=True)


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def check_mutant(kind: str, read_path: Path, target: Path) -> str:
    """'error', 'checked' (numbers equal the reference's), 'excused' (counts differ by exactly what
    the warnings name), 'unchecked' (no reference for these bytes) or 'FAIL: why'."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                streamed = None
                if kind in ("throughputramp", "ramp"):  # the CLI's streamed path must agree
                    try:
                        streamed = headroom.analyze(reduce_run(read_path))
                    except HeadroomError as e:
                        streamed = e
                run = load_run(read_path)
                s = headroom.analyze(run)
                if isinstance(streamed, HeadroomError):
                    return f"FAIL: load_run accepted, reduce_run refused: {str(streamed)[:200]}"
                if streamed is not None and list(streamed.table.requests) != list(s.table.requests):
                    return "FAIL: reduce_run and load_run disagree on the steps"
            except HeadroomError as e:
                if streamed is not None and not isinstance(streamed, HeadroomError):
                    return f"FAIL: reduce_run accepted, load_run refused: {str(e)[:200]}"
                msg = str(e)
                text = msg.replace(str(read_path.parent), "")  # the temporary folder's name is long
                if "\n" in msg or len(text) > 300:
                    return f"FAIL: oversized or multi-line message ({len(msg)} chars): {msg[:200]!r}"
                if str(read_path) not in msg and str(read_path.parent) not in msg and target.name not in msg:
                    if not msg.startswith(("give ", "unknown --format")):
                        return f"FAIL: message does not name the file: {msg[:200]!r}"
                return "error"
            runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
            if runtime:
                return f"FAIL: RuntimeWarning leaked: {runtime[0].message}"
    except Hang:
        return "FAIL: no answer in 20 s"
    except RecursionError:
        return "FAIL: RecursionError"
    except Exception as e:  # a traceback for the user
        return f"FAIL: {type(e).__name__}: {str(e)[:200]}"
    finally:
        signal.alarm(0)
    for w in run.warnings:
        if len(w) > 500:
            return f"FAIL: oversized warning ({len(w)} chars)"
    try:
        ref = _reference(kind, target, read_path)
    except Exception as e:
        return f"FAIL: headroom accepted what the reference cannot read: {type(e).__name__}: {str(e)[:200]}"
    if isinstance(ref, Unchecked):
        return "unchecked"
    t = s.table
    left_out = named_left_out(run.warnings)
    if ref[0] == "run":
        return _check_run(run, t, ref[1:], left_out)
    if len(ref) != len(t):
        if any("were dropped as too short" in w for w in run.warnings):
            return "excused"  # the warning names the steps it dropped
        return f"FAIL: {len(t)} steps, reference {len(ref)}"
    total_ref = sum(ok + (err or 0) for ok, err, _ in ref)
    total_got = int(t.requests.sum()) + (int(t.errors.sum()) if t.errors is not None else 0)
    for k, (ok, err, lats) in enumerate(ref):
        if t.requests[k] != ok or (err is not None and t.errors is not None and t.errors[k] != err):
            if left_out and total_ref - total_got == left_out:
                return "excused"  # exactly the requests the warnings say were left out
            return (
                f"FAIL: step {k}: {t.requests[k]} ok / {None if t.errors is None else t.errors[k]} errors, "
                f"reference {ok} / {err} (warnings name {left_out} left out)"
            )
        if lats:
            for name, q in (("p50", 0.5), ("p99", 0.99)):
                want = lats[math.ceil(q * len(lats)) - 1]
                got = t.latency.pct[name][k]
                if not np.isclose(got, want, rtol=1e-9, atol=1e-12):
                    return f"FAIL: step {k} {name} {got!r}, reference {want!r}"
    return "checked"


def named_left_out(warnings_: list[str]) -> int:
    """Requests the warnings say were left out, by the number they name (0: none named)."""
    import re

    n = 0
    for w in warnings_:
        for pattern in (
            r"left out ([\d,]+) of [\d,]+ requests",
            r"left out ([\d,]+) transaction-controller",
            r"skipped ([\d,]+) bad row",
        ):
            n += sum(int(x.replace(",", "")) for x in re.findall(pattern, w))
    return n


def _check_run(run, t, ref, left_out: int) -> str:
    """A whole run against the independent reader: successes, errors, p50/p99 of the successes."""
    ok, err, lats = ref
    got_ok, got_err = int(t.requests.sum()), (int(t.errors.sum()) if t.errors is not None else None)
    if got_ok != ok or (got_err is not None and got_err != err):
        if left_out and (ok + err) - (got_ok + (got_err or 0)) == left_out:
            return "excused"
        return f"FAIL: {got_ok} ok / {got_err} errors, reference {ok} / {err} (warnings name {left_out} left out)"
    got = np.sort(run.requests.latency_s)
    for q in (0.5, 0.99):
        if lats and not np.isclose(got[math.ceil(q * len(got)) - 1], lats[math.ceil(q * len(lats)) - 1],
                                   rtol=1e-9, atol=1e-12):  # fmt: skip
            return f"FAIL: run p{q * 100:g} differs from the reference"
    return "checked"


def run_fuzz(tmp: Path, n: int, seed: int) -> dict:
    rnd = random.Random(seed)
    sources = _sources(tmp)
    counts = {"mutants": 0, "error": 0, "checked": 0, "excused": 0, "unchecked": 0, "failures": []}
    for m in range(n):
        kind, read_path, target = sources[m % len(sources)]
        work = tmp / f"m{m}"
        if read_path.is_dir():
            shutil.copytree(read_path, work)
            rp, tg = work, work / target.name
        else:
            work.mkdir()
            rp = tg = work / target.name
            shutil.copy(target, tg)
        what, data = mutate(tg.read_bytes(), rnd, tg.name == "metadata.yml")
        tg.write_bytes(data)
        result = check_mutant(kind, rp, tg)
        counts["mutants"] += 1
        if result.startswith("FAIL"):
            counts["failures"].append(f"#{m} {kind}/{tg.name} {what}: {result}")
        else:
            counts[result] += 1
        shutil.rmtree(work, ignore_errors=True)
    return counts


def test_mutation_fuzz(tmp_path):
    counts = run_fuzz(tmp_path, N_MUTANTS, SEED)
    print(
        f"\nfuzz: {counts['mutants']} mutants (seed {SEED}): {counts['error']} clean errors, "
        f"{counts['checked']} accepted and checked against the reference, {counts['excused']} accepted "
        f"with a count difference their warnings name, {counts['unchecked']} accepted unchecked, "
        f"{len(counts['failures'])} failures"
    )
    assert not counts["failures"], "\n".join(counts["failures"][:20])
    # the oracle did its work: most accepted mutants were compared number by number
    assert counts["checked"] >= MIN_CHECKED * counts["mutants"], counts
    assert counts["unchecked"] + counts["excused"] <= counts["checked"], counts


def test_real_samples_are_fuzzed_and_pass_the_checker_unmutated(tmp_path):
    sources = [s for s in _sources(tmp_path) if s[0].startswith("real:")]
    assert {k[5:] for k, _, _ in sources} == set(REAL)
    for kind, rp, tg in sources:
        assert _reference(kind, tg, rp)[0] == "run"
        assert check_mutant(kind, rp, tg) == "checked", kind


@pytest.mark.parametrize("name", list(SAMPLES))
def test_unmutated_samples_pass_the_checker(tmp_path, name):
    d = tmp_path / "x"
    d.mkdir()
    shutil.copy(FORMATS / name, d / name)
    assert check_mutant(name, d / name, d / name) == "checked"


N_CLI = int(os.environ.get("HEADROOM_FUZZ_CLI", "14"))


def test_cli_on_mutants(tmp_path):
    """A few mutants through the command line: exit 0 or 2, no traceback, no abort at exit, short lines."""
    import subprocess
    import sys

    rnd = random.Random(SEED + 1)
    sources = _sources(tmp_path)
    bad = []
    for m in range(N_CLI):
        kind, read_path, target = sources[rnd.randrange(len(sources))]
        work = tmp_path / f"c{m}"
        if read_path.is_dir():
            shutil.copytree(read_path, work)
            rp, tg = work, work / target.name
        else:
            work.mkdir()
            rp = tg = work / target.name
            shutil.copy(target, tg)
        what, data = mutate(tg.read_bytes(), rnd, tg.name == "metadata.yml")
        tg.write_bytes(data)
        cmd = ["summary", rp] if m % 4 else ["compare", rp, rp]
        p = subprocess.run(
            [sys.executable, "-m", "headroom", *map(str, cmd)], capture_output=True, text=True, timeout=60
        )
        lines = [ln for ln in p.stderr.splitlines() if ln]
        problems = []
        if p.returncode not in ((0, 2) if cmd[0] == "summary" else (0, 1, 2, 3)):
            problems.append(f"exit {p.returncode}")
        if "Traceback" in p.stderr or "terminate called" in p.stderr:
            problems.append("traceback or abort")
        if any(len(ln.replace(str(work), "")) > 500 for ln in lines):
            problems.append("a line over 500 characters")
        if p.returncode == 2 and len(lines) != 1:
            problems.append(f"{len(lines)} lines on error")
        if problems:
            bad.append(f"#{m} {kind}/{tg.name} {what} {cmd[0]}: {', '.join(problems)}: {p.stderr[-300:]!r}")
    assert not bad, "\n".join(bad)
