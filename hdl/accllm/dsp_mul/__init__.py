"""AccLLM's DSP-packed multiplier: the components (`dsp_mul`), the packing arithmetic
(`packing`) and the DSP48E2 (`xilinx`) and fabric / MULT18X18D (`fabric`) circuits."""

from .dsp_mul import AccllmDspMul, AccllmPlainMul

__all__ = ["AccllmDspMul", "AccllmPlainMul"]
