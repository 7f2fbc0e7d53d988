"""Step profiles: reading real pprof files, per-request figures, the diff, and bad input.

The profiles are real: data/profiles/ (two 25-step runs of testserver, see its
README), and profiles fetched here from a running testserver.
"""

from __future__ import annotations

import datetime
import gzip
import json
import shutil
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from goserver import GoServer, built_or_skip

import headroom.profiles as hp
from headroom.model import HeadroomError
from headroom.profiles.capture import ProfileOptions, endpoint, fit, http_get, probe
from headroom.profiles.cli import main as profiles_main
from headroom.profiles.proto import Profile
from headroom.profiles.read import read_profile

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "profiles"
BASE, REGEXP = DATA / "base-01", DATA / "regexp-01"


@pytest.fixture(scope="module")
def binary():
    return built_or_skip()


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    return lines[0]


# --------------------------------------------------------------------------
# reading


def test_read_agrees_with_the_protobuf_message():
    f = sorted((REGEXP / "profiles").glob("*.pb.gz"))[10]
    p = read_profile(f)
    msg = Profile.FromString(gzip.decompress(f.read_bytes()))
    st = msg.string_table
    assert [(st[t.type], st[t.unit]) for t in msg.sample_type] == [
        ("samples", "count"),
        ("cpu", "nanoseconds"),
    ]
    assert p.samples == sum(s.value[0] for s in msg.sample)
    assert p.cpu_s == pytest.approx(sum(s.value[1] for s in msg.sample) / 1e9)
    assert p.duration_s == pytest.approx(msg.duration_nanos / 1e9)
    # flat CPU adds up to the whole profile; the leaf of every sample, by hand
    assert p.flat_cpu_s.sum() == pytest.approx(p.cpu_s)
    fn = {f.id: st[f.name] for f in msg.function}
    loc = {x.id: [fn[ln.function_id] for ln in x.line] for x in msg.location}
    leaf: dict[str, int] = {}
    cum: dict[str, int] = {}
    for s in msg.sample:
        names = [n for lid in s.location_id for n in loc[lid]]
        leaf[names[0]] = leaf.get(names[0], 0) + s.value[0]
        for n in set(names):
            cum[n] = cum.get(n, 0) + s.value[0]
    got_flat = {f: int(n) for f, n in zip(p.functions, p.flat_samples) if n}
    got_cum = {f: int(n) for f, n in zip(p.functions, p.cum_samples) if n}
    assert got_flat == leaf and got_cum == cum


def test_gzip_or_not_reads_the_same(tmp_path):
    f = sorted((BASE / "profiles").glob("*.pb.gz"))[3]
    raw = tmp_path / "step3.pb"
    raw.write_bytes(gzip.decompress(f.read_bytes()))
    a, b = read_profile(f), read_profile(raw)
    assert a.functions == b.functions and np.array_equal(a.cum_samples, b.cum_samples)


def test_per_request_figures_and_profile_top():
    ps = hp(BASE)
    assert isinstance(ps, hp.ProfileSet) and len(ps.steps) == 25
    meta = yaml.safe_load((BASE / "metadata.yml").read_text())
    s = ps.level(12)
    assert s.requests == meta["step_requests"][11]
    assert 0.4 < s.window_share < 0.9  # a 1 s profile inside a 1.5 s step
    top = ps.to_json()["steps"][11]["profile_top"]
    assert set(top[0]) >= {"function", "flat_cpu_s_per_request", "cum_cpu_s_per_request"}
    assert top[0]["cum_cpu_s_per_request"] == pytest.approx(s.profile.cum_cpu_s.max() / s.requests_in_profile)
    # the profile accounts for most of the CPU psutil measured in the same window
    shares = [x.cpu_share for x in ps.steps if x.cpu_share is not None]
    assert 0.5 < float(np.median(shares)) < 1.5
    assert "<table>" in ps._repr_html_() and "base-01" in repr(ps)


