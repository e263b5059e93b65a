"""AccLLM's PE: the component (`pe`) and its DSP48E2 circuit (`xilinx`)."""

from .pe import AccllmPe

__all__ = ["AccllmPe"]
