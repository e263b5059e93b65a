"""Stream plumbing shared by the units.

The rules followed are those of :mod:`amaranth.lib.stream`: a transfer happens on a clock edge where
``valid`` and ``ready`` are both high; once ``valid`` is high, neither ``valid`` nor ``payload``
change until the transfer; ``ready`` may depend combinationally on ``valid``.
"""

__all__ = ["output_register"]


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
