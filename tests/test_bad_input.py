"""Bad, hostile and awkward input: one clear line, exit 2, nothing silently wrong, nothing executed."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, RUNS

BAD = ROOT / "tests" / "data" / "bad"


def cli(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "headroom", *map(str, args)], capture_output=True, text=True, cwd=cwd
    )


# (case, file the message must name, line or None, a fragment of the message)
ERRORS = [
    ("empty-file", "perfResults.csv", None, "the file is empty"),
    ("header-only", "perfResults.csv", None, "no requests"),
    ("wrong-header", "perfResults.csv", 1, "unexpected header 'time,latency'"),
    ("garbage-timestamp", "perfResults.csv", 5, "bad start-time 'yesterday'"),
    ("negative-latency", "perfResults.csv", 4, "bad response-time -0.002"),
    ("empty-latency", "perfResults.csv", 4, "empty response-time value"),
    ("nan-latency", "perfResults.csv", 4, "bad response-time nan"),
    ("extra-columns", "perfResults.csv", 8, "expected 2 fields (start-time,response-time), got 3"),
    ("binary-junk", "perfResults.csv", 22, "bad response-time '\\ufffd"),
    ("binary-file", "perfResults.csv", 1, "not a CSV text file"),
    ("truncated-gz", "perfResults.csv.gz", None, "damaged or truncated gzip file"),
    ("cpu-wrong-header", "cpuStats.csv", 1, "unexpected CPU header 'time,cpu'"),
    ("no-perf-results", None, None, "no perfResults.csv or perfResults.csv.gz in this folder"),
    ("one-second", "perfResults.csv", None, "only 1 time bucket(s) of load"),
    ("broken-yaml", "metadata.yml", 1, "bad YAML: while scanning a quoted scalar"),
    ("yaml-python-tag", "metadata.yml", 1, "bad YAML: could not determine a constructor"),
]


def assert_one_line_error(p, case, name, line, fragment):
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stdout == ""
    assert p.stderr.endswith("\n") and p.stderr.count("\n") == 1, p.stderr
    assert "Traceback" not in p.stderr
    msg = p.stderr.strip()
    where = f"tests/data/bad/{case}" + (f"/{name}" if name else "")
    assert msg.startswith(f"headroom: error: {where}" + (f":{line}:" if line else ":")), msg
    assert fragment in msg, msg
    assert msg.isascii()


@pytest.mark.parametrize(("case", "name", "line", "fragment"), ERRORS, ids=[e[0] for e in ERRORS])
def test_error_cases(case, name, line, fragment):
    assert_one_line_error(cli("summary", f"tests/data/bad/{case}"), case, name, line, fragment)


# the other formats: (case, file, line or None, fragment)
FORMAT_ERRORS = [
    ("vegeta-bad-latency", "results.csv", 3, "bad latency '12ms'"),
    ("vegeta-huge-line", "results.csv", 4, "bad CSV"),
    ("k6-json-broken-line", "results.json", 3, "not a JSON line"),
    ("k6-csv-bad-value", "results.csv", 5, "bad metric_value 'fast'"),
    ("jmeter-formatted-timestamp", "results.jtl", 4, "timestamp_format=ms"),
    ("jmeter-xml-unclosed", "results.xml", 9, "bad XML"),
    ("jmeter-xml-entities", "results.xml", None, "DOCTYPE or entity definitions is refused"),
    ("gatling-bad-request", "simulation.log", 5, "without start, end (ms) and OK/KO"),
    ("oha-bad-start", "results.csv", 6, "bad request-start '-'"),
    ("hey-header-only", "hey.csv", None, "hey wrote only its header line"),
    ("all-failed", "hey.csv", None, "all 50 requests failed: 50x HTTP 404"),
    ("summary-only-oha-json", "oha.json", None, "oha's JSON summary"),
]


@pytest.mark.parametrize(
    ("case", "name", "line", "fragment"), FORMAT_ERRORS, ids=[e[0] for e in FORMAT_ERRORS]
)
def test_format_error_cases(case, name, line, fragment):
    p = cli("summary", f"tests/data/bad/{case}/{name}")
    assert_one_line_error(p, case, name, line, fragment)
    assert len(p.stderr) < 300, p.stderr  # at most a short excerpt of the line


def test_missing_path():
    p = cli("summary", "tests/data/bad/does-not-exist")
    assert (
        p.returncode == 2
        and p.stderr == "headroom: error: tests/data/bad/does-not-exist: no such file or folder\n"
    )


def test_hints_where_they_help():
    assert "--skip-bad-rows" in cli("summary", BAD / "garbage-timestamp").stderr
    assert "try a smaller --bucket" in cli("summary", BAD / "one-second").stderr
    # and the hint works: 0.8 s of load in 200 ms buckets is a curve
    assert cli("summary", BAD / "one-second", "--bucket", "200ms").returncode == 0


def test_compare_and_report_give_the_same_one_line_error(tmp_path):
    p = cli("compare", "tests/data/bad/garbage-timestamp", RUNS / "nginx-keepalive")
    assert_one_line_error(p, "garbage-timestamp", "perfResults.csv", 5, "bad start-time 'yesterday'")
    out = tmp_path / "r.html"
    p = cli("report", "tests/data/bad/garbage-timestamp", "-o", out)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert "perfResults.csv:5: bad start-time 'yesterday'" in p.stderr and not out.exists()


def test_debug_shows_the_traceback():
    p = cli("summary", BAD / "garbage-timestamp", "--debug")
    assert p.returncode != 0 and "Traceback" in p.stderr and "HeadroomError" in p.stderr


def test_bom_and_crlf_work_like_plain_files(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    for f in ("perfResults.csv", "cpuStats.csv"):
        text = (BAD / "bom-crlf" / f).read_bytes().decode("utf-8-sig").replace("\r\n", "\n")
        (plain / f).write_text(text)
    docs = []
    for folder in (BAD / "bom-crlf", plain):
        out = tmp_path / f"{folder.name}.json"
        p = cli("summary", folder, "--json", out, "--cpu-cores", "1")
        assert p.returncode == 0 and p.stderr == ""
        doc = json.loads(out.read_text())
        docs.append({k: doc[k] for k in ("requests", "steps", "bins", "cpu", "capacity")})
    assert docs[0] == docs[1]
    assert docs[0]["requests"]["successful"] == 300


def test_truncated_last_line_is_dropped_with_a_warning(tmp_path):
    out = tmp_path / "t.json"
    p = cli("summary", BAD / "truncated-last-line", "--json", out)
    assert p.returncode == 0
    assert p.stderr.startswith("headroom: warning: ") and p.stderr.count("\n") == 1
    assert (
        "perfResults.csv:303: dropped a truncated last line of 13 bytes without a line end '2024-01-02T03'"
        in p.stderr
    )
    doc = json.loads(out.read_text())
    assert doc["requests"]["successful"] == 300  # the 300 complete rows, not the partial one
    assert any("truncated last line" in w for w in doc["warnings"])


def test_cpu_not_overlapping_is_left_out_with_a_warning(tmp_path):
    out = tmp_path / "c.json"
    p = cli("summary", BAD / "cpu-no-overlap", "--json", out)
    assert p.returncode == 0 and "do not overlap the load window" in p.stderr
    doc = json.loads(out.read_text())
    assert doc["cpu"] is None and all(b["cpu_pct"] is None for b in doc["bins"])
    assert doc["capacity"]["at_cpu_target"]["status"] == "no data"


def test_skip_bad_rows_counts_and_names_the_first(tmp_path):
    out = tmp_path / "s.json"
    p = cli("summary", BAD / "garbage-timestamp", "--skip-bad-rows", "--bucket", "20ms", "--json", out)
    assert p.returncode == 0, p.stderr
    assert "skipped 1 bad row(s) (--skip-bad-rows); first: line 5: bad start-time 'yesterday'" in p.stderr
    assert json.loads(out.read_text())["requests"]["successful"] == 9
    # several kinds in one file: counted, first named, the rest of the rows kept exactly
    lines = (BAD / "garbage-timestamp" / "perfResults.csv").read_text().splitlines()
    lines[6] = lines[6].split(",")[0] + ",-1"
    lines[8] = lines[8] + ",x"
    many = tmp_path / "many"
    many.mkdir()
    (many / "perfResults.csv").write_text("\n".join(lines) + "\n")
    p = cli("summary", many, "--skip-bad-rows", "--bucket", "20ms", "--json", out)
    assert p.returncode == 0 and "skipped 3 bad row(s)" in p.stderr and "first: line 5" in p.stderr
    assert json.loads(out.read_text())["requests"]["successful"] == 7


def test_yaml_tags_never_run(tmp_path):
    p = cli("summary", BAD / "yaml-python-tag", cwd=tmp_path)
    assert p.returncode == 2
    assert not (tmp_path / "headroom-pwned").exists() and not (ROOT / "headroom-pwned").exists()


HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def test_hostile_metadata_is_escaped_in_the_report(tmp_path):
    run = tmp_path / "evil"
    run.mkdir()
    (run / "perfResults.csv.gz").write_bytes((RUNS / "nginx-keepalive" / "perfResults.csv.gz").read_bytes())
    (run / "metadata.yml").write_text(
        f"sha: '{HOSTILE}'\ndescription: \"</small><b onmouseover=alert(3)>x</b>\"\n"
    )
    out = tmp_path / "r.html"
    p = cli("report", run, RUNS / "nginx-keepalive", "-o", out)
    assert p.returncode == 0, p.stderr
    page = out.read_text()
    assert "<script" not in page and "<img src=x" not in page and "<b onmouseover" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in page
    assert "&lt;b onmouseover=alert(3)&gt;" in page
    title = re.search(r"<title>(.*?)</title>", page, re.S).group(1)
    assert "<" not in title and "&lt;script&gt;" in title
    assert not re.search(r"https?://", page)


def test_parameters_cannot_inject_code(tmp_path):
    label = "it's \"quoted\" \\ back\\slash\nsecond line'); import os; os.system('touch pwned') #"
    keep = tmp_path / "kept.ipynb"
    out = tmp_path / "r.html"
    p = cli(
        "report", RUNS / "nginx-keepalive", "-o", out, "--label", label, "--keep-notebook", keep, cwd=tmp_path
    )
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "pwned").exists()
    nb = nbformat.read(keep, as_version=4)
    cell = next(c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", []))
    values = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in ast.parse(cell.source).body
        if isinstance(node, ast.Assign)
    }
    assert values["label"] == label  # round-trips intact: quotes, backslashes, newline
    # and the report shows it as text
    import html

    assert html.escape(label.split("\n")[0], quote=False) in out.read_text().replace("&#x27;", "'").replace(
        "&quot;", '"'
    )


def test_report_loads_nothing_from_the_network():
    page_files = list(Path(ROOT / "headroom" / "templates").rglob("*"))
    text = "".join(f.read_text() for f in page_files if f.is_file())
    assert "http" not in text  # our template adds nothing remote; test_report checks the output


# -- line ends: CR-only refused in one line for every format; CRLF and mixed CRLF/LF read alike ----

LINE_END_SAMPLES = [
    RUNS / "nginx-keepalive" / "perfResults.csv.gz",
    *(ROOT / "tests" / "data" / "formats" / n for n in (
        "hey-ramp.csv", "jmeter.csv", "jmeter.xml", "k6.csv", "k6.json", "vegeta.csv", "vegeta.json",
        "gatling-simulation.log", "oha.csv",
    )),
]  # fmt: skip


def _text_of(path: Path) -> bytes:
    import gzip

    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


@pytest.mark.parametrize("sample", LINE_END_SAMPLES, ids=lambda p: p.name)
def test_cr_only_line_ends_are_one_line_and_exit_2(sample, tmp_path):
    """Every row would run into one: refused at once (a 13 MB throughputramp file used to loop
    for ever looking for its 13 MB 'header line')."""
    name = sample.name.removesuffix(".gz")
    if sample.parent.name == "nginx-keepalive":
        (tmp_path / "run").mkdir()
        target = tmp_path / "run" / name
    else:
        target = tmp_path / name
    target.write_bytes(_text_of(sample).replace(b"\r\n", b"\n").replace(b"\n", b"\r"))
    r = subprocess.run(
        [sys.executable, "-m", "headroom", "summary", target.parent if name == "perfResults.csv" else target],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0] == (
        f"headroom: error: {target}:1: lines end in a bare CR (old Mac line ends), so its rows run "
        "together: convert it with `tr '\\r' '\\n' < FILE > FILE.new` and read that"
    )
    assert len(lines[0]) - len("headroom: error: ") - len(str(target)) <= 300


@pytest.mark.parametrize("name", ["jmeter.csv", "k6.csv", "vegeta.csv", "hey-ramp.csv"])
def test_crlf_and_mixed_line_ends_read_as_lf(name, tmp_path):
    """Windows line ends, and a file whose second half was appended with Unix ones, give the
    same summary as the LF original."""
    lf = _text_of(ROOT / "tests" / "data" / "formats" / name).replace(b"\r\n", b"\n")
    crlf = lf.replace(b"\n", b"\r\n")
    half = len(lf) // 2
    cut = lf.index(b"\n", half) + 1
    mixed = lf[:cut].replace(b"\n", b"\r\n") + lf[cut:]
    docs = []
    for tag, body in (("lf", lf), ("crlf", crlf), ("mixed", mixed)):
        (tmp_path / tag).mkdir()
        f = tmp_path / tag / name
        f.write_bytes(body)
        r = cli("summary", f, "--json", "-")
        assert r.returncode == 0, (tag, r.stderr)
        # hey's times are anchored at the file's modification time: the rest must be equal
        steps = [
            {k: v for k, v in st.items() if k not in ("start", "end")} for st in json.loads(r.stdout)["steps"]
        ]
        docs.append(json.dumps(steps, sort_keys=True))
    assert docs[0] == docs[1] == docs[2]
