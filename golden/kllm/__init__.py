"""Golden models for KLLM: index concatenation, the Index Distribution Counter, K-Means
quantization, the index-based MatMul / nonlinear flow, the MatMul column and Orizuru.

Reference: Wu et al., "KLLM: Fast LLM Inference with K-Means Quantization", sections III-A to
III-D (algorithm) and IV-A to IV-C (Concat units, Index Distribution Counter, Orizuru); the contract
sections 1, 2, 3 and 7.

Modules:

* :mod:`.concat`: index concatenation (section III-B, contract section 1), bit-exact;
* :mod:`.idx_counter`: the Index Distribution Counter (section IV-B, contract section 2), bit-exact;
* :mod:`.kmeans`: K-Means quantization of weights and activations, outlier split (III-A);
* :mod:`.matmul`: the index-based MatMul (section III-B, Fig. 3) and the MatMul of Fig. 5;
* :mod:`.nonlinear`: the index-based nonlinear operations (section III-C, Fig. 4);
* :mod:`.column`: the ``kllm_column`` unit (contract section 7), bit-exact, and its float reference;
* :mod:`.orizuru`: Orizuru, the outlier detector (section IV-C, contract section 3), bit-exact;
* :mod:`.beats`: the beat-level adapters of ``kllm_concat``, ``kllm_idx_counter``, ``orizuru``
  and ``kllm_column``;
* :mod:`.checks`: the argument checks these modules share.

Two kinds of model live here:

* **Bit-exact integer models** that the RTL is checked against: :func:`concat_indices`,
  :func:`split_indices`, :func:`index_distribution`, :func:`index_distributions` and
  :func:`counter_width`. They use integer arithmetic only (int64).
* **Float references of the paper's algorithm** (everything else). They compute in float64.
  The only binary16 rounding is that of the activation outliers, which the paper keeps in FP16
  (:func:`split_outliers`; identity when the input activation already is ``float16``). The
  paper's codebooks, MatMul outputs and FP16 MAC accumulations are *not* rounded to binary16
  here: the float models describe the algorithm, not an FP16 datapath.

The package exports the models of :mod:`.concat`, :mod:`.idx_counter`, :mod:`.kmeans`,
:mod:`.matmul`, :mod:`.nonlinear` and :mod:`.column` (``from qllm_cores.golden.kllm import
concat_indices``); Orizuru's are in :mod:`.orizuru` (``golden.kllm.orizuru.orizuru``), the
adapters in :mod:`.beats`.
"""

from .column import (COLUMN_NAN, ColumnOutputs, ColumnReference, column_counts,
                     column_float_reference, column_outputs, column_weighted_sum, load_codebook,
                     reductions_to_beats)
from .concat import concat_indices, split_indices
from .idx_counter import counter_width, index_distribution, index_distributions, wrap_counts
from .kmeans import (QuantizedActivation, WeightQuantization, activation_codebook, dequantize,
                     dequantize_activation, kmeans_codebook, kmeans_quantize, max_abs_scale,
                     outliers_per_side, quantize_activation, quantize_weights, split_outliers)
from .matmul import (index_elementwise_product, index_matmul_ik, index_matmul_kk, kllm_matmul,
                     product_codebook)
from .nonlinear import apply_elementwise, kllm_rmsnorm_matmul, rms_from_indices, rmsnorm, silu

__all__ = [
    # Concat (contract section 1)
    "concat_indices", "split_indices",
    # Index Distribution Counter (contract section 2)
    "index_distribution", "index_distributions", "counter_width", "wrap_counts",
    # K-Means quantization (section III-A)
    "kmeans_codebook", "kmeans_quantize", "dequantize", "max_abs_scale",
    "WeightQuantization", "quantize_weights",
    "outliers_per_side", "split_outliers", "activation_codebook",
    "QuantizedActivation", "quantize_activation", "dequantize_activation",
    # Index-based MatMul and nonlinear operations (sections III-B to III-D)
    "product_codebook", "index_elementwise_product", "index_matmul_kk", "index_matmul_ik",
    "kllm_matmul", "silu", "apply_elementwise", "rmsnorm", "rms_from_indices",
    "kllm_rmsnorm_matmul",
    # kllm_column (contract section 7)
    "COLUMN_NAN", "column_weighted_sum", "column_counts", "ColumnOutputs", "column_outputs",
    "load_codebook", "reductions_to_beats", "ColumnReference", "column_float_reference",
]
