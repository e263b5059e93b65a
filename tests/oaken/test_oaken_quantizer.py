# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""oaken_quantizer: parameters, ports, manifest, the exact division by 15, the golden adapter's
readings, the benches, the quantizer -> dequantizer round trip, and seeded mutations."""

import json
import re

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from qllm_cores.gen import generate
from qllm_cores.golden.adapters import MODELS
from qllm_cores.golden.oaken import quantize_vector
from qllm_cores.hdl.oaken.decomposer import OakenDecomposer
from qllm_cores.hdl.oaken.dequantizer.dequantizer import OakenDequantizer
from qllm_cores.hdl.oaken.quantizer.quantizer import CUT_ORDER, DEFAULT_PIPELINE, OakenQuantizer
from qllm_cores.hdl.oaken.quantizer.parts import div15_plan, div15_reference, divide_by_15
from qllm_cores.verif.runner import BenchFailure, edit_site, run_testbench

# --- parameters -----------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,error,message", [
    ({"vec_len": 0}, ValueError, r"vec_len must be in range 1\.\.64, not 0"),
    ({"vec_len": 65}, ValueError, r"vec_len must be in range 1\.\.64, not 65"),
    ({"vec_len": 8, "lanes": 16}, ValueError, r"lanes must be in range 1\.\.8, not 16"),
    ({"vec_len": 40, "lanes": 16}, ValueError,
     r"lanes must be a power of two dividing vec_len \(40\), not 16"),
    ({"lanes": 3}, ValueError, r"lanes must be a power of two dividing vec_len \(64\), not 3"),
    ({"lanes": 0}, ValueError, r"lanes must be in range 1\.\.64, not 0"),
    ({"data_bits": 1}, ValueError, r"data_bits must be in range 2\.\.32, not 1"),
    ({"data_bits": 40}, ValueError, r"data_bits must be in range 2\.\.32, not 40"),
    ({"frac_bits": 0}, ValueError, r"frac_bits must be in range 1\.\.16, not 0"),
    ({"frac_bits": 17}, ValueError, r"frac_bits must be in range 1\.\.16, not 17"),
    ({"pipeline": -1}, ValueError, rf"pipeline must be in range 0\.\.{len(CUT_ORDER)}, not -1"),
    ({"pipeline": len(CUT_ORDER) + 1}, ValueError,
     rf"pipeline must be in range 0\.\.{len(CUT_ORDER)}, not {len(CUT_ORDER) + 1}"),
    ({"frac_bits": "8"}, TypeError, r"frac_bits must be an integer, not '8'"),
    ({"lanes": True}, TypeError, r"lanes must be an integer, not True"),
    ({"pipeline": 1.0}, TypeError, r"pipeline must be an integer, not 1\.0"),
    ({"vec_len": 64.0}, TypeError, r"vec_len must be an integer, not 64\.0"),
])
def test_invalid_parameters_name_the_parameter(kwargs, error, message):
    with pytest.raises(error, match=message):
        OakenQuantizer(**kwargs)


#: Cycles each cut adds to the latency at 16 lanes (docs/units/oaken_quantizer.md, Latency):
#: ``code`` three registers, ``tree`` one per tree level (4 at 16 lanes) and one for the pairs'
#: comparisons, ``stats`` one (before the statistics queue), ``meta`` none (the header path
#: only), ``beats`` one per level of the tree over a chunk's four beats (2), ``lanes`` one per
#: level of the lane trees after the pairs (3).
ADDED = {"fetch": 1, "select": 1, "code": 3, "stats": 1, "meta": 0, "classify": 1, "abs": 1,
         "tree": 5, "hold": 1, "out": 1, "beats": 2, "lanes": 3}


def test_latency_follows_pipeline():
    # pipeline=0: decomposer output register, the two levels of the tree over a chunk's four
    # beats, two queues (statistics, dense). The metadata cuts delay only the header, which is
    # ready before the first dense beat.
    expected = [5]
    for cut in CUT_ORDER:
        expected.append(expected[-1] + ADDED[cut])
    assert [OakenQuantizer(pipeline=p).latency for p in range(len(CUT_ORDER) + 1)] == expected
    assert OakenQuantizer().latency == expected[DEFAULT_PIPELINE]


def _ports(text, top):
    header = re.search(rf"module {top}\((.*?)\);", text, re.S)
    return {port.strip() for port in header.group(1).split(",")}


def test_outputs_are_the_dequantizers_inputs():
    quantizer, dequantizer = OakenQuantizer(), OakenDequantizer()
    assert quantizer.hdr_layout == dequantizer.hdr_layout
    assert quantizer.dense_layout == dequantizer.dense_layout
    assert quantizer.coo_layout == dequantizer.coo_layout
    assert quantizer.in_layout == OakenDecomposer().in_layout
    small = OakenQuantizer(lanes=4, vec_len=16, data_bits=8, frac_bits=4)
    assert small.coo_layout == OakenDequantizer(lanes=4, vec_len=16, data_bits=8,
                                                frac_bits=4).coo_layout


def test_verilog_ports_and_the_composed_decomposer():
    text = verilog.convert(OakenQuantizer(pipeline=0), name="oaken_quantizer", emit_src=False)
    assert _ports(text, "oaken_quantizer") == {
        "clk", "rst", "threshold_error",
        *(f"{p}__{s}" for p in ("i", "hdr", "dense", "coo") for s in ("valid", "ready",
                                                                       "payload"))}
    m_bits = 16 + 8 + 2
    assert "input [319:0] i__payload;" in text                       # 16 x 16 + 4 x 16
    assert f"output [{4 * 16 + 6 * m_bits - 1}:0] hdr__payload;" in text
    assert "output [63:0] dense__payload;" in text
    assert f"output [{16 * 8 + 5 + 1 - 1}:0] coo__payload;" in text   # count 0..16: 5 bits
    # Oaken's decomposer is composed as a submodule, not copied.
    assert re.search(r"^module \\oaken_quantizer\.decomposer_0 \(", text, re.M)


def test_manifest_states_latency_and_the_status_signal(tmp_path):
    params = {"lanes": 4, "vec_len": 16, "data_bits": 8, "pipeline": 3}
    generate("oaken_quantizer", params, tmp_path)
    manifest = json.loads((tmp_path / "oaken_quantizer.json").read_text())
    assert manifest["latency"] == OakenQuantizer(**params).latency
    assert manifest["signals"] == {"threshold_error": {"direction": "out", "width": 1,
                                                       "signed": False}}
    assert list(manifest["ports"]) == ["i", "hdr", "dense", "coo"]


# --- the metadata step: an exact division by 15 (no divider) ---------------------------------


def _n_max(data_bits, frac_bits):
    """The largest dividend ``span * 2^F + 7``: ``span`` up to ``2^(D+1) - 2`` (a middle group
    whose shifted values span both sides; misordered thresholds included)."""
    return (((1 << (data_bits + 1)) - 2) << frac_bits) + 7


def test_division_by_15_is_exact_for_every_configuration():
    # The multiply-shift's error term 14 n / (15 2^P) stays below 1/15 for every dividend of
    # every legal (data_bits, frac_bits): the proof of div15_plan's docstring, checked here.
    for data_bits in range(2, 33):
        for frac_bits in range(1, 17):
            n_max = _n_max(data_bits, frac_bits)
            total, shifts = div15_plan(n_max)
            assert 14 * n_max < 1 << total
            assert total % 4 == 0 and shifts == tuple(4 << i for i in range(len(shifts)))
            r = 1
            for shift in shifts:
                r *= 1 + (1 << shift)
            assert 15 * r == (1 << total) - 1
            for n in (0, 1, 14, 15, 16, n_max - 1, n_max):
                assert div15_reference(n, (total, shifts)) == n // 15


def test_d_fx_is_exact_over_the_full_span_range():
    # Every span of the paper configuration (data_bits 16, frac_bits 8), the RTL's adder chain
    # evaluated in NumPy: d_fx = floor((span 2^(F+1) + 15) / 30), golden.oaken's formula.
    data_bits, frac_bits = 16, 8
    span = np.arange((1 << (data_bits + 1)) - 1, dtype=np.int64)
    n = (span << frac_bits) + 7
    got = div15_reference(n, div15_plan(_n_max(data_bits, frac_bits)))
    np.testing.assert_array_equal(got, (span * (1 << (frac_bits + 1)) + 15) // 30)


def _simulate_division(data_bits, frac_bits, spans):
    span_max = (1 << (data_bits + 1)) - 2
    m = Module()
    span = Signal(data_bits + 1)
    n = Signal(_n_max(data_bits, frac_bits).bit_length())
    m.d.comb += n.eq((span << frac_bits) + 7)
    quotient = divide_by_15(m, n, _n_max(data_bits, frac_bits), stage=lambda v, name: v,
                            name="d")
    got = []

    async def bench(ctx):
        for value in spans:
            assert 0 <= value <= span_max
            ctx.set(span, int(value))
            got.append(ctx.get(quotient))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got, dtype=object)


@pytest.mark.parametrize("data_bits,frac_bits,exhaustive", [
    (8, 1, True), (8, 4, True), (8, 16, True), (5, 3, True),
    (16, 8, False), (32, 16, False),
])
def test_divider_circuit_matches_golden_d_fx(data_bits, frac_bits, exhaustive):
    # The RTL block itself (Amaranth's simulator): every span of the small widths, the ends,
    # the multiples of 15 and their neighbours, and random spans of the wide ones.
    span_max = (1 << (data_bits + 1)) - 2
    if exhaustive:
        spans = list(range(span_max + 1))
    else:
        rng = np.random.default_rng(data_bits)
        spans = sorted({0, 1, 2, span_max - 1, span_max,
                        *(min(span_max, k * 15 + d) for k in (1, 2, 1000, span_max // 15)
                          for d in (-1, 0, 1)),
                        *(int(v) for v in rng.integers(0, span_max + 1, 400))})
    got = _simulate_division(data_bits, frac_bits, spans)
    want = [(s * (1 << (frac_bits + 1)) + 15) // 30 for s in spans]
    assert list(got) == want


# --- golden adapter -----------------------------------------------------------------------------


def test_adapter_is_quantize_vector_with_full_coo_beats():
    model = MODELS["oaken_quantizer"]
    params = {"lanes": 16, "vec_len": 64, "data_bits": 16, "frac_bits": 8}
    rng = np.random.default_rng(4)
    inputs = model.stimulus(rng, params, 200)
    expected = model.expected(params, inputs)
    x = np.asarray(inputs["i"]["x"]).reshape(200, 64)
    ends = np.flatnonzero(expected["coo"]["last"]) + 1
    starts = np.concatenate(([0], ends[:-1]))
    ordered = 0
    for c in range(200):
        t = tuple(int(inputs["i"][n][4 * c]) for n in ("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o"))
        if list(t) != sorted(t):
            continue
        ordered += 1
        chunk = quantize_vector(x[c], t, 8, 16, 64)
        np.testing.assert_array_equal(expected["dense"]["codes"][4 * c:4 * c + 4].ravel(),
                                      chunk.dense)
        assert tuple(expected["hdr"][n][c] for n in ("mid_min", "mid_d", "in_min", "in_d",
                                                     "out_min", "out_d")) == tuple(chunk.meta)
        counts = expected["coo"]["count"][starts[c]:ends[c]]
        entries = expected["coo"]["entries"][starts[c]:ends[c]]
        assert (counts[:-1] == 16).all() and 1 <= len(counts) <= 4
        np.testing.assert_array_equal(np.concatenate([e[:k] for e, k in zip(entries, counts)]),
                                      chunk.coo)
        for e, k in zip(entries, counts):                   # entries beyond count: 0
            assert not e[k:].any()
    assert ordered > 150
    # Misordered and changing thresholds, and empty groups, are in the stimulus.
    t = np.stack([inputs["i"][n] for n in ("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o")], 1)
    assert (np.diff(t, axis=1) < 0).any(axis=1).any()
    assert (t.reshape(200, 4, 4)[:, 1:] != t.reshape(200, 4, 4)[:, :1]).any()
    assert (np.diff(t, axis=1) == 0).any()


# --- benches ----------------------------------------------------------------------------------

#: Every bench: 0 / 1 / 10 / 50 / 100 % outliers under random gaps on i and on hdr, dense and
#: coo ready, the sustained rate (and the latency), the threshold faults and the directed
#: corners. The acceptance size, 2,000 chunks per density, is the bench's default (``make
#: benches``, ``qllm sim --unit oaken_quantizer``); here fewer, to keep ``make
#: test`` within its budget. The paper configuration at the default depth; ``pipeline=0`` on a
#: small configuration (a second build of the paper configuration costs more than the bench);
#: one-beat chunks (a header per beat) with frac_bits 1, and 16-beat chunks (running
#: accumulators instead of the tree over the beats), both at the default depth.
SMALL = {"lanes": 4, "vec_len": 16, "data_bits": 8, "frac_bits": 4, "pipeline": 0}
QUANTIZER_CONFIGS = [
    pytest.param({}, 150, id="paper-16x64"),
    pytest.param(SMALL, 300, id="4x16-d8f4-p0"),
    pytest.param({"lanes": 2, "vec_len": 2, "data_bits": 5, "frac_bits": 1}, 150,
                 marks=pytest.mark.large,
                 id="2x2-d5f1"),
    pytest.param({"lanes": 2, "vec_len": 32, "data_bits": 6, "frac_bits": 2}, 60,
                 marks=pytest.mark.large, id="2x32-d6f2"),
]


@pytest.mark.sim
@pytest.mark.parametrize("params,chunks", QUANTIZER_CONFIGS)
def test_quantizer_bench(params, chunks):
    metrics = run_testbench("oaken_quantizer", params, extra_env={"QLLM_CHUNKS": chunks})
    assert metrics["tests"] == 5 + 5 + 1 + 1 + 1          # round_trip_decode is skipped
    windows = params.get("vec_len", 64) // params.get("lanes", 16)
    for density in (0.0, 0.01, 0.1, 0.5, 1.0):
        run = metrics[f"random_chunks_backpressure[{density}]"]
        assert run["chunks"] == chunks and run["beats"] == chunks * windows
        assert metrics[f"sustained_rate[{density}]"]["beats_per_cycle"] == 1.0
    assert metrics["random_chunks_backpressure[1.0]"]["coo_beats"] == chunks * windows


@pytest.mark.sim
def test_round_trip_through_the_dequantizer():
    from qllm_cores.verif.oaken.tb_quantizer import round_trip

    metrics = round_trip(50)
    assert metrics["round_trip_decode"]["chunks"] == 5 * 50


def _mutant_drops_zero_span(text):
    """Lane 2 ignores its group's zero span: a group whose values are all equal codes 15."""
    return edit_site(text, r"assign code_2 = \w+ \? 4'h0 : ", "assign code_2 = ")


