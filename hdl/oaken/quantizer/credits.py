"""Flow control of the Oaken quantizer (:class:`hdl.oaken.quantizer.quantizer.OakenQuantizer`):
its LUT-RAM queues, the credits that guarantee room in every queue for every beat in flight
towards it (nothing inside the unit stalls), and the invariants that tie the credits to the
queues' levels and to the beats in the stages (proofs only, :mod:`hdl.common.invariants`).
"""

from types import SimpleNamespace

from amaranth.hdl import Mux, Signal

from ...common.invariants import invariant
from .coding import writes_ordered
from .parts import LutQueue
from .stages import chunk_position, register

__all__ = ["Credits", "below_after", "make_queues"]


def make_queues(m, unit):
    """Add the queues of ``unit`` (an ``OakenQuantizer``) to ``m`` as its submodules
    ``chunk_buffer``, ``chunk_stats``, ``hdr_queue``, ``dense_queue`` and ``coo_prequeue``
    (:class:`~hdl.oaken.quantizer.parts.LutQueue`, sized by the unit), and offer the ``hdr``
    and ``dense`` outputs from their queues (``valid`` a flip-flop, the payload the queue's
    asynchronous read, a transfer pops it).

    Returns a namespace of the queues: ``buffer``, ``stats``, ``hdr``, ``dense``, ``pre``. Their
    writes and the other reads are driven by the stages.
    """
    m.submodules.chunk_buffer = buf = LutQueue(width=unit.word_layout.size,
                                               depth=unit.buffer_depth)
    m.submodules.chunk_stats = cst = LutQueue(width=unit.stats_layout.size,
                                              depth=unit.stats_depth)
    m.submodules.hdr_queue = hq = LutQueue(width=unit.hdr_layout.size,
                                           depth=unit.hdr_depth, track=True)
    m.submodules.dense_queue = dq = LutQueue(width=unit.dense_layout.size,
                                             depth=unit.out_depth, track=True)
    m.submodules.coo_prequeue = pq = LutQueue(
        width=unit.pre_layout.size, depth=unit.pre_depth, track=True,
        entry=lambda bits: writes_ordered(unit.pre_layout(bits)))
    m.d.comb += [
        unit.hdr.valid.eq(hq.valid), unit.hdr.payload.eq(hq.r_data),
        hq.r_en.eq(unit.hdr.valid & unit.hdr.ready),
        unit.dense.valid.eq(dq.valid), unit.dense.payload.eq(dq.r_data),
        dq.r_en.eq(unit.dense.valid & unit.dense.ready),
    ]
    return SimpleNamespace(buffer=buf, stats=cst, hdr=hq, dense=dq, pre=pq)


