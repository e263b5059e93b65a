# amaranth: UnusedElaboratable=no
"""Data properties of ``oaken_dequantizer`` (contract section 4) and ``oaken_quantizer`` (the contract
section 8). The expected values are written here from the contract text, never from the RTL.

**Dequantizer: every output element is contract 4's dequantized value of its chunk**::

    v  = min + q * d                  # (min, d): the metadata of the element's group
    m  = (v + 2^(frac_bits-1)) >> frac_bits                    # arithmetic shift
    x' = m + (t_hi_i if m >= 0 else t_lo_i)                    # middle (no COO entry)
    x' = -m if sign else m                                     # inner (entry group bit 0)
    x' = (-m if sign else m) + (t_lo_o if sign else t_hi_o)    # outer (entry group bit 1)

saturated to the signed ``data_bits`` range; ``q`` is the element's dense code, and a COO entry
naming the element (bits [7:2] its index) selects its group and sign.

:class:`DequantizerHarness`: the unit has three input streams (``hdr``, one beat per chunk;
``dense``, ``vec_len / lanes`` beats; ``coo``, beats up to the one with ``last``) and one
output ``o``, so :class:`~verif.formal.transaction.TransactionHarness` does not fit. The harness
watches one element position (``watch``, free in the first cycle, then held: every position is
covered) and checks, in every chunk, the output lane at that position against the formula. The
stimulus is contract 4's: COO beats well formed (``count <= lanes``, indices below ``vec_len`` and
strictly increasing through the chunk, entries past ``count`` free), everything else free
(thresholds in any order: the formula needs none); one restriction: a COO beat without entries
only as the chunk's last (so a chunk has at most ``vec_len + 1`` COO beats).
The environment runs **one chunk at a time** (no beat of the next chunk until every stream, the
output included, has finished this one), offers every beat of the chunk at once and takes output
beats at once (``stall``: the longest wait allowed, 0 in every row).

Under that frame the harness also asserts what the unit's docstring promises, which k-induction
needs to see a unit state that disagrees with the harness within a few chunks: a ``dense`` beat
is taken only after its chunk's header and the COO entries that can fall in its window (the
chunk's ``last`` beat, or an entry at or past the window's last position); with one chunk in
flight ``hdr`` and ``coo`` are never refused; and, as in the transaction harness, an output
beat comes no sooner than ``latency`` cycles after its ``dense`` beat, with nothing out that was
not put in.

Two data modes:

* ``rigid`` (the proofs): the header, the COO map (per position: named, group bit, sign bit;
  its packing into COO beats free per chunk) and the dense codes (per position) are free values
  chosen in the first cycle, the same in every chunk. k-induction decides the property only so:
  the unit's one-hot read pointers (``read_slot``, ``read_window``) and its reset-less slot
  headers admit unreachable states (two pointer bits set, so a stale header or map is ORed into
  the one read) that agree with every output for as long as consecutive chunks carry equal data;
  with data free per chunk the induction step finds such a counterexample at every depth tried
  (16 to 24), and the harness cannot name the unit's internal registers to rule them out. With
  the same data in every chunk those states are harmless and k-induction at depth 20 proves the
  property. What the rigid rows cannot see is a chunk computed with another chunk's header or
  map (the test's seeded "stale header" bug passes them).
* free (the bounded rows): every chunk has its own header, COO entries and codes, recorded per
  chunk; a mix-up between chunks shows (the seeded stale header fails), within the bound only.

Shape ``lanes`` 1, ``vec_len`` 2, ``data_bits`` 2, ``frac_bits`` 1: two windows, both COO
groups and signs, 5-bit metadata; the smallest that keeps windows and the zero insert. Rows
(seconds measured one at a time on the shared 2-core machine at load 4 to 7):

* ``pipeline`` 0, rigid, k-induction at depth 20 (16 does not prove), one row per group of the
  watched element (middle, inner, outer; all three in one row took 94 s): **proved**, 11-16 s /
  15-16 s / 28-38 s.
* ``pipeline`` 0, free data, bounded: 36 cycles (five chunks or more), 22-38 s.
* ``pipeline`` 7 (the default), free data, bounded: 56 cycles (four chunks through the 7-cycle
  pipeline and the output queue), 31-46 s.

Not proved, and why:

* ``pipeline`` 7 unbounded: three slots instead of two, and the unreachable pointer states stay
  hidden longer than 40 cycles (k-induction of the control assertions alone, without the data
  check, fails at 24, 32 and 40, also at ``vec_len`` 4, two slots); with the data check every
  step costs seconds.
* Output stalls and idle inputs: with output stalls of one cycle the middle-group proof needs
  depth 24 and 94 s; a bounded check with free data and stalls: 30 cycles at ``pipeline`` 7 in
  90 s, 24 at ``pipeline`` 0 not in 120 s; with inputs idle up to a cycle an 8-cycle bounded
  check took 50 to 90 s. The stream proofs (hold, counting) cover stalls and idle inputs
  for the control.
* More than one chunk in flight (headers and COO beats running ahead into the next slots): an
  environment with two chunks in flight and no frame took 74 s for one bounded step.
* PDR: the proof scripts write the harness as AIGER, which Yosys refuses for this unit ("Design
  contains 'x' or 'z' bits": its fully covered ``Switch`` / ``Array`` selections become
  ``$pmux`` cells with an undefined default). With ``setundef -anyseq`` in the script (an
  experiment, not in :mod:`verif.formal.engines`) PDR proves the control assertions in 10 s but
  not the data property in 300 s.

**Quantizer: the ``hdr`` thresholds and the COO entries are contract 8's**
(:class:`QuantizerHarness`): every ``hdr`` beat carries its chunk's thresholds; the COO
entries of a chunk are, in index order, exactly its elements outside contract 4's middle group,
each with its group bit (outer) and sign bit (``s < 0``: inner ``x < 0``, outer the lower
side), and the beat with ``last`` is the one that completes them; no ``hdr`` beat and no COO ``last`` without a chunk taken. The chunk's
thresholds (ordered, as contract 4 requires) and values are free in the first cycle and the same in
every chunk; the input offers a beat in every cycle and the outputs are always ready. Shape
``lanes`` 2 (a COO beat packs two entries), ``vec_len`` 4, ``data_bits`` 2, ``frac_bits`` 1.
Rows, bounded: ``pipeline`` 0, 16 cycles (about six chunks out), 13-27 s; ``pipeline`` 12 (the
default), 26 cycles (the 17-cycle latency, then about four chunks), 25 s (30 cycles: 21 to 76 s
with the machine's load). Not proved: k-induction at ``pipeline`` 0 fails at 10, 16 and 24
(corrupted credit counters slow the unit's intake for good, and its LUT-RAM queues hold stale
entries, so unreachable states stay hidden for long; depth 24 took 61 s). Not checked: the
dense codes and the header's metadata (min, d: the group statistics and the division by 15),
chunks with different data (a mix-up between chunks), misordered or changing thresholds, output
stalls.
"""

