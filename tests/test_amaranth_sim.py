# amaranth: UnusedElaboratable=no
"""The second simulator, pip only: every registered unit in Amaranth's simulator
(:mod:`verif.amaranth_sim`) against its golden adapter, the one the Verilator benches use, with
random gaps on every input and output stream, at its default depth and at ``pipeline=0``; and a
mutant that the harness catches."""

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring

from gen.registry import UNITS, resolve_params
from hdl.kllm_concat import KllmConcat
from verif.amaranth_sim import compare_beats, simulate_streams
from verif.bench import golden_model

#: Items of stimulus per unit (beats, or vectors / chunks where an item spans several beats):
#: a reduced set beside the Verilator benches' (Amaranth's simulator runs in Python).
ITEMS = {"kllm_idx_counter": 40, "oaken_dequantizer": 6, "orizuru": 20, "orizuru_scan": 20,
         "orizuru_sortnet": 20}

#: Every unit at its defaults and at ``pipeline=0``, and at each of its report (paper)
#: configurations; a configuration that instantiates a vendor primitive (the DSP48E2 or
#: MULT18X18D targets of ``accllm_dsp_mul``) has no Amaranth model and is simulated by the
#: Verilator benches only.
CASES = ([(unit, None, depth) for unit in sorted(UNITS) for depth in ("default", 0)]
         + [(unit, row.config, "default") for unit in sorted(UNITS)
            for row in UNITS[unit].report if not row.overrides])


@pytest.mark.parametrize("unit,config,depth", CASES,
                         ids=[f"{u}-{c or 'defaults'}-{d}" for u, c, d in CASES])
def test_unit_agrees_with_its_golden_adapter(unit, config, depth):
    spec, params = resolve_params(unit, config, {"pipeline": 0} if depth == 0 else {})
    dut = spec.build(params)
    if getattr(dut, "primitives", ()):
        pytest.skip(f"{unit} at {config} instantiates {', '.join(dut.primitives)}: no "
                    "Amaranth model (the Verilator benches simulate it)")
    model = golden_model(unit)
    rng = np.random.default_rng([17, len(unit), len(config or ""), 0 if depth == 0 else 1])
    inputs = model.stimulus(rng, params, ITEMS.get(unit, 100))
    result = simulate_streams(dut, inputs, rng=rng, valid_probability=0.7,
                              ready_probability=0.6)
    assert result.problems == []
    mismatches = compare_beats(model, result.outputs, model.expected(params, inputs))
    assert mismatches == [], mismatches[:5]
    assert all(len(next(iter(f.values()))) for f in result.outputs.values())


class StuckBitConcat(wiring.Component):
    """Mutant: KllmConcat with bit 0 of lane 0 stuck at 1."""

    def __init__(self, **params):
        self.inner = KllmConcat(**params)
        super().__init__(self.inner.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        wiring.connect(m, wiring.flipped(self.i), inner.i)
        m.d.comb += [self.o.valid.eq(inner.o.valid), inner.o.ready.eq(self.o.ready),
                     self.o.payload.eq(inner.o.payload.as_value() | 1)]
        return m


class WithdrawingConcat(StuckBitConcat):
    """Mutant: KllmConcat whose output drops ``valid`` every other cycle while not ready
    (a stream-rule violation)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        from amaranth.hdl import Signal
        toggle = Signal()
        m.d.sync += toggle.eq(~toggle)
        m.d.comb += [self.o.valid.eq(self.inner.o.valid & (toggle | self.o.ready)),
                     self.o.payload.eq(self.inner.o.payload)]
        return m


def test_the_harness_catches_a_wrong_bit_and_a_withdrawn_beat():
    params = resolve_params("kllm_concat", None, {"lanes": 2})[1]
    model = golden_model("kllm_concat")
    rng = np.random.default_rng(3)
    inputs = model.stimulus(rng, params, 30)
    result = simulate_streams(StuckBitConcat(**params), inputs, rng=rng)
    mismatches = compare_beats(model, result.outputs, model.expected(params, inputs))
    assert len(mismatches) == 1 and mismatches[0].startswith("o.y: "), mismatches
    result = simulate_streams(WithdrawingConcat(**params), inputs, rng=rng,
                              ready_probability=0.3)
    assert any("changed or left" in problem for problem in result.problems)
