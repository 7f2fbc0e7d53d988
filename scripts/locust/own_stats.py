"""Locust's own per-stage figures from the snapshots ramp.py wrote (run with Locust installed).

    python3 scripts/locust/own_stats.py OWN_DIR > OWN_DIR/stages.json

Every process's snapshots (cumulative, per name) are differenced stage by stage and added up
over the processes; each stage's count, failures and percentiles (50 ... 100 %, as Locust
reports them) are computed by Locust's own functions (locust.stats.StatsEntry over the
stage's rounded response-time histogram), for every name and for all names together.
"""

import json
import sys
from collections import Counter
from pathlib import Path

from locust.stats import PERCENTILES_TO_REPORT, calculate_response_time_percentile


def stages_of(path: Path) -> dict:
    """{stage: {name: (requests, failures, Counter of rounded ms)}} of one process."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    out = {}
    for a, b in zip(rows, rows[1:]):
        per = {}
        for name, e in b["entries"].items():
            old = a["entries"].get(name, {"num_requests": 0, "num_failures": 0, "response_times": {}})
            rt = Counter({int(k): v for k, v in e["response_times"].items()})
            rt.subtract({int(k): v for k, v in old["response_times"].items()})
            per[name] = (
                e["num_requests"] - old["num_requests"],
                e["num_failures"] - old["num_failures"],
                +rt,
            )
        out[a["stage"]] = {"users": a["users"], "per": per}
    return out


def figures(n: int, f: int, rt: Counter) -> dict:
    # Locust's percentiles are over every request logged with a response time, failures too
    return {
        "requests": n,
        "failures": f,
        "percentiles_ms": {
            f"{p:g}": calculate_response_time_percentile(rt, n, p) for p in PERCENTILES_TO_REPORT
        },
    }


def main(folder: str) -> None:
    procs = [stages_of(p) for p in sorted(Path(folder).glob("snapshots-*.jsonl"))]
    out = {"processes": len(procs), "stages": {}}
    for k in sorted({k for p in procs for k in p}):
        per: dict[str, list] = {}
        for p in procs:
            for name, (n, f, rt) in p.get(k, {"per": {}})["per"].items():
                acc = per.setdefault(name, [0, 0, Counter()])
                acc[0] += n
                acc[1] += f
                acc[2].update(rt)
        total = [sum(v[0] for v in per.values()), sum(v[1] for v in per.values()), Counter()]
        for v in per.values():
            total[2].update(v[2])
        users = next(p[k]["users"] for p in procs if k in p)
        out["stages"][str(k)] = {
            "users": users,
            "all": figures(*total),
            "names": {name: figures(*v) for name, v in sorted(per.items())},
        }
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
