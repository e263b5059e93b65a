"""AccLLM's cocotb benches.

* :mod:`.tb_dsp_mul`: ``accllm_dsp_mul`` and its baseline ``accllm_plain_mul``;
* :mod:`.tb_sparse_selector`: ``accllm_sparse_selector``;
* :mod:`.tb_pe`: ``accllm_pe``;
* :mod:`.tb_dsp48e2_model`: the DSP48E2 simulation model (``verif/models/DSP48E2.v``) in a
  harness ``tests/accllm/test_dsp48e2_model.py`` writes.
"""
