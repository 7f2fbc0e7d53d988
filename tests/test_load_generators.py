"""``load_run`` reads several request files of one run as ``reduce_run`` does: real runs dealt row by
row into generator files give the whole file's steps, counts and percentiles (checked against the
file's own text, parsed here with the csv module and numpy), and the same run as ``reduce_run``."""

import csv
import gzip
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, RUNS

from headroom import HeadroomError, analyze, load_run, reduce_run, to_json

RUN = RUNS / "nginx-keepalive"
VEGETA = ROOT / "tests" / "data" / "formats" / "real" / "vegeta-rates.csv.gz"


def column(steps, name: str) -> np.ndarray:
    """A per-step column of a step table: ``requests``, ``errors``, ``max`` or a percentile (``p99``)."""
    if name == "max":
        return steps.latency.max_s
    return steps.latency.pct[name] if name.startswith("p") else getattr(steps, name)


def doc(run) -> str:
    """The analysis of a run as JSON, without what names its files."""
    d = to_json(analyze(run))
    d.pop("source")
    d["warnings"] = [w for w in d["warnings"] if "load generators" not in w and "cpuStats" not in w]
    return json.dumps(d, sort_keys=True)


# ---- the bundled throughputramp run: its text parsed here, its rows dealt into files -----------


def sections(text: str) -> list[list[tuple[str, str]]]:
    """The run's sections (steps) as (start-time, response-time) rows, in file order."""
    out: list[list[tuple[str, str]]] = []
    for ln in text.splitlines():
        if ln.startswith("start-time"):
            out.append([])
        elif ln:
            start, lat = ln.split(",")
            out[-1].append((start, lat))
    return out


def ns(rfc3339: list[str]) -> np.ndarray:
    return np.array([np.datetime64(s.removesuffix("Z"), "ns") for s in rfc3339]).astype(np.int64)


def write_sections(path: Path, secs) -> None:
    path.write_text("".join("start-time,response-time\n" + "".join(f"{a},{b}\n" for a, b in s) for s in secs))


@pytest.fixture(scope="module")
def run_sections() -> list[list[tuple[str, str]]]:
    return sections(gzip.decompress((RUN / "perfResults.csv.gz").read_bytes()).decode())


def deal(folder: Path, secs, n: int) -> list[Path]:
    """Every section's rows dealt round-robin into ``n`` files (each file has every section)."""
    folder.mkdir()
    paths = [folder / f"gen{k + 1}.csv" for k in range(n)]
    for k, p in enumerate(paths):
        write_sections(p, [s[k::n] for s in secs])
    for name in ("cpuStats.csv", "metadata.yml"):
        shutil.copy(RUN / name, folder)
    return paths


def check_against_text(run, secs) -> None:
    """Every step of ``run`` holds exactly the rows of its section: counts, starts, latencies."""
    req = run.requests
    assert req.n_steps == len(secs)
    assert np.diff(req.step_offsets).tolist() == [len(s) for s in secs]
    for k, s in enumerate(secs):
        start, lat = req.sorted_step(k)
        want = sorted(zip(ns([a for a, _ in s]).tolist(), [float(b) for _, b in s]))
        got = sorted(zip(start.tolist(), lat.tolist()))
        assert got == want, k
        p99 = np.percentile([float(b) for _, b in s], 99, method="inverted_cdf")
        assert analyze(run).table.latency.pct["p99"][k] == pytest.approx(p99, abs=1e-12)


@pytest.mark.parametrize("n", [2, 3])
def test_generator_files_give_the_whole_run_and_reduce_runs_result(tmp_path, run_sections, n):
    paths = deal(tmp_path / "gens", run_sections, n)
    whole = load_run(RUN)
    merged = load_run(tmp_path / "gens")
    check_against_text(merged, run_sections)
    check_against_text(whole, run_sections)
    assert doc(merged) == doc(whole) == doc(reduce_run(tmp_path / "gens"))
    assert merged.warnings[0] == (
        f"{paths[0]}: {n} files whose times overlap are read as load generators of one ramp "
        "(8 steps aligned on the wall clock, requests concatenated)"
    )
    # the files given as a list (no folder, so no metadata): the same requests per step
    listed = load_run([str(p) for p in paths])
    assert np.array_equal(listed.requests.step_offsets, merged.requests.step_offsets)
    assert np.array_equal(listed.requests.start_ns, merged.requests.start_ns)


