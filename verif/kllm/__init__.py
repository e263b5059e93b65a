"""KLLM's cocotb benches and their stimulus.

* :mod:`.tb_concat`: ``kllm_concat``;
* :mod:`.tb_idx_counter`: ``kllm_idx_counter``;
* :mod:`.tb_column`: ``kllm_column``;
* :mod:`.tb_orizuru`: ``orizuru`` and its baselines ``orizuru_scan``, ``orizuru_sortnet``;
* :mod:`.orizuru_sim`: the Amaranth-simulator driver of Orizuru's stream interface (tests).
"""
