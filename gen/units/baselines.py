"""The FP16 baselines in the registry (:data:`gen.registry.UNITS`): ``fp16_mac`` (P3-LLM's PE
and KLLM's column compare with it) and ``fp16_pcu``, HBM-PIM's PCU (P3-LLM's PCU compares with
it)."""

from qllm_cores.gen.spec import ReportConfig, UnitSpec

__all__ = ["SPECS"]


SPECS = (
    UnitSpec(
        name="fp16_mac",
        factory="qllm_cores.hdl.baselines.fp16_mac.fp16_mac:Fp16Mac",
        configs={
            # contract 5's second reading (the papers do not say which accumulator their
            # "FP16 MAC" has): binary16 accumulator, product rounded to binary16.
            "fp16-acc": {"acc": "fp16"},
        },
        testbench="qllm_cores.verif.baselines.tb_fp16_mac",
        golden="qllm_cores.golden.baselines.beats:fp16_mac",
        doc="docs/units/fp16_mac.md",
        # The other reading of "an FP16 MAC" beside the FP32-accumulating one (the derived
        # baseline of these rows): the ratio table shows both.
        report=(ReportConfig("fp16-acc", baseline_of=(
            "p3_pe@p3-pcu-pe", "kllm_column@kllm-a4", "kllm_column@kllm-a3",
            "kllm_column@kllm-ik-a4")),),
        result="MAC",
        rate=lambda p: 1,
        summary="Baseline for p3_pe: FP16 x FP16 multiply, FP32 accumulate (HBM-PIM style)",
        ops_per_cycle=1,
    ),
    UnitSpec(
        name="fp16_pcu",
        factory="qllm_cores.hdl.baselines.fp16_pcu:Fp16Pcu",
        testbench="qllm_cores.verif.baselines.tb_fp16_pcu",
        golden="qllm_cores.golden.baselines.beats:fp16_pcu",
        doc="docs/units/fp16_pcu.md",
        result="MAC",
        rate=lambda p: p["lanes"],
        summary="Baseline for p3_pcu: HBM-PIM PCU, 16 FP16 x FP16 MACs sharing one "
                "activation, FP32 accumulate",
        # At the default 16 lanes (ops_per_cycle is one number per unit; rate follows
        # lanes).
        ops_per_cycle=16,
    ),
)