def _mutant_gearbox_slot1(text):
    """Slot 1 of a full COO beat always takes the new entry, never the one held over from
    the previous windows."""
    return edit_site(text, r"assign gear_full_1 = \S+\s+\? gear_held_1 : (gear_in\[15:8\]);",
                     r"assign gear_full_1 = \1;")


@pytest.mark.sim
@pytest.mark.parametrize("mutation", [
    pytest.param(("zero-span", _mutant_drops_zero_span), marks=pytest.mark.large, id="zero-span"),
    pytest.param(("gearbox", _mutant_gearbox_slot1), id="gearbox")])
def test_bench_fails_on_broken_rtl(mutation):
    params = SMALL
    with pytest.raises(BenchFailure):
        run_testbench("oaken_quantizer", params, extra_env={"QLLM_CHUNKS": 40},
                      mutation=mutation)


@pytest.mark.parametrize("vec_len", [2, 6, 10], ids=["1-beat", "3-beats", "5-beats"])
def test_odd_beat_trees_match_golden_in_the_amaranth_simulator(vec_len):
    """Chunks of 1, 3 and 5 beats at the default depth: the tree over a chunk's beats has an
    unpaired entry at some level, delayed like the pairs (with the ``beats`` cut, by their
    comparison register too)."""
    from qllm_cores.verif.amaranth_sim import simulate_streams
    from qllm_cores.verif.payload import compare_outputs

    params = {"lanes": 2, "vec_len": vec_len, "data_bits": 6, "frac_bits": 2}
    dut = OakenQuantizer(**params)
    model = MODELS["oaken_quantizer"]
    rng = np.random.default_rng(vec_len)
    inputs = model.stimulus(rng, params, 40)
    result = simulate_streams(dut, inputs, rng=rng, valid_probability=0.7,
                              ready_probability=0.6)
    assert result.problems == []
    assert compare_outputs(result.outputs, model.expected(params, inputs), model.equal) == []
