"""Locust run for real here (127.0.0.1 only, every run bounded): headroom's listener enabled by one import
and by the command line, one process and a master with workers, and ``headroom ramp --engine locust``
driving a locustfile step by step.  Each run is checked against Locust's own statistics of the same run
(snapshots inside Locust, its --json-file), never against figures made by headroom."""

from __future__ import annotations

import csv
import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, tools_required

import headroom

SCRIPTS = ROOT / "scripts" / "locust"
LOCUSTFILE = """
from locust import FastHttpUser, constant, task


class Web(FastHttpUser):
    wait_time = constant(0)

    @task(9)
    def home(self):
        self.client.get("/", name="home")

    @task(1)
    def missing(self):
        self.client.get("/missing", name="missing")
"""


def need_locust() -> None:
    if importlib.util.find_spec("locust") is None:
        msg = "locust is not installed (python3 -m pip install locust, or '.[test]')"
        if tools_required("locust"):
            pytest.fail(msg + ", and HEADROOM_REQUIRE_TOOLS=1 says it must be there")
        pytest.skip(msg)


@pytest.fixture(scope="module")
def server():
    need_locust()
    from goserver import GoMissing, GoServer

    try:
        srv = GoServer(delay=0.005, work=1000)
        srv.start()
    except GoMissing as e:
        if tools_required("go"):
            pytest.fail(str(e))
        pytest.skip(str(e))
    try:
        yield srv
    finally:
        srv.stop()


def locust(*args, cwd: Path, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "locust", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})  # fmt: skip


def request_rows(folder: Path) -> list[dict]:
    out = []
    for p in sorted(folder.glob("locust*.csv")):
        opener = gzip.open if p.suffix == ".gz" else open
        with opener(p, "rt", newline="") as f:
            out += [r for r in csv.DictReader(f) if r["event"] == "request"]
    return out


def own_stages(own: Path) -> dict:
    r = subprocess.run([sys.executable, str(SCRIPTS / "own_stats.py"), str(own)], capture_output=True, text=True,
                       timeout=60, check=True)  # fmt: skip
    return json.loads(r.stdout)["stages"]


