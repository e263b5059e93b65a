"""Oaken's dequantizer: the component (`dequantizer`), COO zero insertion (`coo`) and the
per-group integer arithmetic (`arithmetic`)."""

from .dequantizer import OakenDequantizer

__all__ = ["OakenDequantizer"]
