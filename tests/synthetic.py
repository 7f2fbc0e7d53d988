"""Seeded synthetic closed-loop ramps with the noise real shared machines have.

The server follows the USL (lambda 200 req/s per client, sigma 0.05,
kappa 0.0005); a ramp runs concurrency 1, 4, ... 40 (14 steps), each step
lasting 1-5 s (drawn per run).  Noise, all lognormal, with the defaults set
from real interleaved nginx ramps on a loaded 2-core machine (see
``bench/noise.py`` and the README's calibration section):

* per run: the host's speed during the whole run (``run``, 27 %): other
  jobs take CPU time from the server, so it slows latency and throughput
  together, but not what a request costs;
* per step: the host's speed during one step (``step``, 12 %), correlated
  from one step to the next (``step_rho``, AR(1) 0.7, which leaves step
  residuals correlated +0.2 to +0.3 as on the real runs: a busy neighbour
  stays busy for a while);
* per second: latency within a second (10 %); per request: 30 %;
* the tail: a fraction of the requests (``tail_share`` 2 %) is delayed by a
  factor that varies per run (25 %) and per step (30 %), so p99 is noisier
  than p50 (31 % against 27 % per run);
* CPU per request: its own noise per run (``cpu_run``, 6 %) and per step
  (``cpu_step``, 4 %), independent of the host's speed.

In a closed loop a second whose latency is f times higher completes f times
fewer requests (Little's law), so every speed factor moves throughput and
latency together.  ``slowdown`` makes the server's work that many times
longer (latency up, throughput down, CPU per request up); ``drift`` adds a
trend to the run factor (log units), for baseline runs recorded before the
candidate's.  Used by the calibration tests and ``bench/calibrate.py``.
"""

from __future__ import annotations

import numpy as np

from headroom.model import CpuSamples, Requests, Run, RunMeta

LAMBDA, SIGMA, KAPPA = 200.0, 0.05, 0.0005
PLAN = np.arange(1, 41, 3)
NOISE = {
    "run": 0.27,
    "step": 0.12,
    "step_rho": 0.7,
    "second": 0.10,
    "request": 0.30,
    "tail_share": 0.02,
    "tail_run": 0.25,
    "tail_step": 0.30,
    "cpu_run": 0.06,
    "cpu_step": 0.03,
}
CPU_S_PER_REQ = 0.0002  # of one core (at most ~60 % busy: never clipped at 100 %)


def usl(n):
    return LAMBDA * n / (1 + SIGMA * (n - 1) + KAPPA * n * (n - 1))


def _ar1(rng, n: int, sd: float, rho: float) -> np.ndarray:
    """n correlated step factors (log units) with marginal sd ``sd`` and lag-1 correlation ``rho``."""
    e = rng.normal(0, sd, n)
    out = np.empty(n)
    out[0] = e[0]
    for i in range(1, n):
        out[i] = rho * out[i - 1] + np.sqrt(1 - rho * rho) * e[i]
    return out


def _second(rng, nz, r: float, n: int, length: float, t0: int, tail: float):
    """One second of one step: (start times ns, latencies s) of a closed loop at mean latency ``r``."""
    r = r * np.exp(rng.normal(0, nz["second"]))
    count = rng.poisson(n / r * length)
    st = t0 + np.sort(rng.uniform(0, length * 1e9, count)).astype(np.int64)
    lat = r * np.exp(rng.normal(-(nz["request"] ** 2) / 2, nz["request"], count))
    slow = rng.random(count) < nz["tail_share"]
    lat[slow] *= tail
    return st, np.round(lat, 5), count


def ramp(
    seed: int,
    *,
    slowdown: float = 1.0,
    label: str = "synthetic",
    noise: dict | None = None,
    drift: float = 0.0,
    factors: dict | None = None,
    cpu_slowdown: float | None = None,
    plan: np.ndarray | None = None,
) -> Run:
    """One synthetic ramp run, reproducible from its seed.

    ``factors`` (for :func:`interleaved`) gives the host's factors instead of
    drawing them: ``f_run``, ``f_cpu``, ``tail_run``, ``f_steps`` and
    ``cpu_steps`` (per step).  ``cpu_slowdown``: CPU per request changes by
    this factor, latency by ``slowdown`` (default: the same).  ``plan``: the concurrency of every
    step (default PLAN; a level repeated is recorded that many times in a row, as
    ``headroom ramp --pairs-per-level`` records it); ``slowdown`` may be an array, one factor per
    step (a change that varies with load).
    """
    plan = PLAN if plan is None else np.asarray(plan)
    slowdown = np.broadcast_to(np.asarray(slowdown, np.float64), plan.shape)
    nz = {**NOISE, **(noise or {})}
    rng = np.random.default_rng(seed)
    if factors is None:
        f_run = np.exp(rng.normal(0, nz["run"]) + drift)
        f_cpu = np.exp(rng.normal(0, nz["cpu_run"]))
        tail_run = 3.0 * np.exp(rng.normal(0, nz["tail_run"]))
        f_steps = np.exp(_ar1(rng, len(plan), nz["step"], nz["step_rho"]))
        cpu_steps = None
    else:
        f_run, f_cpu, tail_run = factors["f_run"], factors["f_cpu"], factors["tail_run"]
        f_steps, cpu_steps = factors["f_steps"], factors["cpu_steps"]
    cpu_slow = (
        slowdown if cpu_slowdown is None else np.broadcast_to(np.asarray(cpu_slowdown, float), plan.shape)
    )
    t = 1_700_000_000 * 10**9
    starts, lats, offsets, cpu_t, cpu_p = [], [], [0], [], []
    for k, n in enumerate(plan):
        dur = rng.uniform(1.0, 5.0)
        r_step = n / usl(n) * slowdown[k] * f_run * f_steps[k]
        tail = tail_run * np.exp(rng.normal(0, nz["tail_step"]))
        cpu_f = np.exp(rng.normal(0, nz["cpu_step"])) if cpu_steps is None else cpu_steps[k]
        cpu_step = CPU_S_PER_REQ * cpu_slow[k] * f_cpu * cpu_f
        step_rows = 0
        for j in range(int(np.ceil(dur))):
            length = min(1.0, dur - j)
            st, lat, count = _second(rng, nz, r_step, int(n), length, t + int(j * 1e9), tail)
            starts.append(st)
            lats.append(lat)
            step_rows += count
            cpu_t.append(t + int((j + length) * 1e9))
            cpu_p.append(min(100.0, 100.0 * count / length * cpu_step))
        offsets.append(offsets[-1] + step_rows)
        t += int(np.ceil(dur * 1e9)) + 50_000_000
    req = Requests(np.concatenate(starts), np.concatenate(lats), np.asarray(offsets, np.int64))
    cpu = CpuSamples(np.asarray(cpu_t, np.int64), np.asarray(cpu_p), None, 1.0, "synthetic")
    fields = {"lower_concurrency": 1, "concurrency_step": 3, "sha": label}
    if len(plan) != len(PLAN) or not np.array_equal(plan, PLAN):
        fields["concurrency"] = [int(c) for c in plan]
    return Run(
        req, cpu, RunMeta(label, f"synthetic:{seed}", fields), step_errors=np.zeros(len(plan), np.int64)
    )


