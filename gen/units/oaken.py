"""Oaken's units in the registry (:data:`gen.registry.UNITS`): the decomposer, the
dequantizer and the online quantizer."""

from qllm_cores.gen.spec import ReportConfig, UnitSpec

__all__ = ["SPECS"]


SPECS = (
    UnitSpec(
        name="oaken_decomposer",
        factory="qllm_cores.hdl.oaken.decomposer:OakenDecomposer",
        configs={
            # Oaken section 5.2 / contract 4: 16-bit fixed-point KV values, 16 per beat.
            "oaken-16": {"lanes": 16, "data_bits": 16},
            # A whole 64-element chunk per beat.
            "oaken-64": {"lanes": 64, "data_bits": 16},
        },
        testbench="qllm_cores.verif.oaken.tb_decomposer",
        golden="qllm_cores.golden.oaken.beats:oaken_decomposer",
        doc="docs/units/oaken.md",
        report=(ReportConfig("oaken-16"),),
        result="element",
        rate=lambda p: p["lanes"],
        summary="Oaken decomposer: threshold grouping, group shift, inlier/outlier lanes",
    ),
    UnitSpec(
        name="oaken_dequantizer",
        factory="qllm_cores.hdl.oaken.dequantizer.dequantizer:OakenDequantizer",
        configs={
            "oaken-16": {"lanes": 16, "vec_len": 64, "data_bits": 16, "frac_bits": 8},
            "oaken-64": {"lanes": 64, "vec_len": 64, "data_bits": 16, "frac_bits": 8},
        },
        testbench="qllm_cores.verif.oaken.tb_dequantizer",
        golden="qllm_cores.golden.oaken.beats:oaken_dequantizer",
        doc="docs/units/oaken.md",
        report=(ReportConfig("oaken-16"),),
        benchmark="qllm_cores.verif.benchmarks:oaken_table",
        result="element",
        rate=lambda p: p["lanes"],
        summary="Oaken dequantizer: COO zero insert, per-group integer dequantization",
    ),
    UnitSpec(
        name="oaken_quantizer",
        factory="qllm_cores.hdl.oaken.quantizer.quantizer:OakenQuantizer",
        configs={
            "oaken-16": {"lanes": 16, "vec_len": 64, "data_bits": 16, "frac_bits": 8},
        },
        testbench="qllm_cores.verif.oaken.tb_quantizer",
        golden="qllm_cores.golden.oaken.beats:oaken_quantizer",
        doc="docs/units/oaken_quantizer.md",
        report=(ReportConfig("oaken-16"),),
        result="element",
        rate=lambda p: p["lanes"],
        summary="Oaken online quantizer: chunk min/max, 4-bit codes, dense + COO streams",
    ),
)
