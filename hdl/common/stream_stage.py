"""Stream plumbing shared by the units: register stages, stall-together pipelines, skid buffers.

The rules followed are those of :mod:`amaranth.lib.stream`: a transfer happens on a clock edge where
``valid`` and ``ready`` are both high; once ``valid`` is high, neither ``valid`` nor ``payload``
change until the transfer; ``ready`` may depend combinationally on ``valid``.

Every unit takes a ``pipeline`` parameter (contract section 0) that chooses its register stages. The
pieces here are what the units compose to build them:

* :class:`StallPipeline`: the valid chain and the common clock enable of a fixed-depth pipeline
  between two streams (every stage register loads when the output slot is free). The unit places
  its own stage registers with :meth:`StallPipeline.stage`.
* :class:`SkidBuffer`: a two-entry stream buffer whose ``i.ready`` and ``o.valid``/``o.payload``
  all come from flip-flops. Put it behind a pipeline (``wiring.connect``) to cut the
  combinational path from the consumer's ``ready`` into the pipeline's clock enable.
* :class:`PingPongBuffer`: a two-entry stream FIFO whose payload registers load from the
  producer side only (the consumer's ``ready`` reaches two pointer bits and the occupancy):
  put it in front of a unit whose input ``ready`` is a wide clock enable.
* :func:`output_register`: one register stage (a :class:`StallPipeline` of depth 1 whose
  payload register the caller writes).
* :func:`check_pipeline`: the parameter check every unit shares.
* :func:`pack_fields`: a payload's bits assembled by field name (no ``Cat`` that relies on the
  order of the layout's fields).
"""

from collections.abc import Mapping

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .invariants import invariant
from .params import check_int

__all__ = ["output_register", "StallPipeline", "SkidBuffer", "PingPongBuffer", "check_pipeline",
           "pack_fields", "distinct_copies"]


def check_pipeline(value, *, max_value):
    """Return ``value`` as an int if it is a valid ``pipeline`` depth ``0..max_value``.

    Raises
    ------
    TypeError
        If ``value`` is not an integer.
    ValueError
        If ``value`` is outside ``0..max_value``.
    """
    return check_int("pipeline", value, min_value=0, max_value=max_value)


def output_register(m, i, o, *, emit=None):
    """Make ``o`` a registered copy of ``i`` and return the condition to load ``o.payload``.

    One pipeline stage with full throughput: a beat accepted on ``i`` appears on ``o`` one cycle
    later, and ``i`` accepts a new beat on every cycle in which the held beat leaves (or there is
    none). The caller computes the output payload from ``i.payload`` and assigns it to
    ``o.payload`` in ``m.d.sync`` under the returned condition; this function owns ``i.ready``
    and ``o.valid``.

    ``i.ready`` is combinational in ``o.ready`` (allowed by the stream rules); ``o.valid`` and
    ``o.payload`` come straight from flip-flops.

    Parameters
    ----------
    m : Module
        The module being elaborated.
    i : stream.Interface
        Input stream (the consumer side of this stage).
    o : stream.Interface
        Output stream (the producer side of this stage).
    emit : Value, optional
        If given, only accepted beats with ``emit`` high produce an output beat (the others are
        absorbed, e.g. the inner beats of an accumulation run).

    Returns
    -------
    Value
        High in the cycles where a beat transfers on ``i`` and must be registered.
    """
    load = i.valid & i.ready
    m.d.comb += i.ready.eq(~o.valid | o.ready)
    with m.If(load if emit is None else load & emit):
        m.d.sync += o.valid.eq(1)
    with m.Elif(o.ready):
        m.d.sync += o.valid.eq(0)
    return load


def enabled_register(m, value, enable, *, name):
    """``value`` registered in ``m`` in the cycles where ``enable`` is high (a ``reset_less``
    signal of its shape)."""
    register = Signal.like(value, name=name, reset_less=True)
    with m.If(enable):
        m.d.sync += register.eq(value)
    return register


