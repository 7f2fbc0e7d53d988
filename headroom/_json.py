"""The one number format and the schema versions of headroom's JSON documents (a leaf module)."""

from __future__ import annotations

import math

#: schema version of each kind of document; serialize.py reads these and the older ones
SCHEMAS = {"summary": 2, "comparison": 3, "history": 2}


def number(v, digits: int = 6) -> float | None:
    """A JSON-safe, stable number: None for None/NaN/inf, else rounded to ``digits`` significant digits."""
    if v is None:
        return None
    v = float(v)
    if not math.isfinite(v):
        return None
    if v == 0:
        return 0.0
    return float(f"{v:.{digits}g}")
