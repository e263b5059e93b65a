"""P3-LLM's cocotb benches.

* :mod:`.tb_pe`: ``p3_pe``;
* :mod:`.tb_pcu`: ``p3_pcu``.
"""
