"""HdrHistogram interval logs written by YCSB: the real samples of tests/data/formats/real/ycsb-hlog
(YCSB 0.17.0's Client with HdrHistogram 2.1.12, an HTTP binding of ours, against nginx on 127.0.0.1;
scripts/ycsb/record.sh) read against two independent readings of the same files: HdrHistogram's own
Java HistogramLogProcessor (its output saved beside the samples when they were recorded) and YCSB's
printed summary; the times against HdrHistogram_py's HistogramLogReader.  Bad input: one line, exit 2."""

from __future__ import annotations

import csv
import gzip
import json
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

from headroom import formats as F

SAMPLES = ROOT / "tests" / "data" / "formats" / "real" / "ycsb-hlog"
OUT = SAMPLES / "ycsb-output"
LEVELS = (1, 2, 4, 8)


def cli(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "headroom", *map(str, args)], capture_output=True, text=True, cwd=cwd
    )


def ycsb_printed(c: int) -> dict[tuple[str, str], float]:
    """YCSB's own summary of the step's run (its stdout): {(measurement, figure): value}."""
    out = {}
    for line in (OUT / f"ycsb-c{c}.stdout.txt").read_text().splitlines():
        m = re.match(r"\[([^\]]+)\], ([^,]+), (.+)$", line)
        if m:
            out[m[1], m[2]] = float(m[3])
    return out


def processor_total(name: str) -> dict[str, float]:
    """The last line of HistogramLogProcessor's CSV (Java, values in the log's unit, microseconds):
    the whole log's count and percentiles."""
    lines = [ln for ln in (OUT / f"{name}.processor").read_text().splitlines() if not ln.startswith("#")]
    head, last = list(csv.reader(lines[:1]))[0], list(csv.reader(lines[-1:]))[0]
    return {k: float(v) for k, v in zip(head, last)}


def summary_json(path) -> dict:
    p = cli("summary", path, "--json", "-")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout[p.stdout.index("{") :])


def test_every_sample_is_detected_and_only_they():
    for c in LEVELS:
        assert F.detect(SAMPLES / f"ycsb-c{c}.hlog") == "hlog"
        assert F.detect(OUT / f"ycsb-c{c}-READ-FAILED.hlog") == "hlog"
    assert F.detect(SAMPLES / "bad-input" / "ycsb-hdr2.1.4-READ.hlog") == "hlog"
    assert not F.FORMATS["hlog"].guess_can_open(b"starttime\tseconds\tctime\tdtime\tttime\twait\n")
    assert not F.FORMATS["hlog"].guess_can_open(b"# a comment\n1,2\n")


def test_a_folder_of_logs_is_a_ramp_whose_steps_equal_hdrhistograms_java_processor():
    # the whole route (detection, steps from the names, reduction, the summary's JSON) against
    # HistogramLogProcessor of HdrHistogram 2.1.12 (Java) on the same files: counts, percentiles, max
    d = summary_json(SAMPLES)
    assert d["format"] == "hlog"
    steps = d["steps"]
    assert [s["concurrency"] for s in steps] == list(LEVELS)
    for s, c in zip(steps, LEVELS):
        java = processor_total(f"ycsb-c{c}")
        assert s["requests"] == java["Total_Count"], c
        assert s["errors"] is None, c  # READ.hdr holds successes only; the failures are in READ-FAILED.hdr
        for key, col in (("p50_s", "50%"), ("p90_s", "90%"), ("p99_s", "99%"), ("p999_s", "99.9%")):
            assert round(s[key] * 1e6) == java[f"Total_{col}"], (c, key)
        assert round(s["max_s"] * 1e6) == java["Total_Max"], c