from __future__ import annotations

from functools import partial

from amaranth.hdl import Assert, Assume, Cat, Const, Module, Mux, Signal, signed

from qllm_cores.gen.registry import resolve_params

from . import Proof
from .stream import UnitHarness, assume_input_hold

__all__ = ["DequantizerHarness", "QuantizerHarness", "dequantized", "proofs"]

DEQUANTIZER_PROPERTY = "x = the contract dequantized"
#: contract 4 groups of the watched element: (named by a COO entry, entry group bit).
GROUPS = {"mid": (0, 0), "in": (1, 0), "out": (1, 1)}
#: The proofs' shape (see the module docstring).
SHAPE = {"lanes": 1, "vec_len": 2, "data_bits": 2, "frac_bits": 1}
#: The k-induction depth of the rigid rows at ``pipeline`` 0 (16 does not prove them).
DEPTH = 20
#: The bounded rows with free data per chunk: (``pipeline``, cycles from reset).
BOUNDED = ((0, 36), (7, 56))


def dequantized(*, q, mn, d, hit, outer, sign, t_lo_o, t_lo_i, t_hi_i, t_hi_o, data_bits,
                frac_bits):
    """contract 4's dequantized value of one element (an Amaranth value, exact widths): ``q`` its
    dense code, (``mn``, ``d``) its group's metadata, ``hit`` a COO entry names it (``outer``
    its group bit, ``sign`` its sign bit), ``x'`` saturated to signed ``data_bits``."""
    v = mn + q * d
    m = (v + (1 << (frac_bits - 1))) >> frac_bits            # arithmetic: v is signed
    signed_m = Mux(sign, -m, m)
    middle = m + Mux(m >= 0, t_hi_i, t_lo_i)
    outer_value = signed_m + Mux(sign, t_lo_o, t_hi_o)
    x = Mux(hit, Mux(outer, outer_value, signed_m), middle)
    lo, hi = -(1 << (data_bits - 1)), (1 << (data_bits - 1)) - 1
    return Mux(x < lo, lo, Mux(x > hi, hi, x))


