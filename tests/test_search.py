"""``headroom ramp --find``: the search for the capacity at an objective (issue 39).

The decisions are checked on fits of known numbers; the real searches run against the Go test
server of testserver/ with hey, vegeta and oha, and every figure the search wrote is checked
against the raw steps (numpy's nearest rank on the recorded latencies) and against what
``headroom summary`` reads from the same folder.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from conftest import ROOT, need_tool

from headroom.crossing import Probes, crossing, curve
from headroom.model import parse_objective
from headroom.ramp.search import FindOptions, Next, SideSearch

OBJ = parse_objective("p99<=10ms")
STOPS = {"precision", "noise", "budget", "held", "limit", "broken", "probes"}


def _ramp(args, timeout=300):
    cmd = [sys.executable, "-m", "headroom", "ramp", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout)


# --------------------------------------------------------------------------
# the options


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--find", "mean<=5ms"], "give a percentile objective"),
        (["--find", "p99<=5"], "--find: bad objective"),
        (["--precision", "5%"], "--precision is for --find"),
        (["--budget", "1m"], "--budget is for --find"),
        (["--find", "p99<=5ms", "--precision", "80%"], "bad --precision"),
        (["--find", "p99<=5ms", "--budget", "soon"], "bad --budget"),
        (["--find", "p99<=5ms", "--requests-per-step", "1000"], "--requests-per-step is not for it"),
        (["--find", "p99<=5ms", "--concurrency", "1:40:3"], "give the search's range LOW:HIGH"),
        (["--find", "p99<=5ms", "--concurrency", "10:15"], "HIGH must be at least twice LOW"),
    ],
)
def test_bad_find_options_are_refused_in_one_line(tmp_path, args, says, capsys):
    from headroom.cli import main

    assert main(["ramp", "http://127.0.0.1:9/", "-o", str(tmp_path / "r"), *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and lines[0].startswith("headroom: error:")
    assert not (tmp_path / "r").exists()


def test_ab_find_needs_interleaved_steps(tmp_path):
    p = _ramp(
        [
            "--ab",
            "http://127.0.0.1:9/",
            "http://127.0.0.1:9/",
            "-o",
            str(tmp_path / "j"),
            "--find",
            "p99<=5ms",
        ]
    )
    assert (
        p.returncode == 2
        and "give --interleave steps" in p.stderr
        and len(p.stderr.strip().splitlines()) == 1
    )


# --------------------------------------------------------------------------
# the decisions, on fits of known numbers


def _side(loads, p99_ms, *, open_loop=False, low=1, high=1000, precision=0.05, gen_cpu=10.0):
    """A SideSearch whose fit is that of steps at ``loads`` with these p99s (sampling sd 5 %)."""
    loads = np.asarray(loads, float)
    y = np.log(np.asarray(p99_ms, float) * 1e-3)
    p = Probes(
        loads, y, np.full(len(loads), 0.05**2), np.log(1000 * np.minimum(loads, 10)), np.arange(len(loads))
    )
    rec = SimpleNamespace(affinity=[0], engine=SimpleNamespace(name="hey"), step_duration=3.0)
    side = SideSearch(rec, FindOptions(OBJ, precision, 300.0, low, high, open_loop))
    side.fit = crossing(curve(p, OBJ.bound_s), OBJ.bound_s)
    side.points = p
    side.probes = [
        {"verdict": "holds" if v < 9 else "breaks", "concurrency": int(x)} for x, v in zip(loads, p99_ms)
    ]
    return side


def test_it_grows_by_doubling_while_the_objective_holds():
    assert _side([1], [2]).propose() == Next(2, "grow")
    assert _side([1, 2, 4], [2, 3, 4]).propose() == Next(8, "grow")
    assert _side([1, 2, 4, 8], [2, 3, 4, 5], high=12).propose() == Next(12, "grow")  # never past HIGH


def test_it_stops_when_the_objective_holds_at_the_highest_load_allowed():
    nxt = _side([1, 2, 4, 8, 12], [2, 3, 4, 5, 6], high=12).propose()
    assert nxt.load is None and nxt.why == "held" and "concurrency 12" in nxt.reason


def test_it_bisects_the_loads_around_the_crossing():
    assert _side([1, 2, 4, 8, 16], [2, 3, 4, 6, 20]).propose() == Next(12, "bisect")
    assert _side([1, 2, 4, 8, 16, 12], [2, 3, 4, 6, 20, 14]).propose() == Next(10, "bisect")


def test_adjacent_loads_are_repeated_where_the_interval_is_wider():
    side = _side([1, 2, 4, 8, 16, 12, 10, 9], [2, 3, 4, 6, 20, 14, 11, 9.5])
    x = side.fit
    assert x.between == (4, 5) and [x.curve.load[4], x.curve.load[5]] == [9, 10]
    nxt = side.propose()
    assert nxt.why == "repeat" and nxt.load in (8, 9, 10, 12)


def test_it_stops_once_the_interval_is_within_the_precision():
    loads = [1, 2, 4, 8, 16, 12, 10, 9] + [9, 10] * 12
    p99 = [2, 3, 4, 6, 20, 14, 11, 9.5] + [9.5, 10.5] * 12
    side = _side(loads, p99, precision=0.10)
    hw = side.fit.half_width
    assert hw is not None and hw <= 0.10
    nxt = side.propose()
    assert nxt == Next(None, "precision", nxt.reason) and f"{100 * hw:.1f} %" in nxt.reason


def test_a_first_probe_that_breaks_the_objective_is_refused():
    side = _side([1], [25])
    side.probes[0].update({"p99_ms": 25.0, "p99_ms_low": 22.0, "p99_ms_high": 28.0})
    nxt = side.propose()
    assert nxt.load is None and nxt.why == "broken"
    assert "p99<=10ms is already broken at the first probe (concurrency 1: p99 25 ms" in nxt.reason


def test_the_generators_limit_caps_the_search():
    side = _side([1, 2, 4, 8], [2, 3, 4, 5])
    side._check_limit(8, SimpleNamespace(generator_cpu_pct=95.0, throughput=0.0), "holds")
    assert side.limit == 8
    nxt = side.propose()
    assert nxt.why == "limit" and "hey used 95% CPU of the 100% it may use" in nxt.reason
    # an open loop: sent under 90 % of the rate asked while the objective held
    side = _side([100, 200], [2, 3], open_loop=True, low=100)
    side._check_limit(200, SimpleNamespace(generator_cpu_pct=20.0, throughput=150.0), "holds")
    assert side.limit == 200 and "sent 150 req/s of the 200 asked" in side.limit_reason


def _clock(left: int, each: float = 3.5, budget=60.0):
    """A search clock with ``left`` probes of ``each`` seconds left in its budget."""
    from headroom.ramp.search import _Clock

    c = _Clock(budget, 3.0)
    c.spent = [each]
    c.budget_s = (left + 0.5) * each
    return c


def test_it_stops_for_noise_when_the_budget_cannot_buy_the_precision():
    # a crossing between 9 and 10 already probed five times each: a sixth narrows the interval
    # a little; +-5 % would take far more probes than two
    loads = [1, 2, 4, 8, 16, 12, 10, 9] + [9, 10] * 4
    p99 = [2, 3, 4, 6, 20, 14, 11, 9.5] + [9.2, 10.9, 9.8, 10.3, 9.4, 10.6, 9.7, 10.1]
    side = _side(loads, p99)
    hw = side.fit.half_width
    assert hw is not None and hw > 0.05
    nxt = side.propose()
    assert nxt.why == "repeat"
    hw1 = side.projected_half_width(nxt.load)
    assert 0 < hw1 < hw  # one more probe on the curve narrows it, and not to nothing
    r = hw1 / hw
    need = r * r / (1 - r * r) * ((hw / 0.05) ** 2 - 1)  # the 1/sqrt(n) law, written out
    assert side.noise_stop(nxt.load, _clock(left=math.ceil(need) + 1)) is None
    stop = side.noise_stop(nxt.load, _clock(left=max(0, math.floor(need) - 1)))
    assert stop is not None and stop.load is None and stop.why == "noise"
    assert (
        f"about {need:,.0f} more probes" in stop.reason
        and f"±{100 * hw:.1f} % is the precision reached" in stop.reason
    )


def test_growth_probes_are_half_as_long_as_the_probes_that_place_the_crossing():
    side = _side([1, 2], [2, 3])
    side.rec.profile_opts = SimpleNamespace(any=False)
    assert side.probe_s("start") == side.probe_s("grow") == 1.5 and side.probe_s("bisect") == 3.0
    side.full_s = 1.5
    assert side.probe_s("grow") == 1.0  # never under a second
    side.rec.profile_opts = SimpleNamespace(any=True)  # a profile per step needs the whole step
    assert side.probe_s("grow") == 1.5


def test_the_auto_budget_is_half_a_dense_ramp_to_past_the_estimate():
    side = _side([1, 2, 4, 8, 16, 12, 10, 9], [2, 3, 4, 6, 20, 14, 11, 9.5])
    x = side.fit.load
    assert 9 < x < 10
    n = 11  # concurrency 1, 2, ... 11: the first concurrency past ceil(estimate) = 10
    assert side.dense_steps() == n
    c = _clock(left=5)
    c.rebudget(side)  # a given budget stays
    assert c.budget_s == pytest.approx(5.5 * 3.5)
    c = _clock(left=5)
    c.auto = True
    c.rebudget(side)
    assert c.dense_s == pytest.approx(n * 3.25) and c.budget_s == pytest.approx(0.5 * n * 3.25)
    far = _side([1, 2, 4, 8, 16, 32, 64, 128, 256, 512], [2, 2, 2, 2, 3, 4, 5, 7, 8, 20])
    assert far.dense_steps() > 2 * 300 / 3.25
    c.rebudget(far)
    assert c.budget_s == 300.0  # at most 5 minutes however far the estimate


# --------------------------------------------------------------------------
# real searches


@pytest.fixture(scope="module")
def go_server():
    need_tool("go")
    from goserver import GoServer

    with GoServer(work=3000, cpu=1, max_lifetime="15m") as srv:
        yield srv


def _sections(folder: Path) -> list[np.ndarray]:
    """Each step's latencies (seconds) from perfResults.csv, read here without headroom."""
    out, cur = [], None
    for line in (folder / "perfResults.csv").read_text().splitlines():
        if line.startswith("start-time"):
            cur = []
            out.append(cur)
        elif line:
            t, lat, code = line.split(",")
            if 200 <= int(code) <= 299:
                cur.append(float(lat))
    return [np.sort(np.array(s)) for s in out]


