"""Golden models of the FP16 baselines the papers compare with: the HBM-PIM style FP16 MAC
(``fp16_mac``, contract sections 0 and 5) and its compute unit of parallel lanes (``fp16_pcu``, the
baseline of contract section 9).

Modules:

* :mod:`.fp16_mac`: FP16 x FP16 multiply with binary32 (or binary16) accumulation, bit-exact;
* :mod:`.beats`: the beat-level adapters of ``fp16_mac`` and ``fp16_pcu``.

The package exports the models of :mod:`.fp16_mac`
(``from qllm_cores.golden.baselines import fp16_mac_run``).
"""

from .fp16_mac import (ACC_FORMATS, CANONICAL_NAN, CANONICAL_NAN_FP16, SHORT_RUN, canonical_nan,
                       fp16_is_nan, fp16_mac_run, fp16_products, fp32_is_nan, fp32_match)

__all__ = ["ACC_FORMATS", "CANONICAL_NAN", "CANONICAL_NAN_FP16", "SHORT_RUN", "fp16_mac_run",
           "fp16_products", "fp16_is_nan", "fp32_is_nan", "fp32_match", "canonical_nan"]