def _select(array, index, count):
    """``array[index]`` as a chain of multiplexers (no out-of-range ``x`` bits)."""
    value = array[0]
    for n in range(1, count):
        value = Mux(index == n, array[n], value)
    return value


def _held(m, started, value, name):
    """``value`` in the first cycle (``started`` low), then the same in every later one."""
    reg = Signal.like(value, name=f"{name}_reg")
    now = Signal.like(value, name=name)
    m.d.comb += now.eq(Mux(started, reg, value))
    m.d.sync += reg.eq(now)
    return now


def fire(stream):
    """A beat transfers on ``stream``."""
    return stream.valid & stream.ready


class DequantizerHarness(UnitHarness):
    """The element at position ``watch`` of every chunk of ``oaken_dequantizer``, one chunk at a
    time, checked against contract 4 (see the module docstring).

    ``rigid``: the same header, COO map and codes in every chunk (else free per chunk);
    ``group``: restrict the watched element to one contract 4 group (``"mid"``, ``"in"``,
    ``"out"``; rigid only); ``stall``: the longest wait of an output beat (0: taken at once).
    """

    def __init__(self, dut, *, rigid=True, group=None, stall=0):
        if group is not None and not rigid:
            raise ValueError("group restricts the rigid COO map only")
        self.rigid, self.group, self.stall = rigid, group, stall
        V = dut.vec_len
        self.watch_in = Signal(range(max(V, 2)), name="watch_in")
        self.hdr_in = Signal(dut.hdr_layout, name="hdr_in")
        self.map_in = Signal(3 * V, name="map_in")         # per position: hit, outer, sign
        self.codes_in = Signal(4 * V, name="codes_in")
        super().__init__(dut)

    @property
    def free_ports(self):
        rigid = [self.hdr_in.as_value(), self.map_in, self.codes_in] if self.rigid else []
        return [*super().free_ports, self.watch_in, *rigid]

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        L, V, W = dut.lanes, dut.vec_len, dut.windows
        lane_bits = (L - 1).bit_length()
        started = assume_input_hold(m, dut, self.ports)

        held = partial(_held, m, started)

        watch = held(self.watch_in, "watch")
        m.d.comb += Assume(watch < V)
        watch_lane = watch[:lane_bits] if lane_bits else Const(0, 1)
        watch_window = watch[lane_bits:] if W > 1 else Const(0, 1)

        # Progress through the chunk: beats on dense and o, an open COO chunk, and per stream
        # "finished this chunk". The next chunk starts once all four have finished.
        dense_beat = Signal(range(W), name="dense_beat")
        out_beat = Signal(range(W), name="out_beat")
        coo_open = Signal(name="coo_open")          # a COO beat of this chunk was taken
        for stream, beat in ((dut.dense, dense_beat), (dut.o, out_beat)):
            with m.If(fire(stream)):
                m.d.sync += beat.eq(Mux(beat == W - 1, 0, beat + 1))
        coo = dut.coo.payload
        with m.If(fire(dut.coo)):
            m.d.sync += coo_open.eq(~coo.last)
        ends = {"hdr": fire(dut.hdr), "dense": fire(dut.dense) & (dense_beat == W - 1),
                "coo": fire(dut.coo) & coo.last, "o": fire(dut.o) & (out_beat == W - 1)}
        done = {s: Signal(name=f"{s}_done") for s in ends}
        all_done = done["hdr"] & done["dense"] & done["coo"] & done["o"]
        for s, end in ends.items():
            m.d.sync += done[s].eq(Mux(all_done, 0, done[s] | end))
            if s != "o":
                with m.If(done[s]):
                    m.d.comb += Assume(~getattr(dut, s).valid)
                # Patience 0: every beat of the chunk offered at once.
                m.d.comb += Assume(done[s] | getattr(dut, s).valid)
        stalled = Signal(range(self.stall + 2), name="o_stalled")
        m.d.sync += stalled.eq(Mux(dut.o.valid & ~dut.o.ready, stalled + 1, 0))
        m.d.comb += Assume(~(dut.o.valid & ~dut.o.ready) | (stalled < self.stall))

        # Well-formed COO beats (contract 4).
        prev_index = Signal(6, name="coo_prev_index")      # the chunk's last index so far
        prev_any = Signal(name="coo_prev_any")
        indices = [coo.entries[j][2:] for j in range(L)]
        present = [coo.count > j for j in range(L)]
        with m.If(dut.coo.valid):
            m.d.comb += [Assume(coo.count <= L), Assume(coo.last | (coo.count > 0))]
            for j in range(L):
                with m.If(present[j]):
                    m.d.comb += Assume(indices[j] < V)
                    if j:
                        m.d.comb += Assume(indices[j] > indices[j - 1])
                    else:
                        m.d.comb += Assume(~(coo_open & prev_any) | (indices[0] > prev_index))
        with m.If(fire(dut.coo)):
            last_index = indices[0]
            for j in range(1, L):
                last_index = Mux(present[j], indices[j], last_index)
            m.d.sync += [prev_any.eq((coo_open & prev_any) | present[0]),
                         prev_index.eq(Mux(present[0], last_index, prev_index))]
        # The window of the dense beat offered is complete on the COO side.
        window_end = (dense_beat + 1) * L - 1
        complete = done["coo"] | (coo_open & prev_any & (prev_index >= window_end))

        if self.rigid:
            header, hit, outer, sign, code = self._rigid(m, dut, held, watch, dense_beat,
                                                         present, indices, coo_open)
            recorded = 1
        else:
            header, hit, outer, sign, code, reached = self._record(
                m, dut, fire, watch, watch_lane, watch_window, dense_beat, present, indices,
                coo_open, done)
            recorded = done["hdr"] & (done["coo"] | (coo_open & reached))

        # The unit's promises (module docstring).
        with m.If(fire(dut.dense)):
            m.d.comb += [Assert(done["hdr"]), Assert(complete)]
        m.d.comb += [Assert(dut.hdr.ready), Assert(dut.coo.ready)]

        # Every output beat answers a dense beat taken at least `latency` cycles before.
        taken = Mux(done["dense"], W, dense_beat)
        given = Mux(done["o"], W, out_beat)
        history = Signal(dut.latency, name="dense_history")
        m.d.sync += history.eq(Cat(fire(dut.dense), history[:-1]))
        matured = Signal(range(W + 1), name="matured")    # old enough and not yet out
        matured_now = matured + history[-1]
        m.d.sync += matured.eq(matured_now - fire(dut.o))
        m.d.comb += Assert(matured + sum(history) == taken - given)
        with m.If(dut.o.valid):
            m.d.comb += [Assert(~done["o"]), Assert(matured_now > 0)]
            with m.If(out_beat == watch_window):
                m.d.comb += Assert(recorded)

                def group(name):
                    return Mux(hit, Mux(outer, header[f"out_{name}"], header[f"in_{name}"]),
                               header[f"mid_{name}"])
                expected = Signal(signed(dut.data_bits), name="expected")
                m.d.comb += [
                    expected.eq(dequantized(
                        q=code, mn=group("min"), d=group("d"), hit=hit, outer=outer,
                        sign=sign, t_lo_o=header.t_lo_o, t_lo_i=header.t_lo_i,
                        t_hi_i=header.t_hi_i, t_hi_o=header.t_hi_o, data_bits=dut.data_bits,
                        frac_bits=dut.frac_bits)),
                    Assert(_select(dut.o.payload.x, watch_lane, L) == expected),
                ]
        return m

    def _rigid(self, m, dut, held, watch, dense_beat, present, indices, coo_open):
        """The same header, COO map and codes in every chunk; returns the watched element's
        header, flags and code."""
        L, V, W = dut.lanes, dut.vec_len, dut.windows
        coo = dut.coo.payload
        header = dut.hdr_layout(held(self.hdr_in.as_value(), "hdr_const"))
        flags_of = held(self.map_in, "map_const")
        flags = [flags_of[3 * p:3 * p + 3] for p in range(V)]      # hit, outer, sign
        codes = held(self.codes_in, "codes_const")
        with m.If(dut.hdr.valid):
            m.d.comb += Assume(dut.hdr.payload.as_value() == header.as_value())
        with m.If(dut.dense.valid):
            for w in range(W):
                with m.If(dense_beat == w):
                    m.d.comb += Assume(dut.dense.payload.codes.as_value()
                                       == codes[4 * w * L:4 * (w + 1) * L])
        # The chunk's COO entries name exactly the positions of the map, with its flags.
        seen = Signal(V, name="coo_seen")
        named = [0] * V
        with m.If(dut.coo.valid):
            for j in range(L):
                with m.If(present[j]):
                    m.d.comb += Assume(_select(flags, indices[j], V)
                                       == Cat(Const(1, 1), coo.entries[j][1], coo.entries[j][0]))
                for p in range(V):
                    named[p] = named[p] | (present[j] & (indices[j] == p))
            with m.If(coo.last):
                for p in range(V):
                    m.d.comb += Assume(~flags[p][0] | (coo_open & seen[p]) | named[p])
        with m.If(dut.coo.valid & dut.coo.ready):
            m.d.sync += seen.eq(Mux(coo_open, seen, 0) | Cat(*named))
        hit, outer, sign = (_select(flags, watch, V)[n] for n in range(3))
        if self.group is not None:
            m.d.comb += Assume(Cat(hit, outer) == Cat(*(Const(b, 1) for b in GROUPS[self.group])))
        code = _select([codes[4 * p:4 * p + 4] for p in range(V)], watch, V)
        return header, hit, outer, sign, code

    def _record(self, m, dut, fire, watch, watch_lane, watch_window, dense_beat, present,
                indices, coo_open, done):
        """Free data per chunk, recorded: the header, the watched code and the watched
        position's COO flags; ``reached``: an entry at or past the position was taken."""
        L = dut.lanes
        coo = dut.coo.payload
        header = Signal(dut.hdr_layout, name="rec_hdr")
        code = Signal(4, name="rec_code")
        hit, outer, sign, reached = (Signal(name=f"rec_{n}")
                                     for n in ("hit", "outer", "sign", "reached"))
        with m.If(fire(dut.hdr)):
            m.d.sync += header.eq(dut.hdr.payload)
        with m.If(fire(dut.dense) & (dense_beat == watch_window)):
            m.d.sync += code.eq(_select(dut.dense.payload.codes, watch_lane, L))
        names = [present[j] & (indices[j] == watch) for j in range(L)]
        with m.If(fire(dut.coo)):
            m.d.sync += [
                hit.eq((coo_open & hit) | (sum(names) != 0)),
                outer.eq((coo_open & outer)
                         | (sum(names[j] & coo.entries[j][1] for j in range(L)) != 0)),
                sign.eq((coo_open & sign)
                        | (sum(names[j] & coo.entries[j][0] for j in range(L)) != 0)),
                reached.eq((coo_open & reached)
                           | (sum(present[j] & (indices[j] >= watch) for j in range(L)) != 0)),
            ]
        return header, hit, outer, sign, code, reached


