"""The P3-LLM PE's arithmetic (P3-LLM section V-C; contract sections 5 and 9), shared by
:class:`~hdl.p3.pe.P3Pe` (one PE) and :class:`~hdl.p3.pcu.P3Pcu` (16 PEs sharing their
activations).

One way of a PE is: the activation decoder (:func:`decode_activation`: ``M5``, the sign, the
exponent shift, NaN), the weight decoder (:func:`decode_weight`: BitMoD or INT4 with the
activation's sign applied), the 6-bit signed multiplier as radix-4 Booth over ``M5``
(:func:`booth_digits`, which depend on the activation only, and :func:`booth_product`), the
exponent shift; then four ways meet in a 4:2 compressor and the accumulator
(:func:`accumulate`, with one accumulator set per ``slot``).
"""

from amaranth.hdl import Array, Cat, Const, Mux, Signal, signed

__all__ = ["WAYS", "ACC_BITS", "BITMOD_HALF_UNITS", "BITMOD_SPECIAL", "MAGNITUDE_BITS",
           "WEIGHT_BITS", "PRODUCT_BITS", "TERM_BITS", "SUM_BITS", "decode_activation",
           "decode_weight", "booth_digits", "booth_product", "accumulate"]

WAYS = 4
ACC_BITS = 32
#: BitMoD FP4 magnitudes in half units, by the code's bits [2:0] (0, 0.5, 1, 1.5, 2, 3, 4, 6).
BITMOD_HALF_UNITS = (0, 1, 2, 3, 4, 6, 8, 12)
#: BitMoD special values replacing negative zero, in half units, by ``sv_sel`` (+5 -5 +8 -8).
BITMOD_SPECIAL = (10, -10, 16, -16)
MAGNITUDE_BITS = 5         # M5, the activation significand with its hidden bit
WEIGHT_BITS = 6            # (-1)^s * w: -16..16
PRODUCT_BITS = 10          # |M5 * w| <= 31 * 16 = 496 < 2^9
TERM_BITS = PRODUCT_BITS + 14   # shifted left by up to max(e, 1) - 1 = 14
SUM_BITS = ACC_BITS + 1    # acc + four terms, exact: |acc| < 2^31, |terms| < 2^23 each


def decode_activation(m, code, act_fmt, *, suffix):
    """One FP8 activation ``code`` (8 bits) in format ``act_fmt`` (0 E4M3, 1 S0E4M4):
    ``(magnitude, negative, shift, nan)``: ``M5`` (0 for NaN), the sign (E4M3 only), the
    exponent shift ``max(e, 1) - 1`` and the NaN flag (E4M3 ``e == 15, m == 7``). Signals are
    named ``<what>_<suffix>``."""
    e4m3 = ~act_fmt
    exponent = Signal(4, name=f"exp_{suffix}")
    m.d.comb += exponent.eq(Mux(e4m3, code[3:7], code[4:8]))
    hidden = exponent != 0
    m5 = Signal(MAGNITUDE_BITS, name=f"m5_{suffix}")
    m.d.comb += m5.eq(Mux(e4m3, Cat(Const(0, 1), code[0:3], hidden),
                          Cat(code[0:4], hidden)))
    negative = e4m3 & code[7]
    nan = Signal(name=f"nan_{suffix}")
    m.d.comb += nan.eq(e4m3 & (code[0:7] == 0x7F))
    shift = Signal(4, name=f"shift_{suffix}")            # max(e, 1) - 1
    m.d.comb += shift.eq(Mux(hidden, exponent - 1, 0))
    magnitude = Signal(MAGNITUDE_BITS, name=f"mag_{suffix}")
    m.d.comb += magnitude.eq(Mux(nan, 0, m5))
    return magnitude, negative, shift, nan


