"""KLLM (index-based computation on K-Means quantized weights and activations): the Concat
unit, the Index Distribution Counter, the MatMul column built from them, and Orizuru with its
baselines."""

from .column import KllmColumn
from .concat import KllmConcat
from .idx_counter import KllmIdxCounter
from .orizuru import Orizuru, OrizuruScan, OrizuruSortnet

__all__ = ["KllmColumn", "KllmConcat", "KllmIdxCounter", "Orizuru", "OrizuruScan",
           "OrizuruSortnet"]
