"""On a Dask cluster every load-generator file is parsed once: its first task keeps what it parsed on its
worker, the second reduces from it there.  Checked on a real ``distributed.LocalCluster`` of two worker
processes: the JSON equals the local reduction, every file is parsed once (the workers' own count), a
worker that lost what it kept (or left the cluster) parses again with the same result, and nothing stays
kept after a run, a failed one included."""

import csv
import faulthandler
import gzip
import io
import json

import numpy as np
import pytest
from conftest import ROOT
from test_load_generators import RUN, deal, sections, write_sections

from headroom import HeadroomError, analyze, reduce_run, to_json
from headroom import cluster as hc
from headroom.reading import candidates, generators, run_from_partial
from headroom.reduce import Frame
from headroom.runfolder import locate_run, read_metadata
from headroom.sources import CsvSource, ReadSettings

distributed = pytest.importorskip("distributed")

VEGETA = ROOT / "tests" / "data" / "formats" / "real" / "vegeta-rates.csv.gz"
LIMIT_S = 240  # the whole module: a hung cluster ends the run with a traceback, not a stuck job


@pytest.fixture(scope="module")
def client():
    faulthandler.dump_traceback_later(LIMIT_S, exit=True)
    try:
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
            ) as cl,
            distributed.Client(cl) as c,
        ):
            yield c
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Generator files of two formats: the throughputramp run dealt into 3, the vegeta ramp into 3."""
    tmp = tmp_path_factory.mktemp("gens")
    secs = sections(gzip.decompress((RUN / "perfResults.csv.gz").read_bytes()).decode())
    deal(tmp / "csv", secs, 3)
    rows = list(csv.reader(io.StringIO(gzip.decompress(VEGETA.read_bytes()).decode(), newline="")))
    (tmp / "vegeta").mkdir()
    for k in range(3):
        out = io.StringIO(newline="")
        csv.writer(out, lineterminator="\n").writerows(rows[k::3])
        (tmp / "vegeta" / f"gen{k + 1}.csv.gz").write_bytes(gzip.compress(out.getvalue().encode()))
    return {"csv": tmp / "csv", "vegeta": tmp / "vegeta", "sections": secs}


def stats(client) -> dict:
    """Files parsed and parsed again, and files kept now, over all workers."""
    per = client.run(hc.worker_stats)
    return {k: sum(s[k] for s in per.values()) for k in ("parses", "fallbacks", "kept")}


def delta(a: dict, b: dict) -> dict:
    return {k: b[k] - a[k] for k in ("parses", "fallbacks")} | {"kept": b["kept"]}


def as_json(run) -> str:
    return json.dumps(to_json(analyze(run)))


# (folder, chunk_bytes): the CSV files also in pieces of 4 kB, so that a step is several batches
CASES = [("csv", 64 << 20), ("csv", 4096), ("vegeta", 64 << 20)]


@pytest.mark.parametrize(("name", "chunk"), CASES)
def test_every_file_is_parsed_once_with_the_local_json(client, runs, name, chunk):
    local = as_json(reduce_run(runs[name], chunk_bytes=chunk))
    before = stats(client)
    remote = as_json(reduce_run(runs[name], chunk_bytes=chunk, client=client))
    assert remote == local
    assert delta(before, stats(client)) == {"parses": 3, "fallbacks": 0, "kept": 0}


def reduce_in_two_phases(client, path, between, chunk=64 << 20):
    """What ``reduce_run(path, client=client)`` does for generator files, ``between(kept)`` run between
    the files' first tasks (kept on their workers) and their second ones."""
    files, s = locate_run(path), ReadSettings(chunk_bytes=chunk)
    runner = hc.DaskRunner(client)
    runner.CHECK_S = 0.5
    _, sources = candidates(files, s)
    kept = runner.prepare(sources)
    try:
        between(kept)
        p = generators(kept, runner)
    finally:
        runner.release(kept)
    return run_from_partial(p, files, read_metadata(files.meta) if files.meta else {}, s)


@pytest.mark.parametrize(("name", "chunk"), CASES)
def test_a_worker_that_lost_its_files_parses_them_again(client, runs, name, chunk):
    local = as_json(reduce_run(runs[name], chunk_bytes=chunk))
    before = stats(client)
    cleared = []
    run = reduce_in_two_phases(
        client, runs[name], lambda kept: cleared.append(client.run(hc.drop, kept.tokens)), chunk
    )
    assert sum(cleared[0].values()) == 3  # every file was kept, and is no longer
    assert as_json(run) == local
    assert delta(before, stats(client)) == {"parses": 6, "fallbacks": 3, "kept": 0}


