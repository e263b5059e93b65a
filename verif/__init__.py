"""cocotb test benches and their reusable pieces.

* :mod:`verif.payload` packs and unpacks stream payloads by field name from a unit's manifest.
* :mod:`verif.stream` drives and monitors ``lib.stream`` ports with random backpressure.
* :mod:`verif.runner` builds a unit with Verilator (or Icarus) and runs a test bench.
* The benches, one module per unit, grouped by paper: :mod:`verif.kllm`, :mod:`verif.oaken`,
  :mod:`verif.p3`, :mod:`verif.accllm`, :mod:`verif.baselines`.
"""
