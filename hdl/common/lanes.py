"""Lane plumbing for wide, many-lane payloads.

Amaranth 0.5's netlist builder re-emits a whole signal for every slice taken of it, so slicing
``lanes`` fields out of one ``lanes x width`` payload costs O(lanes^2) at elaboration (measured:
49.6 s to convert ``kllm_concat`` with 4096 lanes). :func:`split_lanes` first copies the payload
into groups of ``group`` lanes held in small intermediate signals (combinational wires, free in
hardware) and slices those, which is O(lanes * group).
"""

from amaranth.hdl import Signal, Value

from .params import check_int

__all__ = ["split_lanes"]


def split_lanes(m, value, elem_width, count, *, name, group=64):
    """Return ``count`` values of ``elem_width`` bits each, lane 0 from the least significant
    bits of ``value``.

    Parameters
    ----------
    m : Module
        Module to which the combinational group wires are added.
    value : Value-castable
        At least ``elem_width * count`` bits.
    elem_width, count : int
        Lane width and number of lanes.
    name : str
        Prefix of the group wires in the generated Verilog.
    group : int
        Lanes per intermediate wire.
    """
    elem_width = check_int("elem_width", elem_width, min_value=1)
    count = check_int("count", count, min_value=1)
    group = check_int("group", group, min_value=1)
    value = Value.cast(value)
    if len(value) < elem_width * count:
        raise ValueError(f"value has {len(value)} bits, fewer than {count} x {elem_width}")
    if count <= group:
        return [value[lane * elem_width:(lane + 1) * elem_width] for lane in range(count)]
    lanes = []
    for first in range(0, count, group):
        size = min(group, count - first)
        wire = Signal(elem_width * size, name=f"{name}_lanes_{first}")
        m.d.comb += wire.eq(value[first * elem_width:(first + size) * elem_width])
        lanes += [wire[k * elem_width:(k + 1) * elem_width] for k in range(size)]
    return lanes

