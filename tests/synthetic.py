"""Seeded synthetic closed-loop ramps with the noise real machines have.

The server follows the USL (lambda 200 req/s per client, sigma 0.05,
kappa 0.0005); a ramp runs concurrency 1, 4, ... 40 (14 steps), each step
lasting 1-5 s (drawn per run).  Noise, all lognormal:

* per run: the host's speed during the whole run (sigma 5 %);
* per step: the host's speed during one step (sigma 12 %);
* per second: latency within a second (sigma 10 %);
* per request: latency around its second's level (sigma 30 %).

In a closed loop a second whose latency is f times higher completes f times
fewer requests (Little's law), so every factor moves throughput and latency
together.  ``slowdown`` makes the server's work that many times longer
(latency up, throughput down, CPU per request up).  Used by the
calibration tests and ``bench/calibrate.py``.
"""

from __future__ import annotations

import numpy as np

from headroom.model import CpuSamples, Requests, Run, RunMeta

LAMBDA, SIGMA, KAPPA = 200.0, 0.05, 0.0005
PLAN = np.arange(1, 41, 3)
NOISE = {"run": 0.05, "step": 0.12, "second": 0.10, "request": 0.30}
CPU_S_PER_REQ = 0.0004  # of one core


def usl(n):
    return LAMBDA * n / (1 + SIGMA * (n - 1) + KAPPA * n * (n - 1))


def ramp(seed: int, *, slowdown: float = 1.0, label: str = "synthetic", noise: dict | None = None) -> Run:
    """One synthetic ramp run, reproducible from its seed."""
    nz = {**NOISE, **(noise or {})}
    rng = np.random.default_rng(seed)
    f_run = np.exp(rng.normal(0, nz["run"]))
    t = 1_700_000_000 * 10**9
    starts, lats, offsets = [], [], [0]
    cpu_t, cpu_p = [], []
    for n in PLAN:
        dur = rng.uniform(1.0, 5.0)
        f_step = np.exp(rng.normal(0, nz["step"]))
        r_step = n / usl(n) * slowdown * f_run * f_step
        whole = int(np.ceil(dur))
        for j in range(whole):
            length = min(1.0, dur - j)
            r = r_step * np.exp(rng.normal(0, nz["second"]))
            count = rng.poisson(n / r * length)
            st = t + int(j * 1e9) + np.sort(rng.uniform(0, length * 1e9, count)).astype(np.int64)
            lat = r * np.exp(rng.normal(-(nz["request"] ** 2) / 2, nz["request"], count))
            starts.append(st)
            lats.append(np.round(lat, 5))
            cpu_t.append(t + int((j + length) * 1e9))
            cpu_p.append(min(100.0, 100.0 * count / length * CPU_S_PER_REQ * slowdown * f_run))
        offsets.append(offsets[-1] + sum(len(x) for x in starts[len(starts) - whole :]))
        t += int(np.ceil(dur * 1e9)) + 50_000_000
    req = Requests(np.concatenate(starts), np.concatenate(lats), np.asarray(offsets, np.int64))
    cpu = CpuSamples(np.asarray(cpu_t, np.int64), np.asarray(cpu_p), None, 1.0, "synthetic")
    fields = {"lower_concurrency": 1, "concurrency_step": 3, "sha": label}
    return Run(
        req, cpu, RunMeta(label, f"synthetic:{seed}", fields), step_errors=np.zeros(len(PLAN), np.int64)
    )


def write(run: Run, folder) -> None:
    """Write a run as a headroom-ramp style folder: perfResults.csv (with status), cpuStats.csv, metadata.yml."""
    import datetime
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)

    def stamp(ns: np.ndarray) -> np.ndarray:
        secs = (ns // 10**9).astype("datetime64[s]").astype(str)
        frac = np.char.zfill((ns % 10**9).astype(str), 9)
        return np.char.add(np.char.add(np.char.add(secs, "."), frac), "Z")

    req = run.requests
    with open(folder / "perfResults.csv", "w") as f:
        for k in range(req.n_steps):
            a, b = req.step_offsets[k], req.step_offsets[k + 1]
            f.write("start-time,response-time,status-code\n")
            lat = np.char.mod("%.5f", req.latency_s[a:b])
            rows = np.char.add(np.char.add(stamp(req.start_ns[a:b]), ","), lat)
            f.write("\n".join(np.char.add(rows, ",200")) + "\n")
    cpu = run.cpu
    lines = ["timestamp,percentage"] + [f"{t},{p:.6f}" for t, p in zip(stamp(cpu.time_ns), cpu.pct)]
    (folder / "cpuStats.csv").write_text("\n".join(lines) + "\n")
    meta = dict(run.meta.fields)
    meta["cpu_cores"] = 1
    text = "".join(f"{k}: {v!r}\n" if isinstance(v, str) else f"{k}: {v}\n" for k, v in meta.items())
    (folder / "metadata.yml").write_text(text + f"date: '{datetime.date(2026, 1, 1)}'\n")
