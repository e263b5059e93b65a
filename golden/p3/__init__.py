"""Golden models of P3-LLM: the hybrid numerical formats, the 4-way FP8 x INT4/BitMoD PE and
the PIM compute unit, and the report that compares the formats.

Reference: Chen et al., "P3-LLM: An Integrated NPU-PIM Accelerator for LLM Inference Using
Hybrid Numerical Formats"; contract sections 5 and 9.

Modules:

* :mod:`.formats`: the quantizers and decoders of the formats and their baselines (sections
  II-C, IV-A to IV-D, V-B);
* :mod:`.pe`: the PE (``p3_pe``, contract section 5) and the compute unit (``p3_pcu``, contract section
  9), bit-exact (sections V-C, V-D);
* :mod:`.report`: ``python -m qllm_cores.golden.p3.report``, the formats' error against their
  baselines;
* :mod:`.beats`: the beat-level adapters of ``p3_pe`` and ``p3_pcu``;
* :mod:`.checks`: the argument checks :mod:`.formats` and :mod:`.pe` share.

The package exports the models of :mod:`.formats` and :mod:`.pe`
(``from qllm_cores.golden.p3 import pe_run``). Nothing here imports ``hdl``.
"""

from .formats import (ACT_E4M3, ACT_S0E4M4, BITMOD_HALF_UNITS, BITMOD_SPECIAL_HALF, E4M3_MAX,
                      FP4_VALUES, S0E4M4_MAX, WGT_BITMOD, WGT_INT4, decode_bitmod, decode_e4m3,
                      decode_fp4, decode_int4, decode_s0e4m4, dequantize_bitmod,
                      dequantize_e4m3, dequantize_fp4, dequantize_int4_asym,
                      dequantize_int4_sym, dequantize_int8, quantize_bitmod, quantize_e4m3,
                      quantize_fp4, quantize_int4_asym, quantize_int4_sym, quantize_int8,
                      quantize_s0e4m4, smooth_keys)
from .pe import (ACC_BITS, LANES, acc_to_real, decode_act, decode_act_value, decode_weight,
                 pcu_run, pe_products, pe_run)

__all__ = [
    "ACT_E4M3", "ACT_S0E4M4", "WGT_BITMOD", "WGT_INT4", "LANES", "ACC_BITS",
    "E4M3_MAX", "S0E4M4_MAX", "BITMOD_HALF_UNITS", "BITMOD_SPECIAL_HALF", "FP4_VALUES",
    "quantize_e4m3", "decode_e4m3", "dequantize_e4m3",
    "quantize_s0e4m4", "decode_s0e4m4",
    "quantize_bitmod", "decode_bitmod", "dequantize_bitmod",
    "quantize_int4_asym", "decode_int4", "dequantize_int4_asym",
    "quantize_fp4", "decode_fp4", "dequantize_fp4",
    "quantize_int4_sym", "dequantize_int4_sym", "quantize_int8", "dequantize_int8",
    "smooth_keys",
    "decode_act", "decode_act_value", "decode_weight", "pe_products", "pe_run", "acc_to_real",
    "pcu_run",
]
