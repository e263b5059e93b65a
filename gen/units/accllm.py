"""AccLLM's units in the registry (:data:`gen.registry.UNITS`): the DSP-packed multiplier and
its plain baseline, the 2:4 sparse selector and the PE."""

from qllm_cores.gen.spec import ReportConfig, UnitSpec

__all__ = ["SPECS"]


def _accllm_products(params):
    """Products per beat of the packed multiplier (and of its plain baseline)."""
    if params["mode"] == "w2" and params["cross_products"]:
        return 4
    return 2


SPECS = (
    UnitSpec(
        name="accllm_dsp_mul",
        factory="qllm_cores.hdl.accllm.dsp_mul.dsp_mul:AccllmDspMul",
        configs={
            # AccLLM section V-B3, Fig. 10(d): one DSP48E2 per two precision-scalable
            # multipliers. (1) A8 x LoRA W8; (2) Q x K / S x V, 8 x 4 bits; (3) A8 x W2 after
            # the 2:4 sparse selector, four products of which X1 W1 and X2 W2 are kept.
            "accllm-w8-xilinx": {"mode": "w8", "target": "xilinx"},
            "accllm-w4-xilinx": {"mode": "w4", "target": "xilinx"},
            "accllm-w2-xilinx": {"mode": "w2", "target": "xilinx"},
            # The figure zero-extends X into B: unsigned activations.
            "accllm-w2-xilinx-unsigned": {"mode": "w2", "target": "xilinx",
                                          "x_signed": False},
            # Dot-product tiles accumulated in the P register (WP486's 7 INT8 products).
            "accllm-w8-xilinx-acc7": {"mode": "w8", "target": "xilinx", "acc_depth": 7},
            # Other geometries: mode w4 only (see docs/units/accllm_dsp_mul.md).
            "accllm-w4-ecp5": {"mode": "w4", "target": "ecp5"},
            "accllm-w4-ice40": {"mode": "w4", "target": "ice40", "x_bits": 7},
        },
        testbench="qllm_cores.verif.accllm.tb_dsp_mul",
        golden="qllm_cores.golden.accllm.beats:accllm_mul",
        doc="docs/units/accllm_dsp_mul.md",
        # AccLLM: the DSP48E2 packings (Xilinx only) and the packings ECP5/iCE40 allow.
        report=tuple(ReportConfig(config) for config in (
            "accllm-w4-xilinx", "accllm-w2-xilinx", "accllm-w4-ecp5", "accllm-w4-ice40")),
        summary="AccLLM DSP-packed multiplier: 2 (w8/w4) or 4 (w2) products per DSP48E2",
        result="product",
        rate=_accllm_products,
        baseline="accllm_plain_mul",
        ops_per_cycle=2,
    ),
    UnitSpec(
        name="accllm_plain_mul",
        factory="qllm_cores.hdl.accllm.dsp_mul.dsp_mul:AccllmPlainMul",
        testbench="qllm_cores.verif.accllm.tb_dsp_mul",
        golden="qllm_cores.golden.accllm.beats:accllm_mul",
        doc="docs/units/accllm_dsp_mul.md",
        summary="Baseline for accllm_dsp_mul: the same products from separate multipliers",
        result="product",
        rate=_accllm_products,
        ops_per_cycle=2,
    ),
    UnitSpec(
        name="accllm_sparse_selector",
        factory="qllm_cores.hdl.accllm.sparse_selector:AccllmSparseSelector",
        configs={
            # AccLLM section VI-A2: RCE (R x M) x T = (32 x 16) x 16, A8 activations. In 2:4
            # mode a PE block's R = 32 multipliers take 32 selected inputs per cycle, 2 per
            # group of 4: 16 groups (64 dense inputs) per weight row. MM mode broadcasts the
            # inputs to the M = 16 blocks of a tile (Fig. 10(b)), each its own weight row.
            "accllm-block": {"groups": 16, "rows": 1, "x_bits": 8, "x_signed": True},
            "accllm-tile": {"groups": 16, "rows": 16, "x_bits": 8, "x_signed": True},
        },
        testbench="qllm_cores.verif.accllm.tb_sparse_selector",
        golden="qllm_cores.golden.accllm.beats:accllm_sparse_selector",
        doc="docs/units/accllm_sparse_selector.md",
        report=(ReportConfig("accllm-block"),),
        result="selected pair",
        rate=lambda p: p["groups"] * p["rows"],
        summary="AccLLM 2:4 sparse selector: x1/x2 = x[4g + idx1/idx2] per row, registered",
    ),
    UnitSpec(
        name="accllm_pe",
        factory="qllm_cores.hdl.accllm.pe.pe:AccllmPe",
        configs={
            # AccLLM section V-B, Fig. 10: two precision-scalable multipliers of adjacent
            # PE blocks on one DSP48E2 (mode w8 / w4 / w2 per beat), each with its partial
            # sum accumulated across cycles; U280 target.
            "accllm-pe-xilinx": {"target": "xilinx"},
            # The figure zero-extends X into B: unsigned activations.
            "accllm-pe-xilinx-unsigned": {"target": "xilinx", "x_signed": False},
            # The same PE in fabric multipliers (any synthesizer) and on ECP5 with the
            # operands in the MULT18X18D input registers.
            "accllm-pe-generic": {"target": "generic"},
            "accllm-pe-ecp5": {"target": "ecp5"},
        },
        testbench="qllm_cores.verif.accllm.tb_pe",
        golden="qllm_cores.golden.accllm.beats:accllm_pe",
        doc="docs/units/accllm_pe.md",
        # One DSP48E2 (xilinx, area only) and the fabric / MULT18X18D PE (ECP5 Fmax).
        report=(ReportConfig("accllm-pe-xilinx"), ReportConfig("accllm-pe-ecp5"),
                ReportConfig("accllm-pe-generic")),
        result="MAC",
        rate=lambda p: 2,
        summary="AccLLM PE: mode w8/w4/w2 (KV4 zero points) per beat on one DSP48E2, two "
                "exact accumulators",
        ops_per_cycle=2,
    ),
)
