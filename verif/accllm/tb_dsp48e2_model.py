"""cocotb bench for the DSP48E2 behavioral model (``verif/models/DSP48E2.v``).

The top level is ``dsp48e2_model_harness`` (written by ``tests/accllm/test_dsp48e2_model.py``): one
DSP48E2 in the configuration of the AccLLM packed multiplier, ``AMULTSEL = "AD"``,
``INMODE = 5'b00100`` (AD = D + A2, multiplier B from B2), AREG = DREG = ADREG = MREG = PREG =
CREG = 1, INMODEREG = OPMODEREG = ALUMODEREG = CARRYINREG = CARRYINSELREG = 1, BREG from the
harness parameter (``QLLM_DSP_BREG``, 1 or 2), every clock enable driven by ``ce`` and every
synchronous reset by ``rst``. ``OPMODE = 9'b00_000_01_01`` (P = M), or with ``use_c`` set
``9'b00_011_01_01`` (Z = C) or, when ``c_on_w`` is also set, ``9'b11_000_01_01`` (W = C).

Latency to P, in enabled clock edges (clock edges with ``ce`` high):

* A, D: AREG/DREG + ADREG + MREG + PREG = 4
* B: BREG + MREG + PREG = 2 + BREG (3 with BREG = 1: B must then be presented one enabled cycle
  after A and D of the same product; with BREG = 2 all three line up)
* C: CREG + PREG = 2; OPMODE (``use_c``, ``c_on_w``): OPMODEREG + PREG = 2

Tests
-----
latency_per_input
    Steps one input at a time with ``ce`` held high and measures the cycles until P changes;
    then checks that a held ``ce`` freezes P and that ``rst`` clears P even with ``ce`` low.
random_vectors_ce_gaps_resets
    Corner vectors (A, D at the 27-bit extremes so that the pre-adder wraps, B at -2^17 and
    2^17 - 1, C at the 48-bit extremes, junk in A[29:27]) and ``QLLM_DSP_VECTORS`` (default
    20,000) random vectors, each input skewed by its latency so that one product's operands meet;
    random ``ce`` gaps (inputs are randomized while ``ce`` is low and must be ignored) and random
    synchronous resets. Every cycle P is compared with a delay-line reference built on
    :func:`reference_p`; the reference is checked against ``golden.accllm.dsp_mul.dsp48e2_p``.
"""

import os
from collections import deque

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

A_MASK, B_MASK, C_MASK, D_MASK = (1 << 30) - 1, (1 << 18) - 1, (1 << 48) - 1, (1 << 27) - 1