def decode_weight(m, wgt, negative, wgt_fmt, sv_sel, zp, *, suffix, both_differences=False):
    """One 4-bit weight code as a 6-bit signed integer, BitMoD (``wgt_fmt`` 0, special value by
    ``sv_sel``) or INT4 ``q - zp``, with the activation's sign applied: ``(-1)^s * w``.

    INT4 is one subtraction whose operands the sign swaps (``q - zp`` or ``zp - q``), or with
    ``both_differences`` two subtractions the sign then selects from: the sign (a register
    that a PCU shares between PEs) then meets one multiplexer, not the subtractor's inputs."""
    # BitMoD: one table over (code, activation sign, sv_sel). The sign flips the code's
    # sign bit, and the special values come in +- pairs, so it flips sv_sel's bit 0.
    table = []
    for index in range(1 << 7):
        code4, sign, select = index & 15, (index >> 4) & 1, index >> 5
        if code4 == 0b1000:
            value = BITMOD_SPECIAL[select ^ sign]
        else:
            value = BITMOD_HALF_UNITS[code4 & 7] * (-1 if (code4 >> 3) ^ sign else 1)
        table.append(Const(value, signed(WEIGHT_BITS)))
    bitmod = Signal(signed(WEIGHT_BITS), name=f"bitmod_{suffix}")
    m.d.comb += bitmod.eq(Array(table)[Cat(wgt, negative, sv_sel)])
    # INT4: q - zp, or zp - q for a negative activation, -15..15.
    int4 = Signal(signed(WEIGHT_BITS), name=f"int4_{suffix}")
    if both_differences:
        up = Signal(signed(WEIGHT_BITS), name=f"int4_up_{suffix}")
        down = Signal(signed(WEIGHT_BITS), name=f"int4_down_{suffix}")
        q, z = (Cat(value, Const(0, 1)).as_signed() for value in (wgt, zp))   # 0..15
        m.d.comb += [up.eq(q - z), down.eq(z - q), int4.eq(Mux(negative, down, up))]
    else:
        minuend = Signal(5, name=f"int4_a_{suffix}")
        subtrahend = Signal(5, name=f"int4_b_{suffix}")
        m.d.comb += [
            minuend.eq(Mux(negative, zp, wgt)),
            subtrahend.eq(Mux(negative, wgt, zp)),
            int4.eq(minuend.as_signed() - subtrahend.as_signed()),
        ]
    weight = Signal(signed(WEIGHT_BITS), name=f"w_{suffix}")
    m.d.comb += weight.eq(Mux(wgt_fmt, int4, bitmod))
    return weight


def booth_digits(magnitude):
    """Radix-4 Booth digits of the unsigned 5-bit ``magnitude``, three of them: per digit
    ``(negative, one, two)`` (``d_j = -2 b[2j+1] + b[2j] + b[2j-1]``, ``b[-1] = b[5] = 0``, so
    the top digit is never negative). They depend on the activation only: a PCU computes them
    once for all its PEs. Returns expressions."""
    bits = Cat(Const(0, 1), magnitude, Const(0, 1))
    digits = []
    for j in range(3):
        triple = bits[2 * j:2 * j + 3]
        digits.append((triple[2] & ~(triple[0] & triple[1]),      # negative
                       triple[0] ^ triple[1],                      # |d| = 1
                       (triple == 0b011) | (triple == 0b100)))     # |d| = 2
    return digits


def booth_product(m, digits, weight, *, suffix):
    """``magnitude * weight`` from the magnitude's :func:`booth_digits`. Row ``j`` is
    ``|d_j| * weight`` inverted when ``d_j < 0``; the +1 completing that negation sits in the
    free position ``2j`` of row ``j + 1`` (the top digit is never negative). One adder sums the
    three rows."""
    rows = []
    negative = []
    for j, (neg, one, two) in enumerate(digits):
        select = Signal(signed(WEIGHT_BITS + 1), name=f"booth{j}_sel_{suffix}")
        m.d.comb += select.eq(Mux(two, weight << 1, Mux(one, weight, 0)))
        row = Signal(signed(PRODUCT_BITS), name=f"booth{j}_{suffix}")
        m.d.comb += row.eq(Mux(neg, ~select, select))
        if j:
            row = Cat(Const(0, 2 * j - 2), negative[-1], Const(0, 1),
                      row[:PRODUCT_BITS - 2 * j])
        rows.append(row)
        negative.append(neg)
    product = Signal(signed(PRODUCT_BITS), name=f"prod_{suffix}")
    m.d.comb += product.eq(rows[0] + rows[1] + rows[2])
    return product


