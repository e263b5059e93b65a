"""AccLLM 2:4 sparse selector (AccLLM section V-B2 "Sparse and Dense Patterns", Fig. 10(c))."""

from amaranth.hdl import Array, Cat, Module, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..common.lanes import split_lanes
from ..common.params import check_int
from ..common.stream_stage import StallPipeline, check_pipeline, pack_fields

__all__ = ["AccllmSparseSelector"]

#: Inputs per group: 2:4 pruning keeps 2 of every 4 weights, so a 2-bit index selects one of 4.
GROUP_SIZE = 4
INDEX_BITS = 2
#: Largest ``rows * groups * x_bits``: the output payload holds two such fields, and Amaranth's
#: RTLIL back end refuses wires wider than 65,536 bits.
MAX_SELECTED_BITS = 1 << 15
#: Highest ``pipeline`` value: an input register stage in front of the multiplexers.
MAX_PIPELINE = 1
#: The output register alone closes timing at the paper configurations (docs/units/
#: accllm_sparse_selector.md: 254 MHz on ECP5 for ``accllm-block``).
DEFAULT_PIPELINE = 0


class AccllmSparseSelector(wiring.Component):
    """Multiplexers that pick, per 2:4-pruned weight row, the inputs meeting its kept weights.

    AccLLM prunes weights 2:4 (section IV-A1): of every group of 4 consecutive weights of a row,
    2 are kept, each stored with a 2-bit index into its group. Before the inputs enter the RCE,
    the sparse selector (section V-B2, Fig. 10(c)) muxes out the two inputs that meet the kept
    weights and discards the other two. Several weight rows ("Mux 1" .. "Mux N" in the figure,
    the PE blocks of one tile) share the same inputs, each with its own indices, so the selected
    inputs differ per row (the figure's red dotted line). For every row ``r`` and group ``g``:

    ``x1[r][g] = x[4 g + idx1[r][g]]``, ``x2[r][g] = x[4 g + idx2[r][g]]``

    The selected values are passed through unchanged (no sign or width conversion). The paper's
    dense mode, which bypasses the selector, is outside this unit.

    Indices that do not come from a valid 2:4 mask (``idx1 >= idx2``, including
    ``idx1 == idx2``) are not an error: the multiplexers select exactly what the indices say, so
    ``idx1 > idx2`` gives the two inputs in that order and ``idx1 == idx2`` gives the same input
    on both outputs. Golden model: :func:`golden.accllm.sparse_select` (indices from a 2:4 mask,
    ``idx1 < idx2``) and :func:`golden.accllm.select_by_index` (any indices).

    Parameters
    ----------
    groups : int
        Groups of 4 inputs per beat, 1..64 (default 1); ``x`` has ``4 * groups`` lanes.
    rows : int
        Weight rows sharing the inputs, each with its own indices, 1..64 (default 1).
    x_bits : int
        Input width, 2..16 (default 8, the paper's A8 activations).
    x_signed : bool
        Inputs signed (default) or unsigned. Only the payload shape changes; the bits are muxed
        as they are.
    pipeline : int
        0 (default): the multiplexers feed the output register directly. 1: the input beat
        (``x``, ``idx1``, ``idx2``) is registered first, so that the multiplexers start at
        flip-flops; one cycle more latency.

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        Input stream; payload fields ``x`` (``4 * groups`` x ``x_bits``, lane ``4 g + k`` is
        input ``k`` of group ``g``), ``idx1`` and ``idx2`` (``rows`` x ``groups`` x 2 bits
        unsigned, ``idx1[r][g]`` the index of row ``r``'s first kept weight in group ``g``).
    o : ``Out(stream.Signature(out_layout))``
        Output stream; payload fields ``x1`` and ``x2`` (``rows`` x ``groups`` x ``x_bits``, the
        shape of ``x``'s lanes).
    latency : int
        ``1 + pipeline``: cycles from the transfer on ``i`` to the corresponding beat being
        valid on ``o`` (with ``o.ready`` high).

    In every array field the first index is the least significant: lane 0, and row 0 before
    row 1 (``idx1[r][g]`` sits at bit ``2 (r groups + g)`` of the field).

    The default ``pipeline = 0`` already closes timing (``accllm-block``: 261 MHz on ECP5-25F,
    102 MHz on iCE40 UP5K); both depths are limited by the fan-out of the clock enable to the
    payload registers, so ``pipeline = 1`` does not raise Fmax in the project's flow (see
    docs/units/accllm_sparse_selector.md).

    Latency and throughput: ``1 + pipeline`` cycles from the transfer on ``i`` to ``o.valid``;
    one beat per cycle sustained at every depth. Every stage loads on one clock enable,
    ``i.ready = ~o.valid | o.ready`` (combinational in ``o.ready``); ``o.valid`` and
    ``o.payload`` come straight from flip-flops.

    Raises
    ------
    TypeError
        If ``groups``, ``rows``, ``x_bits`` or ``pipeline`` is not an integer, or ``x_signed``
        not a bool.
    ValueError
        If ``groups``, ``rows``, ``x_bits`` or ``pipeline`` is outside its range, or
        ``rows * groups * x_bits`` exceeds 32,768 (the output payload, twice that, would exceed
        Amaranth's 65,536-bit wire limit; e.g. 64 rows of 64 groups need ``x_bits <= 8``).
    """

    def __init__(self, *, groups=1, rows=1, x_bits=8, x_signed=True,
                 pipeline=DEFAULT_PIPELINE):
        self.groups = check_int("groups", groups, min_value=1, max_value=64)
        self.rows = check_int("rows", rows, min_value=1, max_value=64)
        self.x_bits = check_int("x_bits", x_bits, min_value=2, max_value=16)
        selected_bits = self.rows * self.groups * self.x_bits
        if selected_bits > MAX_SELECTED_BITS:
            raise ValueError(
                f"rows * groups * x_bits must be at most {MAX_SELECTED_BITS} (the output "
                f"payload, 2 * rows * groups * x_bits bits, must fit Amaranth's 65,536-bit "
                f"wire limit), not {self.rows} * {self.groups} * {self.x_bits} = "
                f"{selected_bits}")
        if not isinstance(x_signed, bool):
            raise TypeError(f"x_signed must be a bool, not {x_signed!r}")
        self.x_signed = x_signed
        self.pipeline = check_pipeline(pipeline, max_value=MAX_PIPELINE)
        self.latency = 1 + self.pipeline
        x_shape = signed(self.x_bits) if x_signed else unsigned(self.x_bits)
        index_layout = data.ArrayLayout(data.ArrayLayout(unsigned(INDEX_BITS), self.groups),
                                        self.rows)
        selected_layout = data.ArrayLayout(data.ArrayLayout(x_shape, self.groups), self.rows)
        self.in_layout = data.StructLayout({
            "x": data.ArrayLayout(x_shape, GROUP_SIZE * self.groups),
            "idx1": index_layout,
            "idx2": index_layout,
        })
        self.out_layout = data.StructLayout({"x1": selected_layout, "x2": selected_layout})
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        # One valid chain and clock enable for the input stage (pipeline = 1) and the output
        # register; the payload registers are reset-less.
        pipe = StallPipeline(m, self.i, self.o, latency=self.latency, name="select")
        payload = pipe.delay(self.i.payload, self.pipeline, name="inputs")
        # Lanes as slices of small wires (see hdl/common/lanes.py), one wire per group of 4 inputs and
        # one per row of indices: Amaranth re-emits a whole signal for every slice taken of it,
        # so slicing the wide payload (or wide wires) once per multiplexer made elaboration
        # quadratic.
        x = split_lanes(m, payload.x, self.x_bits, GROUP_SIZE * self.groups, name="x",
                        group=GROUP_SIZE)
        pairs = self.rows * self.groups                       # row-major: lane r * groups + g
        idx1 = split_lanes(m, payload.idx1, INDEX_BITS, pairs, name="idx1", group=self.groups)
        idx2 = split_lanes(m, payload.idx2, INDEX_BITS, pairs, name="idx2", group=self.groups)

        selected = {"x1": [], "x2": []}
        for row in range(self.rows):
            for group in range(self.groups):
                inputs = Array(x[GROUP_SIZE * group:GROUP_SIZE * (group + 1)])
                lane = row * self.groups + group
                for name, index in (("x1", idx1[lane]), ("x2", idx2[lane])):
                    mux = Signal(self.x_bits, name=f"{name}_r{row}_g{group}")
                    m.d.comb += mux.eq(inputs[index])
                    selected[name].append(mux)

        # The payload register, one per output field and row (``x1_row0`` ...). Only the valid
        # chain needs a reset; the payload registers do not.
        registers = {
            name: [pipe.stage(Cat(*selected[name][row * self.groups:(row + 1) * self.groups]),
                              name=f"{name}_row{row}")
                   for row in range(self.rows)]
            for name in ("x1", "x2")
        }
        m.d.comb += self.o.payload.eq(pack_fields(self.out_layout, registers))
        return m
