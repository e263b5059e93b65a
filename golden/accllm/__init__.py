"""Golden models of AccLLM: W2A8KV4 quantization, 2:4 pruning, the sparse selector, DSP
packing and the PE.

Reference: Liang et al., "AccLLM: Accelerating Long-Context LLM Inference Via
Algorithm-Hardware Co-Design", section IV-A1 (2:4 semi-structured pruning), IV-B (W2A8KV4:
Eq. 7-9, Fig. 8), V-B2 (Fig. 10(c), sparse selector) and V-B3 (Fig. 10(d), DSP packing); the contract
sections 6 and 10.

Modules:

* :mod:`.quant`: :func:`prune_2_4` and the quantizers, float models of the paper's algorithm;
* :mod:`.sparse_selector`: the sparse selector (``accllm_sparse_selector``), bit-exact;
* :mod:`.dsp_mul`: the DSP48E2 and the packing of ``accllm_dsp_mul`` (contract section 6),
  bit-exact;
* :mod:`.pe`: ``accllm_pe`` (contract section 10), bit-exact;
* :mod:`.beats`: the beat-level adapters of ``accllm_dsp_mul`` / ``accllm_plain_mul``,
  ``accllm_sparse_selector`` and ``accllm_pe``;
* :mod:`.checks`: the argument checks these modules share.

The package exports the models of :mod:`.quant`, :mod:`.sparse_selector`, :mod:`.dsp_mul` and
:mod:`.pe` (``from qllm_cores.golden.accllm import prune_2_4``).
"""

from .dsp_mul import (A_BITS, AD_BITS, B_BITS, D_BITS, P_BITS, W2_SHIFTS, W8_SHIFTS, W2Products,
                      W8Products, accumulate_packed, b_fits, dsp48e2_p, extract_w2, extract_w8,
                      max_accumulation_depth, pack_w2, pack_w8, packed_p_w2, product_range,
                      run_sums)
from .pe import PE_MODES, pe_product_bits, pe_products, pe_run, pe_weights
from .quant import (ActQuant, KV4Quant, W2Quant, dequantize_a8, dequantize_kv4, dequantize_w2,
                    prune_2_4, quantize_a8, quantize_kv4, quantize_w2)
from .sparse_selector import SparseSelection, select_by_index, sparse_select

__all__ = [
    "W2Quant", "ActQuant", "KV4Quant", "SparseSelection", "W8Products", "W2Products",
    "A_BITS", "D_BITS", "B_BITS", "P_BITS", "AD_BITS", "W8_SHIFTS", "W2_SHIFTS",
    "prune_2_4", "quantize_w2", "dequantize_w2", "quantize_a8", "dequantize_a8",
    "quantize_kv4", "dequantize_kv4", "sparse_select", "select_by_index",
    "dsp48e2_p", "product_range", "pack_w8", "extract_w8", "b_fits", "pack_w2",
    "packed_p_w2", "extract_w2", "max_accumulation_depth", "accumulate_packed", "run_sums",
    "PE_MODES", "pe_product_bits", "pe_weights", "pe_products", "pe_run",
]
