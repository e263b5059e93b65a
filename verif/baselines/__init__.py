"""The FP16 baselines' cocotb benches.

* :mod:`.tb_fp16_mac`: ``fp16_mac`` (both accumulator readings);
* :mod:`.tb_fp16_pcu`: ``fp16_pcu``.
"""