#: noise of an interleaved recording's level pairs, beyond what the host shares (log units):
#: ``pair`` and ``cpu_pair`` the sd of a level's log ratio B/A from the step's speed and its
#: CPU per request, ``*_rho`` their lag-1 correlation between neighbouring levels.  Set so that
#: ``bench/noise.py --paired --synthetic`` matches the 16 real A/A recordings of
#: data/calibration/interleaved/aa (residual sd of a level's log ratio: throughput 46 %, p99 75 %,
#: CPU per request 6.7 %; lag-1 correlation +0.1 to +0.25 after the bias correction; the model
#: gives 43 %, 70 % and 7.8 %, +0.13 to +0.26).  The real p50's 18 % is mostly hey's 0.1 ms
#: rounding of 0.2 ms latencies, which the model does not have: its p50 moves with throughput,
#: by Little's law.  ``tail_step`` replaces the per-step tail noise of NOISE for both sides.
PAIR_NOISE = {"pair": 0.48, "pair_rho": 0.3, "cpu_pair": 0.065, "cpu_pair_rho": 0.3, "tail_step": 0.55}
#: the pair noise measured on 16 real A/A recordings with two pairs per level at 61-88 % foreign load
#: (dev-go-aa-70, dev-nginx-aa-70, r5-go-aa-70; ``bench/noise.py --paired``: pure error within levels
#: and the levels' own noise alike, throughput 42/46 %, p50 38/40 %, p99 83/63 %, CPU per request
#: 9.4/10.5 %; neighbouring levels' correlation -0.25 to +0.11)
PAIR_NOISE_2 = {"pair": 0.44, "pair_rho": 0.0, "cpu_pair": 0.10, "cpu_pair_rho": 0.0, "tail_step": 0.55}


def interleaved(
    seed: int,
    *,
    slowdown: float = 1.0,
    cpu_slowdown: float | None = None,
    noise: dict | None = None,
    pair_noise: dict | None = None,
    job: str = "synthetic",
    pairs: int = 1,
) -> tuple[Run, Run]:
    """One interleaved recording (A, B): both sides share the host's run and step factors, each
    step has its own pair noise; B's server is ``slowdown`` times slower (CPU per request
    ``cpu_slowdown``, default the same; either may be a function of the concurrency, a change
    that varies with load).  ``pairs``: steps per level and side (``--pairs-per-level``).
    Metadata says ``ab.design: interleaved steps``."""
    pn = {**(PAIR_NOISE if pairs == 1 else PAIR_NOISE_2), **(pair_noise or {})}
    nz = {**NOISE, "tail_step": pn["tail_step"], **(noise or {})}
    rng = np.random.default_rng([seed, 17])
    plan = np.repeat(PLAN, pairs)
    n = len(plan)
    slow = np.array([slowdown(c) if callable(slowdown) else slowdown for c in plan], float)
    if cpu_slowdown is None:
        cslow_all = slow
    else:
        cslow_all = np.array(
            [cpu_slowdown(c) if callable(cpu_slowdown) else cpu_slowdown for c in plan], float
        )
    shared = {
        "f_run": float(np.exp(rng.normal(0, nz["run"]))),
        "f_cpu": float(np.exp(rng.normal(0, nz["cpu_run"]))),
        "tail_run": float(3.0 * np.exp(rng.normal(0, nz["tail_run"]))),
    }
    host = _ar1(rng, n, nz["step"], nz["step_rho"])
    out = []
    for k, (side, sl, cs) in enumerate((("a", 1.0, 1.0), ("b", slow, cslow_all))):
        eps = _ar1(rng, n, pn["pair"] / np.sqrt(2), pn["pair_rho"])
        ceps = _ar1(rng, n, pn["cpu_pair"] / np.sqrt(2), pn["cpu_pair_rho"])
        f = {**shared, "f_steps": np.exp(host + eps), "cpu_steps": np.exp(ceps)}
        run = ramp(
            seed * 2 + k, slowdown=sl, cpu_slowdown=cs, label=f"{side}-01", noise=nz, factors=f, plan=plan
        )
        run.meta.fields["ab"] = {
            "design": "interleaved steps",
            "job": f"{job}-{seed}",
            "recording": 1,
            "side": side,
        }
        out.append(run)
    return out[0], out[1]


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
