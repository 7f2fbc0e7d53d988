"""The report's figures drawn once to image bytes (the report notebooks show these)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from ..summary import Summary
from ._base import _runs
from .by_load import by_concurrency
from .headroom_plot import headroom
from .over_time import (
    cpu_over_time,
    cpu_vs_throughput,
    latency_over_time,
    memory_over_time,
    memory_vs_throughput,
    throughput_over_time,
)

#: The figures of the report notebooks, in order (``report_figure`` draws each).
REPORT_FIGURES = (
    "headroom",
    "by_concurrency",
    "throughput_over_time",
    "cpu_over_time",
    "cpu_vs_throughput",
    "latency_over_time",
    "memory",
)


class FigureImage:
    """A drawn figure as image bytes that Jupyter displays (PNG, or SVG text).

    The report notebooks show these instead of live figures: the figure is
    drawn once, to its image, and closed (the inline backend's
    ``bbox_inches="tight"`` drew every figure twice, once only to measure it).
    """

    def __init__(self, data: bytes | str, fmt: str):
        self.data, self.fmt = data, fmt

    def _repr_png_(self):
        return self.data if self.fmt == "png" else None

    def _repr_svg_(self):
        return self.data if self.fmt == "svg" else None

    def __repr__(self) -> str:
        return f"<{self.fmt.upper()} figure, {len(self.data):,} bytes>"


#: room added around a figure before it is drawn (inches): legends and labels hang outside the Axes
_PAD_IN = 2.0
#: white kept around the drawn content (inches), as savefig's pad_inches
_MARGIN_IN = 0.1


def image_bytes(fig, *, fmt: str = "png") -> bytes | str:
    """The figure as PNG bytes (drawn once, cropped to what was drawn) or SVG text (tight box).

    For PNG the canvas is first enlarged by 2 inches on every side (the Axes
    keep their size and place), drawn once with Agg, and cropped to the
    pixels that are not background plus 0.1 inch: the result equals
    ``savefig(bbox_inches="tight")``, which draws the figure a second time
    to measure it.  Content reaching the enlarged canvas' edge falls back to
    ``savefig`` (nothing is cut).
    """
    import io

    if fmt == "svg":
        buf = io.StringIO()
        fig.savefig(buf, format="svg", bbox_inches="tight")
        return buf.getvalue()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    _enlarge(fig, _PAD_IN)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    rgba = np.asarray(canvas.buffer_rgba())
    box = _drawn_box(rgba, canvas.figure.get_facecolor())
    buf = io.BytesIO()
    if box is None:  # something reaches the edge: let savefig measure it
        fig.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()
    (r0, r1), (c0, c1) = box
    m = round(_MARGIN_IN * fig.dpi)
    h, w = rgba.shape[:2]
    crop = rgba[max(r0 - m, 0) : min(r1 + m, h), max(c0 - m, 0) : min(c1 + m, w), :3]
    # zlib level 1: a figure's flat colours compress as well as at the default 6 (406 against 411 kB
    # for the report's figures), in less time
    Image.fromarray(np.ascontiguousarray(crop)).save(
        buf, format="png", dpi=(fig.dpi, fig.dpi), compress_level=1
    )
    return buf.getvalue()


def _enlarge(fig, pad: float) -> None:
    """Add ``pad`` inches on every side of the figure, keeping every Axes' size and place in inches."""
    w, h = fig.get_size_inches()
    boxes = [(ax, ax.get_position()) for ax in fig.axes if ax.get_axes_locator() is None]
    nw, nh = w + 2 * pad, h + 2 * pad
    fig.set_size_inches(nw, nh)
    for ax, b in boxes:
        ax.set_position([(b.x0 * w + pad) / nw, (b.y0 * h + pad) / nh, b.width * w / nw, b.height * h / nh])


def _drawn_box(rgba: np.ndarray, face) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """(rows, columns) spans of the pixels unlike the background, None when they touch the edge."""
    bg = np.round(np.asarray(face[:3]) * 255).astype(np.uint8)
    pixels = np.ascontiguousarray(rgba).view(np.uint32)[:, :, 0]  # one compare per pixel, not three
    ink = pixels != np.frombuffer(bytes([*bg, 255]), dtype=np.uint32)[0]
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    if not len(rows):
        return (0, rgba.shape[0]), (0, rgba.shape[1])
    r0, r1, c0, c1 = int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1
    if r0 == 0 or c0 == 0 or r1 == rgba.shape[0] or c1 == rgba.shape[1]:
        return None
    return (r0, r1), (c0, c1)


def report_image(
    name: str,
    summaries: Summary | Sequence[Summary],
    *,
    comparison=None,
    log_latency: bool = False,
    fmt: str = "png",
) -> FigureImage:
    """One figure of the report notebooks (:func:`report_figure`), drawn once to an image and closed.

    Text is drawn without font hinting (:data:`REPORT_RC`): as matplotlib's
    SVG and PDF output are; at the report's size it looks the same, and it
    takes a sixth of the figures' CPU less.
    """
    with plt.rc_context(REPORT_RC):
        fig = report_figure(name, summaries, comparison=comparison, log_latency=log_latency)
        try:
            return FigureImage(image_bytes(fig, fmt=fmt), fmt)
        finally:
            plt.close(fig)


#: matplotlib settings of the report's figures
REPORT_RC = {"text.hinting": "none"}


def report_figure(
    name: str, summaries: Summary | Sequence[Summary], *, comparison=None, log_latency: bool = False
):
    """One figure of the report notebooks, drawn exactly as the report draws it; returns the Figure.

    ``name`` is one of :data:`REPORT_FIGURES`; ``comparison`` (two runs)
    adds the per-pair change row to ``"by_concurrency"``; ``log_latency``
    gives the latency axes a log scale.
    """
    runs = _runs(summaries)
    if name == "headroom":
        fig, ax = plt.subplots(figsize=(11, 6.5))
        headroom(runs, ax=ax, marginals=True, log_latency=log_latency)
    elif name == "by_concurrency":
        fig = by_concurrency(runs, comparison, log_latency=log_latency)[0, 0].figure
    elif name == "throughput_over_time":
        fig, ax = plt.subplots(figsize=(11, 4))
        throughput_over_time(runs, ax=ax)
    elif name == "cpu_over_time":
        fig, ax = plt.subplots(figsize=(11, 4))
        cpu_over_time(runs, ax=ax)
    elif name == "cpu_vs_throughput":
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
        cpu_vs_throughput(runs, ax=left)
        cpu_vs_throughput(runs, per_request=True, ax=right)
    elif name == "latency_over_time":
        fig, ax = plt.subplots(figsize=(11, 4))
        latency_over_time(runs, ax=ax, log_latency=log_latency)
    elif name == "memory":
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
        memory_over_time(runs, ax=left)
        memory_vs_throughput(runs, ax=right)
    else:
        raise ValueError(f"unknown report figure {name!r}; one of {', '.join(REPORT_FIGURES)}")
    return fig
