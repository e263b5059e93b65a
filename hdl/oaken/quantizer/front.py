"""The front of the Oaken quantizer (:class:`hdl.oaken.quantizer.quantizer.OakenQuantizer`): the
input beat with its chunk's thresholds, the threshold checks beside it, and the composed
decomposers (Oaken Fig. 9(a) step 1) with the chunk position and the threshold queue beside
them.
"""

from amaranth.hdl import Cat, Const, Mux, Signal, signed

from ...common.invariants import invariant
from ...common.lanes import split_lanes
from ...common.stream_stage import distinct_copies, pack_fields
from ..decomposer import THRESHOLDS, OakenDecomposer
from .parts import LutQueue
from .stages import register

__all__ = ["check_thresholds", "decompose", "hold_input", "shadow_valid"]


def hold_input(m, unit, credits, marks):
    """The input beat of ``unit`` (an ``OakenQuantizer``) with its chunk's thresholds: those
    of the chunk's first beat, held (registers loaded at the first beat's transfer) and
    substituted on the later beats.

    ``credits``: the :class:`~hdl.oaken.quantizer.credits.Credits` (the transfer ``take`` and
    the beat's position). Returns ``(front, valid, used, held)``: ``front`` the beat's fields
    (``x``, ``first``, ``last``, the used thresholds) and ``valid`` its valid bit, both
    registered once with the ``hold`` cut (and that register's mark of a chunk's last beat
    appended to ``marks``); ``used`` the thresholds the chunk is coded with (combinational:
    the first beat's payload, then ``held``).
    """
    D = unit.data_bits
    p = unit.i.payload
    held = {n: Signal(signed(D), name=f"held_{n}", reset_less=True) for n in THRESHOLDS}
    used = {n: Signal(signed(D), name=f"chunk_{n}") for n in THRESHOLDS}
    for n in THRESHOLDS:
        m.d.comb += used[n].eq(Mux(credits.first_in, p[n], held[n]))
    with m.If(credits.take & credits.first_in):
        m.d.sync += [held[n].eq(p[n]) for n in THRESHOLDS]
    front = {"x": p.x.as_value(), "last": credits.last_in, "first": credits.first_in,
             **{n: used[n] for n in THRESHOLDS}}
    valid = credits.take
    if "hold" in unit.cuts:
        front = {key: register(m, value, f"hold_{key}") for key, value in front.items()}
        valid = register(m, valid, "hold_valid", reset=True)
        marks.append(valid & front["last"])
    return front, valid, used, held


def check_thresholds(m, unit, credits, front, held):
    """Drive the sticky ``threshold_error`` of ``unit``: it rises when a chunk's first beat
    carries misordered thresholds (not ``t_lo_o <= t_lo_i <= t_hi_i <= t_hi_o``) or a later
    beat carries thresholds different from ``held`` (the first beat's).

    Beside the data path (``front``: :func:`hold_input`'s beat). Without the ``hold`` cut the
    checks are on the payload and the error rises a cycle after the transfer. With it the
    order is compared on the registered thresholds (the first beat's are the used ones) in
    two registered halves, then joined; the equality and the beat's position are registered
    three times beside it, then the verdict: the error rises five cycles after the transfer.
    """
    D, cuts = unit.data_bits, unit.cuts
    p, take, first_in = unit.i.payload, credits.take, credits.first_in
    # (With the "hold" cut the order's halves are upper half less / equal, lower half less or
    # equal: a 16-bit comparison with its operands' routes measured 7.4 ns on ECP5.)
    names = THRESHOLDS
    if "hold" in cuts:
        tests = {"valid": take, "first": first_in,
                 "same": Cat(*(p[n] == held[n] for n in names))}
        for stage in (1, 2, 3):
            tests = {key: register(m, value, f"threshold_{key}_{stage}",
                                   reset=key == "valid")
                     for key, value in tests.items()}
        half = D // 2
        pairs = list(zip(names, names[1:]))
        # (the upper half signed, the lower half unsigned; data_bits >= 2, so both exist)
        upper_lt = register(m, Cat(*(front[a][half:].as_signed()
                                     < front[b][half:].as_signed() for a, b in pairs)),
                            "threshold_upper_lt")
        upper_eq = register(m, Cat(*(front[a][half:] == front[b][half:]
                                     for a, b in pairs)), "threshold_upper_eq")
        lower_le = register(m, Cat(*(front[a][:half] <= front[b][:half]
                                     for a, b in pairs)), "threshold_lower_le")
        tests["order"] = register(m, upper_lt | (upper_eq & lower_le), "threshold_order")
    else:
        tests = {"valid": take, "first": first_in,
                 "order": Cat(*(p[a] <= p[b] for a, b in zip(names, names[1:]))),
                 "same": Cat(*(p[n] == held[n] for n in names))}
    fault = Signal(name="threshold_fault")
    m.d.comb += fault.eq(tests["valid"] & Mux(tests["first"], ~tests["order"].all(),
                                              ~tests["same"].all()))
    if "hold" in cuts:
        fault = register(m, fault, "threshold_fault_reg", reset=True)
    error = Signal(name="threshold_error_reg")
    m.d.comb += unit.threshold_error.eq(error)
    with m.If(fault):
        m.d.sync += error.eq(1)


