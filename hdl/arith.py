"""Small arithmetic pieces shared by the units: one-hot decoding, popcount, adder trees."""

from amaranth.hdl import Cat, Const, Value

from .params import check_int

__all__ = ["one_hot_decode", "adder_tree", "popcount"]


def one_hot_decode(value, *, chunk_bits=4):
    """Return ``2**len(value)`` single-bit values; bit ``k`` is high when ``value == k``
    (combinational).

    The index is predecoded in chunks of ``chunk_bits`` bits (16 lines per 4-bit chunk, one LUT4
    each), and every output is the AND of one line per chunk: for an 8-bit index, 32 predecode
    lines and one 2-input AND per output instead of 256 8-bit comparators.
    """
    value = Value.cast(value)
    chunk_bits = check_int("chunk_bits", chunk_bits, min_value=1)
    width = len(value)
    if width == 0:
        return [Const(1, 1)]
    chunks = [value[start:start + chunk_bits] for start in range(0, width, chunk_bits)]
    lines = [[chunk == code for code in range(1 << len(chunk))] for chunk in chunks]
    outputs = []
    for code in range(1 << width):
        term = None
        for position, chunk_lines in enumerate(lines):
            line = chunk_lines[(code >> (position * chunk_bits)) & ((1 << len(chunks[position])) - 1)]
            term = line if term is None else term & line
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


def popcount(bits):
    """Number of set bits among ``bits`` (a Value or a list of 1-bit Values), combinational.

    The paper's BTC ("bit counter", KLLM section IV-B) for one bin.
    """
    if isinstance(bits, Value):
        bits = [bits[k] for k in range(len(bits))]
    return adder_tree([Cat(bit) for bit in bits])
