"""The Python API as a notebook user meets it: top-level names, lazy imports, short reprs, rich display."""

import subprocess
import sys

import nbformat
import pytest
from conftest import ROOT, RUNS
from nbclient import NotebookClient

import headroom


def test_import_headroom_loads_no_heavy_library():
    code = (
        "import sys, headroom\n"
        "heavy = [m for m in ('matplotlib', 'scipy', 'pandas', 'pyarrow', 'papermill') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert p.stdout.strip() == ""
    # and the names resolve on first use, plot being a module
    code = "import sys, headroom; headroom.compare_runs; headroom.plot.headroom; print('matplotlib' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert p.stdout.strip() == "True"


def test_public_api_is_exported():
    from headroom import compare, io, scalability, steps, summary

    assert headroom.compare_runs is compare.compare_runs and headroom.Comparison is compare.Comparison
    assert headroom.Summary is summary.Summary and headroom.analyze is summary.analyze
    assert headroom.StepTable is steps.StepTable
    assert headroom.USLFit is scalability.USLFit and headroom.fit_usl is scalability.fit_usl
    assert headroom.load_run is io.load_run and headroom.reduce_run is io.reduce_run
    for name in headroom.__all__:
        assert getattr(headroom, name) is not None, name
    assert {"compare_runs", "Comparison", "Summary", "StepTable", "USLFit", "fit_usl", "plot"} <= set(
        headroom.__all__
    )
    with pytest.raises(AttributeError):
        headroom.no_such_name  # noqa: B018


def test_run_repr_and_html():
    run = headroom.load_run(RUNS / "nginx-keepalive")
    reduced = headroom.reduce_run(RUNS / "nginx-keepalive")
    n = len(run.requests.latency_s)
    steps = len(run.requests.step_offsets) - 1
    for r in (run, reduced):
        text = repr(r)
        assert len(text) < 300
        assert (
            text
            == f"<Run 'nginx-1.22.1-keepalive': throughputramp, {steps} steps, {n:,} requests, CPU samples>"
        )
        page = r._repr_html_()
        assert f"{n:,} successful" in page and "unknown (no status column)" in page
        assert f"{len(r.cpu):,} (" in page and "100 % = " in page and len(page) < 5000


def test_percentiles_are_written_with_their_dot():
    obj = headroom.parse_objective("p99.9<=20ms")
    assert str(obj) == "p99.9<=20ms" and headroom.parse_objective(str(obj)) == obj
    assert str(headroom.parse_objective("p99.5<=1s")) == "p99.5<=1s"
    from headroom.text import format_summary

    s = headroom.analyze(headroom.reduce_run(RUNS / "nginx-keepalive"), objective=obj)
    text = format_summary(s)
    assert "throughput at p99.9<=20ms" in text and "p999" not in text
    c = headroom.compare_runs(s, s, objective=obj)
    assert "p99.9 latency" in [m.name for m in c.metrics]


def test_summary_and_comparison_display_in_a_real_kernel():
    """A cell that displays a Summary, a Comparison and a Run, executed by a real IPython kernel."""
    setup = (
        "import headroom\n"
        f"RUNS = {str(RUNS)!r}\n"
        "obj = headroom.parse_objective('p99<=5ms')\n"
        "base = headroom.analyze(headroom.reduce_run(RUNS + '/nginx-no-keepalive'), objective=obj)\n"
        "cand = headroom.analyze(headroom.reduce_run(RUNS + '/nginx-keepalive'), objective=obj)\n"
        "c = headroom.compare_runs(base, cand, objective=obj)\n"
    )
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(setup),
            nbformat.v4.new_code_cell("cand"),
            nbformat.v4.new_code_cell("c"),
            nbformat.v4.new_code_cell("base.run"),
            nbformat.v4.new_code_cell(
                "print(cand.capacity.capacity_rps, c.verdict, c.metric('p99_s').change)"
            ),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    outs = [c.outputs for c in nb.cells]
    assert not [o for cell in outs for o in cell if o.output_type == "error"]
    # the numbers the kernel printed, to check the displays against
    cap, verdict, p99 = outs[4][0].text.split()
    summary, comparison, run = (cell[0].data for cell in outs[1:4])
    for data in (summary, comparison, run):
        assert len(data["text/html"].encode()) < 20_000
        assert len(data["text/plain"]) < 300
        assert "array(" not in data["text/plain"]
    assert f"{float(cap):,.0f} req/s" in summary["text/html"] and "<table" in summary["text/html"]
    assert summary["text/plain"].startswith("<Summary 'nginx-1.22.1-keepalive': 8 steps")
    assert f"{verdict.upper()}</span>" in comparison["text/html"]
    assert f"{float(p99) * 100:+.1f}%" in comparison["text/html"]
    assert comparison["text/plain"].startswith(f"<Comparison {verdict}:")
    assert run["text/plain"].startswith("<Run 'nginx-1.22.1-no-keepalive': throughputramp")


def test_lower_bound_qualifier_follows_the_capacity_figure():
    """A capacity that is still rising at the last step is a lower bound in the summary and in the comparison."""
    from headroom.html import verdict
    from headroom.text import capacity_rows

    runs = [headroom.analyze(headroom.reduce_run(RUNS / n)) for n in ("nginx-ka-aa1-a", "nginx-ka-aa1-b")]
    rising = [not s.capacity.model.peak_reached for s in runs]
    assert any(rising)
    for s, r in zip(runs, rising):
        row = dict(capacity_rows(s))["modelled capacity (USL)"]
        limited = s.generator is not None  # hey near its own core's limit: every throughput a lower bound
        assert row.startswith(">= ") == (r or limited) and ("(a lower bound)" in row) == r
        assert ("a lower bound: the generator's limit" in row) == limited
    c = headroom.compare_runs(*runs)
    m = c.metric("capacity_rps")
    assert not m.decides and "lower bound" in m.note
    assert "its capacity is a lower bound" in verdict(c)
    same = headroom.compare_runs(runs[0], runs[0]) if not rising[0] else None
    if same is not None:
        assert "lower bound" not in same.metric("capacity_rps").note


def test_analyze_takes_what_the_cli_takes():
    """Objective and bucket as the CLI writes them: the same summary as the parsed objects give."""
    import headroom
    from headroom.model import parse_objective

    run = headroom.load_run(RUNS / "nginx-no-keepalive")
    a = headroom.analyze(run, objective="p99<=5ms", bucket_s="1s")
    b = headroom.analyze(run, objective=parse_objective("p99<=5ms"), bucket_s=1.0)
    assert a.capacity.objective == b.capacity.objective and str(a.capacity.objective) == "p99<=5ms"
    assert a.capacity.rps_at_objective == b.capacity.rps_at_objective is not None
    assert headroom.to_json(a) == headroom.to_json(b)
    assert headroom.analyze(run, objective="").capacity.objective is None
    with pytest.raises(headroom.HeadroomError, match="bad objective"):
        headroom.analyze(run, objective="p99 under 5")
