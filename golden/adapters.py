"""Every unit's beat-level golden adapter by name (:data:`MODELS`), each also under its own
name.

The adapters (:class:`golden.common.beats.BeatModel`) live in their papers' ``beats`` modules,
where ``gen.registry`` names them (``"qllm_cores.golden.kllm.beats:kllm_concat"``); this index
gathers them for what spans every unit: the check that every adapter serves a registered unit,
and the tests that use adapters of several papers.

Adapters and the units they serve:

* ``kllm_concat``: ``kllm_concat`` (:mod:`golden.kllm.beats`);
* ``kllm_idx_counter``: ``kllm_idx_counter`` (:mod:`golden.kllm.beats`);
* ``orizuru``: ``orizuru``, ``orizuru_scan``, ``orizuru_sortnet`` (:mod:`golden.kllm.beats`);
* ``kllm_column``: ``kllm_column`` (:mod:`golden.kllm.beats`);
* ``oaken_decomposer``: ``oaken_decomposer`` (:mod:`golden.oaken.beats`);
* ``oaken_dequantizer``: ``oaken_dequantizer`` (:mod:`golden.oaken.beats`);
* ``oaken_quantizer``: ``oaken_quantizer`` (:mod:`golden.oaken.beats`);
* ``p3_pe``: ``p3_pe`` (:mod:`golden.p3.beats`);
* ``p3_pcu``: ``p3_pcu`` (:mod:`golden.p3.beats`);
* ``fp16_mac``: ``fp16_mac`` (:mod:`golden.baselines.beats`);
* ``fp16_pcu``: ``fp16_pcu`` (:mod:`golden.baselines.beats`);
* ``accllm_mul``: ``accllm_dsp_mul``, ``accllm_plain_mul`` (:mod:`golden.accllm.beats`);
* ``accllm_sparse_selector``: ``accllm_sparse_selector`` (:mod:`golden.accllm.beats`);
* ``accllm_pe``: ``accllm_pe`` (:mod:`golden.accllm.beats`).
"""

from .accllm.beats import accllm_mul, accllm_pe, accllm_sparse_selector
from .baselines.beats import fp16_mac, fp16_pcu
from .common.beats import BeatModel
from .kllm.beats import kllm_column, kllm_concat, kllm_idx_counter, orizuru
from .oaken.beats import oaken_decomposer, oaken_dequantizer, oaken_quantizer
from .p3.beats import p3_pcu, p3_pe

__all__ = [
    "BeatModel", "MODELS",
    "kllm_concat", "kllm_idx_counter", "orizuru", "kllm_column", "oaken_decomposer",
    "oaken_dequantizer", "oaken_quantizer", "p3_pe", "p3_pcu", "fp16_mac", "fp16_pcu",
    "accllm_mul", "accllm_sparse_selector", "accllm_pe",
]

#: Every adapter by name.
MODELS = {model.name: model for model in (
    kllm_concat, kllm_idx_counter, orizuru, kllm_column, oaken_decomposer, oaken_dequantizer,
    oaken_quantizer, p3_pe, p3_pcu, fp16_mac, fp16_pcu, accllm_mul, accllm_sparse_selector,
    accllm_pe)}
