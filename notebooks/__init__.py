"""The report notebooks, shipped inside the package as ``headroom.notebooks``."""
