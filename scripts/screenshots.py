#!/usr/bin/env python3
"""Screenshots of both reports on the bundled runs, in headless Chromium, for docs/screenshots/.

    python3 scripts/screenshots.py            # writes docs/screenshots/*.png
    python3 scripts/screenshots.py --keep     # also keeps the HTML reports there

Renders ``headroom report`` for one run and for the bundled comparison
(nginx without upstream keep-alive -> with it), opens each in headless
Chromium (``chromium``, or ``$CHROMIUM``) at 1280 px wide, and saves the
page top to bottom in parts of at most ``--height`` pixels, quantized to a
256-colour palette so that every PNG stays well under 1 MB.  Also draws the
comparison's headroom plot alone (``headroom-plot.png``, for docs/report.md)
with ``plot.report_figure``, the function the report notebook calls.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# relative to the repository root, so that no local path shows in the pictures
REPORTS = {
    "run-report": ["data/runs/nginx-keepalive"],
    "comparison-report": ["data/runs/nginx-no-keepalive", "data/runs/nginx-keepalive"],
    # issue 49: the recommended design (two pairs a level), a --find search, a run Locust limited
    "interleaved-report": [
        "data/calibration/interleaved/r6-go-cpu30-70/a-01",
        "data/calibration/interleaved/r6-go-cpu30-70/b-01",
    ],
    "search-report": ["data/search/ref6-go-hog/01/search"],
    "locust-report": ["data/runs/locust-nginx-regex3000"],
}
#: each report's objective (the bundled pair's p99<=5ms, else the recording's own)
OBJECTIVES = {"interleaved-report": "p99<=20ms", "search-report": "p99<=30ms", "locust-report": "p99<=20ms"}
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]


def chromium() -> str:
    exe = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        sys.exit("screenshots: Chromium not found (apt-get install chromium, or set CHROMIUM)")
    return exe


def shoot(exe: str, page: Path, png: Path, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory(prefix="headroom-chromium-") as profile:
        subprocess.run(
            [
                exe,
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                f"--screenshot={png}",
            ]
            + [page.as_uri()],
            check=True,
            capture_output=True,
            timeout=180,
        )


def split(png: Path, out_stem: Path, part_height: int) -> list[Path]:
    """Cut a full-page screenshot into parts, drop the blank bottom, save as palette PNGs."""
    from PIL import Image, ImageChops

    img = Image.open(png).convert("RGB")
    bg = Image.new("RGB", img.size, (255, 255, 255))
    box = ImageChops.difference(img, bg).getbbox()
    if box:
        img = img.crop((0, 0, img.width, min(img.height, box[3] + 24)))
    parts = []
    for k, top in enumerate(range(0, img.height, part_height)):
        part = img.crop((0, top, img.width, min(img.height, top + part_height)))
        path = out_stem.with_name(f"{out_stem.name}-{k + 1}.png")
        part.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
        parts.append(path)
    return parts


def headroom_figure(out: Path) -> Path:
    """The comparison report's headroom plot on its own, as the report draws it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from headroom import plot, report

    runs = [str(ROOT / r) for r in REPORTS["comparison-report"]]
    summaries = report.load_summaries(runs, objective="p99<=5ms")
    plt.rcParams["figure.dpi"] = 96
    fig = plot.report_figure("headroom", summaries)
    path = out / "headroom-plot.png"
    fig.savefig(path, dpi=96, bbox_inches="tight")
    plt.close(fig)
    from PIL import Image

    Image.open(path).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(
        path, optimize=True
    )
    return path


#: the first screen a reader sees (1400 x 900): the answer must be readable there without scrolling
HISTORY = [
    "nginx-no-keepalive",
    "nginx-keepalive",
    "nginx-keepalive-repeat",
    "nginx-ka-aa1-a",
    "nginx-ka-aa1-b",
    "nginx-ka-aa2-a",
    "nginx-ka-aa2-b",
    "nginx-large-buffering-off",
    "nginx-large-buffering-on",
]


