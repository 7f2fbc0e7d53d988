"""The release report: execute a parameterized notebook, export one HTML file.

The notebooks ship inside the package (``headroom.notebooks``) and are found
with :mod:`importlib.resources`, so this works from a wheel as well as from
an editable install.  papermill runs them in one kernel; :func:`export_html`
writes the executed notebook as one page with code hidden, images embedded,
and a template that loads nothing from the network and needs no JavaScript.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from glob import escape as glob_escape
from importlib import resources
from pathlib import Path

from ._version import __version__
from .model import HeadroomError, parse_duration, parse_objective
from .options import ReadOptions, VerdictOptions

RUN_NOTEBOOK = "run_report.ipynb"
#: Image formats of the report's figures: PNG, or SVG inlined in the page (sharp at any zoom).
FIGURE_FORMATS = ("png", "svg")
COMPARISON_NOTEBOOK = "comparison_report.ipynb"
_TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"


class ReportError(Exception):
    """A report notebook failed for a reason other than bad input."""


#: how the report's kernel starts: ipykernel's own launcher, with debugpy kept out (a report never
#: debugs, and ipykernel imports debugpy at start: 0.1 s of CPU, a quarter of the kernel's start)
_LAUNCH = "import sys; sys.modules['debugpy'] = None; from ipykernel import kernelapp; kernelapp.launch_new_instance()"


def _kernel_manager_class(socket_dir: str) -> str:
    """A kernel manager that talks to the kernel over IPC sockets in ``socket_dir``.

    Local IPC needs no TCP ports and keeps the kernel from warning on stderr
    about unencrypted TCP; papermill takes the class by its import path.
    """
    from jupyter_client.manager import AsyncKernelManager

    class LocalKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.transport = "ipc"
            self.ip = os.path.join(socket_dir, "kernel")

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            cmd = list(kernel_cmd)
            if cmd[1:3] == ["-m", "ipykernel_launcher"]:  # the standard python3 kernel spec
                cmd[1:3] = ["-c", _LAUNCH]
            # the kernel's own log lines (e.g. "KeyboardInterrupt caught in kernel" when it is shut
            # down after a failed cell) are not the command's output: they go to a file beside
            # the sockets; cell errors still arrive through the messaging protocol
            if "stderr" in kw:
                return await super()._async_launch_kernel(cmd, **kw)
            with open(os.path.join(socket_dir, "kernel-stderr.log"), "ab") as log:
                # the kernel inherits the descriptor; the parent's copy is closed once it has started
                return await super()._async_launch_kernel(cmd, stderr=log, **kw)

    globals()["_LocalKernelManager"] = LocalKernelManager
    return f"{__name__}._LocalKernelManager"


def notebook(name: str):
    """The shipped notebook ``name`` as an importlib.resources Traversable."""
    nb = resources.files("headroom.notebooks") / name
    if not nb.is_file():
        raise ReportError(f"report notebook {name} is missing from the installed package")
    return nb


def notebook_parameters(
    runs: Sequence[str] = (),
    *,
    baseline: Sequence[str] = (),
    candidate: Sequence[str] = (),
    labels: Sequence[str] = (),
    objective: str = "",
    bucket: str = "1s",
    bins: int = 0,
    bin_width: float = 0.0,
    cpu_target: float = 70.0,
    read_options: dict | None = None,
    verdict_options: dict | None = None,
    title: str = "",
    figure_format: str = "png",
    log_latency: bool = False,
    telemetry: Sequence[dict] = (),
) -> tuple[str, dict]:
    """Which notebook to run and the papermill parameters to pass it.

    One run (``runs``) gives the single-run report; two runs (BASELINE
    CANDIDATE), or ``baseline``/``candidate`` with one or more runs each, give
    the comparison report, whose verdict is computed as ``headroom compare``
    computes it (``verdict_options``: a :meth:`VerdictOptions.to_dict`).
    Values are plain str/int/float/list/dict so that papermill writes them as
    Python literals (quoted and escaped, never pasted as code).
    """
    runs, baseline, candidate = list(runs), list(baseline), list(candidate)
    if runs and (baseline or candidate):
        raise HeadroomError("give RUN [RUN] or --baseline/--candidate, not both")
    if len(runs) == 2:
        baseline, candidate, runs = [runs[0]], [runs[1]], []
    if (baseline or candidate) and not (baseline and candidate):
        raise HeadroomError(
            "a comparison report needs a baseline and a candidate (--baseline ... --candidate ...)"
        )
    if len(runs) > 2 or not (runs or baseline):
        raise HeadroomError(
            f"give one run (a single-run report) or two (baseline, candidate), not {len(runs)}"
        )
    if figure_format not in FIGURE_FORMATS:
        raise HeadroomError(f"figure format {figure_format!r}: expected one of {', '.join(FIGURE_FORMATS)}")
    n = len(runs) or len(baseline) + len(candidate)
    if len(labels) > n:
        raise HeadroomError(f"{len(labels)} --label values for {n} run(s)")
    labels = list(labels) + [""] * (n - len(labels))
    read = ReadOptions.from_dict(read_options)
    common = {
        "objective": objective,
        "bucket": bucket,
        "bins": int(bins),
        "bin_width": float(bin_width),
        "cpu_target": float(cpu_target),
        "cpu_cores": float(read.cpu_cores or 0.0),
        "skip_bad_rows": bool(read.skip_bad_rows),
        "read_options": read.to_dict(),
        "title": title,
        "figure_format": figure_format,
        "log_latency": bool(log_latency),
        "headroom_version": __version__,
        "telemetry": [dict(t) for t in telemetry],
    }
    if runs:
        return RUN_NOTEBOOK, {"run_path": str(runs[0]), "label": labels[0], **common}
    return COMPARISON_NOTEBOOK, {
        "baseline_paths": [str(r) for r in baseline],
        "candidate_paths": [str(r) for r in candidate],
        "labels": labels,
        "verdict_options": VerdictOptions.from_dict(verdict_options).to_dict(),
        **common,
    }


def load_summaries(
    paths: Sequence[str],
    *,
    labels: Sequence[str] = (),
    objective: str = "",
    bucket: str = "1s",
    bins: int = 0,
    bin_width: float = 0.0,
    cpu_target: float = 70.0,
    cpu_cores: float = 0.0,
    skip_bad_rows: bool = False,
    read_options: dict | None = None,
    telemetry: Sequence[dict] = (),
):
    """Load and analyse runs from notebook parameters (0 / "" mean "default").

    ``read_options`` (a :meth:`ReadOptions.to_dict`) carries every reading option of the
    command line; ``cpu_cores`` and ``skip_bad_rows`` stay for notebooks run by hand.
    ``telemetry``: per run a :class:`headroom.telemetry.PromSource` as a dict (``--prometheus``),
    one for all runs, or none (the runs' own files).
    """
    from .io import reduce_run
    from .summary import analyze
    from .telemetry import PromSource

    obj = parse_objective(objective) if objective else None
    labels = list(labels) + [""] * (len(paths) - len(labels))
    out = []
    sources = [PromSource(**t) for t in telemetry] or [None]
    sources = sources * len(paths) if len(sources) == 1 else sources
    read = _read_options(read_options, cpu_cores, skip_bad_rows)
    for path, label, source in zip(paths, labels, sources):
        run = reduce_run(
            path,
            bucket_s=parse_duration(bucket),
            label=label or None,
            telemetry=source,
            **read.reduce_kwargs(),
        )
        out.append(
            analyze(
                run,
                objective=obj,
                bucket_s=parse_duration(bucket),
                bins=bins or None,
                bin_width=bin_width or None,
                cpu_target_pct=cpu_target,
            )
        )
    return out


def _read_options(
    read_options: dict | None, cpu_cores: float = 0.0, skip_bad_rows: bool = False
) -> ReadOptions:
    if not read_options:  # a notebook run by hand with the two plain parameters
        return ReadOptions(cpu_cores=cpu_cores or None, skip_bad_rows=skip_bad_rows)
    return ReadOptions.from_dict(read_options)


def load_sides(
    baseline_paths: Sequence[str], candidate_paths: Sequence[str], *, labels: Sequence[str] = (), **kw
):
    """The baseline's and the candidate's runs, analysed (``kw``: as :func:`load_summaries`)."""
    nb = len(baseline_paths)
    runs = load_summaries([*baseline_paths, *candidate_paths], labels=labels, **kw)
    return runs[:nb], runs[nb:]


def noise_source(paths: Sequence[str], load):
    """What ``--noise-from`` names: runs (loaded with ``load``), the noise a history JSON stored, or None."""
    if not paths:
        return None
    from .noise import load_history_noise

    if len(paths) == 1 and str(paths[0]).endswith(".json"):
        return load_history_noise(paths[0])
    if any(str(p).endswith(".json") for p in paths):
        raise HeadroomError("--noise-from takes one history JSON file or run folders, not both")
    return [load(p) for p in paths]


def compare_sides(
    baseline,
    candidate,
    *,
    objective: str = "",
    verdict_options: dict | VerdictOptions | None = None,
    read_options: dict | ReadOptions | None = None,
):
    """The verdict of ``headroom compare`` for these runs (runs or summaries, baseline first).

    ``headroom compare`` and the comparison report both call this, so the two
    state one verdict and one exit code: the same noise (``--noise-from``,
    read with the same reading options), threshold, error threshold and
    confidence, and the mismatch warnings (:mod:`headroom.mismatch`) first
    among the comparison's warnings.
    """
    from .compare import compare_runs
    from .io import reduce_run
    from .mismatch import with_mismatches
    from .summary import Summary, analyze

    opts = (
        verdict_options
        if isinstance(verdict_options, VerdictOptions)
        else VerdictOptions.from_dict(verdict_options)
    )
    read = read_options if isinstance(read_options, ReadOptions) else ReadOptions.from_dict(read_options)
    obj = parse_objective(objective) if objective else None
    # analysed once here (compare_runs takes summaries as they are), so the mismatch check reads them too
    sides = [
        [s if isinstance(s, Summary) else analyze(s, objective=obj) for s in side]
        for side in (baseline, candidate)
    ]
    from .compare.wording import same_files

    if same_files(sides):  # nothing can change: a usage error, not a verdict (issue 49)
        raise HeadroomError(same_files(sides)[0].replace("every change is 0", "compare two different runs"))
    c = compare_runs(
        sides[0],
        sides[1],
        objective=obj,
        threshold=opts.threshold,
        error_threshold=opts.error_threshold,
        noise_from=noise_source(opts.noise_from, lambda p: reduce_run(p, **read.reduce_kwargs())),
        confidence=opts.confidence,
        accept_mismatch=opts.accept_mismatch,
    )
    return with_mismatches(c, sides[0], sides[1])


def verdict_parameters(verdict_options: dict | VerdictOptions | None) -> dict:
    """The verdict's settings as the report's parameters table shows them (percentages, paths)."""
    o = (
        verdict_options
        if isinstance(verdict_options, VerdictOptions)
        else VerdictOptions.from_dict(verdict_options)
    )
    return {
        "threshold": f"{o.threshold * 100:g}%",
        "confidence": f"{o.confidence * 100:g}%",
        "error_threshold": f"{o.error_threshold * 100:g} points",
        "noise_from": " ".join(o.noise_from) or "none (per-metric defaults, or repeat runs)",
    }


def compare_summaries(summaries, *, objective: str = ""):
    """The verdict for two analysed runs (baseline first), with the CLI's defaults."""
    return compare_sides([summaries[0]], [summaries[1]], objective=objective)


def notebook_verdict(nb) -> dict | None:
    """The verdict the executed comparison notebook stated (``verdict``, ``exit_code``), or None."""
    from .html import VERDICT_MIME

    for cell in nb.cells:
        for o in cell.get("outputs", []):
            doc = o.get("data", {}).get(VERDICT_MIME)
            if doc:
                return dict(doc)
    return None


def export_html(nb, *, title: str) -> str:
    """One self-contained HTML page of an executed notebook: markdown and outputs, code hidden.

    Rendered with jinja2 (autoescape) and mistune, the libraries nbconvert
    itself uses, without nbconvert's exporter machinery and its 200 kB theme
    (about half the report's CPU outside the notebook's kernel went to
    importing and running it).  Each figure is named after the section it is
    in (its ``alt`` text); inline SVG figures lose their XML prologue and
    metadata, which name web addresses a self-contained page has no use for.
    """
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_TEMPLATE_DIR / "headroom_report")),
        autoescape=True,
        keep_trailing_newline=True,
    )
    page = env.get_template("page.html.j2").render(title=title, version=__version__, blocks=_blocks(nb))
    return page


