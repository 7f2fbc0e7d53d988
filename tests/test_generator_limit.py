"""The load generator as the ceiling (issue 49), with real runs recorded here: Locust (one Python process)
against an nginx that costs little CPU a request is limited by Locust; hey against the same nginx made
costly (URI regexes) is limited by nginx.  The first is said first in summary (text and JSON), compare
and the report; the second is not flagged.  The rule itself on planted step tables, recomputed by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import ROOT, tools_required

from headroom.generator_limit import BUSIER, GENERATOR_BUSY_PCT, SERVER_IDLE_PCT, generator_limit

LOCUSTFILE = """
from locust import HttpUser, constant, task


class Web(HttpUser):
    wait_time = constant(0)

    @task
    def home(self):
        self.client.get("/index.html", name="home")
"""


def _table(rps, cpu_pct, cores=1.0, paced=None):
    n = len(rps)
    return SimpleNamespace(
        rps=np.array(rps, float), cpu_pct=np.array(cpu_pct, float), cpu_cores=cores,
        client_paced=np.zeros(n, bool) if paced is None else np.array(paced), __len__=lambda: n,
    )  # fmt: skip


class _T(SimpleNamespace):
    def __len__(self):
        return len(self.rps)


def _run(gen=None, cores=1, engine="locust"):
    fields = {"engine": engine}
    if gen is not None:
        fields["generator_cpu"] = {"per_step_percent": gen, "cores_available": cores}
    return SimpleNamespace(meta=SimpleNamespace(fields=fields))


def test_the_rule_on_planted_steps():
    t = _T(**vars(_table([100, 200, 300, 310], [5, 6, 7, 7])))
    # the generator at 50 % of a core, the server at 5-7 %: busier by far, and itself busy
    got = generator_limit(_run([40, 50, 50, 50]), t)
    assert got is not None and got.steps == (1, 2, 3) and got.engine == "locust"
    assert 50 >= GENERATOR_BUSY_PCT and 50 >= BUSIER * 7 and 7 < SERVER_IDLE_PCT
    # a light generator beside a light server (an nginx proxy waiting on its upstream): not flagged
    assert generator_limit(_run([20, 20, 20, 20]), t) is None
    # busy, but not much busier than the server (hey 28-44 % beside a proxy at 14-20 %): not flagged
    proxy = _T(**vars(_table([100, 200, 300, 310], [14, 16, 18, 20])))
    assert generator_limit(_run([28, 35, 40, 44], engine="hey"), proxy) is None
    # the server busy: not flagged, however busy the generator
    busy = _T(**vars(_table([100, 200, 300, 310], [40, 60, 90, 95])))
    assert generator_limit(_run([50, 60, 70, 70]), busy) is None
    # the generator at 86 % of its one core: flagged whatever the server did
    got = generator_limit(_run([50, 70, 86, 88], engine="hey"), busy)
    assert got is not None and got.steps == (2, 3) and "88 % of the 100 %" in got.evidence
    # only one of the three top steps limited: not the run's ceiling
    assert generator_limit(_run([50, 60, 70, 90], engine="hey"), busy) is None
    # no generator CPU (an imported file): client-paced steps while the server idles
    paced = _T(**vars(_table([100, 200, 300, 310], [5, 6, 7, 7], paced=[False, True, True, True])))
    got = generator_limit(SimpleNamespace(meta=SimpleNamespace(fields={})), paced)
    assert got is not None and "Little's law" in got.evidence


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A Locust ramp of a cheap nginx and a hey ramp of a costly one (3000 URI regexes), 1, 2, 4."""
    import importlib.util

    import psutil
    from test_ramp import Nginx, _need

    if importlib.util.find_spec("locust") is None:
        if tools_required("locust"):
            pytest.fail("locust is not installed and HEADROOM_REQUIRE_TOOLS=1 says it must be")
        pytest.skip("locust is not installed")
    _need("nginx")
    _need("hey")
    d = tmp_path_factory.mktemp("genlimit")
    (d / "locustfile.py").write_text(LOCUSTFILE)
    out = {}
    for name, regexes, engine in (("locust", 0, ["--engine", "locust", "--locustfile", str(d / "locustfile.py")]),
                                  ("hey", 6000, [])):  # fmt: skip
        loc = " ".join(f'if ($uri ~ "^/nomatch{i}x") {{ return 404; }}' for i in range(regexes))
        srv = Nginx(d / f"nginx-{name}", location=loc).wait()
        try:
            pids = [srv.pid] + [c.pid for c in psutil.Process(srv.pid).children(recursive=True)]
            base = srv.url.rsplit("/", 1)[0] + "/"
            url = base if name == "locust" else base + "index.html"
            cmd = [sys.executable, "-m", "headroom", "ramp", url, "-o", str(d / name), *engine,
                   "--concurrency", "1,2,4", "--step-duration", "3s", *[f"--cpu-pid={p}" for p in pids]]  # fmt: skip
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=ROOT)
            assert r.returncode == 0, r.stderr[-1000:]
        finally:
            srv.stop()
        out[name] = d / name
    return out


