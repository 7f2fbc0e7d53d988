"""Reading in chunks: the streamed reduction equals the in-memory analysis, exactly."""

import gzip
import io
import json

import pytest
from conftest import RUN_NAMES, RUNS, ts, write_run

from headroom import analyze, load_run, parse_objective, reduce_run, to_json
from headroom.io import _Progress


def doc(run, **kw):
    return json.dumps(to_json(analyze(run, **kw)), sort_keys=True)


@pytest.mark.parametrize("name", RUN_NAMES)
@pytest.mark.parametrize("chunk_bytes", [64 << 20, 50_000])
def test_streamed_equals_in_memory(name, chunk_bytes):
    # 50 kB chunks split every ~3 MB section into many: the two-pass path
    obj = parse_objective("p99<=5ms")
    assert doc(reduce_run(RUNS / name, chunk_bytes=chunk_bytes), objective=obj) == doc(
        load_run(RUNS / name), objective=obj
    )


def test_streamed_bucket_must_match():
    run = reduce_run(RUNS / "nginx-keepalive", bucket_s=0.5)
    assert doc(run, bucket_s=0.5) == doc(load_run(RUNS / "nginx-keepalive"), bucket_s=0.5)
    with pytest.raises(Exception, match="reduced with 0.5 s buckets"):
        analyze(run, bucket_s=1.0)


def test_streamed_edge_cases(tmp_path):
    rows = [(ts(0.01 * i), "0.0010") for i in range(250)]
    one = [(ts(9.0), "0.0020")]  # a step of one request: not bucketed, still in the step table
    folder = write_run(tmp_path / "r", [rows, [], one, rows[:120]], gz=True)
    a, b = reduce_run(folder, chunk_bytes=2_000), load_run(folder)
    assert doc(a) == doc(b)
    assert a.requests is None and b.requests is not None
    with pytest.raises(Exception, match="reduced while reading"):
        a.requests_frame()


def test_progress_line_only_when_slow():
    out = io.StringIO()
    p = _Progress(RUNS / "x.csv", 100 * 2**20, enabled=True, after_s=0.0)
    p._out = out
    p.update(50 * 2**20)
    p.close()
    text = out.getvalue()
    assert (
        text.startswith("\rreading x.csv [###############")
        and " 50% 50/100 MB" in text
        and text.endswith("\n")
    )
    quiet = _Progress(RUNS / "x.csv", 100, enabled=True, after_s=3600)
    quiet._out = out = io.StringIO()
    quiet.update(50)
    quiet.close()
    assert out.getvalue() == ""


def test_gzip_is_not_decompressed_into_memory(tmp_path):
    # the streamed reader maps a temporary file: a broken gzip is still one clear error
    folder = tmp_path / "g"
    folder.mkdir()
    (folder / "perfResults.csv.gz").write_bytes(gzip.compress(b"start-time,response-time\n" * 1000)[:60])
    with pytest.raises(Exception, match="damaged or truncated gzip file"):
        reduce_run(folder)