def distinct_copies(m, value, count, *, name, enable=None):
    """``count`` registered copies of ``value`` (loaded when ``enable``, every cycle when None)
    that synthesis keeps apart, so that each drives a share of a wide fan-out. Yosys merges
    flip-flops with the same input and initial value, so copy ``k`` holds ``value`` inverted
    when bit 0 of ``k`` is set (undone after it) and starts at all ones when bit 1 is set: four
    copies differ in every bit (more copies share them in turn). Returns the copies
    (combinational from their registers, of ``value``'s shape)."""
    value = Value.cast(value)
    ones = (1 << len(value)) - 1
    copies = []
    for k in range(count):
        mask = Const(ones if k & 1 else 0, len(value))
        register = Signal(len(value), name=f"{name}_{k}_held", reset_less=True,
                          init=ones if k & 2 else 0)
        copy = Signal(value.shape(), name=f"{name}_{k}")
        if enable is None:
            m.d.sync += register.eq(value ^ mask)
        else:
            with m.If(enable):
                m.d.sync += register.eq(value ^ mask)
        m.d.comb += copy.eq(register ^ mask)
        copies.append(copy)
    return copies


def register_packed(items, register, *, group, name):
    """``items`` (values) registered packed, ``group`` values per register: ``register(value,
    name)`` registers each ``Cat`` of a group (named ``name``, then ``name_<first index>``);
    returns the registered copies in order (signed where the item is), slices of those
    registers. A stage of a wide circuit is then a few wide registers rather than one per
    value: a smaller netlist, faster elaboration and Verilator builds."""
    registered = []
    for first in range(0, len(items), group):
        values = [Value.cast(item) for item in items[first:first + group]]
        packed = register(Cat(values), f"{name}_{first}" if first else name)
        offset = 0
        for value in values:
            part = packed[offset:offset + len(value)]
            registered.append(part.as_signed() if value.shape().signed else part)
            offset += len(value)
    return registered


def pack_fields(layout, fields):
    """Return the bits of a ``layout`` value whose fields hold ``fields`` (combinational).

    Each value is placed at its field's offset, found by name, so that a payload assembled
    here stays right if the layout's fields are reordered (a ``Cat`` in layout order would
    silently swap them). The result is the ``Cat`` of the values in offset order: assign it
    to the payload (``payload.eq(...)``) or register it.

    Parameters
    ----------
    layout : layout-like
        A layout whose fields tile its bits (a :class:`~amaranth.lib.data.StructLayout`, or an
        :class:`~amaranth.lib.data.ArrayLayout` with the element indices as names).
    fields : mapping
        Field name -> value-like of exactly the field's width. A field whose shape is an
        :class:`~amaranth.lib.data.ArrayLayout` may instead be given as a sequence of its
        elements (element 0 first), each of exactly the element's width.

    Returns
    -------
    Value
        ``layout.size`` bits.

    Raises
    ------
    TypeError
        If ``layout`` is not a layout, ``fields`` is not a mapping, a value is not value-like,
        or a sequence is given for a field that is not an ``ArrayLayout``.
    ValueError
        If a field of ``layout`` is missing from ``fields``, a name in ``fields`` is not a field
        of ``layout``, a value (or an element, or the number of elements) does not match its
        field, or the fields of ``layout`` overlap or leave gaps.
    """
    layout = data.Layout.cast(layout)
    if not isinstance(fields, Mapping):
        raise TypeError(f"Fields must be a mapping of field names to values, not {fields!r}")
    members = dict(layout)
    names = ", ".join(repr(name) for name in members)
    for name in fields:
        if name not in members:
            raise ValueError(f"Unknown field {name!r}; the layout's fields are {names}")
    parts, offset = [], 0
    for name, field in sorted(members.items(), key=lambda item: item[1].offset):
        if field.offset != offset:
            raise ValueError(f"Fields of the layout must tile its bits, but field {name!r} "
                             f"starts at bit {field.offset}, not {offset}")
        if name not in fields:
            raise ValueError(f"Field {name!r} is missing; the layout's fields are {names}")
        parts.append(_field_bits(name, field, fields[name]))
        offset += field.width
    if offset != layout.size:
        raise ValueError(f"Fields of the layout must tile its bits, but they cover {offset} "
                         f"of its {layout.size} bits")
    return Cat(*parts)