def sext(value, bits):
    """The low ``bits`` bits of ``value`` read as a signed two's complement number."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def reference_p(a, d, b, c, use_c):
    """``P = (sext27(A + D) * B + (C if use_c else 0)) mod 2^48``, signed.

    ``a`` is the 30-bit A port (only A[26:0] reaches the pre-adder), ``d`` 27-bit, ``b`` 18-bit,
    ``c`` 48-bit; any integers (their low bits are used).
    """
    ad = sext(sext(a, 27) + sext(d, 27), 27)
    return sext(ad * sext(b, 18) + (sext(c, 48) if use_c else 0), 48)


def latencies(breg):
    """Enabled clock edges from each harness input to P."""
    return {"a": 4, "d": 4, "b": breg + 2, "c": 2, "use_c": 2}


def _breg():
    breg = int(os.environ.get("QLLM_DSP_BREG", 1))
    assert breg in (1, 2), f"QLLM_DSP_BREG must be 1 or 2, not {breg}"
    return breg


def _drive(dut, a=0, d=0, b=0, c=0, use_c=0, c_on_w=0, ce=1, rst=0):
    dut.a.value = a & A_MASK
    dut.d.value = d & D_MASK
    dut.b.value = b & B_MASK
    dut.c.value = c & C_MASK
    dut.use_c.value = use_c
    dut.c_on_w.value = c_on_w
    dut.ce.value = ce
    dut.rst.value = rst


async def _start(dut):
    """Start the clock, reset for two cycles; return at a falling edge with inputs idle."""
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    _drive(dut, ce=0, rst=1)
    for _ in range(2):
        await FallingEdge(dut.clk)
    _drive(dut)
    await FallingEdge(dut.clk)
    assert dut.p.value.to_signed() == 0, "P is not 0 after reset"


async def _settle(dut, cycles=8):
    for _ in range(cycles):
        await FallingEdge(dut.clk)


async def _measure(dut, before, after, expected, max_cycles=12):
    """Drive ``before`` until P settles, then ``after``; return cycles until P == expected."""
    _drive(dut, **before)
    await _settle(dut)
    assert dut.p.value.to_signed() != expected, f"P already {expected} before the step"
    _drive(dut, **after)
    for cycle in range(1, max_cycles + 1):
        await FallingEdge(dut.clk)
        if dut.p.value.to_signed() == expected:
            return cycle
    raise AssertionError(f"P never reached {expected} within {max_cycles} cycles of {after}")


@cocotb.test()
async def latency_per_input(dut):
    breg = _breg()
    expected = latencies(breg)
    await _start(dut)
    measured = {
        "a": await _measure(dut, dict(a=0, d=0, b=3), dict(a=5, d=0, b=3), 15),
        "d": await _measure(dut, dict(a=0, d=0, b=3), dict(a=0, d=-7, b=3), -21),
        "b": await _measure(dut, dict(a=2, d=1, b=0), dict(a=2, d=1, b=-11), -33),
        "c": await _measure(dut, dict(c=0, use_c=1), dict(c=-99, use_c=1), -99),
        "use_c": await _measure(dut, dict(c=77, use_c=0), dict(c=77, use_c=1), 77),
    }
    measured_w = await _measure(dut, dict(c=-5, use_c=0, c_on_w=1), dict(c=-5, use_c=1, c_on_w=1),
                                -5)
    dut._log.info("BREG=%d latency to P (cycles): %s; use_c with W = C: %d", breg, measured,
                  measured_w)
    assert measured == expected, f"latencies {measured}, expected {expected} (BREG={breg})"
    assert measured_w == expected["use_c"]

    # A held clock enable freezes every stage: change all inputs with ce low, P must hold; when
    # ce returns, the new operands arrive after the usual latency (counted in enabled edges).
    _drive(dut, a=1000, d=24, b=-3)
    await _settle(dut)
    assert dut.p.value.to_signed() == -3072
    _drive(dut, a=-1, d=-1, b=17, c=1, use_c=1, ce=0)
    for _ in range(10):
        await FallingEdge(dut.clk)
        assert dut.p.value.to_signed() == -3072, "P changed while ce was low"
    # One enabled edge moves C/OPMODE into their registers and the old product into P: P holds.
    _drive(dut, a=-1, d=-1, b=17, c=1, use_c=1, ce=1)
    await FallingEdge(dut.clk)
    _drive(dut, a=-1, d=-1, b=17, c=1, use_c=1, ce=0)
    for _ in range(3):
        await FallingEdge(dut.clk)
        assert dut.p.value.to_signed() == -3072, "P moved after one enabled edge (latency 2)"
    _drive(dut, a=-1, d=-1, b=17, c=1, use_c=1, ce=1)
    await FallingEdge(dut.clk)
    assert dut.p.value.to_signed() == -3072 + 1, "C not added after its second enabled edge"
    _drive(dut, a=-1, d=-1, b=17, c=1, use_c=1, ce=1)
    await _settle(dut)
    assert dut.p.value.to_signed() == -2 * 17 + 1

    # The synchronous reset wins over a low clock enable.
    _drive(dut, a=-1, d=-1, b=17, c=1, use_c=1, ce=0, rst=1)
    await FallingEdge(dut.clk)
    assert dut.p.value.to_signed() == 0, "rst with ce low did not clear P"
    _drive(dut, a=-1, d=-1, b=17, c=1, use_c=1, ce=0, rst=0)
    await _settle(dut, 3)
    assert dut.p.value.to_signed() == 0, "P left 0 with ce low after reset"


def corner_vectors(rng):
    """(a, d, b, c, use_c, c_on_w) tuples at the extremes of every operand."""
    ad_values = [-(1 << 26), (1 << 26) - 1, 0, -1, 1]
    b_values = [-(1 << 17), (1 << 17) - 1, 0, -1, 1]
    c_values = [-(1 << 47), (1 << 47) - 1, 0, -1]
    vectors = []
    for a in ad_values:
        for d in ad_values:
            for b in b_values:
                for c in c_values:
                    junk = int(rng.integers(0, 8)) << 27  # A[29:27] must not matter
                    vectors.append(((a & D_MASK) | junk, d, b, c, int(rng.integers(0, 2)),
                                    int(rng.integers(0, 2))))
    return vectors


def random_vectors(rng, count):
    a = rng.integers(0, 1 << 30, size=count)
    d = rng.integers(0, 1 << 27, size=count)
    b = rng.integers(0, 1 << 18, size=count)
    c = rng.integers(0, 1 << 48, size=count, dtype=np.int64)
    use_c = rng.integers(0, 2, size=count)
    c_on_w = rng.integers(0, 2, size=count)
    return [tuple(int(v) for v in row) for row in zip(a, d, b, c, use_c, c_on_w)]


@cocotb.test()
async def random_vectors_ce_gaps_resets(dut):
    breg = _breg()
    seed = int(os.environ.get("QLLM_SEED", 1))
    rng = np.random.default_rng([seed, 48, breg])
    count = int(os.environ.get("QLLM_DSP_VECTORS", 20_000))
    vectors = corner_vectors(rng) + random_vectors(rng, count)
    lat = latencies(breg)
    skew_b, skew_c = lat["a"] - lat["b"], lat["a"] - lat["c"]
    await _start(dut)

    # Delay lines of (vector index, operands), newest first; index -1 is a zeroed (reset) entry.
    zero_ad, zero_b, zero_c = (-1, 0, 0), (-1, 0), (-1, 0, 0)
    line_ad = deque([zero_ad] * lat["a"], maxlen=lat["a"])
    line_b = deque([zero_b] * lat["b"], maxlen=lat["b"])
    line_c = deque([zero_c] * lat["c"], maxlen=lat["c"])
    expected = 0
    k = 0                       # next vector whose A and D enter at an enabled edge
    checked = []                # (vector index, P) for products whose operands all met
    cycles = resets = gaps = 0
    total = len(vectors) + skew_c + lat["a"]
    while k < total:
        rst = rng.random() < 0.003
        ce = rng.random() < 0.75
        junk = random_vectors(rng, 1)[0]
        if ce and not rst:
            vec_ad = vectors[k] if k < len(vectors) else junk
            vec_b = vectors[k - skew_b] if 0 <= k - skew_b < len(vectors) else junk
            vec_c = vectors[k - skew_c] if 0 <= k - skew_c < len(vectors) else junk
            _drive(dut, a=vec_ad[0], d=vec_ad[1], b=vec_b[2], c=vec_c[3], use_c=vec_c[4],
                   c_on_w=vec_c[5], ce=1, rst=0)
            line_ad.appendleft((k, vec_ad[0], vec_ad[1]))
            line_b.appendleft((k - skew_b, vec_b[2]))
            line_c.appendleft((k - skew_c, vec_c[3], vec_c[4]))
            k += 1
            (i_ad, a, d), (i_b, b), (i_c, c, use_c) = line_ad[-1], line_b[-1], line_c[-1]
            expected = reference_p(a, d, b, c, use_c)
            if i_ad == i_b == i_c and 0 <= i_ad < len(vectors):
                checked.append((i_ad, expected))
        else:
            # Random operands while the clock enable is low (or in reset): must be ignored.
            _drive(dut, *junk[:2], b=junk[2], c=junk[3], use_c=junk[4], c_on_w=junk[5],
                   ce=int(ce), rst=int(rst))
            if rst:
                resets += 1
                line_ad.extend([zero_ad] * lat["a"])
                line_b.extend([zero_b] * lat["b"])
                line_c.extend([zero_c] * lat["c"])
                expected = 0
            else:
                gaps += 1
        await FallingEdge(dut.clk)
        cycles += 1
        got = dut.p.value.to_signed()
        assert got == expected, (
            f"cycle {cycles} (vector {k}, ce={int(ce)}, rst={int(rst)}): P = {got}, expected "
            f"{expected}; in flight A/D {list(line_ad)}, B {list(line_b)}, C {list(line_c)}")

    dut._log.info("BREG=%d: %d cycles, %d ce gaps, %d resets, %d of %d vectors checked whole",
                  breg, cycles, gaps, resets, len(checked), len(vectors))
    assert gaps > 1000 and resets > 10
    assert len(checked) >= 20_000 or count < 20_000
    corners = sum(1 for index, _ in checked if index < len(vectors) - count)
    assert corners >= 0.9 * (len(vectors) - count), f"only {corners} corner vectors checked"

    # The bench's reference agrees with the project's golden model.
    try:
        from qllm_cores.golden.accllm import dsp48e2_p
    except ImportError:
        dut._log.warning("golden.accllm.dsp_mul.dsp48e2_p not found: reference not cross-checked")
        return
    index = np.array([i for i, _ in checked])
    rows = np.array([vectors[i] for i in index], dtype=object)
    a = np.array([sext(v, 27) for v in rows[:, 0]], dtype=np.int64)
    d = np.array([sext(v, 27) for v in rows[:, 1]], dtype=np.int64)
    b = np.array([sext(v, 18) for v in rows[:, 2]], dtype=np.int64)
    c = np.array([sext(v, 48) if u else 0 for v, u in zip(rows[:, 3], rows[:, 4])],
                 dtype=np.int64)
    golden = dsp48e2_p(a, d, b, c)
    ours = np.array([p for _, p in checked], dtype=np.int64)
    mismatch = np.flatnonzero(golden != ours)
    assert mismatch.size == 0, (
        f"reference_p disagrees with golden.accllm.dsp_mul.dsp48e2_p on {mismatch.size} vectors, "
        f"e.g. {vectors[index[mismatch[0]]]}: {ours[mismatch[0]]} vs {golden[mismatch[0]]}")
