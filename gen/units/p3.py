"""P3-LLM's units in the registry (:data:`gen.registry.UNITS`): the PE and the PIM compute
unit (PCU)."""

from qllm_cores.gen.spec import ReportConfig, UnitSpec

__all__ = ["SPECS"]


SPECS = (
    UnitSpec(
        name="p3_pe",
        factory="qllm_cores.hdl.p3.pe:P3Pe",
        configs={
            # P3-LLM section V-C / Fig. 6(c): one PE of the PCU, a 4-way dot product.
            "p3-pcu-pe": {},
        },
        testbench="qllm_cores.verif.p3.tb_pe",
        golden="qllm_cores.golden.p3.beats:p3_pe",
        doc="docs/units/p3_pe.md",
        report=(ReportConfig("p3-pcu-pe"),),
        result="MAC",
        rate=lambda p: 4,
        summary="P3-LLM PE: 4-way FP8 (E4M3/S0E4M4) x INT4/BitMoD dot product, 32-bit acc",
        baseline="fp16_mac",
        ops_per_cycle=4,
    ),
    UnitSpec(
        name="p3_pcu",
        factory="qllm_cores.hdl.p3.pcu:P3Pcu",
        configs={
            # P3-LLM section V-C / Fig. 6(c): 16 PEs, a 1 x 4 x 16 tile per column read.
            "p3-pcu": {"pes": 16, "reuse": 1},
            # Section V-D / Fig. 7: the throughput-enhanced PCU, two accumulator sets.
            "p3-pcu-te": {"pes": 16, "reuse": 2},
        },
        testbench="qllm_cores.verif.p3.tb_pcu",
        golden="qllm_cores.golden.p3.beats:p3_pcu",
        doc="docs/units/p3_pcu.md",
        report=(ReportConfig("p3-pcu"), ReportConfig("p3-pcu-te")),
        result="MAC",
        rate=lambda p: 4 * p["pes"],
        summary="P3-LLM PCU: 16 PEs sharing FP8 activations, 1 x 4 x 16 GEMV tile per beat",
        baseline="fp16_pcu",
        ops_per_cycle=64,
    ),
)
