"""Standard-cell area and timing of the generated units on open PDKs (pip only).

:mod:`~fpga.stdcell.liberty` finds a library under ``PDK_ROOT`` (volare/ciel layout) and
reads its facts; :mod:`~fpga.stdcell.flow` maps a unit with the native Yosys of ``pyosys``
and returns its area (um^2, NAND2-equivalents, flip-flop share) and an estimated Fmax;
:mod:`~fpga.stdcell.run` is the Yosys process itself.
"""

from .flow import StdcellError, StdcellResult, facts_for, stdcell_job, stdcell_synth
from .liberty import LIBRARIES, LibraryError, find_liberty, library_facts

__all__ = ["LIBRARIES", "LibraryError", "StdcellError", "StdcellResult", "facts_for",
           "find_liberty", "library_facts", "stdcell_job", "stdcell_synth"]
