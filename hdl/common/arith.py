"""Small arithmetic pieces shared by the units: one-hot decoding, popcount, adder trees."""

from amaranth.hdl import Cat, Const, Mux, Signal, Value

from .params import check_int

__all__ = ["named", "one_hot_decode", "one_hot_wires", "predecode", "one_hot_from_lines", "adder_tree",
           "adder_tree_cut", "popcount", "at_least", "or_tree", "lowest_one_hot",
           "one_hot_index"]


def named(m, value, name):
    """``value`` as a combinational signal of ``m`` named ``name`` (unsigned, as wide).

    Amaranth lowers each statement's expression on its own: an expression that several
    statements use is emitted once per statement (exponentially often when such uses
    reconverge along a chain, as in a comparator network), a named signal once.
    """
    value = Value.cast(value)
    signal = Signal(len(value), name=name)
    m.d.comb += signal.eq(value)
    return signal


def one_hot_decode(value, *, chunk_bits=4):
    """Return ``2**len(value)`` single-bit values; bit ``k`` is high when ``value == k``
    (combinational).

    The index is predecoded in chunks of ``chunk_bits`` bits (16 lines per 4-bit chunk, one LUT4
    each), and every output is the AND of one line per chunk: for an 8-bit index, 32 predecode
    lines and one 2-input AND per output instead of 256 8-bit comparators.
    """
    value = Value.cast(value)
    return one_hot_from_lines(predecode(value, chunk_bits=chunk_bits))


def one_hot_wires(m, value, *, name, chunk_bits=4):
    """:func:`one_hot_decode` of ``value`` into a ``2**len(value)``-bit signal of ``m``, the
    predecode lines held in wires (combinational).

    The same circuit, built from few, wide operations so that a wide decode (4096 outputs)
    elaborates fast: the one-hot over the chunks so far is repeated once per line of the next
    chunk, each copy ANDed with its line (a multiplexer with 0), instead of one AND per output
    and chunk.
    """
    value = Value.cast(value)
    term = None
    for c, chunk in enumerate(predecode(value, chunk_bits=chunk_bits)):
        lines = named(m, Cat(*chunk), f"{name}_line{c}")
        if term is None:
            term = lines
        else:
            term = Cat(*(Mux(lines[code], term, 0) for code in range(len(chunk))))
    decoded = Signal(1 << len(value), name=name)
    m.d.comb += decoded.eq(Const(1, 1) if term is None else term)
    return decoded


def predecode(value, *, chunk_bits=4):
    """Split ``value`` into chunks of ``chunk_bits`` bits (least significant first) and return,
    per chunk, its ``2**len(chunk)`` one-hot lines (combinational).

    ``predecode(v)[c][k]`` is high when chunk ``c`` of ``v`` equals ``k``. A zero-width value
    has no chunks. The lines are the first half of :func:`one_hot_decode`; a unit that registers
    them (or ANDs an enable into one chunk's lines) finishes the decode with
    :func:`one_hot_from_lines`.
    """
    value = Value.cast(value)
    chunk_bits = check_int("chunk_bits", chunk_bits, min_value=1)
    chunks = [value[start:start + chunk_bits] for start in range(0, len(value), chunk_bits)]
    return [[chunk == code for code in range(1 << len(chunk))] for chunk in chunks]


def one_hot_from_lines(lines):
    """Return the one-hot decode of an index from its predecode ``lines`` (combinational).

    ``lines`` is a list, least significant chunk first, of lists of ``2**bits_c`` one-hot lines
    (as returned by :func:`predecode`, possibly registered). Output ``k`` is the AND of line
    ``(k >> offset_c) & (2**bits_c - 1)`` of every chunk ``c``; there are ``prod(len(lines[c]))``
    outputs. No chunks: one constant-1 output (a zero-width index has one value).
    """
    if not lines:
        return [Const(1, 1)]
    sizes = [len(chunk_lines) for chunk_lines in lines]
    for size in sizes:
        if size < 2 or size & (size - 1):
            raise ValueError(f"every chunk must have a power-of-two number (>= 2) of lines, "
                             f"not {sizes!r}")
    total = 1
    for size in sizes:
        total *= size
    outputs = []
    for code in range(total):
        term = None
        shift = 0
        for size, chunk_lines in zip(sizes, lines):
            line = chunk_lines[(code >> shift) & (size - 1)]
            term = line if term is None else term & line
            shift += size.bit_length() - 1
        outputs.append(term)
    return outputs


