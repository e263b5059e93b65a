"""NumPy golden models, written from the papers and docs/contract.md alone (never from ``hdl``).

Integer models are bit-exact with the RTL; float models give the paper's algorithm where the RTL
approximates it.

Grouped by paper, as ``hdl`` is: :mod:`.kllm` (with Orizuru), :mod:`.oaken`, :mod:`.p3`,
:mod:`.accllm`, the FP16 baselines (:mod:`.baselines`) and what they share (:mod:`.common`:
argument checks, the beat-level adapter type). Each paper's ``beats`` module holds the
beat-level adapters of its units (:data:`.adapters.MODELS` gathers them by name);
:mod:`.paper` prints the papers' checkable numbers next to ours; :mod:`.llm` runs a small real
LLM (SmolLM2-135M from a GGUF file) in NumPy, with hooks where the papers' quantizers act.
"""
