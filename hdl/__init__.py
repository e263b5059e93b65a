"""Amaranth 0.5 components for the key units of the qllm-cores papers, grouped by paper
(``kllm``, ``oaken``, ``p3``, ``accllm``), the FP16 baselines (``baselines``) and the pieces
they share (``common``). Nothing here imports ``golden``: the RTL stands on the papers and the
interface contract alone.

Every unit class is exported here (``from qllm_cores.hdl import Orizuru, P3Pcu``), imported
on first use so that importing one module does not import them all.
"""

import importlib

#: Unit class -> the subpackage that defines it.
_UNITS = {
    "KllmConcat": "kllm", "KllmIdxCounter": "kllm", "KllmColumn": "kllm", "Orizuru": "kllm",
    "OrizuruScan": "kllm", "OrizuruSortnet": "kllm",
    "OakenDecomposer": "oaken", "OakenDequantizer": "oaken", "OakenQuantizer": "oaken",
    "P3Pe": "p3", "P3Pcu": "p3",
    "AccllmDspMul": "accllm", "AccllmPlainMul": "accllm", "AccllmPe": "accllm",
    "AccllmSparseSelector": "accllm",
    "Fp16Mac": "baselines", "Fp16Pcu": "baselines",
}

__all__ = sorted(_UNITS)


def __getattr__(name):
    if name in _UNITS:
        return getattr(importlib.import_module(f".{_UNITS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_UNITS))
