"""Report notebooks executed on a real kernel, exported HTML checked, rendered in Chromium."""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

import nbformat
import papermill as pm
import pytest
from conftest import ROOT, RUNS

from headroom import report
from headroom.cli import build_parser, report_parameters

NB_DIR = ROOT / "notebooks"


def cli(*args, cwd=ROOT, env=None):
    return subprocess.run(
        [sys.executable, "-m", "headroom", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env
    )


@pytest.mark.parametrize("name", ["run_report.ipynb", "comparison_report.ipynb", "explore.ipynb"])
def test_notebooks_committed_clean(name):
    nb = nbformat.read(NB_DIR / name, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == (0 if name == "explore.ipynb" else 1)
    for c in nb.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None
            # no analysis in notebooks: code cells only call the headroom API
            assert "numpy" not in c.source and "np." not in c.source


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "data/runs/nginx-keepalive", "-o", "x.html"],
        [
            "report",
            "a",
            "b",
            "-o",
            "x.html",
            "--objective",
            "p99<=20ms",
            "--title",
            "T",
            "--label",
            "A",
            "--bins",
            "5",
            "--cpu-cores",
            "2",
        ],
    ],
)
def test_cli_parameters_match_notebook_parameters(argv):
    args = build_parser().parse_args(argv)
    name, params = report_parameters(args)
    declared = pm.inspect_notebook(str(NB_DIR / name))
    assert set(params) == set(declared)
    for k, v in params.items():  # same types as the notebook's defaults
        assert type(v) is type(ast.literal_eval(declared[k]["default"])), k


def _images(page: str) -> int:
    return len(re.findall(r'<img[^>]+src="data:image/png;base64,', page))


def figures_in(name: str) -> int:
    """The figure cells of a shipped notebook (the memory figure's is shown only with memory data)."""
    nb = nbformat.read(NB_DIR / name, as_version=4)
    return sum("plot.report_image(" in c.source for c in nb.cells if c.cell_type == "code")


def check_html(page: str, labels, figures: int, memory: bool = False):
    assert "Traceback" not in page and "Error" not in re.sub(r"<style.*?</style>", "", page, flags=re.S)
    assert not re.search(r"https?://", page), "the report refers to a network address"
    assert "<script" not in page
    # code hidden: no input areas, no source
    assert "load_summaries" not in page and "hl-ipython3" not in page
    for label in labels:
        assert label in page
    # seven figure cells; the memory figure only when a run has memory telemetry (the bundled runs have
    # none: one line says so instead of two empty axes)
    assert figures == 7 and _images(page) == figures - (not memory)
    assert memory or "No memory telemetry for" in page
    # every figure named after its section, for screen readers and when images are blocked
    assert "No description has been provided" not in page
    assert 'alt="Headroom plot: latency against throughput"' in page


def test_run_report_html(tmp_path):
    out = tmp_path / "run.html"
    keep = tmp_path / "run.ipynb"
    p = cli("report", RUNS / "nginx-keepalive", "-o", out, "--objective", "p99<=5ms", "--keep-notebook", keep)
    assert p.returncode == 0, p.stderr
    page = out.read_text()
    check_html(page, ["nginx-1.22.1-keepalive"], figures_in("run_report.ipynb"))
    assert "<title>Capacity report: nginx-1.22.1-keepalive</title>" in page
    # the parameters: a table at the end, spelled as the command line spells them
    assert re.search(r"<code>--objective</code></td><td[^>]*>[^<]*</td><td>p99&lt;=5ms</td>", page)
    assert "headroom 0.1.0" in page and "log_latency=" not in page
    executed = nbformat.read(keep, as_version=4)
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in executed.cells)
    # one set of numbers: the report's capacity table shows what `summary --json` says
    doc = json.loads(
        subprocess.run(
            [sys.executable, "-m", "headroom", "summary", RUNS / "nginx-keepalive", "--objective", "p99<=5ms"]
            + ["--json", "-"],
            capture_output=True,
            text=True,
            cwd=ROOT,
        ).stdout
    )
    cap = doc["capacity"]
    for key in ("capacity_rps", "knee_rps", "plateau_rps", "peak_step_rps"):
        assert f"{round(cap[key]):,} req/s" in page, key
    assert f"{cap['cpu_s_per_req'] * 1e6:.1f} us" in page
    for step in doc["steps"]:  # the per-step table, step by step
        assert f"<td>{round(step['goodput_rps']):,}</td>" in page


