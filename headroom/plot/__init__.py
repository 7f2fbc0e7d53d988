"""Figures: matplotlib, Axes in, Axes out.

Every function takes one :class:`~headroom.summary.Summary` or a list of
them (overlaid, each run in its own colour with its label in the legend),
keyword-only options and an optional ``ax``, and returns the Axes it drew
on.  Nothing here reads files or computes statistics: the numbers come from
the summary, or from :mod:`headroom.binning` helpers called for the plot.
Axes start at zero and scale to the data.

The figures live in one module per family: :mod:`.headroom_plot` (the
headroom plot), :mod:`.over_time` (throughput, CPU, latency and memory over
the run and against throughput), :mod:`.by_load` (per-load panels and a
comparison's per-pair changes) and :mod:`.images` (the report's figures
drawn once to image bytes); shared helpers in :mod:`._base`.
"""

from .by_load import by_concurrency
from .headroom_plot import DENSITY_COLUMNS, density_grids, headroom
from .images import REPORT_FIGURES, REPORT_RC, FigureImage, image_bytes, report_figure, report_image
from .over_time import (
    cpu_over_time,
    cpu_vs_throughput,
    latency_over_time,
    memory_over_time,
    memory_vs_throughput,
    throughput_over_time,
)

__all__ = [
    "DENSITY_COLUMNS",
    "REPORT_FIGURES",
    "REPORT_RC",
    "FigureImage",
    "by_concurrency",
    "cpu_over_time",
    "cpu_vs_throughput",
    "density_grids",
    "headroom",
    "image_bytes",
    "latency_over_time",
    "memory_over_time",
    "memory_vs_throughput",
    "report_figure",
    "report_image",
    "throughput_over_time",
]
