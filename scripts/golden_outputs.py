"""Golden outputs of the reading layer: every bundled and sample run, read, reduced and summarised.

    python3 scripts/golden_outputs.py OUT_DIR            # write one file per run into OUT_DIR
    diff -r /tmp/golden-before /tmp/golden-after        # after a change to the readers

For every run (the bundled runs under data/, the format samples and the
real samples under tests/data/formats, the bad inputs of tests/data/bad and a
few runs read with options) it writes what ``headroom summary --json`` prints
(:func:`headroom.reduce_run` then :func:`headroom.summary.analyze`, as the
command does) and a fingerprint of :func:`headroom.load_run` (every request's
start and latency, the step offsets, failed requests, warnings, format and
steps), or the one-line error either gives.  Files with relative times are
anchored at their modification time: compare outputs of the same checkout.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

#: (name, path(s), reading options) of runs read with options
WITH_OPTIONS = [
    ("k6-steps-10s", "tests/data/formats/k6.json", {"steps": "10s"}),
    ("vegeta-steps-cuts", "tests/data/formats/vegeta.csv", {"steps": "0,1,2"}),
    ("oha-hey-start", "tests/data/formats/oha.csv", {"base_time_ns": 1_700_000_000_000_000_000}),
    ("hey-hey-start", "tests/data/formats/real/hey-ramp-base.csv.gz", {"base_time_ns": 1_700_000_000_000_000_000}),
    ("hey-concurrency", "tests/data/formats/real/hey-ramp-base.csv.gz", {"concurrency": "1:5"}),
    ("ab-steps-5s", "tests/data/formats/real/ab-steps/ab-c8.tsv.gz", {"steps": "5s"}),
    ("oha-ramp-steps", "tests/data/formats/oha-ramp", {"steps": "1s"}),
    ("jmeter-forced", "tests/data/formats/jmeter.csv", {"format": "jmeter"}),
    ("k6-forced-wrong", "tests/data/formats/k6.json", {"format": "vegeta-csv"}),
    ("two-throughputramp", ["data/runs/nginx-keepalive/perfResults.csv.gz",
                            "data/runs/nginx-keepalive-repeat/perfResults.csv.gz"], {}),
    ("two-gatling", ["tests/data/formats/real/gatling-ClosedRampSimulation.log.gz",
                     "tests/data/formats/real/gatling3_16_0-ClosedRampSimulation.log.gz"], {}),
    ("skip-bad-rows", "tests/data/bad/garbage-timestamp", {"skip_bad_rows": True}),
]  # fmt: skip


def runs() -> list[tuple[str, object, dict]]:
    """Every run to read: (name, path or paths, options)."""
    out = []
    for perf in sorted(ROOT.glob("data/**/perfResults.csv*")):
        out.append((str(perf.parent.relative_to(ROOT)), str(perf.parent), {}))
    formats = ROOT / "tests/data/formats"
    for p in sorted(formats.rglob("*")):
        if p.is_file() and p.suffix not in (".md", ".txt", ".jmx", ".log") or p.name.endswith(".log.gz"):
            out.append((str(p.relative_to(ROOT)), str(p), {}))
        elif p.name.endswith("simulation.log"):
            out.append((str(p.relative_to(ROOT)), str(p), {}))
    for d in ("oha-ramp", "real/ab-steps", "real/oha-rates"):
        out.append((f"tests/data/formats/{d}/", str(formats / d), {}))
    for p in sorted((ROOT / "tests/data/bad").iterdir()):
        if p.is_dir():
            out.append((str(p.relative_to(ROOT)), str(p), {}))
    for name, path, opts in WITH_OPTIONS:
        paths = [str(ROOT / x) for x in path] if isinstance(path, list) else str(ROOT / path)
        out.append((f"options/{name}", paths, opts))
    return out


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        if a is None:
            h.update(b"None")
        else:
            a = np.ascontiguousarray(a)
            h.update(str(a.dtype).encode() + str(a.shape).encode())
            h.update(a.tobytes())
    return h.hexdigest()[:20]


def summary_doc(path, opts: dict) -> dict:
    from headroom.io import reduce_run
    from headroom.summary import analyze, to_json

    try:
        run = reduce_run(path, progress=False, **opts)
        return to_json(analyze(run))
    except Exception as e:  # noqa: BLE001 - the error is the golden output
        return {"error": f"{type(e).__name__}: {e}"}


def load_doc(path, opts: dict) -> dict:
    from headroom.io import load_run

    opts = {k: v for k, v in opts.items() if k != "progress"}
    try:
        run = load_run(path, **opts)
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}"}
    r = run.requests
    return {
        "n": int(len(r.start_ns)),
        "requests": _digest(r.start_ns, r.latency_s, r.step_offsets),
        "errors": run.errors,
        "error_codes": {str(k): v for k, v in run.error_codes.items()},
        "step_errors": None if run.step_errors is None else [int(x) for x in run.step_errors],
        "warnings": list(run.warnings),
        "format": run.format,
        "step_concurrency": run.meta.step_concurrency,
        "step_rates": run.meta.step_rates,
        "cpu": None if run.cpu is None else _digest(*(getattr(run.cpu, f) for f in ("time_ns", "pct"))),
    }


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else "/tmp/golden")
    out.mkdir(parents=True, exist_ok=True)
    only = argv[2] if len(argv) > 2 else ""
    for name, path, opts in runs():
        if only not in name:
            continue
        doc = {"summary": summary_doc(path, opts), "load_run": load_doc(path, opts)}
        f = out / (name.replace("/", "__") + ".json")
        text = json.dumps(doc, indent=2, sort_keys=True, default=str)
        f.write_text(text.replace(str(ROOT), "<repo>") + "\n")
        print(name, "error" if "error" in doc["summary"] else "ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