def _blocks(nb) -> list[dict]:
    """The page's pieces in order: markdown as HTML, each output as HTML, an image or text."""
    import base64
    import html as _html
    import re

    import mistune

    markdown = mistune.create_markdown(escape=False, plugins=["table"])
    heading = "figure"
    out: list[dict] = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            body = markdown(cell.source)
            for h in re.findall(r"<h2[^>]*>(.*?)</h2>", body, flags=re.S):
                heading = _html.unescape(re.sub(r"<[^>]+>", "", h)).strip() or heading
            out.append({"kind": "markdown", "body": body})
            continue
        for o in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = o.get("data", {})
            if o.get("output_type") == "stream":
                out.append({"kind": "text", "body": o.get("text", "")})
            elif "text/html" in data:
                out.append({"kind": "html", "body": _joined(data["text/html"])})
            elif "image/svg+xml" in data:
                svg = _strip_svg_prologue(_joined(data["image/svg+xml"]))
                body = base64.b64encode(svg.encode("utf-8")).decode("ascii")
                out.append({"kind": "image", "mime": "image/svg+xml", "body": body, "alt": heading})
            elif "image/png" in data:
                body = _joined(data["image/png"]).replace("\n", "")
                out.append({"kind": "image", "mime": "image/png", "body": body, "alt": heading})
            elif "text/plain" in data:
                out.append({"kind": "text", "body": _joined(data["text/plain"])})
    return out


