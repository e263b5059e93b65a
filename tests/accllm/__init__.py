"""AccLLM's tests: the DSP-packed multiplier, the sparse selector, the PE, the DSP-packing table,
the DSP48E2 and MULT18X18D simulation models and the golden models of golden/accllm/."""