def _summary(folder: Path, objective: str) -> dict:
    out = folder.parent / (folder.name + ".json")
    p = subprocess.run(
        [sys.executable, "-m", "headroom", "summary", str(folder), "--objective", objective, "--json", str(out)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    return json.loads(out.read_text())


def _check_search(folder: Path, objective: str, key: str = "concurrency") -> dict:
    """What every search folder must say, checked against the raw steps and headroom summary."""
    meta = yaml.safe_load((folder / "metadata.yml").read_text())
    s = meta["search"]
    probes = s["probes"]
    assert [p[key] for p in probes] == meta["concurrency" if key == "concurrency" else "rates"]
    assert [p["probe"] for p in probes] == list(range(1, len(probes) + 1))
    assert s["stopped"] in STOPS and s["reason"]
    lats = _sections(folder)
    name = parse_objective(objective).name
    for p, lat in zip(probes, lats):
        p99 = lat[math.ceil(0.99 * len(lat)) - 1]  # nearest rank, from the raw file
        assert p[f"{name}_ms"] == pytest.approx(p99 * 1e3, abs=1e-9)
        assert p[f"{name}_ms_low"] <= p[f"{name}_ms"] <= p[f"{name}_ms_high"]
        want = "breaks" if p[f"{name}_ms_low"] > parse_objective(objective).bound_s * 1e3 else None
        assert want is None or p["verdict"] == want
    # growth by doubling until the fit first broke the objective (the first probes)
    grow = []
    for p in probes:
        if p["why"] not in ("start", "grow"):
            break
        grow.append(p[key])
    assert all(b == min(s["range"][1], 2 * a) for a, b in zip(grow, grow[1:]))
    # the estimate is what headroom summary says of the folder
    at = _summary(folder, objective)["capacity"]["at_objective"]
    est = s["estimate"]
    assert est["status"] == at["status"]
    for k in ("rps", "low", "high"):
        if est[k] is None:
            assert at[k] is None
        else:
            assert est[k] == pytest.approx(at[k], abs=0.051), k  # metadata rounds req/s to 0.1
    return meta


@pytest.mark.parametrize("engine", ["hey", "vegeta", "oha"])
def test_a_real_search_finds_the_crossing(go_server, tmp_path, engine):
    """vegeta and oha with a given budget and 1 s probes; hey at the search's defaults (2 s probes, the
    growth probes 1 s, the budget auto: half a dense ramp to past the estimate, at least 15 s)."""
    need_tool(engine)
    out = tmp_path / "find"
    obj = "p99<=10ms" if engine == "hey" else "p99<=50ms"
    given = [] if engine == "hey" else ["--budget", "12s", "--step-duration", "1s"]
    args = [go_server.url, "-o", str(out), "--find", obj, *given]
    p = _ramp([*args, "--engine", engine, f"--cpu-pid={go_server.pid}", "--concurrency", "1:256"])
    assert p.returncode == 0, p.stderr
    meta = _check_search(out, obj)
    s = meta["search"]
    assert s["elapsed_s"] <= s["budget_s"] + 5
    # where it crosses depends on the machine's other work (a shared machine can break 50 ms at
    # concurrency 1): each outcome with its own stop
    est = s["estimate"]
    if est["status"] == "crossed":
        assert s["stopped"] in ("precision", "noise", "budget") and f"capacity at {obj}:" in p.stderr
        assert (est["low"] or 0) <= est["rps"] <= (est["high"] or math.inf)
    elif est["status"] == "held":
        assert s["stopped"] in ("held", "limit", "budget")
    else:
        assert est["status"] == "at lowest step" and s["stopped"] in ("broken", "budget")
    if engine != "hey":
        assert s["budget"] == "given" and s["budget_s"] == 12
        return
    lengths = _step_lengths(out)
    for probe, length in zip(
        s["probes"], lengths
    ):  # growth probes 1 s, the others 2 s (spans a little under)
        want = 1.0 if probe["why"] in ("start", "grow") else 2.0
        assert want - 0.3 <= length <= want + 0.05, (probe, length)
    assert s["budget"] == "auto"
    if est["status"] == "crossed" and s["stopped"] in ("noise", "budget"):
        dense = math.ceil(est["concurrency"]) + 1  # concurrency 1 .. the first past the estimate
        assert s["dense_ramp_s"] == pytest.approx(dense * 2.25, abs=0.06)
        assert s["budget_s"] == pytest.approx(min(300, max(15, dense * 2.25 / 2)), abs=0.06)


def _step_lengths(folder: Path) -> list[float]:
    """Each step's span, first request's start to last response, from perfResults.csv (hey's format)."""
    import datetime

    def t(x):
        return datetime.datetime.fromisoformat(x.replace("Z", "+00:00")[:26] + "+00:00").timestamp()

    spans, cur = [], None
    for line in (folder / "perfResults.csv").read_text().splitlines():
        if line.startswith("start-time"):
            cur = [math.inf, -math.inf]
            spans.append(cur)
        elif line:
            start, lat, _code = line.split(",")
            a = t(start)
            cur[0], cur[1] = min(cur[0], a), max(cur[1], a + float(lat))
    return [b - a for a, b in spans]


def test_a_first_probe_that_breaks_the_objective_exits_2(go_server, tmp_path):
    need_tool("hey")
    out = tmp_path / "broken"
    p = _ramp([go_server.url, "-o", str(out), "--find", "p99<=20us", "--step-duration", "1s"])
    assert p.returncode == 2
    err = [line for line in p.stderr.splitlines() if line.startswith("headroom: error:")]
    assert len(err) == 1 and "p99<=20us is already broken at the first probe (concurrency 1" in err[0]
    meta = yaml.safe_load((out / "metadata.yml").read_text())
    assert meta["search"]["stopped"] == "broken" and len(meta["search"]["probes"]) == 1


def test_an_open_loop_search_stops_at_the_generators_limit(tmp_path):
    need_tool("go")
    need_tool("vegeta")
    from goserver import GoServer

    # two workers that each wait 20 ms a request cannot send more than ~100 req/s
    with GoServer(delay="20ms", max_lifetime="5m") as srv:
        out = tmp_path / "open"
        args = [srv.url, "-o", str(out), "--find", "p99<=200ms", "--rate", "25:3200", "--max-workers", "2"]
        p = _ramp([*args, "--step-duration", "1s", "--budget", "30s"])
    assert p.returncode == 0, p.stderr
    meta = _check_search(out, "p99<=200ms", key="rate")
    s = meta["search"]
    assert s["stopped"] == "limit" and "the generator cannot drive more" in s["reason"]
    # the limit is the first rate whose step sent less than 90 % of it (from the step's own throughput)
    sent = dict(zip(meta["rates"], meta["step_throughput_rps"]))
    first = min(r for r, x in sent.items() if x < 0.9 * r)
    assert s["generator_limit"] == first and max(meta["rates"]) == first


def test_an_ab_search_probes_both_builds_at_the_same_loads(tmp_path):
    need_tool("go")
    need_tool("hey")
    from goserver import GoServer

    from headroom import analyze
    from headroom.compare.capacity import capacity_change
    from headroom.io import reduce_run

    obj = "p99<=20ms"
    with (
        GoServer(work=3000, cpu=1, max_lifetime="5m") as a,
        GoServer(work=6430, cpu=1, max_lifetime="5m") as b,
    ):
        job = tmp_path / "ab"
        args = [
            "--ab",
            a.url,
            b.url,
            "--interleave",
            "steps",
            "-o",
            str(job),
            "--find",
            obj,
            "--budget",
            "25s",
        ]
        p = _ramp([*args, "--step-duration", "1s", f"--cpu-pid-a={a.pid}", f"--cpu-pid-b={b.pid}"])
    assert p.returncode == 0, p.stderr
    ma, mb = (_check_search(job / n, obj) for n in ("a-01", "b-01"))
    assert ma["concurrency"] == mb["concurrency"]
    orders = ma["ab"]["step_order"]
    assert orders == mb["ab"]["step_order"] == [("AB", "BA")[k % 2] for k in range(len(ma["concurrency"]))]
    # each pair's steps follow each other in that order (launch times)
    for k, o in enumerate(orders):
        ta, tb = ma["step_start_times"][k], mb["step_start_times"][k]
        assert (ta < tb) == (o == "AB")
    doc = ma["search"]["capacity_change"]
    assert doc == mb["search"]["capacity_change"]
    sa, sb = (analyze(reduce_run(str(job / n)), objective=obj) for n in ("a-01", "b-01"))
    ch = capacity_change([sa], [sb], recordings=[(0, 0)])
    assert doc["change"] == pytest.approx(ch.change, abs=1e-4) and doc["design"] == "interleaved"
    assert "change in capacity at the objective" in p.stderr
    # compare reads the two halves as one interleaved recording
    c = subprocess.run(
        [sys.executable, "-m", "headroom", "compare", str(job / "a-01"), str(job / "b-01"), "--objective", obj],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert c.returncode in (0, 1, 3), c.stderr
