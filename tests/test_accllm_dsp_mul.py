# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""accllm_dsp_mul, target generic (issue 7 groundwork): parameters and packed products.

The exhaustive cocotb benches (all w4 and w2 operands), the xilinx DSP48E2 target and the
resource table are still to come; these tests simulate the Amaranth design directly on a
strided subset plus every corner value, against the golden packed arithmetic.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden.accllm import extract_w2, extract_w8, pack_w8, packed_p_w2
from hdl.accllm_dsp_mul import AccllmDspMul


@pytest.mark.parametrize("kwargs,error,message", [
    ({"mode": "w3"}, ValueError, r"mode must be one of 'w8', 'w4', 'w2', not 'w3'"),
    ({"x_bits": 9}, ValueError, r"x_bits must be in range 2\.\.8, not 9"),
    ({"x_bits": 1}, ValueError, r"x_bits must be in range 2\.\.8, not 1"),
    ({"x_signed": 1}, TypeError, r"x_signed must be a bool, not 1"),
    ({"mode": "w4", "cross_products": True}, ValueError,
     r"cross_products applies to mode 'w2' only"),
    ({"target": "asic"}, ValueError, r"target must be one of 'generic', not 'asic'"),
])
def test_invalid_parameters_name_the_parameter(kwargs, error, message):
    with pytest.raises(error, match=message):
        AccllmDspMul(**kwargs)


def _simulate(dut, inputs, outputs):
    got = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.i.valid, 1)
        for row in zip(*inputs.values()):
            for name, value in zip(inputs, row):
                ctx.set(getattr(dut.i.payload, name), int(value))
            await ctx.tick()
            got.append([ctx.get(getattr(dut.o.payload, name)) for name in outputs])

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got, np.int64)


def _x_values(x_signed, step):
    lo, hi = (-128, 127) if x_signed else (0, 255)
    return np.unique(np.concatenate([np.arange(lo, hi + 1, step), [lo, lo + 1, -1 if x_signed
                                                                   else 1, 0, hi]]))


@pytest.mark.parametrize("mode", ["w8", "w4"])
@pytest.mark.parametrize("x_signed", [True, False])
def test_two_products_per_multiply(mode, x_signed):
    w_bits = 8 if mode == "w8" else 4
    w_lo, w_hi = -(1 << (w_bits - 1)), (1 << (w_bits - 1)) - 1
    ws = np.unique(np.concatenate([np.arange(w_lo, w_hi + 1, 1 if w_bits == 4 else 37),
                                   [w_lo, -1, 0, 1, w_hi]]))
    x, w1, w2 = (v.ravel() for v in np.meshgrid(_x_values(x_signed, 9), ws, ws, indexing="ij"))
    got = _simulate(AccllmDspMul(mode=mode, x_signed=x_signed), {"x": x, "w1": w1, "w2": w2},
                    ["p1", "p2"])
    # Golden packed arithmetic: P = (A + D) * B, then the borrow-corrected fields.
    a, d, b = pack_w8(x, w1, w2, w_bits, 8, x_signed)
    expected = extract_w8((a + d) * b, w_bits, 8, x_signed)
    np.testing.assert_array_equal(got[:, 0], expected.p1)
    np.testing.assert_array_equal(got[:, 1], expected.p2)
    np.testing.assert_array_equal(got[:, 0], x * w1)
    np.testing.assert_array_equal(got[:, 1], x * w2)


@pytest.mark.parametrize("x_signed", [True, False])
def test_four_products_per_multiply_including_b_port_overflow(x_signed):
    xs = _x_values(x_signed, 23)
    x1, x2, w1, w2 = (v.ravel() for v in np.meshgrid(xs, xs, np.arange(-2, 2), np.arange(-2, 2),
                                                     indexing="ij"))
    got = _simulate(AccllmDspMul(mode="w2", x_signed=x_signed, cross_products=True),
                    {"x1": x1, "x2": x2, "w1": w1, "w2": w2}, ["p11", "p22", "p12", "p21"])
    expected = extract_w2(packed_p_w2(x1, x2, w1, w2, 8, x_signed), 8, x_signed)
    np.testing.assert_array_equal(got, np.stack([expected.p11, expected.p22, expected.p12,
                                                 expected.p21], axis=1))
    np.testing.assert_array_equal(got, np.stack([x1 * w1, x2 * w2, x1 * w2, x2 * w1], axis=1))
    # The inputs where X1 + (X2 << 10) leaves the 18-bit B port are among those checked.
    b = x1 + (x2 << 10)
    assert ((b < -(1 << 17)) | (b >= (1 << 17))).any()
