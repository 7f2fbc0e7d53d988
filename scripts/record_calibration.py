#!/usr/bin/env python3
"""Record the calibration sets in data/calibration/ (see its README.md).

    python3 scripts/record_calibration.py measure [VARIANT ...]   # CPU per request of variants
    python3 scripts/record_calibration.py record SET              # one set: aa, cpu25 or x2

``record`` starts two nginx proxy+backend pairs on loopback (A and B, each
from data/runs/configs/ramp-backend.conf and calib-proxy.conf filled in for
its variant, free ports, all four nginx pinned to CPU $SERVER_CPU), a seeded
CPU hog (scripts/cpu_hog.py) pinned to the same CPU, and runs
``headroom ramp --ab`` (pinned to CPU $GEN_CPU with hey) in ABBA order into
data/calibration/SET/{a,b}-NN.  Then it stops the hog and the four nginx by
their PIDs, and gzips every perfResults.csv (-9).  Every process is bounded
in time.  It refuses to overwrite an existing set folder.

``measure`` runs, for each variant, a fresh pair and ``hey -z 3s -c 20``
(pinned as above, no hog), three times interleaved, and prints the CPU time
of both nginx (user+system, psutil) per request: how the change of each
set was chosen.

Environment: GEN_CPU (0), SERVER_CPU (1), CONC (1:40:3), STEP (2s), PAUSE (3s).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "data" / "runs" / "configs"
OUT = ROOT / "data" / "calibration"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
GEN_CPU = os.environ.get("GEN_CPU", "0")
SERVER_CPU = os.environ.get("SERVER_CPU", "1")
CONC = os.environ.get("CONC", "1:40:3")
STEP = os.environ.get("STEP", "2s")
PAUSE = os.environ.get("PAUSE", "3s")

KEEPALIVE = {
    "KEEPALIVE": "keepalive 64;",
    "PROXY_HTTP": 'proxy_http_version 1.1; proxy_set_header Connection "";',
}
#: proxy variants: substitutions into calib-proxy.conf
VARIANTS = {
    "keepalive": {**KEEPALIVE, "EXTRA": ""},
    "no-keepalive": {"KEEPALIVE": "", "PROXY_HTTP": "", "EXTRA": ""},
    "access-log": {**KEEPALIVE, "EXTRA": "access_log @DIR@/proxy-access.log;"},
    "access-log-buffered": {**KEEPALIVE, "EXTRA": "access_log @DIR@/proxy-access.log combined buffer=64k;"},
    "gzip1": {**KEEPALIVE, "EXTRA": "gzip on; gzip_comp_level 1; gzip_min_length 0; gzip_types *;"},
    "sub-filter": {
        **KEEPALIVE,
        "EXTRA": "sub_filter_types *; sub_filter_once on; sub_filter 'xxxxxxxxxxxxxxxx' 'yyyyyyyyyyyyyyyy';",
    },
    "headers": {
        **KEEPALIVE,
        "EXTRA": "add_header X-A $request_id; add_header X-B $upstream_response_time; "
        "add_header X-C $connection_requests; proxy_set_header X-Request-Id $request_id;",
    },
    "buffering-off": {**KEEPALIVE, "EXTRA": "proxy_buffering off;"},
    # issue 37: the request through an echo-module subrequest (calib-proxy-echo.conf), with and without
    # a 1 ms wait before it (latency with little CPU)
    "echo": {"TEMPLATE": "calib-proxy-echo.conf", "SLEEP": ""},
    "echo-sleep1ms": {"TEMPLATE": "calib-proxy-echo.conf", "SLEEP": "echo_sleep 0.001;"},
}
GZIP = "gzip on; gzip_comp_level 1; gzip_min_length 0; gzip_types *;"
VARIANTS["gzip1-access-log"] = {**KEEPALIVE, "EXTRA": f"{GZIP} access_log @DIR@/proxy-access.log;"}
VARIANTS["gzip9-access-log-headers"] = {
    **KEEPALIVE,
    "EXTRA": f"{GZIP.replace('level 1', 'level 9')} access_log @DIR@/proxy-access.log; "
    f"{VARIANTS['headers']['EXTRA']}",
}
VARIANTS["gzip1-access-log-headers-sub-filter"] = {
    **KEEPALIVE,
    "EXTRA": f"{GZIP} access_log @DIR@/proxy-access.log; {VARIANTS['headers']['EXTRA']} "
    f"{VARIANTS['sub-filter']['EXTRA']}",
}
VARIANTS["gzip1-access-log-headers"] = {
    **KEEPALIVE,
    "EXTRA": f"{GZIP} access_log @DIR@/proxy-access.log; {VARIANTS['headers']['EXTRA']}",
}


def regex_tests(n: int) -> str:
    """nginx CPU without output: ``n`` rewrite-phase tests of the request URI against regular
    expressions that never match (each scans the URI)."""
    return " ".join(f'if ($request_uri ~ "[a-z]+{i:04d}q") {{ return 404; }}' for i in range(n))


# issue 39: nginx bound by its own CPU, not hey's (data/search/README.md): the cost is not linear in n
# (measured: regex3000 about 750 us of CPU a request, regex3300 about 300-330, regex4200 about 390)
for _n in (300, 1000, 2000, 3000, 3300, 3600, 4000, 4200, 4600, 5000):
    VARIANTS[f"regex{_n}"] = {**KEEPALIVE, "EXTRA": regex_tests(_n)}
#: set -> (A variant, B variant, runs per side, hog seed)
SETS = {
    "aa": ("keepalive", "keepalive", 6, 1701),
    "cpu25": ("keepalive", os.environ.get("CPU25_VARIANT", "gzip1-access-log-headers-sub-filter"), 4, 1702),
    "x2": ("keepalive", "no-keepalive", 4, 1703),
    # second rounds of the two changes, recorded after the first, with their own hog seeds
    "cpu25-2": ("keepalive", os.environ.get("CPU25_VARIANT", "gzip1-access-log-headers-sub-filter"), 4, 1704),
    "x2-2": ("keepalive", "no-keepalive", 4, 1705),
    "aa-2": ("keepalive", "keepalive", 5, 1706),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def render(template: Path, out: Path, subs: dict[str, str]) -> None:
    text = template.read_text()
    for _ in range(2):  # @EXTRA@ may itself name @DIR@
        for k, v in subs.items():
            text = text.replace(f"@{k}@", v)
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        sys.exit(f"record_calibration: {template.name}: unfilled {left}")
    out.write_text(text)


def wait_for(url: str, pids: list[int]) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + 10
    while True:
        try:
            with opener.open(url, timeout=1) as r:
                r.read()
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline or not all(psutil.pid_exists(p) for p in pids):
            raise RuntimeError(f"{url} does not answer")
        time.sleep(0.05)


class Pair:
    """A backend nginx and a proxy nginx in front of it, pinned to SERVER_CPU."""

    def __init__(self, variant: str, work: Path, path: str = "/index.html"):
        self.variant = variant
        self.dir = work / variant / str(free_port())
        self.procs: list[subprocess.Popen] = []
        self.path = path  # what the URL asks for ("/" of a Go test server behind the proxy)

    def start(self, backend_port: int | None = None) -> Pair:
        """Start both nginx; ``backend_port``: proxy to a backend already listening there instead."""
        d = self.dir
        for sub in ("www", "backend-tmp", "proxy-tmp"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        (d / "www" / "index.html").write_text("x" * 1023 + "\n")  # 1024 bytes
        self.backend_port, self.proxy_port = backend_port or free_port(), free_port()
        subs = {
            "DIR": str(d),
            "BACKEND_PORT": str(self.backend_port),
            "PROXY_PORT": str(self.proxy_port),
            "USER": "user root;" if os.geteuid() == 0 else "",
            **VARIANTS[self.variant],
        }
        render(CONFIGS / "ramp-backend.conf", d / "backend.conf", subs)
        render(CONFIGS / subs.pop("TEMPLATE", "calib-proxy.conf"), d / "proxy.conf", subs)
        for name in ("backend", "proxy") if backend_port is None else ("proxy",):
            cmd = ["taskset", "-c", SERVER_CPU, NGINX, "-p", str(d), "-c", str(d / f"{name}.conf")]
            self.procs.append(
                subprocess.Popen(
                    [*cmd, "-e", str(d / f"{name}-error.log")],
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        wait_for(self.url, self.pids)
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.proxy_port}{self.path}"

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def cpu_s(self) -> float:
        total = 0.0
        for pid in self.pids:
            root = psutil.Process(pid)
            for p in [root, *root.children(recursive=True)]:
                t = p.cpu_times()
                total += t.user + t.system
        return total

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGQUIT)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def hey_requests(url: str, seconds: int = 3, conc: int = 20) -> int:
    cmd = ["taskset", "-c", GEN_CPU, "hey", "-z", f"{seconds}s", "-c", str(conc), url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30).stdout
    m = re.search(r"\[200\]\s+(\d+) responses", out)
    return int(m[1]) if m else 0


def measure(variants: list[str]) -> int:
    work = Path(tempfile.mkdtemp(prefix="headroom-calib-"))
    per: dict[str, list[float]] = {v: [] for v in variants}
    try:
        for rep in range(3):
            for v in variants:
                pair = Pair(v, work).start()
                try:
                    hey_requests(pair.url, 1)  # warm-up
                    c0 = pair.cpu_s()
                    n = hey_requests(pair.url, 3)
                    per[v].append(1e6 * (pair.cpu_s() - c0) / max(n, 1))
                    print(f"rep {rep + 1} {v:22s} {n:8d} req  {per[v][-1]:6.1f} us CPU/request", flush=True)
                finally:
                    pair.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = sum(per[variants[0]]) / len(per[variants[0]])
    for v in variants:
        m = sum(per[v]) / len(per[v])
        print(f"{v:22s} mean {m:6.1f} us CPU/request  {100 * (m / base - 1):+6.1f} % vs {variants[0]}")
    return 0


def start_hog(seed: int, seconds: float, work: Path, cpu: str = SERVER_CPU) -> subprocess.Popen:
    """The seeded CPU hog pinned to ``cpu``, bounded by ``seconds``, its schedule in work/hog.log."""
    return subprocess.Popen(
        ["taskset", "-c", cpu, sys.executable, str(ROOT / "scripts" / "cpu_hog.py")]
        + ["--seed", str(seed), "--duration", str(seconds)],
        stdin=subprocess.DEVNULL,
        stderr=open(work / "hog.log", "w"),
        start_new_session=True,
    )


def record(name: str) -> int:
    va, vb, repeats, seed = SETS[name]
    dest = OUT / name
    if dest.exists():
        sys.exit(f"record_calibration: {dest} exists; remove it to re-record")
    work = Path(tempfile.mkdtemp(prefix="headroom-calib-"))
    pairs: list[Pair] = []
    hog = None
    budget = 2 * repeats * 60 + 120  # s: a 14-step run takes about 35 s
    try:
        a, b = Pair(va, work).start(), Pair(vb, work).start()
        pairs = [a, b]
        hog = start_hog(seed, budget, work)
        desc = (
            f"calibration set {name}: nginx {nginx_version()} reverse proxy (1 worker) in front of a "
            f"backend nginx (1 worker) serving a 1024-byte file; A = proxy variant {va}, B = {vb}; "
            f"servers and a seeded CPU hog (scripts/cpu_hog.py --seed {seed}) on CPU {SERVER_CPU}, "
            f"headroom and hey on CPU {GEN_CPU}; machine shared with other work"
        )
        cmd = ["taskset", "-c", GEN_CPU, sys.executable, "-m", "headroom", "ramp", "--ab", a.url, b.url]
        cmd += ["--repeats", str(repeats), "-o", str(dest), "--concurrency", CONC, "--step-duration", STEP]
        cmd += ["--pause", PAUSE, "--description", desc, "--progress"]
        cmd += [f"--cpu-pid-a={p}" for p in a.pids] + [f"--cpu-pid-b={p}" for p in b.pids]
        print("record_calibration:", " ".join(cmd), file=sys.stderr, flush=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        rc = subprocess.run(cmd, cwd=ROOT, env=env, timeout=budget + 300).returncode
    finally:
        if hog is not None and hog.poll() is None:
            hog.send_signal(signal.SIGTERM)
            hog.wait(timeout=10)
        for p in pairs:
            p.stop()
    keep_configs(work, dest, pairs)
    for f in sorted(dest.glob("*/perfResults.csv")):
        subprocess.run(["gzip", "-9", str(f)], check=True)
    shutil.rmtree(work, ignore_errors=True)
    return rc


def keep_configs(work: Path, dest: Path, pairs: list[Pair]) -> None:
    """Copy what ran: the rendered configs of each side and the hog's log."""
    if not dest.is_dir():
        return
    (dest / "configs").mkdir(exist_ok=True)
    for side, p in zip("ab", pairs):
        for name in ("backend", "proxy"):
            shutil.copy(p.dir / f"{name}.conf", dest / "configs" / f"{side}-{name}.conf")
    if (work / "hog.log").exists():
        shutil.copy(work / "hog.log", dest / "hog.log")


def nginx_version() -> str:
    r = subprocess.run([NGINX, "-v"], capture_output=True, text=True)
    return r.stderr.strip().split("/")[-1]


def main(argv: list[str]) -> int:
    if argv[:1] == ["measure"]:
        names = argv[1:] or ["keepalive", "access-log", "gzip1", "sub-filter", "headers", "no-keepalive"]
        bad = [v for v in names if v not in VARIANTS]
        if bad:
            sys.exit(f"record_calibration: unknown variant {bad[0]} (known: {', '.join(VARIANTS)})")
        return measure(names)
    if len(argv) == 2 and argv[0] == "record" and argv[1] in SETS:
        return record(argv[1])
    sys.exit(f"usage: record_calibration.py measure [VARIANT ...] | record {{{','.join(SETS)}}}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
