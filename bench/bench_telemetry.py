#!/usr/bin/env python3
"""Reading the telemetry of a 1-hour run at 1 s: headroom's Prometheus source against a plain HTTP fetch.

    python3 bench/bench_telemetry.py [--hours 1] [--repeat 5]

1. Scrapes the real Go test server (testserver/, built by tests/goserver.py) once a second
   for ``--scrape`` seconds while a small load runs, keeping the series headroom reads.
2. Builds an hour of 1 s samples from them: every second takes the next real scrape in turn
   (cycled), counters adding the real scrape-to-scrape increases so that they stay counters.
3. Writes that as OpenMetrics and backfills a fresh TSDB with
   ``promtool tsdb create-blocks-from openmetrics``, then starts Prometheus on it.
4. Times ``headroom.telemetry.prometheus.fetch`` over the hour (every series, rates, checks)
   against a plain HTTP GET of the same series' samples over the same range (bytes read,
   nothing parsed), in the same run, and prints both and their ratio.

Every process is started here, bounded in time and stopped by its PID.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from goserver import GoServer  # noqa: E402
from prometheus import Prometheus  # noqa: E402

from headroom.telemetry.prometheus import DEFAULTS, PromSource, fetch  # noqa: E402

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


def scrape_real(seconds: int) -> list[dict[str, float]]:
    """``seconds`` scrapes of the Go test server's /metrics, one a second, under a light load."""
    names = {q for q, _k, _r in DEFAULTS.values()}
    out = []
    with GoServer(work=3000, alloc=16 << 10, max_lifetime="5m") as srv:
        stop = threading.Event()

        def load():
            while not stop.is_set():
                with urllib.request.urlopen(srv.url, timeout=5) as r:
                    r.read()

        t = threading.Thread(target=load, daemon=True)
        t.start()
        try:
            for _ in range(seconds):
                with urllib.request.urlopen(srv.base + "/metrics", timeout=5) as r:
                    text = r.read().decode()
                row = {}
                for line in text.splitlines():
                    m = _SAMPLE.match(line)
                    if m and m[1] in names and not m[2]:
                        row[m[1]] = float(m[3])
                out.append(row)
                time.sleep(1.0)
        finally:
            stop.set()
            t.join(timeout=10)
    return out


def openmetrics(scrapes: list[dict[str, float]], start_s: int, seconds: int, path: Path) -> None:
    """An hour (``seconds``) of 1 s samples built from the real scrapes, as OpenMetrics."""
    with open(path, "w") as f:
        for name, kind, _req in DEFAULTS.values():
            counter = kind == "counter"
            family = name[: -len("_total")] if name.endswith("_total") else name
            mtype = "counter" if name.endswith("_total") else ("summary" if counter else "gauge")
            if (
                mtype == "summary"
            ):  # go_gc_duration_seconds_sum/_count: keep them as their own gauges-free family
                family, mtype = name, "unknown"
            f.write(f"# TYPE {family} {mtype}\n")
            value = scrapes[0][name]
            for i in range(seconds):
                cur, prev = scrapes[i % len(scrapes)], scrapes[(i - 1) % len(scrapes)]
                if counter and i:
                    value += max(0.0, cur[name] - prev[name])
                elif not counter:
                    value = cur[name]
                f.write(f'{name}{{job="bench",instance="testserver"}} {value!r} {start_s + i}\n')
        f.write("# EOF\n")


def plain_fetch(url: str, selector: str, start_s: float, end_s: float) -> int:
    """GET the samples of the same series over the same range, reading the bytes only."""
    q = f"{selector}[{int(end_s - start_s)}s]"
    params = urllib.parse.urlencode({"query": q, "time": f"{end_s:.3f}"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{params}", timeout=60) as r:
        return len(r.read())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--scrape", type=int, default=20, help="seconds of real scrapes (default: 20)")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    seconds = int(a.hours * 3600)
    scrapes = scrape_real(a.scrape)
    with tempfile.TemporaryDirectory(prefix="headroom-bench-tel-") as tmp:
        tmp = Path(tmp)
        end = int(time.time()) - 600
        start = end - seconds
        om = tmp / "series.om"
        openmetrics(scrapes, start, seconds, om)
        subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(tmp / "tsdb")],
                       check=True, capture_output=True, timeout=600)  # fmt: skip
        with Prometheus({}, tmp / "prom", storage=tmp / "tsdb", retention="30d") as prom:
            src = PromSource(prom.url, match='job="bench"')
            names = "|".join(sorted(q for q, _k, _r in DEFAULTS.values()))
            selector = '{__name__=~"' + names + '",job="bench"}'
            lo, hi = (start + 5) * 10**9, (end - 5) * 10**9
            fetch(src, lo, hi)  # warm Prometheus' caches for both
            plain_fetch(prom.url, selector, lo / 1e9 - 3, hi / 1e9 + 3)
            t_h, t_p = [], []
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                tel = fetch(src, lo, hi)
                t_h.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                nbytes = plain_fetch(prom.url, selector, lo / 1e9 - 3, hi / 1e9 + 3)
                t_p.append(time.perf_counter() - t0)
    h, p = sorted(t_h)[len(t_h) // 2], sorted(t_p)[len(t_p) // 2]
    n = len(tel.get("cpu_cores"))
    print(f"telemetry of {a.hours:g} h at 1 s: {len(tel.series)} series, {n} CPU intervals, "
          f"{nbytes / 1e6:.1f} MB of JSON")  # fmt: skip
    print(f"headroom fetch (parse, rates, checks): {h:.3f} s (median of {a.repeat})")
    print(f"plain HTTP fetch of the same queries:  {p:.3f} s")
    print(f"ratio headroom / plain: {h / p:.2f}")
    return 0 if h < 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
