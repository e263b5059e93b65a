"""P3-LLM: the FP8 x INT4/BitMoD PE (`pe`), the PIM compute unit (`pcu`) and their shared
datapath (`datapath`)."""

from .pcu import P3Pcu
from .pe import P3Pe

__all__ = ["P3Pcu", "P3Pe"]
