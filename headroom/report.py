"""The release report: execute a parameterized notebook, export one HTML file.

The notebooks ship inside the package (``headroom.notebooks``) and are found
with :mod:`importlib.resources`, so this works from a wheel as well as from
an editable install.  papermill runs them in one kernel; nbconvert exports
them with code hidden, images embedded, and a template that loads nothing
from the network and needs no JavaScript.
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
from .options import ReadOptions

RUN_NOTEBOOK = "run_report.ipynb"
#: Image formats of the report's figures: PNG, or SVG inlined in the page (sharp at any zoom).
FIGURE_FORMATS = ("png", "svg")
COMPARISON_NOTEBOOK = "comparison_report.ipynb"
_TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"


class ReportError(Exception):
    """A report notebook failed for a reason other than bad input."""


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
            # the kernel's own log lines (e.g. "KeyboardInterrupt caught in kernel" when it is shut
            # down after a failed cell) are not the command's output: they go to a file beside
            # the sockets; cell errors still arrive through the messaging protocol
            if "stderr" in kw:
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            with open(os.path.join(socket_dir, "kernel-stderr.log"), "ab") as log:
                # the kernel inherits the descriptor; the parent's copy is closed once it has started
                return await super()._async_launch_kernel(kernel_cmd, stderr=log, **kw)

    globals()["_LocalKernelManager"] = LocalKernelManager
    return f"{__name__}._LocalKernelManager"


def notebook(name: str):
    """The shipped notebook ``name`` as an importlib.resources Traversable."""
    nb = resources.files("headroom.notebooks") / name
    if not nb.is_file():
        raise ReportError(f"report notebook {name} is missing from the installed package")
    return nb


def notebook_parameters(
    runs: Sequence[str],
    *,
    labels: Sequence[str] = (),
    objective: str = "",
    bucket: str = "1s",
    bins: int = 0,
    bin_width: float = 0.0,
    cpu_target: float = 70.0,
    read_options: dict | None = None,
    title: str = "",
    figure_format: str = "png",
    log_latency: bool = False,
    telemetry: Sequence[dict] = (),
) -> tuple[str, dict]:
    """Which notebook to run for ``runs`` and the papermill parameters to pass it.

    One run gives the single-run report, two give baseline against candidate.
    Values are plain str/int/float/list so that papermill writes them as
    Python literals (quoted and escaped, never pasted as code).
    """
    if len(runs) not in (1, 2):
        raise HeadroomError(
            f"give one run (a single-run report) or two (baseline, candidate), not {len(runs)}"
        )
    if figure_format not in FIGURE_FORMATS:
        raise HeadroomError(f"figure format {figure_format!r}: expected one of {', '.join(FIGURE_FORMATS)}")
    labels = list(labels) + [""] * (len(runs) - len(labels))
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
    if len(runs) == 1:
        return RUN_NOTEBOOK, {"run_path": str(runs[0]), "label": labels[0], **common}
    return COMPARISON_NOTEBOOK, {
        "baseline_path": str(runs[0]),
        "candidate_path": str(runs[1]),
        "baseline_label": labels[0],
        "candidate_label": labels[1],
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
    for path, label, source in zip(paths, labels, sources):
        read = ReadOptions.from_dict(read_options)
        if not read_options:  # a notebook run by hand with the two plain parameters
            read = ReadOptions(cpu_cores=cpu_cores or None, skip_bad_rows=skip_bad_rows)
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


def compare_summaries(summaries, *, objective: str = ""):
    """The verdict for the comparison report (baseline first), with the CLI's defaults."""
    from .compare import compare_runs

    obj = parse_objective(objective) if objective else None
    return compare_runs(summaries[0], summaries[1], objective=obj)


def export_html(nb, *, title: str) -> str:
    """Export an executed notebook to self-contained HTML with code hidden."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        template_name="headroom_report",
        extra_template_basedirs=[str(_TEMPLATE_DIR)],
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    nb.metadata["title"] = title
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    return _figure_alt_text(_strip_svg_prologue(_strip_css_comments(body)))


def _figure_alt_text(page: str) -> str:
    """Name each figure after the section it is in, instead of nbconvert's "No description..." alt text."""
    import html
    import re

    heading = "figure"

    def walk(m: re.Match) -> str:
        nonlocal heading
        if m.group("h") is not None:
            text = re.sub(r"<a class=\"anchor-link\".*?</a>|<[^>]+>", "", m.group("h"))
            heading = html.unescape(text).strip() or heading
            return m.group(0)
        return f'alt="{html.escape(heading, quote=True)}"'

    pattern = r"<h2[^>]*>(?P<h>.*?)</h2>|alt=\"No description has been provided for this image\""
    return re.sub(pattern, walk, page, flags=re.S)


