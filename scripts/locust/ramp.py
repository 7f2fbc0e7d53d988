"""The locustfile of headroom's real Locust samples (scripts/locust/record.sh).

A closed ramp of LOCUST_STAGES users (default 1,2,4,8), each held LOCUST_STAGE_S seconds
(default 6), by a LoadTestShape; every user waits LOCUST_WAIT_S seconds (default 0) between
requests: 94 % GET /, 4 % GET
/missing (a 404 from nginx or the Go test server), 2 % a closed loopback port (connection
refused: no response).  headroom.locust writes the run folder (--headroom-dir).

Beside it, to check the files against Locust's own statistics, every process that makes
requests writes a snapshot of Locust's cumulative statistics (its StatsEntry counts and
rounded response-time histograms, per name) at every stage change and when the test stops,
into LOCUST_OWN_DIR (one JSON line per snapshot): own_stats.py turns them into Locust's
per-stage counts and percentiles, computed by Locust's own functions.
"""

import json
import os
import time
from collections import Counter
from pathlib import Path

from locust import FastHttpUser, LoadTestShape, constant, events, task
from locust.runners import MasterRunner, WorkerRunner

import headroom.locust

STAGES = [int(x) for x in os.environ.get("LOCUST_STAGES", "1,2,4,8").split(",")]
STAGE_S = float(os.environ.get("LOCUST_STAGE_S", "6"))
OWN_DIR = Path(os.environ.get("LOCUST_OWN_DIR", "locust-own"))


class Web(FastHttpUser):
    wait_time = constant(float(os.environ.get("LOCUST_WAIT_S", "0")))

    @task(94)
    def home(self):
        self.client.get("/", name="home")

    @task(4)
    def missing(self):
        self.client.get("/missing", name="missing")

    @task(2)
    def refused(self):
        self.client.get("http://127.0.0.1:9/", name="refused")


class Stages(LoadTestShape):
    """LOCUST_STAGES users, LOCUST_STAGE_S seconds each, every stage spawned at once."""

    def tick(self):
        k = int(self.get_run_time() // STAGE_S)
        return (STAGES[k], max(STAGES)) if k < len(STAGES) else None


class OwnStats:
    """Locust's cumulative statistics of this process: what it reported to its master so far (a worker's
    entries are reset at every report) plus what it holds now."""

    def __init__(self, env):
        self.env, self.reported = env, {}
        role = "worker" if isinstance(env.runner, WorkerRunner) else "local"
        self.role = role
        self.out = None

    def _add(self, into, e):
        key = f"{e['method']} {e['name']}"
        d = into.setdefault(key, {"num_requests": 0, "num_failures": 0, "response_times": Counter()})
        d["num_requests"] += e["num_requests"]
        d["num_failures"] += e["num_failures"]
        d["response_times"].update({int(k): v for k, v in e["response_times"].items()})

    def on_report(self, client_id, data, **kw):  # after Locust's own listener: data["stats"] is the period's
        for e in data.get("stats", []):
            self._add(self.reported, e)

    def snapshot(self, what, stage, users):
        now = {
            k: {
                "num_requests": v["num_requests"],
                "num_failures": v["num_failures"],
                "response_times": Counter(v["response_times"]),
            }
            for k, v in self.reported.items()
        }
        for e in self.env.stats.entries.values():
            self._add(now, e.serialize())
        if self.out is None:
            OWN_DIR.mkdir(parents=True, exist_ok=True)
            index = f"-{self.env.runner.worker_index}" if self.role == "worker" else ""
            self.out = open(OWN_DIR / f"snapshots-{self.role}{index}.jsonl", "w")
        row = {
            "what": what,
            "stage": stage,
            "users": users,
            "time": time.time(),
            "entries": {k: {**v, "response_times": dict(v["response_times"])} for k, v in now.items()},
        }
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()


@events.init.add_listener
def _own(environment, **kw):
    if environment.runner is None or isinstance(environment.runner, MasterRunner):
        return
    own = OwnStats(environment)
    environment.events.report_to_master.add_listener(own.on_report)
    headroom.locust.stage_changed.add_listener(
        lambda environment, stage, users, **k: own.snapshot("stage", stage, users)
    )
    environment.events.test_stop.add_listener(lambda **k: own.snapshot("stop", None, None))
