"""``headroom ramp``: record ramp runs by driving an existing load generator.

* :mod:`.recorder` records one run (a step per level, CPU sampled, files
  written after every step); see its docstring for the folder layout.
* :mod:`.cpu` samples the server's, the generator's and the foreign CPU.
* :mod:`.engines` drives hey, vegeta or oha and reads what they write.
* :mod:`.ab` runs an interleaved A/B job (ABBA order) and the sequential
  ``--until-decided`` design on top of the recorder.
* :mod:`.command` is the command line (options, help, dispatch).
"""

from __future__ import annotations

from .command import add_parser, run
from .recorder import Recorder, Step, parse_levels, rfc3339_ns

__all__ = ["Recorder", "Step", "add_parser", "parse_levels", "rfc3339_ns", "run"]