def test_comparison_report_html_and_escaping(tmp_path):
    out = tmp_path / "cmp.html"
    evil = "<script>alert(1)</script>\"q'\\"
    p = cli("report", RUNS / "nginx-no-keepalive", RUNS / "nginx-keepalive", "-o", out, "--label", evil)
    assert p.returncode == 0, p.stderr
    page = out.read_text()
    check_html(
        page,
        ["nginx-1.22.1-keepalive", "&lt;script&gt;alert(1)&lt;/script&gt;"],
        figures_in("comparison_report.ipynb"),
    )
    assert "Summary: baseline against candidate" in page
    # the report carries the same verdict `headroom compare` gives for this pair
    verdict = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-m",
                "headroom",
                "compare",
                RUNS / "nginx-no-keepalive",
                RUNS / "nginx-keepalive",
                "--json",
                "-",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
        ).stdout
    )["verdict"]
    assert '<div class="headline better">' in page and f"{verdict.upper()} (exit 0): " in page
    assert "<script>alert(1)" not in page


def test_bad_input_exits_2_and_writes_nothing(tmp_path):
    out = tmp_path / "r.html"
    p = cli("report", tmp_path / "missing", "-o", out)
    assert p.returncode == 2 and not out.exists()
    assert p.stderr.strip().count("\n") == 0 and "no such file or folder" in p.stderr
    p = cli("report", "a", "b", "c", "-o", out)
    assert p.returncode == 2 and "one run or two" in p.stderr


def test_failing_cell_raises_with_cell_error(tmp_path, monkeypatch):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell('run_path = ""', metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell("1 / 0"),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    broken = tmp_path / "broken.ipynb"
    nbformat.write(nb, broken)
    monkeypatch.setattr(report, "notebook", lambda name: broken)
    out = tmp_path / "r.html"
    with pytest.raises(report.ReportError, match="ZeroDivisionError"):
        report.render([str(RUNS / "nginx-keepalive")], out)
    assert not out.exists() and not (tmp_path / "r.html.partial").exists()


def test_report_from_installed_wheel(tmp_path):
    """`pip install .` (not editable): notebooks and template come from the wheel."""
    wheel_dir, site = tmp_path / "wheel", tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheel_dir, ROOT], check=True
    )
    whl = next(wheel_dir.glob("*.whl"))
    names = zipfile.ZipFile(whl).namelist()
    assert "headroom/notebooks/run_report.ipynb" in names
    assert "headroom/templates/headroom_report/page.html.j2" in names
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site, whl], check=True
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    p = cli("report", RUNS / "nginx-keepalive", "-o", "r.html", cwd=work, env=env)
    assert p.returncode == 0, p.stderr
    probe = subprocess.run(
        [sys.executable, "-c", "import headroom; print(headroom.__file__)"],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        check=True,
    )
    assert probe.stdout.startswith(str(site))
    check_html((work / "r.html").read_text(), ["nginx-1.22.1-keepalive"], figures_in("run_report.ipynb"))