def decompose(m, platform, unit, credits, front, used, valid, marks):
    """Oaken's decomposer (Fig. 9(a) step 1), never stalled: ``unit.decomposer_parts``
    :class:`~hdl.oaken.decomposer.OakenDecomposer` side by side (submodules
    ``decomposer_<k>``), each on its group of lanes of ``front["x"]`` with its own copy of
    the chunk's thresholds, their outputs always ready (a fixed delay).

    ``front``, ``used``, ``valid``: :func:`hold_input`'s. Returns ``(decomposers, side,
    threshold_queue)``: the decomposers; ``side`` the beat's ``first`` and ``last`` flags
    delayed like the decomposers (a register per stage; the marks of a chunk's last beat in
    them appended to ``marks``); and the queue (submodule ``threshold_queue``, a
    :class:`~hdl.oaken.quantizer.parts.LutQueue`) where the chunk's thresholds, written at
    its last input beat, wait for its statistics (the caller reads it).
    """
    L, D, cuts = unit.lanes, unit.data_bits, unit.cuts
    # One decomposer per group of lanes (four at the paper configuration), each with its
    # own copy of the held thresholds (:func:`~hdl.common.stream_stage.distinct_copies`): a
    # register feeds four lanes' comparators, not all of them.
    parts, per = unit.decomposer_parts, L // unit.decomposer_parts
    xs = split_lanes(m, front["x"], D, L, name="front_x")
    held_copies = {n: (distinct_copies(m, used[n], parts, name=f"hold_{n}")
                       if "hold" in cuts else [front[n]] * parts) for n in THRESHOLDS}
    decomposers = []
    for k in range(parts):
        dec = OakenDecomposer(lanes=per, data_bits=D, pipeline=unit.decomposer_pipeline)
        m.submodules[f"decomposer_{k}"] = dec
        decomposers.append(dec)
        thresholds = {n: held_copies[n][k] for n in THRESHOLDS}
        m.d.comb += [
            dec.i.valid.eq(valid),
            dec.i.payload.eq(pack_fields(dec.in_layout, {
                "x": Cat(*xs[k * per:(k + 1) * per]), **thresholds})),
            dec.o.ready.eq(1),
        ]
    # The chunk position beside them: the decomposers are a fixed delay line. The chunk's
    # thresholds wait in a small queue for its statistics (written at its last beat).
    side = {key: front[key] for key in ("first", "last")}
    m.submodules.threshold_queue = tq = LutQueue(width=4 * D, depth=unit.threshold_depth)
    m.d.comb += [
        tq.w_en.eq(credits.take & credits.last_in),
        tq.w_data.eq(Cat(*(used[n] for n in THRESHOLDS))),
    ]
    for k in range(decomposers[0].latency):
        side = {key: register(m, value, f"side{k}_{key}") for key, value in side.items()}
        marks.append(shadow_valid(m, platform, valid, k, decomposers[0]) & side["last"])
    return decomposers, side, tq


def shadow_valid(m, platform, valid, k, decomposer):
    """(Proofs only) ``valid`` delayed ``k + 1`` cycles: the valid bit of the beat in the
    decomposer's stage ``k`` (its own is internal), asserted equal to its output valid
    after its last stage. Elsewhere a constant 0 (no logic)."""
    if not getattr(platform, "formal", False):
        return Const(0, 1)
    delayed = valid
    for stage in range(k + 1):
        delayed = register(m, delayed, f"shadow_valid{stage}", reset=True)
    if k == decomposer.latency - 1:
        invariant(m, platform, delayed == decomposer.o.valid, name="shadow_invariant")
    return delayed