def test_generators_with_different_step_counts_are_matched_on_the_wall_clock(tmp_path, run_sections):
    # the second generator started late: it has only the last five steps, so step indexes differ
    folder = tmp_path / "gens"
    folder.mkdir()
    write_sections(folder / "gen1.csv", [s[0::2] for s in run_sections])
    write_sections(folder / "gen2.csv", [s[1::2] for s in run_sections[3:]])
    want = [s[0::2] + (s[1::2] if k >= 3 else []) for k, s in enumerate(run_sections)]
    merged = load_run(folder)
    check_against_text(merged, want)
    reduced = reduce_run(folder)
    assert merged.requests.n_steps == reduced.n_steps == 8
    assert np.diff(merged.requests.step_offsets).tolist() == reduced.reduced.steps.requests.tolist()


def test_files_that_follow_each_other_are_steps_in_time_order(tmp_path, run_sections):
    folder = tmp_path / "seq"
    folder.mkdir()
    write_sections(folder / "a.csv", run_sections[5:])  # the later steps sort first by name
    write_sections(folder / "b.csv", run_sections[:5])
    for name in ("cpuStats.csv", "metadata.yml"):
        shutil.copy(RUN / name, folder)
    seq = load_run(folder)
    check_against_text(seq, run_sections)
    assert doc(seq) == doc(load_run(RUN)) == doc(reduce_run(folder))
    assert not any("load generators" in w for w in seq.warnings)


def test_a_stated_plan_is_the_runs_not_each_files(tmp_path, run_sections):
    deal(tmp_path / "gens", run_sections, 2)
    plan = "2:30:4"  # 8 levels: 2, 6, ..., 30
    a = load_run(tmp_path / "gens", concurrency=plan)
    b = reduce_run(tmp_path / "gens", concurrency=plan)
    assert a.meta.step_concurrency == b.meta.step_concurrency == tuple(range(2, 31, 4))
    with pytest.raises(
        HeadroomError, match=r"gen1\.csv: --concurrency states 3 levels, but the run has 8 steps"
    ):
        load_run(tmp_path / "gens", concurrency="1,2,3")


# ---- a real vegeta rate ramp: exact nanoseconds, failed requests, rates from attack names -----


def vegeta_rows() -> list[list[str]]:
    return list(csv.reader(io.StringIO(gzip.decompress(VEGETA.read_bytes()).decode(), newline="")))


def test_vegeta_generator_files_give_the_whole_files_steps_and_reduce_runs_rates(tmp_path):
    rows = vegeta_rows()
    paths = []
    for k in range(3):
        out = io.StringIO(newline="")
        csv.writer(out, lineterminator="\n").writerows(rows[k::3])
        paths.append(tmp_path / f"gen{k + 1}.csv.gz")
        paths[-1].write_bytes(gzip.compress(out.getvalue().encode()))
    merged = load_run([str(p) for p in paths])
    whole = load_run(VEGETA)
    # the attacks in order of their first request, each step's successful requests from the text
    attacks = list(dict.fromkeys(r[7] for r in sorted(rows, key=lambda r: int(r[0]))))
    assert merged.requests.n_steps == len(attacks) == 5
    ok = [r for r in rows if 200 <= int(r[1]) <= 299]
    for k, name in enumerate(attacks):
        start, lat = merged.requests.sorted_step(k)
        want = sorted((int(r[0]), int(r[2]) / 1e9) for r in ok if r[7] == name)
        assert sorted(zip(start.tolist(), lat.tolist())) == want, name
    assert merged.step_errors.tolist() == whole.step_errors.tolist()
    assert merged.error_codes == whole.error_codes and merged.errors == len(rows) - len(ok)
    sm, sw = analyze(merged).table, analyze(whole).table
    for col in ("requests", "errors", "p50", "p90", "p99", "max"):
        assert np.array_equal(column(sm, col), column(sw, col)), col
    # reduce_run on the same files: the same steps, counts and summed rates; percentiles to its 1 us
    red = reduce_run([str(p) for p in paths])
    assert red.meta.step_rates == merged.meta.step_rates
    assert [r["intended_rps"] for r in merged.meta.step_rates] == [3 * int(a[4:]) for a in attacks]
    sr = analyze(red).table
    assert np.array_equal(sr.requests, sm.requests) and np.array_equal(sr.errors, sm.errors)
    for col in ("p50", "p99", "max"):
        np.testing.assert_allclose(column(sr, col), column(sm, col), rtol=0, atol=0.5e-6)


def test_files_of_two_formats_are_one_line_naming_the_odd_one(tmp_path):
    data = ROOT / "tests" / "data" / "formats"
    files = [str(data / "vegeta.csv"), str(data / "k6.json")]
    with pytest.raises(HeadroomError) as e:
        load_run(files)
    msg = str(e.value)
    assert msg.endswith("formats/k6.json: k6-json, but vegeta.csv is vegeta-csv: one format per run")
    assert "\n" not in msg
    with pytest.raises(HeadroomError) as e2:
        reduce_run(files)
    assert str(e2.value) == msg