def adder_tree(values):
    """Sum ``values`` with a balanced tree of two-input adders (combinational).

    Every addition widens by one bit (Amaranth's rule), so the result never overflows; signed
    operands are sign-extended. Depth is ``ceil(log2(len(values)))`` adders.
    """
    values = [Value.cast(value) for value in values]
    if not values:
        return Const(0, 1)
    while len(values) > 1:
        paired = [values[k] + values[k + 1] for k in range(0, len(values) - 1, 2)]
        if len(values) % 2:
            paired.append(values[-1])
        values = paired
    return values[0]


def adder_tree_cut(values, *, cut_after=(), register=None):
    """Sum ``values`` with the balanced tree of :func:`adder_tree`, registering every partial
    sum after the tree levels listed in ``cut_after``.

    Level 0 is the operands themselves, level ``l`` the sums after ``l`` rows of adders (the
    tree has ``ceil(log2(len(values)))`` levels). After each level in ``cut_after`` every value
    of that level, pass-throughs of an odd count included, goes through ``register`` (a
    callable returning the registered value, such as
    :meth:`hdl.common.stream_stage.StallPipeline.stage`), so every path through the tree crosses the
    same number of registers: ``len(set(cut_after) & {0..depth})``. Levels beyond the depth
    are not registered. With no cuts this is :func:`adder_tree`.

    Returns
    -------
    Value
        The sum (combinational from the last cut).
    """
    values = [Value.cast(value) for value in values]
    cut_after = set(cut_after)
    if cut_after and register is None:
        raise ValueError("adder_tree_cut needs a register callable when cut_after is not empty")
    if not values:
        return Const(0, 1)
    level = 0
    while True:
        if level in cut_after:
            values = [register(value) for value in values]
        if len(values) == 1:
            return values[0]
        paired = [values[k] + values[k + 1] for k in range(0, len(values) - 1, 2)]
        if len(values) % 2:
            paired.append(values[-1])
        values = paired
        level += 1


def popcount(bits):
    """Number of set bits among ``bits`` (a Value or a list of 1-bit Values), combinational.

    The paper's BTC ("bit counter", KLLM section IV-B) for one bin.
    """
    if isinstance(bits, Value):
        bits = [bits[k] for k in range(len(bits))]
    return adder_tree([Cat(bit) for bit in bits])


def at_least(value, bound):
    """``value >= bound`` for an unsigned ``value`` and a constant ``bound``, as AND/OR gates
    (combinational, one gate per bit of ``value``). Yosys would map the comparison operator to
    a carry chain; this is shallower."""
    width = len(value)
    if bound <= 0:
        return Const(1, 1)
    if bound >= 1 << width:
        return Const(0, 1)
    msb = width - 1
    rest = bound & ((1 << msb) - 1)
    if bound >> msb:
        return value[msb] & at_least(value[:msb], rest)
    return value[msb] | at_least(value[:msb], rest)


def or_tree(values):
    """Bitwise OR of ``values`` (any widths), as a balanced tree; ``Const(0, 1)`` for none."""
    values = list(values)
    if not values:
        return Const(0, 1)
    while len(values) > 1:
        values = [values[k] | values[k + 1] if k + 1 < len(values) else values[k]
                  for k in range(0, len(values), 2)]
    return values[0]


def lowest_one_hot(bits):
    """One-hot of the lowest set bit of ``bits`` (a Value), all zero when none is set
    (combinational; bit k is ``bits[k]`` and no lower bit)."""
    bits = Value.cast(bits)
    return Cat(*(bits[k] & ~bits[:k].any() if k else bits[0] for k in range(len(bits))))


def one_hot_index(one_hot, width):
    """The index of the set bit of a one-hot Value (0 when none is set), ``width`` bits
    (combinational: the OR of every position's index gated by its bit)."""
    out = Const(0, width)
    for k in range(1, len(one_hot)):
        out = out | Mux(one_hot[k], k, 0)
    return out[:width]