def accumulate(m, pipe, *, first, pairs, flags, slot, slots, split):
    """The accumulators of one or more PEs: per PE a 3:2 row over (the compressor's pair, acc),
    then a carry-propagate adder, with ``slots`` accumulator sets (``slot`` picks the set a
    beat updates; the PCU's throughput-enhanced mode has two).

    ``first``, ``slot`` (a value, or a list of one value per PE: copies of it that spread
    the fan-out), ``flags`` (a dict of 1-bit values made sticky per set, e.g. ``nan``:
    ``flag = (first ? 0 : flag) | beat's flag``) and ``pairs`` (per PE the compressor's
    ``(sum, carry)``, or ``(sum, None)``: the beat's sum already resolved, so that no 3:2 row
    sits in the loop) are values of the stage before the output stage of ``pipe`` (a
    :class:`~hdl.common.stream_stage.StallPipeline`); with ``split`` the adder is split in halves with
    a resolve stage (``pipe`` then has one stage more; the control is staged here). Per PE and
    set the state holds the 33-bit exact sum of the set's last beat and the sticky overflow
    flag of the beats before it. Returns ``(lanes, flags, out_slot)`` for the beat in the
    output stage: per PE ``(acc, overflow)`` (the 32-bit sum; the flag of the earlier beats
    ORed with the range test of this one, off the adder's path), the sticky flags, the slot.
    Signals of PE ``k`` are suffixed ``_k`` when there are several PEs.
    """
    low = SUM_BITS // 2
    one_set = slots == 1

    def sets(name, shape=1):
        return [Signal(shape, name=name if one_set else f"{name}_s{s}") for s in range(slots)]

    def of_slot(values, index):
        return values[0] if one_set else Array(values)[index]

    def in_set(index, s):
        return 1 if one_set else index == s

    def staged_once(values, name):
        """``values`` (one per PE) registered, each distinct value once."""
        done = {}
        for value in values:
            if id(value) not in done:
                done[id(value)] = pipe.stage(value, name=f"{name}_{len(done)}" if done
                                             else name)
        return [done[id(value)] for value in values]

    firsts = first if isinstance(first, list) else [first] * len(pairs)
    slot_of = slot if isinstance(slot, list) else [slot] * len(pairs)
    # The control of the beat that updates the state (the resolve stage's, with split).
    if split:
        firsts_u = staged_once(firsts, "acc_first")
        flags_u = {key: pipe.stage(value, name=f"acc_{key}") for key, value in flags.items()}
        slots_u = slot_of if one_set else staged_once(slot_of, "acc_slot")
    else:
        firsts_u, flags_u, slots_u = firsts, flags, slot_of
    update = pipe.ce & pipe.beat[-2]      # a beat enters the output stage
    out_slots = slots_u if one_set else staged_once(slots_u, "out_slot")
    sticky = {key: sets(f"{key}_state") for key in flags}
    for s in range(slots):
        with m.If(update & in_set(slots_u[0], s)):
            m.d.sync += [sticky[key][s].eq(Mux(firsts_u[0], 0, sticky[key][s]) | flags_u[key])
                         for key in flags]

    suffixes = [""] if len(pairs) == 1 else [f"_{k}" for k in range(len(pairs))]
    lanes = []
    for k, ((pair_sum, pair_carry), suffix) in enumerate(zip(pairs, suffixes)):
        first, slot, first_u, slot_u = firsts[k], slot_of[k], firsts_u[k], slots_u[k]
        out_slot = out_slots[k]
        exact_state = sets(f"acc_exact{suffix}", SUM_BITS)
        overflow_state = sets(f"overflow_before{suffix}")
        # Per set: its last exact sum is outside the int32 range (off the adder's path).
        left_range = sets(f"left_range{suffix}")
        for s in range(slots):
            top = exact_state[s][ACC_BITS - 1:]
            m.d.comb += left_range[s].eq(top.any() & ~top.all())
        if split:
            # The running sum modulo 2^33, not wrapped at 32 bits, less the pending carry. It
            # equals the exact sum up to the first overflow; from there on the flag is sticky
            # and only the low 32 bits are read, which wrapping would not change.
            running = sets(f"acc_running{suffix}", SUM_BITS)
            pending = sets(f"acc_pending{suffix}")
            base = Mux(first, 0, of_slot(running, slot))
        else:
            base = Mux(first, 0, of_slot(exact_state, slot)[:ACC_BITS].as_signed())  # wrapped
        # The adder's two operands: the 3:2 row over (pair, base), or a resolved sum and base.
        row_sum = Signal(SUM_BITS, name=f"row_sum{suffix}")
        row_carry = Signal(SUM_BITS, name=f"row_carry{suffix}")
        if pair_carry is None:
            m.d.comb += [row_sum.eq(pair_sum), row_carry.eq(base)]
        else:
            m.d.comb += [
                row_sum.eq(pair_sum ^ pair_carry ^ base),
                row_carry.eq(((pair_sum & pair_carry) | (pair_sum & base) | (pair_carry & base))
                             << 1),
            ]
        if split:
            # A 16-bit and a 17-bit adder; the carry out of the low half waits in ``pending``
            # and enters the high half with the set's next beat, as that adder's carry-in.
            low_sum = Signal(low + 1, name=f"acc_low_sum{suffix}")
            high_sum = Signal(SUM_BITS - low, name=f"acc_high_sum{suffix}")
            m.d.comb += [
                low_sum.eq(row_sum[:low] + row_carry[:low]),
                # 1 + pending in an extra least significant position carries exactly pending.
                high_sum.eq((Cat(Const(1, 1), row_sum[low:])
                             + Cat(Mux(first, 0, of_slot(pending, slot)),
                                   row_carry[low:]))[1:]),
            ]
            for s in range(slots):
                with m.If(pipe.ce & pipe.beat[-3] & in_set(slot, s)):
                    m.d.sync += [running[s].eq(Cat(low_sum[:low], high_sum)),
                                 pending[s].eq(low_sum[low])]
            exact = Cat(of_slot(running, slot_u)[:low],
                        of_slot(running, slot_u)[low:] + of_slot(pending, slot_u))
        else:
            exact = row_sum + row_carry
        for s in range(slots):
            with m.If(update & in_set(slot_u, s)):
                m.d.sync += [
                    exact_state[s].eq(exact),
                    overflow_state[s].eq(Mux(first_u, 0, overflow_state[s] | left_range[s])),
                ]
        lanes.append((of_slot(exact_state, out_slot)[:ACC_BITS],
                      of_slot(overflow_state, out_slot) | of_slot(left_range, out_slot)))
    return lanes, {key: of_slot(sticky[key], out_slots[0]) for key in flags}, out_slots[0]