#: run after the page has loaded: what a reader's browser made of every figure and every box
PROBE = """<script>
window.addEventListener("load", function () {
  var imgs = Array.prototype.map.call(document.images, function (i) {
    return {alt: i.alt, w: i.naturalWidth, h: i.naturalHeight, complete: i.complete,
            shown: i.getBoundingClientRect().width};
  });
  var over = [], all = document.body.querySelectorAll("*");
  for (var k = 0; k < all.length; k++) {
    var el = all[k], st = getComputedStyle(el);
    if (st.display === "none" || st.overflowX !== "visible" || el.clientWidth === 0) continue;
    if (el.scrollWidth > el.clientWidth + 1) {
      over.push({tag: el.tagName, sw: el.scrollWidth, cw: el.clientWidth,
                 text: (el.textContent || "").slice(0, 80)});
    }
  }
  var out = document.createElement("pre");
  out.id = "headroom-probe";
  out.textContent = JSON.stringify({images: imgs, overflow: over,
                                    page: document.documentElement.scrollWidth, view: window.innerWidth});
  document.body.appendChild(out);
});
</script>"""


def chromium_dom(page_path, tmp_path, *, javascript=True, shot=None):
    """The DOM Chromium built from the page (``--dump-dom``), its console lines, after the load event."""
    from conftest import need_tool

    chromium = need_tool("chromium")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tempfile.mkdtemp(dir=tmp_path)}",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1280,2400",
        "--virtual-time-budget=10000",  # the load event and its handler run before the dump
        f"--screenshot={shot}" if shot else "--dump-dom",
    ]
    if not javascript:
        flags.append("--disable-javascript")
    r = subprocess.run([chromium, *flags, page_path.as_uri()], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout, [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]


def probe(page: str, tmp_path, name="probe.html") -> tuple[dict, str]:
    """The page with PROBE appended, read back from Chromium's DOM: (probe result, DOM)."""
    path = tmp_path / name
    assert page.count("</body>") == 1
    path.write_text(page.replace("</body>", PROBE + "</body>"))
    dom, console = chromium_dom(path, tmp_path)
    assert console == [], console
    m = re.search(r'<pre id="headroom-probe">(.*?)</pre>', dom, flags=re.S)
    assert m, "the probe did not run: no load event, or JavaScript off"
    import html as _html

    return json.loads(_html.unescape(m.group(1))), dom


def test_the_probe_sees_a_broken_figure_and_overflowing_text(tmp_path):
    """The browser checks below can fail: a figure that does not decode, a line wider than its box."""
    page = (
        "<html><body><p>fine</p>"
        '<img alt="broken" src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA">'
        '<div style="width:100px;white-space:nowrap">' + "wide " * 100 + "</div></body></html>"
    )
    result, _ = probe(page, tmp_path)
    assert [i["w"] for i in result["images"]] == [0]
    assert [o["tag"] for o in result["overflow"]] == ["DIV"]


@pytest.fixture(scope="module")
def comparison_page(tmp_path_factory):
    d = tmp_path_factory.mktemp("cmp")
    out = d / "cmp.html"
    p = cli("report", RUNS / "nginx-no-keepalive", RUNS / "nginx-keepalive", "-o", out)
    assert p.returncode == 0, p.stderr
    r = cli("compare", RUNS / "nginx-no-keepalive", RUNS / "nginx-keepalive", "--json", "-")
    return out, json.loads(r.stdout)


def _dom_text(dom: str) -> str:
    import html as _html

    body = re.sub(r"<(style|script)\b.*?</\1>", "", dom, flags=re.S)
    return re.sub(r"\s+", " ", _html.unescape(re.sub(r"<[^>]+>", " ", body)))


def test_report_as_chromium_shows_it(comparison_page, tmp_path):
    """What a reader sees: the verdict sentence, every figure decoded, no text wider than its box."""
    out, doc = comparison_page
    result, dom = probe(out.read_text(), tmp_path)
    text = _dom_text(dom)
    # the answer first, in the words of the JSON's headline (and so of the terminal)
    assert doc["headline"][0].startswith(
        f"{doc['verdict'].upper()} (exit {doc['exit_code']}): {doc['reason']}"
    )
    assert all(sentence in text for sentence in doc["headline"])
    assert dom.index('class="headline') < dom.index("<img")  # before the first figure
    imgs = result["images"]
    assert len(imgs) == figures_in("comparison_report.ipynb") - 1 == 6  # no memory figure without memory
    assert all(i["complete"] and i["w"] > 100 and i["h"] > 100 and i["shown"] > 100 for i in imgs), imgs
    assert {i["alt"] for i in imgs} >= {"Headroom plot: latency against throughput"}
    assert result["overflow"] == [], result["overflow"][:5]
    assert result["page"] <= result["view"], "the page is wider than the window"


def test_report_reads_without_javascript(comparison_page, tmp_path):
    """The report needs no JavaScript: with it off the DOM holds the verdict and the page is drawn."""
    from PIL import Image

    out, doc = comparison_page
    dom, console = chromium_dom(out, tmp_path, javascript=False)
    assert console == [], console
    assert all(sentence in _dom_text(dom) for sentence in doc["headline"])
    assert len(re.findall(r"<img[^>]+src=\"data:image/png;base64,", dom)) == 6
    shot = tmp_path / "shot.png"
    chromium_dom(out, tmp_path, javascript=False, shot=shot)
    img = Image.open(shot).convert("L")
    dark = sum(img.histogram()[:200]) / (img.width * img.height)
    assert dark > 0.02, f"page looks blank ({dark:.3%} non-white pixels)"


def test_explore_notebook_runs_on_a_real_kernel(tmp_path):
    out = tmp_path / "explore.ipynb"
    pm.execute_notebook(
        str(NB_DIR / "explore.ipynb"), str(out), kernel_name="python3", progress_bar=False, cwd=str(NB_DIR)
    )
    nb = nbformat.read(out, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 5  # the five figure cells


def test_svg_figures_stay_in_one_file(tmp_path):
    import base64

    out = tmp_path / "run.html"
    p = cli("report", RUNS / "nginx-keepalive", "-o", out, "--figure-format", "svg", "--log-latency")
    assert p.returncode == 0, p.stderr
    page = out.read_text()
    svgs = re.findall(r'<img[^>]+src="data:image/svg\+xml;base64,([^"]+)"', page)
    assert len(svgs) == figures_in("run_report.ipynb") - 1 == 6 and _images(page) == 0
    assert "<script" not in page and not re.search(r'(src|href)="https?://', page)
    decoded = [base64.b64decode(s).decode() for s in svgs]
    assert all("<svg" in d for d in decoded)
    assert sum("<image" in d for d in decoded) == 1  # the headroom plot's density, an embedded bitmap
    assert not any(re.search(r'xlink:href="(?!data:|#)', d) for d in decoded)  # nothing from outside
    assert re.search(r"<code>--figure-format</code></td><td[^>]*>[^<]*</td><td>svg</td>", page)
    assert re.search(r"<code>--log-latency</code></td><td[^>]*>[^<]*</td><td>on</td>", page)
    p = cli("report", RUNS / "nginx-keepalive", "-o", out, "--figure-format", "gif")
    assert p.returncode == 2 and "invalid choice: 'gif'" in p.stderr


def _tripwire(monkeypatch):
    """The notebook must not run: an event, not a clock (a busy machine makes any time limit lie)."""

    def ran(*args, **kwargs):
        raise AssertionError("the notebook ran before the output was checked")

    monkeypatch.setattr(pm, "execute_notebook", ran)


def test_output_paths_are_checked_before_the_work(tmp_path, monkeypatch, capsys):
    from headroom import cli as headroom_cli

    missing = tmp_path / "missing" / "x.html"
    _tripwire(monkeypatch)
    argv = ["report", str(RUNS / "nginx-no-keepalive"), str(RUNS / "nginx-keepalive"), "-o", str(missing)]
    assert headroom_cli.main(argv) == 2 and not missing.exists()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err and str(missing.parent) in err
    monkeypatch.undo()
    p = cli("report", RUNS / "nginx-no-keepalive", RUNS / "nginx-keepalive", "-o", missing)
    assert p.returncode == 2 and p.stderr == err  # the process says the same
    p = cli("report", RUNS / "nginx-keepalive", "-o", tmp_path, "--keep-notebook", tmp_path / "x.ipynb")
    assert p.returncode == 2 and "is a folder" in p.stderr
    p = cli("report", RUNS / "nginx-keepalive", "-o", tmp_path / "r.html", "--keep-notebook", missing)
    assert p.returncode == 2 and "does not exist" in p.stderr and not (tmp_path / "r.html").exists()
    p = cli(
        "compare", RUNS / "nginx-no-keepalive", RUNS / "nginx-keepalive", "--json", tmp_path / "no" / "v.json"
    )
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1 and "does not exist" in p.stderr


def test_comparison_report_same_labels_without_cpu(tmp_path):
    """Two runs of one build (same sha), the candidate without cpuStats.csv: told apart, CPU stated missing."""
    cand = tmp_path / "nginx-keepalive-repeat"
    shutil.copytree(RUNS / "nginx-keepalive-repeat", cand)
    (cand / "cpuStats.csv").unlink()
    out = tmp_path / "same.html"
    p = cli("report", RUNS / "nginx-keepalive", cand, "-o", out)
    assert p.returncode == 0, p.stderr
    page = out.read_text()
    check_html(page, [], figures_in("comparison_report.ipynb"))
    for label in (
        "nginx-1.22.1-keepalive (nginx-keepalive)",
        "nginx-1.22.1-keepalive (nginx-keepalive-repeat)",
    ):
        assert f"<th>{label}</th>" in page  # capacity table header
        assert f"<b>{'baseline' if label.endswith('keepalive)') else 'candidate'}</b>: {label}" in page
        assert page.count(f"<p><b>{label}</b>:") == 2  # captions of its bins and steps tables
    title = re.sub(r"<[^>]+>", "", re.search(r"<h1[^>]*>(.*?)</h1>", page).group(1))
    assert title == (
        "Capacity comparison: nginx-1.22.1-keepalive (nginx-keepalive) (baseline) vs "
        "nginx-1.22.1-keepalive (nginx-keepalive-repeat) (candidate)"
    )
    assert "unknown: no CPU data" in page  # throughput at the CPU target, candidate column
    assert "not judged" in page and "error counts unknown" in page


def test_report_refuses_an_output_suffix_it_cannot_write(tmp_path, monkeypatch, capsys):
    from headroom import cli as headroom_cli

    _tripwire(monkeypatch)  # the suffix is checked before the notebook runs
    for name in ("r.pdf", "r.png", "report"):
        assert headroom_cli.main(["report", str(RUNS / "nginx-keepalive"), "-o", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert "give a name ending in .html" in err and not (tmp_path / name).exists()
    monkeypatch.undo()
    p = cli("report", RUNS / "nginx-keepalive", "-o", tmp_path / "r.pdf")
    assert p.returncode == 2 and "give a name ending in .html" in p.stderr
    assert report.check_report_suffix(tmp_path / "R.HTML").name == "R.HTML"


def test_report_warnings_reach_the_caller(tmp_path):
    """The warnings the report lists at its bottom are handed to ``on_warning`` too (the CLI prints them)."""
    from headroom import analyze, load_run

    seen = []
    run = tmp_path / "run"  # the bundled run without its core count: a warning
    shutil.copytree(RUNS / "nginx-keepalive", run)
    meta = run / "metadata.yml"
    meta.write_text(
        "".join(ln for ln in meta.read_text().splitlines(True) if not ln.startswith("cpu_cores:"))
    )
    report.render([str(run)], tmp_path / "r.html", on_warning=seen.append)
    s = analyze(load_run(run))
    assert s.warnings and seen == [f"{s.label}: {w}" for w in s.warnings]
    page = (tmp_path / "r.html").read_text()
    assert "application/vnd.headroom" not in page  # HTML export shows the list, not the JSON
    import html

    assert all(w in html.unescape(page) for w in seen)
