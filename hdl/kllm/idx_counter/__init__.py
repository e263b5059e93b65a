"""KLLM's Index Distribution Counter: the counter (`idx_counter`), its per-bin counting logic
(`bins`) and its readout banks (`readout`)."""

from .idx_counter import KllmIdxCounter, counter_bits

__all__ = ["KllmIdxCounter", "counter_bits"]
