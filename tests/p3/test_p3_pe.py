# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""p3_pe and its 4:2 compressor: ports, parameters, compressor arithmetic, every pipeline depth
in simulation, benches, mutations, synthesis."""

import re

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from qllm_cores.gen import UNITS, generate
from qllm_cores.golden.p3 import pe_run
from qllm_cores.hdl.common.compressor import Compressor42
from qllm_cores.hdl.p3.pe import PIPELINE_CUTS, P3Pe
from qllm_cores.verif.runner import BenchFailure, edit_site, run_testbench
from qllm_cores.verif.p3.tb_pe import FIELDS, directed_beats, random_dot_products

DEFAULT_PIPELINE = UNITS["p3_pe"].defaults["pipeline"]


@pytest.mark.parametrize("width,error,message", [
    (0, ValueError, r"width must be in range 1\.\.128, not 0"),
    (129, ValueError, r"width must be in range 1\.\.128, not 129"),
    (8.0, TypeError, r"width must be an integer, not 8\.0"),
])
def test_compressor_rejects_bad_width(width, error, message):
    with pytest.raises(error, match=message):
        Compressor42(width)


@pytest.mark.parametrize("width", [1, 2, 5, 34])
def test_compressor_sum_and_carry_add_up_modulo_2_to_the_width(width):
    dut = Compressor42(width)
    rng = np.random.default_rng(width)
    mask = (1 << width) - 1
    if width <= 2:      # exhaustive
        cases = [(a, b, c, d) for a in range(1 << width) for b in range(1 << width)
                 for c in range(1 << width) for d in range(1 << width)]
    else:
        cases = [tuple(int(v) for v in rng.integers(0, 1 << min(width, 62), 4)) for _ in range(500)]
        cases += [(mask, mask, mask, mask), (mask, 0, mask, 1), (1, 1, 1, 1)]

    async def bench(ctx):
        for a, b, c, d in cases:
            ctx.set(dut.a, a & mask)
            ctx.set(dut.b, b & mask)
            ctx.set(dut.c, c & mask)
            ctx.set(dut.d, d & mask)
            await ctx.delay(1e-9)
            total = ctx.get(dut.sum) + ctx.get(dut.carry)
            assert total & mask == (a + b + c + d) & mask, (a, b, c, d)
            assert ctx.get(dut.carry) & 1 == 0

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


def test_verilog_ports_follow_the_spec():
    text = verilog.convert(P3Pe(), name="p3_pe", emit_src=False)
    header = re.search(r"module p3_pe\((.*?)\);", text, re.S)
    ports = {port.strip() for port in header.group(1).split(",")}
    assert ports == {"clk", "rst", "i__valid", "i__ready", "i__payload", "o__valid", "o__ready",
                     "o__payload"}
    # act 4x8, wgt 4x4, act_fmt, wgt_fmt, sv_sel 2, zp 4, first, last = 58 bits; acc 32 + 2 flags.
    assert "input [57:0] i__payload;" in text
    assert "output [33:0] o__payload;" in text


def test_pe_takes_only_pipeline():
    with pytest.raises(TypeError):
        P3Pe(lanes=8)
    with pytest.raises(TypeError):
        P3Pe(2)     # keyword only


@pytest.mark.parametrize("pipeline,error,message", [
    (-1, ValueError, r"pipeline must be in range 0\.\.4, not -1"),
    (5, ValueError, r"pipeline must be in range 0\.\.4, not 5"),
    (2.0, TypeError, r"pipeline must be an integer, not 2\.0"),
    (True, TypeError, r"pipeline must be an integer, not True"),
])
def test_pe_rejects_bad_pipeline(pipeline, error, message):
    with pytest.raises(error, match=message):
        P3Pe(pipeline=pipeline)


def test_latency_follows_pipeline():
    assert len(PIPELINE_CUTS) == 4
    assert [P3Pe(pipeline=depth).latency for depth in range(5)] == [2, 3, 4, 5, 6]
    # The default (150 MHz on ECP5) is the registry's default too.
    assert P3Pe().pipeline == DEFAULT_PIPELINE == 3
    assert P3Pe().latency == 5


def _simulate(dut, beats, rng, *, valid_probability, ready_probability):
    """Drive ``beats`` into ``dut`` with random gaps on both streams; return the result fields
    and the clock edges from the first beat's transfer to the first result's transfer."""
    n = len(beats["act"])
    count = int(np.sum(beats["last"]))
    results = []
    edges = {}

    async def producer(ctx):
        edge = 0
        for k in range(n):
            while rng.random() > valid_probability:
                ctx.set(dut.i.valid, 0)
                await ctx.tick()
                edge += 1
            fields = {name: int(beats[name][k]) for name in FIELDS[2:]}
            ctx.set(dut.i.payload, {**fields, "act": [int(x) for x in beats["act"][k]],
                                    "wgt": [int(x) for x in beats["wgt"][k]]})
            ctx.set(dut.i.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(dut.i.ready)
                edge += 1
                if ready:
                    break
            edges.setdefault("in", edge)
        ctx.set(dut.i.valid, 0)

    async def consumer(ctx):
        edge = 0
        while len(results) < count:
            ready = rng.random() < ready_probability
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            edge += 1
            if valid and ready:
                edges.setdefault("out", edge)
                results.append((payload.acc, payload.overflow, payload.nan))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.run()
    got = {key: np.array([r[k] for r in results]) for k, key in
           enumerate(("acc", "overflow", "nan"))}
    return got, edges["out"] - edges["in"]


@pytest.mark.parametrize("pipeline", range(len(PIPELINE_CUTS) + 1))
def test_every_depth_matches_golden_model(pipeline):
    """Amaranth simulation at every depth (the cocotb bench runs pipeline 0 and the default):
    random dot products and the directed overflow / NaN cases under random backpressure, then
    one beat alone with the output always ready to measure the latency."""
    rng = np.random.default_rng(pipeline)
    beats = random_dot_products(rng, 10)
    directed = directed_beats()
    # Negative overflow, positive overflow that stays sticky, NaN, continuation, subnormals.
    keep = np.r_[80:250, 330:len(directed["act"])]
    beats = {name: np.concatenate([beats[name], directed[name][keep]]) for name in FIELDS}
    expected = pe_run(*(beats[name] for name in FIELDS))
    assert expected["overflow"].any() and expected["nan"].any()
    got, _ = _simulate(P3Pe(pipeline=pipeline), beats, rng, valid_probability=0.7,
                       ready_probability=0.6)
    for key in ("acc", "overflow", "nan"):
        np.testing.assert_array_equal(got[key], expected[key].astype(np.int64), err_msg=key)

    single = {name: beats[name][-1:] for name in FIELDS}
    dut = P3Pe(pipeline=pipeline)
    _, latency = _simulate(dut, single, rng, valid_probability=1.0, ready_probability=1.0)
    assert latency == dut.latency


@pytest.mark.sim
@pytest.mark.parametrize("params,dots", [
    # 20,000 in `qllm sim --unit p3_pe`.
    pytest.param({}, 2_000, id="default"),
    pytest.param({"pipeline": 0}, 2_000, id="pipeline0"),
])
def test_bench(params, dots):
    # Simulation-bound (65,536 exhaustive products): Verilator's -Os, not the suite's -O0.
    metrics = run_testbench("p3_pe", params, extra_env={"QLLM_DOTS": dots}, cxx_opt="-Os")
    assert metrics["tests"] == 3
    assert metrics["manifest"]["latency"] == P3Pe(**params).latency
    # 2 activation formats x (4 special-value selects + 4 zero points) x 256 x 16 code pairs.
    assert metrics["exhaustive_single_products"]["products"] == 2 * 8 * 256 * 16
    assert metrics["exhaustive_single_products"]["cycles"] == 2 * 8 * 256 * 16
    run = metrics["random_dot_products_backpressure"]
    assert run["dot_products"] == dots
    assert run["nans"] > 0       # overflow is reached by the directed test, not by chance


def _drop_hidden(text):
    """Lane 2 forgets the hidden bit of its activation significand."""
    return edit_site(text, r"(assign m5_2 = )([^;]+);", r"\1(\2) & 5'h0f;")


def _overflow_never_sticky(text):
    """The 32-bit range test never fires: overflow is never set."""
    return edit_site(text, r"assign left_range = [^;]+;", "assign left_range = 1'h0;")


@pytest.mark.sim
@pytest.mark.parametrize("mutation", [
    pytest.param(("hidden", _drop_hidden), marks=pytest.mark.large, id="hidden-bit"),
    pytest.param(("overflow", _overflow_never_sticky), marks=pytest.mark.large, id="overflow"),
])
def test_bench_fails_on_broken_rtl(mutation):
    with pytest.raises(BenchFailure):
        run_testbench("p3_pe", {}, extra_env={"QLLM_DOTS": 2_000}, mutation=mutation)


@pytest.mark.synth
def test_synthesis_registers_the_documented_state(tmp_path):
    from qllm_cores.fpga.yosys import synth

    source = generate("p3_pe", {}, tmp_path / "v")
    result = synth(source, "p3_pe", "xilinx", tmp_path / "synth")
    # The default depth (pipeline 3): five stages. Valid chain: 5 valid + 4 beat flags (the
    # last stage's beat flag is unused). Per way: decode cut M5 5 + weight 6 + shift 4, multiply
    # cut product 10 + shift 4, shift cut term 24; nan and first at each of the four cuts;
    # output stage: exact sum 33 + overflow + nan.
    fixed = (5 + 4) + 4 * (5 + 6 + 4) + 4 * (10 + 4) + 4 * 24 + 4 * 2 + (33 + 2)
    # The carry-save pair: at most 33 + 32 bits (carry bit 0 is constant), at least the 26 bits
    # of information in a beat's sum (4 x 31 x 16 x 2^14 < 2^25, signed). Yosys merges the
    # sign-extension flops whose values coincide, so the exact count lies in between.
    assert fixed + 26 <= result.metrics["FF"] <= fixed + 33 + 32