def first_screens(exe: str, out: Path) -> list[Path]:
    """The comparison report and a nine-run history report, first screen only."""
    from PIL import Image

    jobs = {
        "comparison-first-screen": ["report", *REPORTS["comparison-report"], "--objective", "p99<=5ms"],
        "history-first-screen": ["history", *(f"data/runs/{r}" for r in HISTORY), "--cache", "none"],
    }
    done = []
    with tempfile.TemporaryDirectory(prefix="headroom-first-") as tmp:
        for name, args in jobs.items():
            page = Path(tmp) / f"{name}.html"
            subprocess.run([sys.executable, "-m", "headroom", *args, "-o", str(page)], check=True, cwd=ROOT)
            png = out / f"{name}.png"
            shoot(exe, page, png, 1400, 900)
            Image.open(png).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(
                png, optimize=True
            )
            done.append(png)
    return done


#: issue 51: the per-endpoint section of a comparison of a run whose B made /api/v2/cart slower
ENDPOINTS = ["data/endpoints/ep-go-cart2x-45/a-01", "data/endpoints/ep-go-cart2x-45/b-01"]


def endpoint_section(exe: str, out: Path) -> Path:
    """The comparison report's "Which endpoint" section alone (the page cut to it, its style kept)."""
    from PIL import Image

    with tempfile.TemporaryDirectory(prefix="headroom-ep-") as tmp:
        page = Path(tmp) / "endpoints.html"
        cmd = [
            sys.executable,
            "-m",
            "headroom",
            "report",
            *ENDPOINTS,
            "--objective",
            "p99<=20ms",
            "-o",
            str(page),
        ]
        subprocess.run(cmd, cwd=ROOT, capture_output=True)  # exit 1: the candidate regressed
        text = page.read_text()
        a = text.index("<h2>Which endpoint</h2>")
        b = text.index("<h2", a + 10)
        main = text.index("<main")
        main = text.index(">", main) + 1
        cut = Path(tmp) / "section.html"
        cut.write_text(text[:main] + text[a:b] + "</main></body></html>")
        png = out / "endpoints-report.png"
        shoot(exe, cut, png, 1280, 1600)
        im = Image.open(png).convert("RGB")
        gray = im.convert("L")
        ink = [y for y in range(gray.height) if min(gray.crop((0, y, gray.width, y + 1)).getdata()) < 250]
        im = im.crop((0, 0, im.width, min(im.height, (ink[-1] if ink else im.height) + 40)))
        im.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(png, optimize=True)
    return png


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"), help="folder for the PNGs")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--page-height", type=int, default=16000, help="browser window height (the whole page)")
    ap.add_argument("--height", type=int, default=2400, help="height of each saved part")
    ap.add_argument("--keep", action="store_true", help="also keep the HTML reports in --out")
    args = ap.parse_args()
    exe = chromium()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*-report-*.png"):
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="headroom-shots-") as tmp:
        for name, runs in REPORTS.items():
            page = Path(tmp) / f"{name}.html"
            cmd = [sys.executable, "-m", "headroom", "report", *map(str, runs), "-o", str(page)]
            subprocess.run(cmd + ["--objective", OBJECTIVES.get(name, "p99<=5ms")], check=True, cwd=ROOT)
            full = Path(tmp) / f"{name}.png"
            shoot(exe, page, full, args.width, args.page_height)
            for part in split(full, out / name, args.height):
                print(
                    f"{part.relative_to(ROOT) if part.is_relative_to(ROOT) else part}: "
                    f"{part.stat().st_size / 1024:,.0f} KB"
                )
            if args.keep:
                shutil.copy(page, out / page.name)
    for path in first_screens(exe, out):
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: first screen, 1400 x 900")
    ep = endpoint_section(exe, out)
    print(f"{ep.relative_to(ROOT) if ep.is_relative_to(ROOT) else ep}: the per-endpoint section")
    fig = headroom_figure(out)
    print(
        f"{fig.relative_to(ROOT) if fig.is_relative_to(ROOT) else fig}: {fig.stat().st_size / 1024:,.0f} KB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
