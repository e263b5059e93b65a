"""The generator: unit registry, named paper configurations, Verilog and manifests.

``qllm verilog`` writes ``build/verilog/<unit>.v`` (top module named as the unit) and
``build/verilog/<unit>.json`` (the manifest: parameters and the bit layout of every stream
payload, which the test benches in ``verif/`` use to pack and unpack beats by field name).
"""

from .registry import UNITS, UnitSpec, resolve_params
from .verilog import generate

__all__ = ["UNITS", "UnitSpec", "resolve_params", "generate"]
