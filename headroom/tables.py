"""What the reading of a run shares beyond one file: ``--concurrency``, rates of a folder of one file
per rate, and the messages of folders of files.

The readers themselves are :mod:`headroom.formats`; the reduction (and :func:`headroom.load_run`,
the same reduction keeping the requests) is :mod:`headroom.reading`.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .formats._scan import short
from .model import HeadroomError
from .runfolder import RunFiles, step_concurrency_from_names  # noqa: F401 - imported from here


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``--concurrency``: a stated plan, ``LOW:HIGH:STEP`` (``1:40:3`` -> 1, 4, ..., 40), ``LOW:HIGH``
    (step 1) or a list ``1,2,4,8``: the concurrency of every step, in step order."""
    t = text.strip()
    why = f"bad --concurrency {short(text, 40)}: expected LOW:HIGH:STEP (1:40:3) or a list (1,2,4,8)"
    try:
        if ":" in t:
            parts = [int(x) for x in t.split(":")]
            if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] < 1) or parts[1] < parts[0]:
                raise ValueError
            levels = tuple(range(parts[0], parts[1] + 1, parts[2] if len(parts) == 3 else 1))
        else:
            levels = tuple(int(x) for x in t.split(","))
    except ValueError:
        raise HeadroomError(why) from None
    if not levels or min(levels) < 1 or len(levels) > 100_000:
        raise HeadroomError(why + " of whole numbers >= 1")
    return levels


def stated_concurrency(source: str, plan: tuple[int, ...], n_steps: int, found, rates, warnings: list):
    """The concurrency of every step from ``--concurrency``, checked against the steps found."""
    if len(plan) != n_steps:
        raise HeadroomError(
            f"{source}: --concurrency states {len(plan)} levels, but the run has {n_steps} steps "
            "(one level per step, in step order)"
        )
    if rates is not None:
        raise HeadroomError(
            f"{source}: --concurrency is for closed-loop ramps; this run's steps are request rates (open loop)"
        )
    if found is not None and any(c is not None and c != p for c, p in zip(found, plan)):
        warnings.append(
            f"{source}: --concurrency {','.join(map(str, plan))} replaces the file's own "
            f"{','.join('?' if c is None else str(c) for c in found)}"
        )
    return tuple(plan)


#: a rate in a file name: ``oha-q250``, ``rate-1000``, ``rps_50`` (oha -q, vegeta -rate)
_RATE_NAME = re.compile(r"(?:^|[^a-z])(?:qps|q|rate|rps)[-_]?(\d+(?:\.\d+)?)(?![\d.]*[a-z])")


def file_rates(files: RunFiles, first, last, n, warnings: list) -> list[dict] | None:
    """Rate steps of a folder of one file per rate (``oha -q R``): every file name states its rate.

    ``first``, ``last``, ``n``: every file's first and last start and its rows
    (failed ones too), as :func:`headroom.plan_steps.steps_from_groups` takes
    them from the rows: steps in order of first request.
    """
    from .levels import StepInference, reader_steps
    from .plan_steps import group_steps

    want = []
    for f in files.steps:
        m = _RATE_NAME.search(f.name.split(".")[0].lower())
        if not m:
            return None
        want.append(float(m[1]))
    first, last, n = (np.asarray(x, np.int64) for x in (first, last, n))
    present = np.flatnonzero(n > 0)
    order = present[np.argsort(first[present], kind="stable")]
    source = "one file per rate"
    inf = group_steps(
        first[order], last[order], n[order], intended_rps=[want[c] for c in order], source=source
    )
    inf = StepInference("rate", inf.steps, np.arange(len(order)), 0, source, inf.notes)
    warnings += [f"{files.perf.parent}: {x}" for x in inf.notes]
    rs = reader_steps(inf, names=[f.name for f in files.steps])
    return None if rs is None else rs.rates


def relative_files_warning(files: RunFiles) -> str:
    """The warning of a folder of files with relative times placed one after another."""
    return (
        f"{files.perf.parent}: {len(files.steps)} files with relative times are read as one ramp, each step "
        "starting when the previous one ended: the spacing between them is unknown"
    )


def csv_family_folder(path: Path) -> HeadroomError:
    """hey or throughputramp files given as one file per step."""
    return HeadroomError(
        f"{path}: a folder of one file per step is read for vegeta, k6, JMeter, Gatling and oha files; "
        "append hey runs to one file instead (each with its header)"
    )
