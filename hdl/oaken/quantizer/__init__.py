"""Oaken's online quantizer: the component (`quantizer`), whose `elaborate` composes its
pipeline stages (`credits`: queues and credits; `front`: thresholds and decomposers; `measure`:
min/max trees and chunk reduction; `statistics`: coding constants and header; `coding`: code
search and COO compaction; `gearbox`: COO beats; `stages`: what they share), and its queues and
arithmetic steps (`parts`)."""

from .quantizer import OakenQuantizer

__all__ = ["OakenQuantizer"]