@pytest.mark.parametrize("c", LEVELS)
def test_counts_percentiles_and_mean_equal_ycsbs_own_summary(c):
    ycsb = ycsb_printed(c)
    t = F.read_table(SAMPLES / f"ycsb-c{c}.hlog", "hlog")
    us = np.sort(np.rint(t.latency_s * 1e6).astype(np.int64))
    n = len(us)
    assert n == ycsb["READ", "Operations"] == ycsb["READ", "Return=OK"]
    assert t.ok is None and t.status is None
    for p in (50, 90, 95, 99, 99.9):  # nearest rank on the rows == HdrHistogram's getValueAtPercentile
        label = f"{p:g}PercentileLatency(us)" if p == 99.9 else f"{p}thPercentileLatency(us)"
        assert us[max(1, -int(-p * n // 100)) - 1] == ycsb["READ", label], p
    assert us[-1] == ycsb["READ", "MaxLatency(us)"]
    # YCSB's mean takes each bucket's middle value, the rows its highest: within 3 significant digits
    assert abs(us.mean() / ycsb["READ", "AverageLatency(us)"] - 1) < 1e-3
    # the minimum: HdrHistogram reports the lowest equivalent value, the rows the highest
    assert ycsb["READ", "MinLatency(us)"] <= us[0] <= ycsb["READ", "MinLatency(us)"] * 1.001 + 1


@pytest.mark.parametrize("c", LEVELS)
def test_failed_operations_log_is_read_as_failed_requests(c):
    ycsb = ycsb_printed(c)
    path = OUT / f"ycsb-c{c}-READ-FAILED.hlog"
    t = F.read_table(path, "hlog")
    assert len(t.latency_s) == ycsb["READ-FAILED", "Operations"] == ycsb["READ", "Return=NOT_FOUND"]
    assert t.ok is not None and not t.ok.any()
    java = processor_total(f"ycsb-c{c}-READ-FAILED")
    assert len(t.latency_s) == java["Total_Count"]
    assert round(float(t.latency_s.max()) * 1e6) == java["Total_Max"]


@pytest.mark.parametrize("c", LEVELS)
def test_rows_lie_in_the_intervals_hdrhistogram_pys_log_reader_gives(c):
    # HistogramLogReader (HdrHistogram_py's own line reading: StartTime, relative timestamps) gives
    # every interval's absolute start and end and its count; each row ends inside its interval
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader

    path = SAMPLES / f"ycsb-c{c}.hlog"
    reader = HistogramLogReader(str(path), HdrHistogram(1, 3_600_000_000, 3))
    spans = []
    while (h := reader.get_next_interval_histogram()) is not None:
        spans.append((h.get_start_time_stamp(), h.get_end_time_stamp(), h.get_total_count()))
    reader.close()
    t = F.read_table(path, "hlog")
    lines = [n for n, ln in enumerate(path.read_text().splitlines(), 1) if ln[:1].isdigit()]
    assert len(lines) == len(spans) >= 3
    end_ms = (t.start_ns + np.rint(t.latency_s * 1e9).astype(np.int64)) / 1e6
    for line, (t0, t1, count) in zip(lines, spans):
        mine = end_ms[t.line == line]
        assert len(mine) == count, line
        if count:
            assert t0 - 1e-3 <= mine.min() and mine.max() < t1 + 1e-3, line
    assert len(t.latency_s) == sum(s[2] for s in spans)


def test_rows_are_reproducible_and_gzip_reads_the_same(tmp_path):
    path = SAMPLES / "ycsb-c2.hlog"
    gz = tmp_path / "ycsb-c2.hlog.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    a, b, z = F.read_table(path, "hlog"), F.read_table(path, "hlog"), F.read_table(gz, "hlog")
    for x in (b, z):
        assert np.array_equal(a.start_ns, x.start_ns) and np.array_equal(a.latency_s, x.latency_s)
    small = list(F.FORMATS["hlog"].scan(path, chunk_bytes=8).batches())  # a batch per interval or two
    assert len(small) > 1
    assert np.array_equal(np.concatenate([s.latency_s for s in small]), a.latency_s)


# --------------------------------------------------------------------------
# bad input: one line naming the file (and the line), exit 2


def _lines():
    return (SAMPLES / "ycsb-c1.hlog").read_text().splitlines(keepends=True)


def _damaged_payload():
    lines = _lines()
    i = next(k for k, ln in enumerate(lines) if ln[:1].isdigit())
    head, payload = lines[i].rsplit(",", 1)
    lines[i] = head + "," + payload[: len(payload) // 2] + "\n"  # cut mid-histogram, line end kept
    return lines, i + 1, "cannot decode the interval's histogram"


def _bad_base64():
    lines = _lines()
    i = [k for k, ln in enumerate(lines) if ln[:1].isdigit()][1]
    lines[i] = lines[i][:-20] + "!!!!" + lines[i][-16:]
    return lines, i + 1, "not an interval line"


def _header_only():
    return [ln for ln in _lines() if not ln[:1].isdigit()], None, "no intervals"


def _not_ycsb():
    return [ln for ln in _lines() if not ln.startswith("#[Logging for")], 4, "does not say its value unit"


def _tagged():
    lines = _lines()
    i = next(k for k, ln in enumerate(lines) if ln[:1].isdigit())
    lines[i] = "Tag=A," + lines[i]
    return lines, i + 1, "tagged interval"


def _half_line():
    lines = _lines()
    i = next(k for k, ln in enumerate(lines) if ln[:1].isdigit())
    lines[i] = lines[i][:9] + "\n"  # "0.0xx,0.6" and nothing more: HistogramLogReader skips it silently
    return lines, i + 1, "not an interval line"


BAD = {
    "damaged-payload": _damaged_payload,
    "bad-base64": _bad_base64,
    "header-only": _header_only,
    "not-ycsb": _not_ycsb,
    "tagged": _tagged,
    "half-line": _half_line,
}


def _one_line_error(p, path, line, fragment):
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stderr.endswith("\n") and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    where = f"{path}:{line}: " if line else f"{path}: "
    assert where in p.stderr and fragment in p.stderr, p.stderr


def test_bad_logs_are_one_line_naming_file_and_line(tmp_path):
    files = {}
    for name, make in BAD.items():
        lines, line, fragment = make()
        f = tmp_path / f"{name}.hlog"
        f.write_text("".join(lines))
        files[name] = (f, line, fragment)
    for f, line, fragment in files.values():
        _one_line_error(cli("summary", f), f, line, fragment)


def test_a_v1_log_of_hdrhistogram_2_1_4_is_refused_naming_its_version():
    # YCSB 0.17.0 with its own HdrHistogram 2.1.4 (recorded by record.sh): log format 1.1, V1 histograms
    path = SAMPLES / "bad-input" / "ycsb-hdr2.1.4-READ.hlog"
    p = cli("summary", path)
    _one_line_error(p, path.relative_to(ROOT), 2, "log format version 1.1")
    assert "HdrHistogram 2.1.12" in p.stderr


def test_a_truncated_last_line_is_dropped_with_a_warning(tmp_path):
    lines = _lines()
    last = max(k for k, ln in enumerate(lines) if ln[:1].isdigit())
    whole = F.read_table(SAMPLES / "ycsb-c1.hlog", "hlog")
    f = tmp_path / "cut.hlog"
    f.write_text("".join(lines[:last]) + lines[last][:40])  # the writer stopped mid-line
    t = F.read_table(f, "hlog")
    assert any(f"{f}:{last + 1}: dropped a truncated last line" in w for w in t.warnings), t.warnings
    assert len(t.latency_s) == int((whole.line != last + 1).sum())


def test_an_intervals_latencies_are_mixed_over_its_span_not_sorted():
    # the rows of an interval are spread over it in a seeded order: a bucket shorter than the
    # interval sees the interval's mix (sorted values would put the slow ones at its end)
    t = F.read_table(SAMPLES / "ycsb-c4.hlog", "hlog")
    end = t.start_ns + np.rint(t.latency_s * 1e9).astype(np.int64)
    checked = 0
    for line in np.unique(t.line):
        sel = t.line == line
        if sel.sum() < 200:
            continue
        rank_t = np.argsort(np.argsort(end[sel]))
        rank_l = np.argsort(np.argsort(t.latency_s[sel], kind="stable"))
        assert abs(np.corrcoef(rank_t, rank_l)[0, 1]) < 0.1, line
        checked += 1
    assert checked >= 2


@pytest.mark.parametrize("c", (1, 8))
def test_each_intervals_rows_are_its_recorded_values(c):
    # HdrHistogram_py's own recorded-values iterator on each interval's histogram: value (the
    # bucket's highest equivalent) and count; the reader takes them from the counts array instead
    from hdrh.histogram import HdrHistogram

    path = SAMPLES / f"ycsb-c{c}.hlog"
    t = F.read_table(path, "hlog")
    us = np.rint(t.latency_s * 1e6).astype(np.int64)
    seen = 0
    for n, ln in enumerate(path.read_text().splitlines(), 1):
        if not ln[:1].isdigit():
            continue
        h = HdrHistogram.decode(ln.rsplit(",", 1)[1])
        want = sorted(
            v
            for it in h.get_recorded_iterator()
            for v in [it.value_iterated_to] * it.count_at_value_iterated_to
        )
        assert sorted(us[t.line == n].tolist()) == want, n
        seen += len(want)
    assert seen == len(us)


def _ramp_with_failures(folder, ok_name="ycsb-c{c}.hlog", failed_name="ycsb-c{c}-READ-FAILED.hlog"):
    """The four steps' logs in ``folder``, each step's READ-FAILED log beside its successes."""
    import shutil

    folder.mkdir(exist_ok=True)
    for c in (1, 2, 4, 8):
        shutil.copy(SAMPLES / f"ycsb-c{c}.hlog", folder / ok_name.format(c=c))
        shutil.copy(OUT / f"ycsb-c{c}-READ-FAILED.hlog", folder / failed_name.format(c=c))
    return folder


def test_a_steps_failed_log_beside_its_successes_gives_its_errors(tmp_path):
    """Each step's READ-FAILED log beside its READ log is read with it, not as a step: the step's
    errors are YCSB's printed READ-FAILED operations (= its Return=NOT_FOUND), its requests and
    percentiles those of READ alone (the failures are left out of the latencies)."""
    folder = _ramp_with_failures(tmp_path / "ramp")
    got = summary_json(folder)
    alone = summary_json(SAMPLES)
    assert [s["concurrency"] for s in got["steps"]] == [1, 2, 4, 8]
    for c, s, a in zip((1, 2, 4, 8), got["steps"], alone["steps"]):
        ycsb = ycsb_printed(c)
        assert s["errors"] == ycsb["READ-FAILED", "Operations"] == ycsb["READ", "Return=NOT_FOUND"], c
        assert s["requests"] == a["requests"] == ycsb["READ", "Operations"], c
        assert [s[k] for k in ("p50_s", "p99_s", "max_s")] == [a[k] for k in ("p50_s", "p99_s", "max_s")], c
    assert got["requests"]["errors"] == sum(
        ycsb_printed(c)["READ-FAILED", "Operations"] for c in (1, 2, 4, 8)
    )
    # the successes logs given by name find their failed logs too
    listed = cli("summary", *[folder / f"ycsb-c{c}.hlog" for c in (1, 2, 4, 8)], "--json", "-")
    assert listed.returncode == 0, listed.stderr
    assert [s["errors"] for s in json.loads(listed.stdout)["steps"]] == [s["errors"] for s in got["steps"]]


def test_ycsbs_own_names_pair_too_and_a_failed_log_alone_is_its_failures(tmp_path):
    """YCSB's own names (READ.hdr, READ-FAILED.hdr) pair as ours do; the failed log given alone beside
    its successes is refused in one line naming the log to give; moved apart, it is read as failed
    requests."""
    one = tmp_path / "c2"
    one.mkdir()
    _ramp_with_failures(one, "READ.hdr", "READ-FAILED.hdr")  # (each copy overwrites: step c8 is left)
    t = F.read_table(one / "READ.hdr", "hlog")
    n_ok, n_failed = ycsb_printed(8)["READ", "Operations"], ycsb_printed(8)["READ-FAILED", "Operations"]
    assert len(t.ok) == n_ok + n_failed and int((~t.ok).sum()) == n_failed
    p = cli("summary", one / "READ-FAILED.hdr")
    assert p.returncode == 2 and "Traceback" not in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert "READ-FAILED.hdr" in p.stderr and "give READ.hdr" in p.stderr, p.stderr
    (one / "READ.hdr").unlink()
    t = F.read_table(one / "READ-FAILED.hdr", "hlog")
    assert t.ok is not None and not t.ok.any() and len(t.ok) == n_failed