def test_the_recorded_regexp_regression_is_named_first():
    d = hp.diff_runs(BASE, REGEXP)
    top = d.cum[0]
    assert top.function.startswith("regexp."), d.cum[:3]
    assert not top.within_uncertainty and top.change > 5e-6
    assert d.levels == tuple(range(1, 26))
    # callers whose change is all through it are folded into its row, not listed above it
    assert "main.(*server).matchRoute" in top.callers
    assert all(r.function != "runtime.goexit" for r in d.cum[:5])
    doc = top.to_dict()
    assert doc["change"] == pytest.approx(
        doc["candidate_cpu_s_per_request"] - doc["baseline_cpu_s_per_request"]
    )


def test_a_run_against_itself_changes_nothing():
    d = hp.diff_runs(BASE, BASE)
    assert not d.changed
    assert all(r.change == 0 for r in d.cum)


def test_profiles_cli_text_and_json(tmp_path, capsys):
    assert profiles_main([str(BASE), str(REGEXP), "--json", str(tmp_path / "d.json")]) == 0
    out = capsys.readouterr().out
    assert "where the CPU went" in out and "regexp.compile" in out
    doc = json.loads((tmp_path / "d.json").read_text())
    rows = doc["profile_diff"]
    assert rows[0]["function"].startswith("regexp.")
    # the changes beyond their uncertainty first, then the others, each group by absolute change
    beyond = [not (r["change_low"] <= 0 <= r["change_high"]) for r in rows]
    assert beyond == sorted(beyond, reverse=True)
    for group in (True, False):
        sizes = [abs(r["change"]) for r, b in zip(rows, beyond) if b == group]
        assert sizes == sorted(sizes, reverse=True)


