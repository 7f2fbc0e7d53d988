"""Plain-text formatting shared by the terminal output and the verdict's wording."""

from __future__ import annotations


def table(header: list[str], rows: list[list[str]], align: str) -> list[str]:
    """Rows under a header, columns padded to their widest cell ('r' right-aligned, 'l' left)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    out = []
    for r in [header, *rows]:
        cells = [c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(r, widths, align)]
        out.append("  " + "  ".join(cells).rstrip())
    return out


def big_pct(v, fmt: str = "+.0%") -> str:
    """A relative change; beyond +999 % (an interval with almost no degrees of freedom) as '>+999%'."""
    if v is None:
        return "-"
    return ">+999%" if v > 9.99 else format(v, fmt)


def change_text(m) -> str:
    """A metric's change as the tables print it: relative (+12.3%), an error rate's in points."""
    if m.change is None:
        return "-"
    if m.key == "error_rate":
        return f"{m.change * 100:+.2f} pt"
    return f"{m.change * 100:+.1f}%"
