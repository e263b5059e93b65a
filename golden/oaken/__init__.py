"""Golden models of Oaken: the online KV-cache quantizer (decomposer, encoder, dequantizer),
the offline threshold profiling, the 4-bit baselines and the report that compares them.

Reference: Kim et al., "Oaken: Fast and Efficient LLM Serving with Online-Offline Hybrid KV
Cache Quantization"; contract sections 4 and 8.

Modules:

* :mod:`.online`: the online quantizer, bit-exact with the ``oaken_decomposer``,
  ``oaken_quantizer`` and ``oaken_dequantizer`` RTL, and its float reference (sections 4.3-4.5,
  5.2);
* :mod:`.profile`: offline threshold profiling (section 4.3) and synthetic KV data;
* :mod:`.baselines`: per-token INT4, KIVI-like, Atom-like and 23-bit COO baselines, Oaken's
  bit counts and round trips, error metrics (sections 4.4, 4.5, 6.1, 6.2);
* :mod:`.report`: ``python -m qllm_cores.golden.oaken.report``, thresholds, bits and error;
* :mod:`.beats`: the beat-level adapters of ``oaken_decomposer``, ``oaken_dequantizer`` and
  ``oaken_quantizer``;
* :mod:`.checks`: the argument checks :mod:`.profile` and :mod:`.baselines` share.

The package exports the models of :mod:`.online`, :mod:`.profile` and :mod:`.baselines`
(``from qllm_cores.golden.oaken import decompose``).
"""

from .baselines import (CODE_BITS, COO_BITS, MIXED_COO_BITS, ErrorMetrics, OakenResult,
                        QuantResult, atom_like, coo23_mixed, effective_bitwidth, error_metrics,
                        kivi_like, oaken_chunk_bits, oaken_float_roundtrip, oaken_roundtrip,
                        per_token_int4)
from .online import (INNER, MAX_VEC_LEN, MIDDLE, OUTER, OakenChunk, OakenMeta, check_thresholds,
                     decompose, dequantize_vector, pack_coo, quantize_dequantize_float,
                     quantize_vector, reconstruction_bound, unpack_coo)
from .profile import (DEFAULT_INNER, DEFAULT_OUTER, group_fractions, profile_layers,
                      profile_thresholds, run_cut_points, synthetic_kv, topk_counts)

__all__ = [
    # online quantizer (contract section 4)
    "MIDDLE", "INNER", "OUTER", "MAX_VEC_LEN", "OakenMeta", "OakenChunk",
    "check_thresholds", "decompose", "quantize_vector", "dequantize_vector",
    "quantize_dequantize_float", "pack_coo", "unpack_coo", "reconstruction_bound",
    # offline profiling (section 4.3)
    "DEFAULT_OUTER", "DEFAULT_INNER", "topk_counts", "run_cut_points", "profile_thresholds",
    "profile_layers", "synthetic_kv", "group_fractions",
    # baselines, bits and errors (sections 4.4, 4.5, 6.1, 6.2)
    "COO_BITS", "MIXED_COO_BITS", "CODE_BITS",
    "QuantResult", "per_token_int4", "kivi_like", "atom_like", "coo23_mixed", "OakenResult",
    "oaken_chunk_bits", "oaken_roundtrip", "oaken_float_roundtrip", "effective_bitwidth",
    "ErrorMetrics", "error_metrics",
]