def test_user_profiles_named_by_concurrency(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    for c in (3, 7):
        shutil.copy(BASE / "profiles" / f"step-{c:03d}-c{c}.pb.gz", mine / f"c{c}.pb.gz")
    ps = hp(BASE, folder=mine)
    assert [s.concurrency for s in ps.steps] == [3, 7]
    assert [s.step for s in ps.steps] == [3, 7]


# --------------------------------------------------------------------------
# bad input: one line naming the file, exit 2


def bad_run(tmp_path, name: str, data: bytes) -> Path:
    run = tmp_path / "run"
    (run / "profiles").mkdir(parents=True)
    shutil.copy(BASE / "metadata.yml", run / "metadata.yml")
    (run / "profiles" / name).write_bytes(data)
    return run


@pytest.mark.parametrize(
    "name,data,says",
    [
        ("step-001-c1.pb.gz", b"hello, this is not a profile\x00\x01\x02", "not a pprof profile"),
        ("step-001-c1.pb", b"", "empty file"),
        ("step-001-c1.pb.gz", None, "broken gzip"),
    ],
)
def test_bad_files_are_one_line_and_exit_2(tmp_path, capsys, name, data, says):
    if data is None:  # a truncated gzip: the first half of a real profile
        whole = (BASE / "profiles" / "step-001-c1.pb.gz").read_bytes()
        data = whole[: len(whole) // 2]
    run = bad_run(tmp_path, name, data)
    with pytest.raises(HeadroomError, match=says):
        hp(run)
    assert profiles_main([str(run)]) == 2
    line = one_line_error(capsys)
    assert name in line and says in line


def test_a_profile_longer_than_its_step(tmp_path, capsys):
    run = bad_run(tmp_path, "step-001-c1.pb.gz", (BASE / "profiles" / "step-001-c1.pb.gz").read_bytes())
    meta = yaml.safe_load((run / "metadata.yml").read_text())
    # step 1 now ends 0.2 s after it started: its 1 s profile cannot be of it
    t0 = datetime.datetime.fromisoformat(meta["step_start_times"][0].replace("Z", "+00:00"))
    meta["step_end_times"][0] = (t0 + datetime.timedelta(seconds=0.2)).isoformat().replace("+00:00", "Z")
    (run / "metadata.yml").write_text(yaml.safe_dump(meta))
    assert profiles_main([str(run)]) == 2
    line = one_line_error(capsys)
    assert "step-001-c1.pb.gz" in line and "lasted 0.2 s" in line


def test_heap_profile_where_cpu_is_expected(tmp_path, capsys, binary):
    with GoServer(binary=binary, alloc=4096, max_lifetime="60s") as srv:
        for _ in range(20):
            http_get(srv.url, 5)
        data = http_get(endpoint(srv.base, "allocs"), 10)
    run = bad_run(tmp_path, "step-001-c1.pb.gz", data)
    assert profiles_main([str(run)]) == 2
    line = one_line_error(capsys)
    assert "heap (allocs) profile" in line and "not a CPU profile" in line


def test_a_compare_with_a_bad_profile_warns(tmp_path):
    from headroom.profiles.compare import side_diff

    run = bad_run(tmp_path, "step-001-c1.pb.gz", b"junk\x00")
    d, warnings = side_diff([[run], [REGEXP]], 0.95)
    assert d is None and any("not a pprof profile" in w for w in warnings)


# --------------------------------------------------------------------------
# the endpoint: 404 or no answer is bad usage before the ramp


def test_fit_inside_the_step():
    assert fit(2.0) == (1, 0.5)
    assert fit(3.0) == (2, 0.5)
    assert fit(10.0)[0] == 9
    with pytest.raises(HeadroomError, match="too short"):
        fit(1.0)
    with pytest.raises(HeadroomError, match="--step-duration"):
        fit(None)


def test_pprof_endpoint_404_is_one_line(binary):
    with GoServer(binary=binary, max_lifetime="60s") as srv:
        with pytest.raises(HeadroomError, match="answered HTTP 404") as e:
            probe(ProfileOptions(pprof=srv.base + "/nothing"))
        assert "\n" not in str(e.value)
        probe(ProfileOptions(pprof=srv.base))  # the real one answers


def test_pprof_endpoint_that_hangs_is_bounded():
    ln = socket.socket()
    ln.bind(("127.0.0.1", 0))
    ln.listen(8)
    held = []
    stop = threading.Event()

    def accept():  # accepts and never answers
        ln.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(ln.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        t0 = time.monotonic()
        with pytest.raises(HeadroomError, match="did not answer within 1s"):
            probe(ProfileOptions(pprof=f"http://127.0.0.1:{ln.getsockname()[1]}", timeout_s=1.0))
        assert time.monotonic() - t0 < 5
    finally:
        stop.set()
        t.join(2)
        for c in held:
            c.close()
        ln.close()


# --------------------------------------------------------------------------
# text, figures, HTML


def test_statistics_do_not_import_matplotlib():
    import subprocess
    import sys

    code = (
        f"import sys, headroom.profiles as hp; d = hp.diff_runs({str(BASE)!r}, {str(REGEXP)!r}); "
        "from headroom.profiles.text import profile_diff_text; profile_diff_text(d); "
        "print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_text_plot_and_report_section():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from headroom.profiles import plot
    from headroom.profiles.html import headline, report_section
    from headroom.profiles.text import profile_diff_text

    a, b = hp(BASE), hp(REGEXP)
    d = hp.diff_runs(a, b)
    text = profile_diff_text(d)
    rows = [x for x in text.splitlines() if x.startswith(("  + ", "  - ", "  ~ "))]
    assert len(rows) == 10 and "regexp.compile" in rows[0]
    assert headline(d).startswith(f"{d.cum[0].function} grew by {d.cum[0].change * 1e6:.1f} us per request")
    ax = plot.diff_bars(d)
    assert len(ax.patches) == 10 and ax.get_xlim()[0] <= 0
    ax2 = plot.cpu_per_request(b, functions=["regexp.compile"])
    # the stacked parts add up to each step's CPU per request
    heights = {}
    for p in ax2.patches:
        x = round(p.get_x() + p.get_width() / 2)
        heights[x] = heights.get(x, 0) + p.get_height()
    for s in b.steps:
        assert heights[s.concurrency] == pytest.approx(s.cpu_s_per_request * 1e6, rel=1e-6)
    plt.close("all")
    html = report_section(d, [a], [b])
    assert html.count("data:image/png;base64,") == 2 and "<script" not in html
    assert "regexp.compile grew by" in html
    assert "<table>" in d._repr_html_()
