"""P3-LLM's tests: the PE, the PCU and the golden models of golden/p3/."""