def test_a_worker_that_left_is_replaced_by_any_other(client, runs):
    """The worker holding a file restarts (a new address): its pinned task goes elsewhere, parses again."""
    local = as_json(reduce_run(runs["csv"]))
    before = client.run(hc.worker_stats)
    gone = []

    def restart(kept):
        gone.append(kept.workers[0])
        client.restart_workers([kept.workers[0]])

    run = reduce_in_two_phases(client, runs["csv"], restart)
    assert as_json(run) == local
    after = client.run(hc.worker_stats)
    assert gone[0] not in after and len(after) == 2
    zero = {"parses": 0, "fallbacks": 0}
    grew = {k: sum(s[k] - before.get(w, zero)[k] for w, s in after.items()) for k in zero}
    assert grew["fallbacks"] >= 1 and all(s["kept"] == 0 for s in after.values())


def test_a_damaged_file_frees_the_others(client, runs, tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    secs = runs["sections"]
    write_sections(folder / "gen1.csv", [s[0::2] for s in secs])
    write_sections(folder / "gen2.csv", [s[1::2] for s in secs])
    text = (folder / "gen2.csv").read_text().splitlines(keepends=True)
    text[5] = text[5].split(",")[0] + ",12ms\n"  # not a number of seconds
    (folder / "gen2.csv").write_text("".join(text))
    with pytest.raises(HeadroomError) as local:
        reduce_run(folder)
    with pytest.raises(HeadroomError) as remote:
        reduce_run(folder, client=client)
    assert str(remote.value) == str(local.value)
    assert stats(client)["kept"] == 0


def assert_same(a, b) -> None:
    """Two partials equal field by field, their steps' arrays element by element."""
    assert (a.source, a.kind, a.n_steps, a.warnings, a.skipped) == (
        b.source,
        b.kind,
        b.n_steps,
        b.warnings,
        b.skipped,
    )
    assert sorted(a.steps) == sorted(b.steps)
    for k, p in a.steps.items():
        q = b.steps[k]
        for f in ("t0", "t1", "n", "rounded", "hist", "loose"):
            assert getattr(p, f) == getattr(q, f), (k, f)
        for f in ("lengths", "counts", "sums"):
            assert np.array_equal(getattr(p, f), getattr(q, f)), (k, f)


def test_kept_rows_reduce_as_the_file_parsed_again(runs):
    """Without a cluster: a CSV file's kept rows, reduced in shared frames, give the parts of a second
    parse exactly (steps of one batch and of many)."""
    path = runs["csv"] / "gen1.csv"
    for chunk in (64 << 20, 4096):
        s = ReadSettings(chunk_bytes=chunk)
        spans, kept = CsvSource(path, s).spans_kept()
        try:
            again = CsvSource(path, s).spans()
            assert spans.steps == again.steps and spans.warnings == again.warnings
            frames = {k: Frame(p.t0 - 10**9, p.t1 + 10**9, 3 * p.n) for k, p in spans.steps.items() if k != 2}
            assert_same(kept.reduce(frames), CsvSource(path, s).reduce(frames))
        finally:
            kept.close()


def test_spools_on_the_workers_disks_are_removed(client, runs, tmp_path):
    """Every kept file on disk (no memory budget): its folder is there between the tasks, gone after,
    whether the second task reduced from it, parsed again, or never came (a damaged file)."""
    where = tmp_path / "spools"
    where.mkdir()

    def on_disk(folder, budget):
        import os

        from headroom import spool

        if folder:
            os.environ["HEADROOM_SPOOL_DIR"] = folder
        else:
            os.environ.pop("HEADROOM_SPOOL_DIR", None)
        old, spool.BUDGET_BYTES = spool.BUDGET_BYTES, budget
        return old

    seen = []

    def look(kept):
        seen.append(len(list(where.iterdir())))

    budget = set(client.run(on_disk, str(where), 0).values()).pop()
    try:
        for name in ("csv", "vegeta"):
            reduce_in_two_phases(client, runs[name], look)
            assert not any(where.iterdir())
            reduce_in_two_phases(
                client, runs[name], lambda kept: (look(kept), client.run(hc.drop, kept.tokens))
            )
            assert not any(where.iterdir())
        bad = tmp_path / "bad"
        bad.mkdir()
        write_sections(bad / "gen1.csv", runs["sections"])
        (bad / "gen2.csv").write_text("start-time,response-time\n2026-11-22T10:42:29Z,x\n")
        with pytest.raises(HeadroomError):
            reduce_run(bad, client=client)
        assert not any(where.iterdir())
    finally:
        client.run(on_disk, None, budget)
    assert len(seen) == 4 and min(seen) >= 3  # every file's folder (a spooled file has two spools)
    assert stats(client)["kept"] == 0
