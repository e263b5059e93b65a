# amaranth: UnusedElaboratable=no
"""The second simulator, pip only: every registered unit in Amaranth's simulator
(:mod:`verif.amaranth_sim`) against its golden adapter, the one the Verilator benches use, with
random gaps on every input and output stream, at its default depth and at ``pipeline=0``; and a
mutant that the harness catches."""

import numpy as np
import pytest

from qllm_cores.gen.registry import UNITS, resolve_params
from tests.concat_mutants import StuckBitConcat, WithdrawingConcat
from qllm_cores.verif.amaranth_sim import simulate_streams
from qllm_cores.verif.bench import golden_model
from qllm_cores.verif.payload import compare_outputs

#: Items of stimulus per unit (beats, or vectors / chunks where an item spans several beats):
#: a reduced set beside the Verilator benches' (Amaranth's simulator runs in Python).
ITEMS = {"kllm_idx_counter": 40, "oaken_dequantizer": 6, "orizuru": 20, "orizuru_scan": 20,
         "orizuru_sortnet": 20, "kllm_column": 6, "oaken_quantizer": 24, "p3_pcu": 24,
         "fp16_pcu": 12}

#: Units whose result depends on the order of beats across their inputs: their inputs are
#: offered serially in the golden adapter's ``order`` (``kllm_column``: the codebook load
#: before the reductions), and the idle cycles that end a run (a reduction's weighted sum
#: takes up to ``add_cycles x 2**bits`` cycles).
SERIAL = {"kllm_column"}
IDLE_CYCLES = {"kllm_column": 3000}

#: Every unit at its defaults and at ``pipeline=0``, and (make test-large) at each of its report
#: (paper) configurations; a configuration that instantiates a vendor primitive (the DSP48E2 or
#: MULT18X18D targets of ``accllm_dsp_mul``) has no Amaranth model and is simulated by the
#: Verilator benches only.
CASES = ([(unit, None, depth) for unit in sorted(UNITS) for depth in ("default", 0)]
         + [(unit, row.config, "default") for unit in sorted(UNITS)
            for row in UNITS[unit].report if not row.overrides])


@pytest.mark.parametrize("unit,config,depth", [
    pytest.param(u, c, d, id=f"{u}-{c or 'defaults'}-{d}",
                 marks=[pytest.mark.large] if c is not None else [])
    for u, c, d in CASES])
def test_unit_agrees_with_its_golden_adapter(unit, config, depth):
    spec, params = resolve_params(unit, config, {"pipeline": 0} if depth == 0 else {})
    dut = spec.build(params)
    if getattr(dut, "primitives", ()):
        pytest.skip(f"{unit} at {config} instantiates {', '.join(dut.primitives)}: no "
                    "Amaranth model (the Verilator benches simulate it)")
    model = golden_model(unit)
    rng = np.random.default_rng([17, len(unit), len(config or ""), 0 if depth == 0 else 1])
    inputs = model.stimulus(rng, params, ITEMS.get(unit, 100))
    order = model.order(params, inputs) if unit in SERIAL else None
    result = simulate_streams(dut, inputs, rng=rng, valid_probability=0.7,
                              ready_probability=0.6, idle_cycles=IDLE_CYCLES.get(unit, 200),
                              order=order)
    assert result.problems == []
    mismatches = compare_outputs(result.outputs, model.expected(params, inputs), model.equal)
    assert mismatches == [], mismatches[:5]
    assert all(len(next(iter(f.values()))) for f in result.outputs.values())


def test_the_harness_catches_a_wrong_bit_and_a_withdrawn_beat():
    params = resolve_params("kllm_concat", None, {"lanes": 2})[1]
    model = golden_model("kllm_concat")
    rng = np.random.default_rng(3)
    inputs = model.stimulus(rng, params, 30)
    result = simulate_streams(StuckBitConcat(**params), inputs, rng=rng)
    expected = model.expected(params, inputs)
    mismatches = compare_outputs(result.outputs, expected)
    wrong_bit0 = int(((np.asarray(expected["o"]["y"])[:, 0] & 1) == 0).sum())
    assert len(mismatches) == wrong_bit0 > 0, mismatches
    assert all(line.startswith("o.y beat") for line in mismatches), mismatches
    result = simulate_streams(WithdrawingConcat(**params), inputs, rng=rng,
                              ready_probability=0.3)
    assert any("changed or left" in problem for problem in result.problems)