def _joined(v) -> str:
    return "".join(v) if isinstance(v, list) else str(v)


def _strip_svg_prologue(svg: str) -> str:
    """Drop what an SVG figure in a page does not need: XML declaration, DOCTYPE, metadata.

    matplotlib writes them for standalone files; the DOCTYPE and the metadata
    name web addresses (the DTD, Dublin Core, matplotlib.org) that a
    self-contained report has no use for.
    """
    import re

    svg = re.sub(r"<\?xml[^>]*\?>\s*", "", svg)
    svg = re.sub(r"<!DOCTYPE svg[^>]*>\s*", "", svg)
    return re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)


#: What ``headroom report -o`` can write.
REPORT_SUFFIXES = (".html", ".htm")


def check_report_suffix(path: str | os.PathLike) -> Path:
    """Refuse, in one line, a report file name whose suffix says a format the report is not.

    ``-o out.pdf`` used to write HTML into ``out.pdf``.  Raises
    HeadroomError (the CLI's exit 2) unless the suffix is .html or .htm.
    """
    out = Path(path)
    if out.suffix.lower() not in REPORT_SUFFIXES:
        said = f"'{out.suffix}'" if out.suffix else "no suffix"
        raise HeadroomError(
            f"{out}: the report is one HTML file; give a name ending in .html, not {said} "
            "(print it to PDF from a browser)"
        )
    return out


