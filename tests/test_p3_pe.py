# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""p3_pe and its 4:2 compressor: ports, compressor arithmetic, benches, mutations, synthesis."""

import re

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from gen import generate
from hdl.compressor import Compressor42
from hdl.p3_pe import P3Pe
from verif.runner import BenchFailure, edit_site, run_testbench


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


def test_pe_takes_no_parameters():
    with pytest.raises(TypeError):
        P3Pe(lanes=8)


@pytest.mark.sim
def test_bench():
    metrics = run_testbench("p3_pe", {}, extra_env={"QLLM_DOTS": 20_000})
    assert metrics["tests"] == 3
    # 2 activation formats x (4 special-value selects + 4 zero points) x 256 x 16 code pairs.
    assert metrics["exhaustive_single_products"]["products"] == 2 * 8 * 256 * 16
    assert metrics["exhaustive_single_products"]["cycles"] == 2 * 8 * 256 * 16
    run = metrics["random_dot_products_backpressure"]
    assert run["dot_products"] == 20_000
    assert run["nans"] > 0       # overflow is reached by the directed test, not by chance


def _drop_hidden(text):
    """Lane 2 forgets the hidden bit of its activation significand."""
    return edit_site(text, r"(assign m5_2 = )([^;]+);", r"\1(\2) & 5'h0f;")


def _overflow_never_sticky(text):
    """The overflow flag forgets earlier beats."""
    return edit_site(text, r"assign left_range = [^;]+;", "assign left_range = 1'h0;")


@pytest.mark.sim
@pytest.mark.parametrize("mutation", [("hidden", _drop_hidden),
                                      ("overflow", _overflow_never_sticky)],
                         ids=["hidden-bit", "overflow"])
def test_bench_fails_on_broken_rtl(mutation):
    with pytest.raises(BenchFailure):
        run_testbench("p3_pe", {}, extra_env={"QLLM_DOTS": 2_000}, mutation=mutation)


@pytest.mark.synth
def test_synthesis_registers_the_documented_state(tmp_path):
    from fpga.yosys import synth

    source = generate("p3_pe", {}, tmp_path / "v")
    result = synth(source, "p3_pe", "xilinx", tmp_path / "synth")
    # Fixed state: stage-1 valid, nan, first, last; acc 32 + overflow + nan; the output
    # register 34 and o.valid.
    fixed = 4 + (32 + 2) + (34 + 1)
    # The carry-save pair: at most 34 + 33 bits (carry bit 0 is constant), at least the 26 bits
    # of information in a beat's sum (4 x 31 x 16 x 2^14 < 2^25, signed). Yosys merges the
    # sign-extension flops whose values coincide, so the exact count lies in between.
    assert fixed + 26 <= result.metrics["FF"] <= fixed + 34 + 33
