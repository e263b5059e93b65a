"""Oaken's online quantizer: the component (`quantizer`) and its queues and arithmetic steps
(`parts`)."""

from .quantizer import OakenQuantizer

__all__ = ["OakenQuantizer"]