def _field_bits(name, field, value):
    """``value`` (a value-like, or a sequence of elements for an ``ArrayLayout`` field) as the
    bits of field ``name``, checked against its width."""
    if isinstance(value, (list, tuple)):
        shape = field.shape
        if not isinstance(shape, data.ArrayLayout):
            raise TypeError(f"Field {name!r} is not an ArrayLayout and takes one value, not a "
                            f"sequence of {len(value)}")
        if len(value) != shape.length:
            raise ValueError(f"Field {name!r} must be given {shape.length} elements, not "
                             f"{len(value)}")
        width = Shape.cast(shape.elem_shape).width
        elements = [Value.cast(element) for element in value]
        for index, element in enumerate(elements):
            if len(element) != width:
                raise ValueError(f"Element {index} of field {name!r} must be {width} bits "
                                 f"wide, not {len(element)}")
        return Cat(*elements)
    value = Value.cast(value)
    if len(value) != field.width:
        raise ValueError(f"Field {name!r} must be {field.width} bits wide, not {len(value)}")
    return value


class StallPipeline:
    """Valid chain and common clock enable of a ``latency``-stage pipeline from ``i`` to ``o``.

    The stages advance together: every stage register loads in the cycles where ``ce`` is high,
    and ``ce = ~o.valid | o.ready`` (the output slot is free or is being emptied). ``i.ready`` is
    ``ce``, so a beat transfers on ``i`` whenever the pipeline advances; bubbles travel down the
    chain like beats (``valid[k]`` is low for them). At ``o.ready`` held high the pipeline takes
    one beat per cycle and the beat accepted on ``i`` in cycle t is valid on ``o`` in cycle
    t + ``latency``. Under backpressure nothing is dropped or duplicated: a stalled stage holds
    its register.

    The caller builds the data path: :meth:`stage` registers a value at the clock enable
    (``reset_less``), and the last stage's registers drive ``o.payload`` combinationally
    (``m.d.comb += o.payload.eq(...)``), so that ``o.payload`` is stable while ``o.valid`` waits.
    Data taken from ``i.payload`` enters stage 0; a value registered ``k`` times along its path
    belongs to stage ``k - 1``. The caller must register every output field exactly ``latency``
    times (the benches catch a mismatch as wrong data).

    ``ce`` fans out to every stage register and is combinational in ``o.ready``; connect ``o``
    to a :class:`SkidBuffer` when that path limits timing (``ce`` then comes from a flip-flop).

    Parameters
    ----------
    m : Module
        The module being elaborated.
    i, o : stream.Interface
        Input (consumer side) and output (producer side) streams. This object drives
        ``i.ready`` and ``o.valid``.
    latency : int
        Number of register stages, at least 1.
    emit : Value, optional
        Sampled with ``i.payload``: only accepted beats with ``emit`` high produce an output beat
        (the others flow down the chain as bubbles, e.g. the inner beats of an accumulation).
    name : str
        Prefix of the valid-chain signals.
    hold : Value, optional
        While high, no stage advances (``ce`` low, so ``i.ready`` is low too), whatever the state
        of ``o``: a unit stalls its whole front this way while a resource downstream of the
        pipeline is busy (e.g. a single histogram bank being read out).
    o_ready_copy : Value, optional
        A copy of ``o.ready`` (equal to it in every cycle, e.g. from a duplicated flip-flop):
        ``i.ready`` is then ``~o.valid | o_ready_copy`` (without ``hold``), a gate of its own
        instead of the ``ce`` net, so that the producer's enable does not wait on the route
        of a clock enable that fans out to every stage.
    registered_ce : bool
        ``ce`` is a flip-flop (reset high) loading :attr:`ce_next`, which the caller drives
        with the value ``~o.valid | o.ready`` takes in the next cycle (computed from the next
        state of the flip-flops behind ``o.valid`` and ``o.ready``), so that the clock enable
        of every stage leaves a register instead of a gate. Not with ``hold``. The caller's
        proof asserts ``ce == advance``.

    Members
    -------
    ce : Signal
        Clock enable of every stage.
    advance : Value
        ``~o.valid | o.ready`` (``& ~hold`` with ``hold``): what ``ce`` equals in every cycle.
    ce_next : Signal
        With ``registered_ce`` only: the input of the ``ce`` flip-flop.
    load : Value
        A beat transfers on ``i`` (``i.valid & ce``).
    valid : list of Signal
        ``valid[k]``: stage ``k`` holds a beat (``valid[latency - 1]`` drives ``o.valid``).
    beat : list of Signal
        ``beat[k]``: stage ``k`` holds an accepted beat, whether or not it will be emitted
        (equal to ``valid[k]`` without ``emit``). Use it to gate state updates (accumulators).
    """

    def __init__(self, m, i, o, *, latency, emit=None, name="pipe", hold=None,
                 o_ready_copy=None, registered_ce=False):
        if latency < 1:
            raise ValueError(f"latency must be at least 1, not {latency!r}")
        if hold is not None and (o_ready_copy is not None or registered_ce):
            raise ValueError("o_ready_copy and registered_ce are for a pipeline without hold")
        self.m = m
        self.latency = latency
        self.advance = ~o.valid | o.ready if hold is None else (~o.valid | o.ready) & ~hold
        if registered_ce:
            self.ce = Signal(name=f"{name}_ce", init=1)
            self.ce_next = Signal(name=f"{name}_ce_next")
            m.d.sync += self.ce.eq(self.ce_next)
        else:
            self.ce = Signal(name=f"{name}_ce")
            m.d.comb += self.ce.eq(self.advance)
        self.load = i.valid & self.ce
        m.d.comb += i.ready.eq(self.ce if o_ready_copy is None else ~o.valid | o_ready_copy)
        self.beat = [Signal(name=f"{name}_beat{k}") for k in range(latency)]
        if emit is None:
            self.valid = self.beat
        else:
            self.valid = [Signal(name=f"{name}_valid{k}") for k in range(latency)]
        with m.If(self.ce):
            m.d.sync += self.beat[0].eq(i.valid)
            for k in range(1, latency):
                m.d.sync += self.beat[k].eq(self.beat[k - 1])
            if emit is not None:
                m.d.sync += self.valid[0].eq(i.valid & emit)
                for k in range(1, latency):
                    m.d.sync += self.valid[k].eq(self.valid[k - 1])
        m.d.comb += o.valid.eq(self.valid[-1])
        self._count = 0

    def stage(self, value, *, name=None, enable=True, m=None):
        """Return ``value`` registered at ``ce`` (a ``reset_less`` Signal of its shape).

        With ``enable=False`` return ``value`` unchanged: a unit's ``pipeline`` parameter turns
        its optional cuts on and off this way without two code paths. ``m`` places the register
        in another module (a submodule of the pipeline's, e.g. to keep a block's hierarchy).
        """
        if not enable:
            return value
        self._count += 1
        return enabled_register(self.m if m is None else m, value, self.ce,
                                name=name or f"stage_{self._count}")

    def delay(self, value, cycles, *, name=None):
        """Return ``value`` registered ``cycles`` times at ``ce`` (a delay line; 0: unchanged)."""
        for k in range(cycles):
            value = self.stage(value, name=None if name is None else f"{name}_d{k + 1}")
        return value


