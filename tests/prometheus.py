"""Start and stop a real Prometheus server for the tests (Debian's ``prometheus`` package).

    from prometheus import Prometheus          # tests/ on sys.path, as under pytest
    with Prometheus(["127.0.0.1:8080"], tmp_path) as prom:
        prom.wait_for_target()
        print(prom.url)                        # http://127.0.0.1:PORT

Each instance listens on 127.0.0.1 on a free port, scrapes its targets every
second, keeps its TSDB in its own folder and is stopped by its PID (SIGTERM,
then SIGKILL); it never touches a system-wide Prometheus service.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

CONFIG = """global:
  scrape_interval: {interval}
  evaluation_interval: {interval}
scrape_configs:
{jobs}
"""
JOB = """  - job_name: "{job}"
    scrape_interval: {interval}
    scrape_timeout: {timeout}
    static_configs:
      - targets: ["{target}"]
"""


def find_prometheus() -> str | None:
    return shutil.which("prometheus") or (
        "/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK) else None
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    """A Prometheus scraping ``targets`` (``{job: "host:port"}`` or a list: jobs t0, t1, ...)."""

    def __init__(self, targets, folder: Path, *, interval: str = "1s", binary: str | None = None,
                 retention: str = "2h", storage: Path | None = None):  # fmt: skip
        if not isinstance(targets, dict):
            targets = {f"t{i}": t for i, t in enumerate(targets)}
        self.targets = targets
        self.folder = Path(folder)
        self.interval = interval
        self.binary = binary or find_prometheus()
        self.storage = storage or self.folder / "tsdb"
        self.retention = retention
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None

    def start(self, timeout: float = 30.0) -> Prometheus:
        self.folder.mkdir(parents=True, exist_ok=True)
        jobs = "".join(
            JOB.format(job=j, target=t, interval=self.interval, timeout=self.interval)
            for j, t in self.targets.items()
        )
        cfg = self.folder / "prometheus.yml"
        cfg.write_text(CONFIG.format(interval=self.interval, jobs=jobs or "  []"))
        log = open(self.folder / "prometheus.log", "w")
        self.proc = subprocess.Popen(
            [
                self.binary,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={self.storage}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                f"--storage.tsdb.retention.time={self.retention}",
                "--web.enable-admin-api",
            ],  # fmt: skip
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.pid = self.proc.pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"prometheus exited: {(self.folder / 'prometheus.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"prometheus not ready after {timeout:g} s")

    def api(self, path: str) -> dict:
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def wait_for_target(self, timeout: float = 20.0) -> None:
        """Until every target has been scraped up at least twice."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            act = self.api("/api/v1/targets")["data"]["activeTargets"]
            if act and all(t["health"] == "up" for t in act):
                time.sleep(2.2)
                return
            time.sleep(0.3)
        raise RuntimeError(f"targets not up after {timeout:g} s: {self.api('/api/v1/targets')}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
