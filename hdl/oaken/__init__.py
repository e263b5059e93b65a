"""Oaken (online-offline hybrid KV-cache quantization): the decomposer, the zero-insert
dequantizer and the online quantizer."""

from .decomposer import OakenDecomposer
from .dequantizer import OakenDequantizer
from .quantizer import OakenQuantizer

__all__ = ["OakenDecomposer", "OakenDequantizer", "OakenQuantizer"]
