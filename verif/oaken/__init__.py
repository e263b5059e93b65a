"""Oaken's cocotb benches and their stimulus.

* :mod:`.tb_decomposer`: ``oaken_decomposer``;
* :mod:`.tb_dequantizer`: ``oaken_dequantizer``;
* :mod:`.tb_quantizer`: ``oaken_quantizer``, and the quantizer -> dequantizer round trip
  (``python -m qllm_cores.verif.oaken.tb_quantizer``);
* :mod:`.chunks`: random chunks encoded by the golden model, cut into the units' beats.
"""