class SkidBuffer(wiring.Component):
    """A two-entry stream buffer with registered ``i.ready``, ``o.valid`` and ``o.payload``.

    Full throughput: one beat per cycle in and out while ``o.ready`` is high, one cycle from a
    transfer on ``i`` to ``o.valid``. When ``o`` stalls, the beat arriving in that cycle is held
    in the skid register and ``i.ready`` drops in the next cycle; no combinational path runs from
    ``o.ready`` to ``i.ready``. Placed behind a :class:`StallPipeline`, it turns the pipeline's
    clock enable into a flip-flop output.

    Parameters
    ----------
    payload_shape : shape-like
        Payload shape of both streams.

    Members
    -------
    i : ``In(stream.Signature(payload_shape))``
    o : ``Out(stream.Signature(payload_shape))``
    """

    #: Cycles from a transfer on ``i`` to the beat being valid on ``o``.
    latency = 1

    def __init__(self, payload_shape):
        super().__init__({
            "i": In(stream.Signature(payload_shape)),
            "o": Out(stream.Signature(payload_shape)),
        })

    def elaborate(self, platform):
        m = Module()
        skid_valid = Signal()
        skid = Signal.like(self.o.payload, name="skid", reset_less=True)
        out = Signal.like(self.o.payload, name="out", reset_less=True)
        m.d.comb += [
            self.i.ready.eq(~skid_valid),
            self.o.payload.eq(out),
        ]
        out_free = ~self.o.valid | self.o.ready
        with m.If(out_free):
            # The output register takes the oldest beat: the skid entry, else the input.
            with m.If(skid_valid):
                m.d.sync += [out.eq(skid), self.o.valid.eq(1), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += [out.eq(self.i.payload), self.o.valid.eq(self.i.valid)]
        with m.Elif(self.i.valid & self.i.ready):
            # Output held: park the incoming beat; i.ready drops next cycle.
            m.d.sync += [skid.eq(self.i.payload), skid_valid.eq(1)]
        return m


class PingPongBuffer(wiring.Component):
    """A two-entry stream FIFO whose entries load from ``i`` alone: the consumer's ``ready``
    reaches only its read pointer and occupancy, never the payload registers' enables.

    Where a :class:`SkidBuffer`'s output and skid registers load on ``~o.valid | o.ready``
    (a consumer's clock enable fanned out to every payload bit), here entry ``k`` loads
    ``i.payload`` in every cycle in which it is the free entry the write pointer names
    (``write == k`` and not ``full``), whether or not a beat transfers: a beat not taken leaves
    the entry free, so the enable is a gate of two flip-flops, not of ``i.valid`` and the
    producer's logic. ``o.payload`` is the entry at the read pointer (a 2:1 multiplexer of
    flip-flops; while the buffer is empty it is the free entry and changes, with ``o.valid``
    low). The occupancy is two flip-flops, ``o.valid``
    (at least one entry) and ``full`` (two), with ``i.ready`` = ``~full``: both handshakes come
    from flip-flops with no logic between. Full throughput: with ``o.ready``
    high one beat per cycle in and out, one cycle from a transfer on ``i`` to ``o.valid``.

    Parameters
    ----------
    payload_shape : shape-like
        Payload shape of both streams.

    Members
    -------
    i : ``In(stream.Signature(payload_shape))``
    o : ``Out(stream.Signature(payload_shape))``
    """

    #: Cycles from a transfer on ``i`` to the beat being valid on ``o``.
    latency = 1

    def __init__(self, payload_shape):
        super().__init__({
            "i": In(stream.Signature(payload_shape)),
            "o": Out(stream.Signature(payload_shape)),
        })

    def elaborate(self, platform):
        m = Module()
        entries = [Signal.like(self.i.payload, name=f"entry{k}", reset_less=True)
                   for k in range(2)]
        write, read = Signal(), Signal()
        nonempty, full = Signal(), Signal()
        push = self.i.valid & self.i.ready
        pop = self.o.valid & self.o.ready
        m.d.comb += [
            self.i.ready.eq(~full),
            self.o.valid.eq(nonempty),
            self.o.payload.eq(Mux(read, entries[1], entries[0])),
        ]
        for k, entry in enumerate(entries):
            with m.If((write == k) & ~full):
                m.d.sync += entry.eq(self.i.payload)
        with m.If(push):
            m.d.sync += write.eq(~write)
        with m.If(pop):
            m.d.sync += read.eq(~read)
        # The occupancy (0, 1, 2) plus push minus pop, as its two flags.
        m.d.sync += [nonempty.eq(push | full | (nonempty & ~pop)),
                     full.eq(~pop & (full | (nonempty & push)))]
        invariant(m, platform, nonempty | ~full, name="occupancy")
        return m
