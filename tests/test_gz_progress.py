"""A gzipped run shows a progress line while it is decompressed (on a terminal), then reads as usual."""

import gzip

from conftest import RUNS

from headroom import io
from headroom.formats import _scan


def test_decompression_progress_line(tmp_path, monkeypatch, capsys):
    raw = gzip.decompress((RUNS / "nginx-keepalive" / "perfResults.csv.gz").read_bytes())
    gz = tmp_path / "perfResults.csv.gz"
    gz.write_bytes(gzip.compress(raw, compresslevel=1))
    monkeypatch.setattr(_scan, "DECOMPRESS_NOTE_S", 0.0)  # show it at once, however fast the machine
    buf = _scan.Buffer(gz, stream=True, progress=True)
    try:
        assert bytes(buf.data) == raw
    finally:
        buf.close()
    err = capsys.readouterr().err
    assert err.startswith("\rdecompressing perfResults.csv.gz [") and err.endswith("\n")
    last = err.rstrip("\n").split("\r")[-1]
    assert "100%" in last and f"/{gz.stat().st_size / 2**20:,.0f} MB" in last
    # off the terminal (progress=None and stderr captured): silent
    buf = _scan.Buffer(gz, stream=True)
    buf.close()
    assert capsys.readouterr().err == ""
    # and reduce_run hands its progress flag through
    run = io.reduce_run(RUNS / "nginx-keepalive", progress=True)
    assert "decompressing perfResults.csv.gz" in capsys.readouterr().err and run.n_requests > 0