def test_a_shape_run_one_import_single_and_distributed(server, tmp_path):
    """scripts/locust/ramp.py (import headroom.locust, a LoadTestShape of 1, 2, 3 users): one process, then
    a master and two workers; every stage's requests and failures are Locust's own of that stage, and the
    workers' files merge into the run's steps."""
    env = {"LOCUST_STAGES": "1,2,3", "LOCUST_STAGE_S": "2", "LOCUST_WAIT_S": "0"}
    host = server.url.rstrip("/")
    for mode in ("single", "distributed"):
        d = tmp_path / mode
        d.mkdir()
        run = ["-f", SCRIPTS / "ramp.py", "--headless", "--host", host, "--headroom-dir", d / "run",
               "--json-file", d / "stats", "--stop-timeout", "0", "--loglevel", "WARNING"]  # fmt: skip
        e = {**env, "LOCUST_OWN_DIR": str(d / "own")}
        if mode == "single":
            locust(*run, cwd=d, env=e)
        else:
            port = 20000 + os.getpid() % 20000
            workers = [
                subprocess.Popen([sys.executable, "-m", "locust", "-f", str(SCRIPTS / "ramp.py"), "--worker",
                                  "--master-host", "127.0.0.1", "--master-port", str(port)], cwd=d,
                                 env={**os.environ, **e}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(2)
            ]  # fmt: skip
            try:
                locust(*run, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", port,
                       "--expect-workers", 2, cwd=d, env=e)  # fmt: skip
                for w in workers:
                    w.wait(timeout=30)
            finally:
                for w in workers:
                    if w.poll() is None:
                        w.kill()
                        w.wait()
        files = sorted((d / "run").glob("locust*.csv"))
        assert len(files) == (1 if mode == "single" else 2)
        stages = own_stages(d / "own")
        s = headroom.to_json(headroom.analyze(headroom.reduce_run(d / "run")))
        assert [x["concurrency"] for x in s["steps"]] == [1, 2, 3]
        for k, step in enumerate(s["steps"]):
            assert step["requests"] + step["errors"] == stages[str(k)]["all"]["requests"], mode
            assert step["errors"] == stages[str(k)]["all"]["failures"] > 0
        stats = json.loads((d / "stats.json").read_text())
        assert sum(e["num_requests"] for e in stats) == len(request_rows(d / "run"))


def test_ramp_engine_locust_drives_the_locustfile_step_by_step(server, tmp_path):
    """headroom ramp --engine locust --locustfile F, the listener given on Locust's command line (no import in
    the locustfile), one process then --processes 2: a step per level, each checked by the engine against
    Locust's own count of it (its --json-file), the 404s counted as errors."""
    lf = tmp_path / "locustfile.py"
    lf.write_text(LOCUSTFILE)
    for extra in ([], ["--engine-arg=--processes=2"]):
        out = tmp_path / f"run{len(extra)}"
        r = subprocess.run(
            [sys.executable, "-m", "headroom", "ramp", server.url, "-o", out, "--engine", "locust", "--locustfile",
             lf, "--concurrency", "1:3:2", "--step-duration", "2s", *extra],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        s = headroom.to_json(headroom.analyze(headroom.reduce_run(out)))
        assert [x["concurrency"] for x in s["steps"]] == [1, 3]
        with open(out / "perfResults.csv", newline="") as f:
            rows = [x for x in csv.reader(f) if x[0] != "start-time"]
        assert sum(x["requests"] + x["errors"] for x in s["steps"]) == len(rows)
        assert sum(x["errors"] for x in s["steps"]) == sum(1 for x in rows if x[2] == "404") > 0
        meta = (out / "metadata.yml").read_text()
        assert "locust" in meta


def test_ramp_engine_refuses_what_locust_cannot_do(tmp_path):
    need_locust()

    def ramp(*args):
        return subprocess.run([sys.executable, "-m", "headroom", "ramp", "http://127.0.0.1:9/", "-o",
                               tmp_path / "x", *args], capture_output=True, text=True, timeout=60)  # fmt: skip

    for args, want in (
        (["--engine", "locust"], "--engine locust needs --locustfile FILE"),
        (["--engine", "locust", "--locustfile", tmp_path / "nope.py"], "no such file"),
        (["--locustfile", __file__], "--locustfile is for --engine locust"),
        (["--engine", "locust", "--rate", "10:20:10"], "Locust cannot hold a fixed total rate"),
    ):
        r = ramp(*args)
        assert r.returncode == 2, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and want in lines[0], (args, lines)


def test_engine_parse_refuses_a_step_whose_files_lost_a_request(server, tmp_path):
    """The engine's check against Locust's own count fails when a request row is missing (planted)."""
    from headroom.model import HeadroomError
    from headroom.ramp.engines import Locust, StepPlan

    lf = tmp_path / "locustfile.py"
    lf.write_text(LOCUSTFILE)
    eng = Locust(sys.executable, lf, [sys.executable, "-m", "locust"])
    work = tmp_path / "step"
    work.mkdir()
    cmd = eng.command(server.url, StepPlan(concurrency=2, duration_s=1), work)
    with open(work / "err", "wb") as err:
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err, timeout=60, check=True)
    rows = eng.parse(work, 0, StepPlan(concurrency=2, duration_s=1))
    assert len(rows) == len(request_rows(work / "locust")) > 0
    f = work / "locust" / "locust.csv"
    lines = f.read_text().splitlines(keepends=True)
    drop = next(i for i, x in enumerate(lines) if x.startswith("request,"))
    f.write_text("".join(lines[:drop] + lines[drop + 1 :]))
    with pytest.raises(HeadroomError, match="Locust counted .* requests but its listener wrote"):
        eng.parse(work, 0, StepPlan(concurrency=2, duration_s=1))