class Credits:
    """The credits of ``unit`` (an ``OakenQuantizer``) and the two decisions they make, built
    into ``m``: ``unit.i.ready`` (a flip-flop: room in the chunk buffer and, at a chunk's last
    beat, in the header queue) and :attr:`issue_ok` (a flip-flop: a chunk's statistics are
    queued, and the ``dense`` queue and the COO pre-queue have room).

    Per queue a count of its entries and of the beats in flight towards it, ``+1`` when a beat
    enters the path, ``-1`` when one leaves the queue: ``buffer`` (:attr:`take`, :attr:`issue`),
    ``hdr`` (a chunk's last beat taken, :attr:`hdr_sent`), ``dense`` (:attr:`issue`,
    :attr:`dense_sent`), ``pre`` (:attr:`issue`, :attr:`gear`). Each room check is registered
    (the comparison of the count's next value, :func:`below_after`), so that the decisions
    come from flip-flops.

    The stages drive the inputs :attr:`issue` (a beat issues to the coding pipeline),
    :attr:`gear` (the gearbox reads the pre-queue), :attr:`stats_write` and :attr:`stats_pop`
    (a chunk's statistics are queued / its last beat issues).

    Attributes
    ----------
    take : Signal
        A beat transfers on ``unit.i``.
    first_in, last_in, in_position, last_in_next : Value
        The input beat's position in its chunk
        (:func:`~hdl.oaken.quantizer.stages.chunk_position`).
    not_last_copy : Signal
        ``~last_in``, a flip-flop of its own (for the header credit).
    hdr_sent, dense_sent : Signal
        A transfer on ``hdr`` / ``dense``, a cycle late.
    credit : dict of str to Signal
        The counts (``buffer``, ``hdr``, ``dense``, ``pre``).
    chunks : Signal
        Chunks whose statistics are queued.
    ready, issue_ok : Signal
        The decisions (``ready`` drives ``unit.i.ready``).
    """

    def __init__(self, m, platform, unit):
        W = unit.windows
        # Each credit check is registered (the comparison of the count's next value), so that
        # i.ready and the issue decision come from flip-flops.
        take, issue, gear = Signal(name="take"), Signal(name="issue"), Signal(name="gear_read")
        first_in, last_in, in_position, last_in_next = chunk_position(m, platform, take,
                                                                      windows=W, name="in_beat")
        room, credit = {}, {}
        # The header credit counts chunks at their last beat from a copy of the `last` flag
        # of its own (held inverted, so that synthesis does not merge it with `last_in`):
        # `take & last_in` also enables the threshold queue's write, which places it far
        # from the credit (measured: 5.9 ns of routing on that path, 140.6 MHz on ECP5).
        # (Reset state: not the last beat, as `last_in`; one-beat chunks: always the last.)
        not_last_copy = Signal(name="in_beat_not_last_copy", init=int(W > 1))
        m.d.sync += not_last_copy.eq(~last_in_next)
        # The outputs' transfers return their credits a cycle late (registered: the consumer's
        # ready reaches one flip-flop, not the counters; the queues have a slot more for it).
        hdr_sent = register(m, unit.hdr.valid & unit.hdr.ready, "hdr_sent", reset=True)
        dense_sent = register(m, unit.dense.valid & unit.dense.ready, "dense_sent", reset=True)
        for name, depth, up, down in (
                ("buffer", unit.buffer_depth, take, issue),
                ("hdr", unit.hdr_depth, take & ~not_last_copy, hdr_sent),
                ("dense", unit.out_depth, issue, dense_sent),
                ("pre", unit.pre_depth, issue, gear)):
            count = Signal(range(depth + 1), name=f"{name}_credit")
            m.d.sync += count.eq(count + up - down)
            credit[name] = count
            room[name] = below_after(m, count, depth, up, down, name=f"{name}_room")
        # Chunks whose statistics are queued (their beats are all in the chunk buffer): the
        # back issues while there is one and room downstream; the decision is a flip-flop.
        stats_write, stats_pop = Signal(name="stats_write"), Signal(name="stats_pop")
        chunks = Signal(range(unit.stats_depth + 1), name="chunks_ready")
        m.d.sync += chunks.eq(chunks + stats_write - stats_pop)
        # chunks after this cycle != 0, from flags of the register (no adder on the path).
        many, one = Signal(name="chunks_many"), Signal(name="chunks_one")
        m.d.comb += [many.eq(chunks > 1), one.eq(chunks == 1)]
        chunks_left = stats_write | many | (one & ~stats_pop)
        ready = Signal(name="i_ready", init=1)
        issue_ok = Signal(name="issue_ok")
        m.d.sync += [
            ready.eq(room["buffer"] & (~last_in_next | room["hdr"])),
            issue_ok.eq(chunks_left & room["dense"] & room["pre"]),
        ]
        m.d.comb += [
            unit.i.ready.eq(ready),
            take.eq(unit.i.valid & ready),
        ]
        self.take, self.issue, self.gear = take, issue, gear
        self.first_in, self.last_in = first_in, last_in
        self.in_position, self.last_in_next = in_position, last_in_next
        self.not_last_copy, self.hdr_sent, self.dense_sent = not_last_copy, hdr_sent, dense_sent
        self.credit, self.chunks = credit, chunks
        self.stats_write, self.stats_pop = stats_write, stats_pop
        self.ready, self.issue_ok = ready, issue_ok

    def check(self, m, platform, unit, *, queues, marks, stats_marks, coded, issued, gearbox):
        """(Proofs only) State the credits' invariants and drive ``unit.owed``.

        ``queues``: :func:`make_queues`' namespace; ``marks``: the valid bits of a chunk's
        last beat in every register from the input to the header queue, the first
        ``stats_marks`` of them before the statistics queue; ``coded``: the beats in the
        coding pipeline's registers; ``issued``: the beats of the chunk being coded issued so
        far; ``gearbox``: the :class:`~hdl.oaken.quantizer.gearbox.Gearbox` (its own
        conditions join the credits'). Elsewhere nothing is built.
        """
        W = unit.windows
        credit, ready, issue_ok = self.credit, self.ready, self.issue_ok
        # Every credit is an entry of its queue or a beat on its way there (the header's: a
        # chunk's last beat in a register of the front, `marks`); the returns of the outputs
        # lag a cycle; the registered room checks agree with the counts; the gearbox reads a
        # beat only with room for its writes.
        invariant(m, platform,
                  self.not_last_copy == ~self.last_in,
                  credit["hdr"] == queues.hdr.level + sum(marks) + self.hdr_sent,
                  credit["hdr"] <= unit.hdr_depth,
                  ~(ready & self.last_in) | (credit["hdr"] < unit.hdr_depth),
                  credit["dense"] == queues.dense.level + coded + self.dense_sent,
                  credit["pre"] == queues.pre.level + coded,
                  credit["dense"] <= unit.out_depth, credit["pre"] <= unit.pre_depth,
                  ~issue_ok | ((credit["dense"] < unit.out_depth)
                               & (credit["pre"] < unit.pre_depth)),
                  *gearbox.conditions(), name="credit_invariant")
        # The chunk buffer holds the beats of the chunk being taken, of the chunks on their
        # way to the statistics queue or in it, less those of the chunk being coded issued so
        # far; a chunk is being coded only while its statistics are queued.
        measured = sum(marks[:stats_marks])
        chunks = self.chunks
        invariant(m, platform,
                  credit["buffer"] <= unit.buffer_depth,
                  ~ready | (credit["buffer"] < unit.buffer_depth),
                  credit["buffer"] == self.in_position + W * (measured + chunks) - issued,
                  ~issue_ok | (chunks != 0), (issued == 0) | (chunks != 0),
                  name="buffer_invariant")
        if getattr(platform, "formal", False):
            owed = unit.owed
            m.d.comb += [
                owed["position"].eq(self.in_position),
                owed["hdr"].eq(credit["hdr"] - self.hdr_sent),
                owed["dense"].eq(credit["dense"] - self.dense_sent + credit["buffer"]
                                 - self.in_position),
            ]


def below_after(m, count, limit, up, down, *, name):
    """``count + up - down < limit`` (``up``, ``down`` single bits), as a choice among three
    comparisons of the ``count`` register, so that ``up`` and ``down`` pass one LUT level
    (combinational)."""
    flags = {}
    for offset in (-1, 0, 1):
        flag = Signal(name=f"{name}_{('lt', 'le', 'le2')[offset + 1]}")
        bound = limit + offset
        # (a bound beyond the register's range would be a constant comparison)
        m.d.comb += flag.eq(count < bound if bound < 1 << len(count) else 1)
        flags[offset] = flag
    result = Signal(name=name)
    m.d.comb += result.eq(Mux(up & ~down, flags[-1], Mux(down & ~up, flags[1], flags[0])))
    return result