def _strip_svg_prologue(page: str) -> str:
    """Drop what inline SVG figures do not need in HTML: XML declaration, DOCTYPE, metadata.

    matplotlib writes them for standalone files; the DOCTYPE and the metadata
    name web addresses (the DTD, Dublin Core, matplotlib.org) that a
    self-contained report has no use for.
    """
    import re

    page = re.sub(r"<\?xml[^>]*\?>\s*", "", page)
    page = re.sub(r"<!DOCTYPE svg[^>]*>\s*", "", page)
    return re.sub(r"<metadata>.*?</metadata>\s*", "", page, flags=re.S)


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


def _strip_css_comments(page: str) -> str:
    """Drop comments inside <style> blocks (nbconvert's CSS cites web pages in them)."""
    import re

    def clean(m: re.Match) -> str:
        return re.sub(r"/\*.*?\*/", "", m.group(0), flags=re.S)

    return re.sub(r"<style[^>]*>.*?</style>", clean, page, flags=re.S)


def render(
    runs: Sequence[str],
    output: str | os.PathLike,
    *,
    keep_notebook: str | os.PathLike | None = None,
    progress: bool | None = None,
    on_warning=None,
    **options,
) -> Path:
    """Execute the report notebook for ``runs`` and write one HTML file.

    Parameters
    ----------
    runs
        One run (single-run report) or two (baseline, candidate).
    output
        Where to write the HTML.  Written only when every cell succeeded.
    keep_notebook
        Also keep the executed notebook there.
    progress
        Show papermill's progress bar (default: when stderr is a terminal).
    on_warning
        Called with each warning the report lists (one line each, "label:
        text"), e.g. to print them on the terminal as well.
    **options
        Passed to :func:`notebook_parameters` (objective, bucket, bins, title...).

    Raises
    ------
    HeadroomError
        Bad input (also when raised inside the notebook).
    ReportError
        Any other failing cell, with the cell's error.
    """
    name, params = notebook_parameters(runs, **options)
    for r in runs:  # a missing run fails in one line now, not after the kernel has started
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
) -> Path:
    """Execute the shipped notebook ``name`` with papermill ``params`` and write one HTML file.

    Shared by every report (run, comparison, history); see :func:`render`.
    """
    import nbformat
    import papermill as pm

    out = check_report_suffix(check_output(output))
    if keep_notebook:
        check_output(keep_notebook, "the notebook")
    if progress is None:
        progress = sys.stderr.isatty()
    with tempfile.TemporaryDirectory(prefix="headroom-report-") as tmp:
        executed = Path(tmp) / "executed.ipynb"
        with resources.as_file(notebook(name)) as src:
            try:
                pm.execute_notebook(
                    str(src),
                    str(executed),
                    parameters=params,
                    kernel_name="python3",
                    progress_bar=progress,
                    log_output=False,
                    cwd=os.getcwd(),
                    kernel_manager_class=_kernel_manager_class(tmp),
                )
            except pm.PapermillExecutionError as e:
                if keep_notebook and executed.exists():
                    Path(keep_notebook).write_bytes(executed.read_bytes())
                msg = f"{e.ename}: {e.evalue}".strip()
                if e.ename == "HeadroomError":
                    raise HeadroomError(e.evalue) from None
                raise ReportError(f"report notebook {name} failed in cell {e.exec_count}: {msg}") from None
        nb = nbformat.read(executed, as_version=4)
        for w in notebook_warnings(nb) if on_warning is not None else ():
            on_warning(w)
        title = title or _default_title(nb)
        page = export_html(nb, title=title)
        if keep_notebook:
            Path(keep_notebook).write_bytes(executed.read_bytes())
    tmp_out = out.with_name(out.name + ".partial")
    try:
        tmp_out.write_text(page, encoding="utf-8")
        tmp_out.replace(out)
    except OSError as e:
        raise HeadroomError(f"{out}: cannot write the report ({e.strerror})") from None
    return out


def _default_title(nb) -> str:
    """The title the notebook's header cell displayed (its first <h1>)."""
    import html
    import re

    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("data", {}).get("text/html", "")
            m = re.search(r"<h1>(.*?)</h1>", "".join(text) if isinstance(text, list) else text, re.S)
            if m:
                return html.unescape(m.group(1))
    return "headroom report"
