"""``make paper``'s hardware comparison: the papers' area tables beside ours, on standard cells.

:mod:`~fpga.paper.sources` quotes the papers' tables (KLLM Table I, P3-LLM Tables VII and VIII,
Oaken Table 4, BitMoD's PE sheet), their clocks and the 28 nm NAND2 area;
:mod:`~fpga.paper.rows` sets our registered units beside them; :mod:`~fpga.paper.search`
picks each row's ``pipeline`` depth on each library (the shallowest meeting the paper's clock
scaled by FO4 delay) from cached standard-cell runs; :mod:`~fpga.paper.comparisons` counts
Orizuru's comparators in the RTL; :mod:`~fpga.paper.render` writes the tables and
:mod:`~fpga.paper.cli` is ``qllm paper-area``. Method and findings: docs/paper.md.
"""