def _row(overrides, label="", engine="kind", depth=DEPTH, **options):
    _, params = resolve_params("oaken_dequantizer", None, overrides)
    configuration = ",".join(f"{key}={value}" for key, value in overrides.items()) + label
    return Proof("oaken_dequantizer", configuration, DEQUANTIZER_PROPERTY,
                 partial(DequantizerHarness, **options), params, engine, depth)



QUANTIZER_PROPERTY = "thresholds/COO = the contract"
#: The quantizer's shape: two lanes (a COO beat packs two entries), two windows.
QUANTIZER_SHAPE = {"lanes": 2, "vec_len": 4, "data_bits": 2, "frac_bits": 1}
#: The quantizer's bounded rows: (``pipeline``, cycles from reset).
QUANTIZER_BOUNDED = ((0, 16), (12, 26))


class QuantizerHarness(UnitHarness):
    """``oaken_quantizer``'s ``hdr`` and ``coo`` outputs against contract 8 / contract 4, the same
    chunk (thresholds and values, free in the first cycle, ordered thresholds) in every chunk:

    * every ``hdr`` beat carries the chunk's thresholds;
    * the chunk's COO entries are, in index order, exactly its elements outside the middle
      group, each with its group bit (outer) and sign bit (``s < 0``: inner ``x < 0``, outer the
      lower side); ``last`` on the beat that completes them;

    and nothing comes out that no chunk asked for (an ``hdr`` beat or a COO ``last`` beyond the
    chunks taken). The input offers a beat in every cycle and the outputs take theirs at once
    (``stall``: the longest wait of an output beat)."""

    def __init__(self, dut, *, stall=0):
        self.stall = stall
        self.t_in = Signal(dut.hdr_layout, name="t_in")            # its thresholds only
        self.x_in = Signal(dut.vec_len * dut.data_bits, name="x_in")
        super().__init__(dut)

    @property
    def free_ports(self):
        return [*super().free_ports, self.t_in.as_value(), self.x_in]

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        L, V, W, D = dut.lanes, dut.vec_len, dut.windows, dut.data_bits
        started = assume_input_hold(m, dut, self.ports)

        held = partial(_held, m, started)

        t = dut.hdr_layout(held(self.t_in.as_value(), "t_const"))
        xs = held(self.x_in, "x_const")
        x = [xs[D * p:D * (p + 1)].as_signed() for p in range(V)]
        m.d.comb += Assume((t.t_lo_o <= t.t_lo_i) & (t.t_lo_i <= t.t_hi_i)
                           & (t.t_hi_i <= t.t_hi_o))
        # The input: every beat offered at once, the chunk's thresholds and values.
        beat = Signal(range(W), name="in_beat")
        with m.If(fire(dut.i)):
            m.d.sync += beat.eq(Mux(beat == W - 1, 0, beat + 1))
        m.d.comb += Assume(dut.i.valid)
        payload = dut.i.payload
        m.d.comb += [Assume(payload[name] == t[name]) for name in THRESHOLD_NAMES]
        for w in range(W):
            with m.If(beat == w):
                m.d.comb += [Assume(payload.x[lane] == x[w * L + lane]) for lane in range(L)]
        for name in ("hdr", "dense", "coo"):
            stream = getattr(dut, name)
            stalled = Signal(range(self.stall + 2), name=f"{name}_stalled")
            m.d.sync += stalled.eq(Mux(stream.valid & ~stream.ready, stalled + 1, 0))
            m.d.comb += Assume(~(stream.valid & ~stream.ready) | (stalled < self.stall))

        # Chunks taken and not yet answered, per output (nothing from nothing).
        chunk_end = fire(dut.i) & (beat == W - 1)
        coo = dut.coo.payload
        for name, answered in (("hdr", fire(dut.hdr)), ("coo", fire(dut.coo) & coo.last)):
            owed = Signal(range(16), name=f"{name}_owed")
            m.d.sync += owed.eq(owed + chunk_end - answered)
            m.d.comb += Assume(~chunk_end | (owed < 15))
            offered = dut.hdr.valid if name == "hdr" else dut.coo.valid & coo.last
            with m.If(offered):
                m.d.comb += Assert(owed > 0)

        # contract 4 groups with the chunk's thresholds: the outliers in index order.
        outer = [(v < t.t_lo_o) | (v > t.t_hi_o) for v in x]
        inner = [(t.t_lo_i <= v) & (v <= t.t_hi_i) for v in x]
        outlier = [o | i for o, i in zip(outer, inner)]
        sign = [Mux(o, v < t.t_lo_o, v < 0) for o, v in zip(outer, x)]
        rank = [sum(outlier[:p]) if p else Const(0, 1) for p in range(V)]  # outliers before p
        total = sum(outlier)
        with m.If(dut.hdr.valid):
            m.d.comb += [Assert(dut.hdr.payload[name] == t[name]) for name in THRESHOLD_NAMES]
        emitted = Signal(range(V + 1), name="coo_emitted")     # entries of this chunk so far
        with m.If(fire(dut.coo)):
            m.d.sync += emitted.eq(Mux(coo.last, 0, emitted + coo.count))
        with m.If(dut.coo.valid):
            m.d.comb += [Assert(coo.count <= L), Assert(emitted + coo.count <= total),
                         Assert(~coo.last | (emitted + coo.count == total))]
            for j in range(L):
                r = emitted + j
                index, group, entry_sign = Const(0, 6), Const(0, 1), Const(0, 1)
                for p in range(V):
                    here = outlier[p] & (rank[p] == r)
                    index = Mux(here, p, index)
                    group = Mux(here, outer[p], group)
                    entry_sign = Mux(here, sign[p], entry_sign)
                with m.If(coo.count > j):
                    m.d.comb += Assert(coo.entries[j] == Cat(entry_sign, group, index))
        return m


#: Threshold fields of the streams (contract 4 order).
THRESHOLD_NAMES = ("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o")


def _quantizer_row(pipeline, engine, depth, **options):
    overrides = {**QUANTIZER_SHAPE, "pipeline": pipeline}
    _, params = resolve_params("oaken_quantizer", None, overrides)
    configuration = ",".join(f"{key}={value}" for key, value in overrides.items())
    return Proof("oaken_quantizer", configuration, QUANTIZER_PROPERTY,
                 partial(QuantizerHarness, **options), params, engine, depth)


def proofs():
    """``oaken_dequantizer``: at ``pipeline`` 0 one proof per group of the watched element
    (rigid data), bounded checks with free data per chunk at ``pipeline`` 0 and at the default;
    ``oaken_quantizer``: bounded checks at ``pipeline`` 0 and at the default (see the module
    docstring)."""
    rows = [_row({**SHAPE, "pipeline": 0}, f",group={group}", group=group)
            for group in GROUPS]
    rows += [_row({**SHAPE, "pipeline": pipeline}, ",free", "bmc", depth, rigid=False)
             for pipeline, depth in BOUNDED]
    rows += [_quantizer_row(pipeline, "bmc", depth) for pipeline, depth in QUANTIZER_BOUNDED]
    return rows
