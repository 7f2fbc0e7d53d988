"""Property test: the fast loader agrees with the slow reference reader on random valid runs."""

import gzip
import tempfile
from pathlib import Path

import numpy as np
import reference
from conftest import BASE_NS
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from headroom import load_run


def rfc3339(ns: int, digits: int) -> str:
    """Go's RFC3339Nano-style text: trailing zeros trimmed, `digits` caps the precision."""
    whole, frac = divmod(ns, 10**9)
    t = np.datetime64(whole, "s").astype(str)
    f = f"{frac:09d}"[:digits].rstrip("0")
    return t + (f".{f}" if f else "") + "Z"


def go_string(ns: int, offset_min: int) -> str:
    """Go's Time.String() in a fixed zone: '2016-12-15 15:00:47.5755 -0800 PST m=+1.5'."""
    local = ns + offset_min * 60 * 10**9
    whole, frac = divmod(local, 10**9)
    t = np.datetime64(whole, "s").astype(str).replace("T", " ")
    f = f"{frac:09d}".rstrip("0")
    sign = "+" if offset_min >= 0 else "-"
    hh, mm = divmod(abs(offset_min), 60)
    return f"{t}{'.' + f if f else ''} {sign}{hh:02d}{mm:02d} XST m=+{whole % 1000}.5"


@st.composite
def run_texts(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    n_steps = draw(st.integers(1, 4))
    digits_mode = draw(st.sampled_from([0, 3, 6, 9, "mixed"]))
    lat_decimals = draw(st.sampled_from([4, 6]))
    sections, t = [], BASE_NS
    sizes = [draw(st.integers(0, 60)) for _ in range(n_steps)]
    if sum(sizes) == 0:  # a file of headers only is an error, tested elsewhere
        sizes[-1] = 1
    for n in sizes:
        starts = t + np.sort(rng.integers(0, 3 * 10**9, n))
        lats = np.round(rng.exponential(0.003, n), lat_decimals)
        order = rng.permutation(n)  # completion order, not start order
        rows = []
        for i in order:
            d = int(rng.integers(0, 10)) if digits_mode == "mixed" else digits_mode
            rows.append(f"{rfc3339(int(starts[i]), d)},{lats[i]:.{lat_decimals}f}")
        sections.append(rows)
        t += 4 * 10**9
    n_cpu = draw(st.integers(1, 3))
    go_format = draw(st.booleans())
    offset = draw(st.sampled_from([-480, 0, 330]))
    cpu_rows = []
    for k in range(8):
        ns = BASE_NS + k * 10**9 + int(rng.integers(0, 10**6))
        stamp = go_string(ns, offset) if go_format else rfc3339(ns, 9)
        cpu_rows.append(stamp + "".join(f",{rng.uniform(0, 100):.6f}" for _ in range(n_cpu)))
    return {
        "sections": sections,
        "cpu_header": "timestamp" + ",percentage" * n_cpu,
        "cpu_rows": cpu_rows,
        "crlf": draw(st.booleans()),
        "bom": draw(st.booleans()),
        "gz": draw(st.booleans()),
        "trailing_newline": draw(st.booleans()),
    }


def write(folder: Path, spec) -> None:
    nl = "\r\n" if spec["crlf"] else "\n"
    lines = []
    for rows in spec["sections"]:
        lines.append("start-time,response-time")
        lines += rows
    text = ("\ufeff" if spec["bom"] else "") + nl.join(lines) + (nl if spec["trailing_newline"] else "")
    data = text.encode()
    if spec["gz"]:
        (folder / "perfResults.csv.gz").write_bytes(gzip.compress(data))
    else:
        (folder / "perfResults.csv").write_bytes(data)
    (folder / "cpuStats.csv").write_text(spec["cpu_header"] + "\n" + "\n".join(spec["cpu_rows"]) + "\n")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=run_texts())
def test_loader_matches_reference_reader(spec):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cut = not spec["trailing_newline"] and len(spec["sections"][-1]) > 0
        # a last line without a line end is dropped as truncated, whether it parses or not
        assume(not cut or sum(map(len, spec["sections"])) > 1)
        write(folder, spec)
        run = load_run(folder)
        perf = folder / ("perfResults.csv.gz" if spec["gz"] else "perfResults.csv")
        ref = reference.read_perf(perf)
        if cut:
            last = spec["sections"][-1][-1].split(",")
            row = (reference.parse_time_ns(last[0]), float(last[1]))
            ref[-1].remove(row)
            assert any("truncated last line" in w for w in run.warnings)
        assert run.requests.n_steps == len(ref) == len(spec["sections"])
        for k, sec in enumerate(ref):
            st_, lat = run.requests.sorted_step(k)
            assert sorted(zip(st_.tolist(), lat.tolist(), strict=True)) == sorted(sec)
        cpu = reference.read_cpu(folder / "cpuStats.csv")
        np.testing.assert_array_equal(run.cpu.time_ns, [r[0] for r in cpu])
        np.testing.assert_allclose(run.cpu.pct, [np.mean(r[1]) for r in cpu], rtol=1e-12)
        assert run.cpu.cores == len(cpu[0][1])