def cli(*args):
    return subprocess.run([sys.executable, "-m", "headroom", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)  # fmt: skip


def test_a_locust_run_the_generator_limited_is_said_first_and_hey_of_a_costly_nginx_is_not(runs):
    p = cli("summary", runs["locust"])
    lines = p.stdout.splitlines()
    assert lines[1].startswith("  ! GENERATOR-LIMITED: locust set the ceiling"), lines[:3]
    assert "(locust via headroom ramp" in p.stdout  # the source line names the engine
    doc = json.loads(cli("summary", runs["locust"], "--json", "-").stdout)
    assert doc["capacity"]["status"] == "generator_limited"
    assert doc["capacity"]["generator_limit"]["engine"] == "locust"
    # Locust's own CPU against the server's, from the recorder's metadata and the step table
    meta = doc["steps"]
    assert all(s["cpu_pct"] is not None for s in meta)
    p = cli("summary", runs["hey"])
    assert "GENERATOR-LIMITED" not in p.stdout, p.stdout[:600]
    assert json.loads(cli("summary", runs["hey"], "--json", "-").stdout)["capacity"]["status"] == "measured"


def test_compare_and_the_report_say_it_first(runs, tmp_path):
    p = cli("compare", runs["hey"], runs["locust"], "--accept-mismatch")
    head = p.stdout.split("\n  > ")[0]
    assert "! WARNING: locust: GENERATOR-LIMITED" in " ".join(head.split()), head
    out = tmp_path / "r.html"
    assert cli("report", runs["locust"], "-o", out).returncode == 0
    page = out.read_text()
    box, first = page.find("The load generator set the ceiling"), page.find("<h2")
    assert 0 <= box < first, (box, first)  # under the title, before the first section


def test_every_throughput_row_of_a_generator_limited_run_says_it_is_a_lower_bound():
    """The bundled Locust run (the generator's ceiling) marks each throughput row, row by row; the
    bundled hey run of the same nginx (the server's ceiling) marks none."""
    import subprocess
    import sys

    from conftest import ROOT

    def rows(name: str) -> dict[str, str]:
        p = subprocess.run([sys.executable, "-m", "headroom", "summary", str(ROOT / "data" / "runs" / name)],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
        assert p.returncode == 0, p.stderr
        block = p.stdout[p.stdout.index("\ncapacity (") :].splitlines()[2:]
        out, key = {}, None
        for line in block:  # a row is "  name  value", continued by lines indented under the value
            if line.startswith("  ") and not line.startswith("    ") and "  " in line.strip():
                key, _, value = line.strip().partition("  ")
                out[key] = value.strip()
            elif key is not None:
                out[key] += " " + line.strip()
        return out

    limited = rows("locust-nginx-regex3000")
    for name in ("modelled capacity (USL)", "plateau throughput", "peak step"):
        assert limited[name].startswith(">= ") and "a lower bound: the generator's limit" in limited[name], (
            name
        )
    assert not limited["CPU per request (whole run)"].startswith(">=")
    server = rows("hey-nginx-regex3000")
    assert server and not any("generator's limit" in v for v in server.values())


def test_history_takes_a_generator_limited_release_as_a_lower_bound(tmp_path):
    """hey then Locust of the same nginx: Locust's plateau (about 660 req/s) is its generator's ceiling,
    not a 71 % loss of the server's 2,277 req/s: marked a lower bound, and no regression is called on it."""
    import json
    import shutil
    import subprocess
    import sys

    from conftest import ROOT

    for name, to in (("hey-nginx-regex3000", "v1"), ("locust-nginx-regex3000", "v2")):
        shutil.copytree(ROOT / "data" / "runs" / name, tmp_path / to)
    out = tmp_path / "h.json"
    p = subprocess.run([sys.executable, "-m", "headroom", "history", str(tmp_path / "v1"), str(tmp_path / "v2"),
                        "--cache", "none", "--json", str(out)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 3, p.stdout + p.stderr  # not judged (3), not regressed (1): a bound shows no loss
    doc = json.loads(out.read_text())
    rel = doc["runs"]
    assert [r["label"] for r in rel] == ["hey", "locust"]
    assert rel[1]["metrics"]["plateau_rps"]["lower_bound"] is True
    assert rel[0]["metrics"]["plateau_rps"]["lower_bound"] is False
    assert "REGRESSED" not in p.stdout and ">=660" in p.stdout.replace(" ", "")
