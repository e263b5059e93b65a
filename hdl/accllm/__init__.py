"""AccLLM: the DSP-packed multiplier and its plain baseline (`dsp_mul`), the PE (`pe`) and
the 2:4 sparse selector."""

from .dsp_mul import AccllmDspMul, AccllmPlainMul
from .pe import AccllmPe
from .sparse_selector import AccllmSparseSelector

__all__ = ["AccllmDspMul", "AccllmPe", "AccllmPlainMul", "AccllmSparseSelector"]