def notebook_warnings(nb) -> list[str]:
    """The warnings the executed report notebook listed (its warnings cell), in order."""
    from .html import WARNINGS_MIME

    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            doc = o.get("data", {}).get(WARNINGS_MIME)
            if doc:
                out += [str(w) for w in doc.get("warnings", [])]
    return out


def check_output(path: str | os.PathLike, what: str = "the report") -> Path:
    """Fail in one line, before any work, when ``path`` cannot be written.

    Raises HeadroomError when its folder is missing or not writable, or the
    path is a folder.
    """
    out = Path(path)
    parent = out.parent
    if out.is_dir():
        raise HeadroomError(f"{out}: is a folder; give a file name for {what}")
    if not parent.is_dir():
        raise HeadroomError(f"{out}: cannot write {what}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise HeadroomError(f"{out}: cannot write {what}: permission denied")
    return out


def render(
    runs: Sequence[str],
    output: str | os.PathLike,
    *,
    keep_notebook: str | os.PathLike | None = None,
    progress: bool | None = None,
    on_warning=None,
    on_verdict=None,
    **options,
) -> Path:
    """Execute the report notebook for ``runs`` and write one HTML file.

    Parameters
    ----------
    runs
        One run (single-run report) or two (baseline, candidate); or none, with
        ``baseline=[...]`` and ``candidate=[...]`` among the options.
    output
        Where to write the HTML.  Written only when every cell succeeded.
    keep_notebook
        Also keep the executed notebook there.
    progress
        Show papermill's progress bar (default: when stderr is a terminal).
    on_warning
        Called with each warning the report lists (one line each, "label:
        text"), e.g. to print them on the terminal as well.
    on_verdict
        Called with the comparison report's verdict (a dict: ``verdict``,
        ``exit_code``, ``reason``, ``headline``), the one the page states.
    **options
        Passed to :func:`notebook_parameters` (objective, bucket, bins, title,
        baseline, candidate, verdict_options...).

    Raises
    ------
    HeadroomError
        Bad input (also when raised inside the notebook).
    ReportError
        Any other failing cell, with the cell's error.
    """
    name, params = notebook_parameters(runs, **options)
    given = [*runs, *options.get("baseline", ()), *options.get("candidate", ())]
    given += list((options.get("verdict_options") or {}).get("noise_from", ()))
    for r in given:  # a missing run fails in one line now, not after the kernel has started
        path = Path(r)
        if not path.exists() and not any(path.parent.glob(glob_escape(path.name) + "*")):
            raise HeadroomError(f"{r}: no such file or folder")
    return run_notebook(
        name,
        params,
        output,
        title=options.get("title", ""),
        keep_notebook=keep_notebook,
        progress=progress,
        on_warning=on_warning,
        on_verdict=on_verdict,
    )


def run_notebook(
    name: str,
    params: dict,
    output: str | os.PathLike,
    *,
    title: str = "",
    keep_notebook: str | os.PathLike | None = None,
    progress: bool | None = None,
    on_warning=None,
    on_verdict=None,
) -> Path:
    """Execute the shipped notebook ``name`` with papermill ``params`` and write one HTML file.

    Shared by every report (run, comparison, history); see :func:`render`.
    """
    out = check_report_suffix(check_output(output))
    if keep_notebook:
        check_output(keep_notebook, "the notebook")
    if progress is None:
        progress = sys.stderr.isatty()
    with tempfile.TemporaryDirectory(prefix="headroom-report-") as tmp:
        nb = _execute(name, params, tmp, progress=progress, keep_notebook=keep_notebook)
        for w in notebook_warnings(nb) if on_warning is not None else ():
            on_warning(w)
        verdict = notebook_verdict(nb)
        if on_verdict is not None and verdict is not None:
            on_verdict(verdict)
        page = export_html(nb, title=title or _default_title(nb))
        if keep_notebook:
            _write_notebook(nb, keep_notebook)
    tmp_out = out.with_name(out.name + ".partial")
    try:
        tmp_out.write_text(page, encoding="utf-8")
        tmp_out.replace(out)
    except OSError as e:
        raise HeadroomError(f"{out}: cannot write the report ({e.strerror})") from None
    return out


def _execute(name: str, params: dict, tmp: str, *, progress: bool, keep_notebook):
    """The executed notebook (papermill on a local kernel); a failing cell raised as HeadroomError
    (bad input) or ReportError, the executed notebook kept when asked."""
    import papermill as pm

    # the executed notebook is written only when it is to be kept (papermill's default writes it,
    # figures included and validated, twice a cell): the page is made from the returned object
    executed = Path(tmp) / "executed.ipynb" if keep_notebook else None
    with resources.as_file(notebook(name)) as src:
        try:
            return pm.execute_notebook(
                str(src),
                None if executed is None else str(executed),
                parameters=params,
                kernel_name="python3",
                progress_bar=progress,
                log_output=False,
                request_save_on_cell_execute=False,
                cwd=os.getcwd(),
                kernel_manager_class=_kernel_manager_class(tmp),
            )
        except pm.PapermillExecutionError as e:
            if executed is not None and executed.exists():
                Path(keep_notebook).write_bytes(executed.read_bytes())
            msg = f"{e.ename}: {e.evalue}".strip()
            if e.ename == "HeadroomError":
                raise HeadroomError(e.evalue) from None
            raise ReportError(f"report notebook {name} failed in cell {e.exec_count}: {msg}") from None


def _write_notebook(nb, path) -> None:
    import nbformat

    Path(path).write_text(nbformat.writes(nb), encoding="utf-8")


def _default_title(nb) -> str:
    """The title the notebook's header cell displayed (its first <h1>)."""
    import html
    import re

    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("data", {}).get("text/html", "")
            m = re.search(r"<h1>(.*?)</h1>", "".join(text) if isinstance(text, list) else text, re.S)
            if m:
                return html.unescape(re.sub(r"<[^>]+>", "", m.group(1)))
    return "headroom report"
