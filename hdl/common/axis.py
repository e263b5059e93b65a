"""AXI4-Stream names around a unit: :class:`AxisWrapper` (``qllm verilog --axis``).

The wrapper changes names, not behaviour: every stream of the unit keeps its handshake rules
(contract section 0) and its payload packing; the clock and reset take AXI's names. The rules
(docs/integration.md):

* **Ports.** Input stream ``p`` becomes ``s_axis_tdata``, ``s_axis_tvalid``, ``s_axis_tready``
  (and ``s_axis_tlast``, below); output stream ``p`` becomes ``m_axis_t*``. Where the unit has
  several streams of one direction, each carries its name: ``s_axis_<p>_t*`` / ``m_axis_<p>_t*``
  (``oaken_dequantizer``: ``s_axis_hdr_*``, ``s_axis_dense_*``, ``s_axis_coo_*``, ``m_axis_*``).
  No ``tkeep``, ``tstrb``, ``tid``, ``tdest`` or ``tuser``: every byte of a beat is data.
* **tdata.** The payload bits, packed as in the manifest (first field at bit 0), zero-padded
  to a whole number of bytes; on inputs the pad bits are ignored, on outputs they are 0.
* **tlast.** Present on a stream whose payload is a struct with a 1-bit field named ``last``.
  On an output ``tlast`` is that field (which stays in ``tdata`` too). On an input ``tlast``
  *is* the field: the unit's ``last`` comes from ``tlast``, and its bit in ``tdata`` is
  ignored, so that a packet (an AXI-Stream frame) ends exactly where the unit's run ends.
* **Clock and reset.** ``aclk`` (rising edge) and ``aresetn``, active low and synchronous
  (the unit's ``rst`` is ``~aresetn``). While ``aresetn`` is low, every ``tvalid`` and
  ``tready`` the wrapper drives is low, as the AXI4-Stream reset rules require.
* **Plain signals** (``coo_error``, ``threshold_error``) keep their names.
"""

from amaranth.hdl import Cat, ClockDomain, Const, Module, Shape, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxisWrapper", "CLOCK", "RESET", "last_field", "stream_ports"]

#: The wrapper's clock (rising edge) and its active-low synchronous reset.
CLOCK, RESET = "aclk", "aresetn"


def stream_ports(signature):
    """``{name: (direction, payload shape)}`` of the stream members of ``signature``
    (``amaranth.lib.stream`` interfaces: ``valid``, ``ready`` and ``payload``), direction
    ``"in"`` or ``"out"`` as seen from the component, in declaration order."""
    ports = {}
    for name, member in signature.members.items():
        if member.is_signature and {"valid", "ready", "payload"} <= set(
                member.signature.members):
            ports[name] = ("in" if member.flow == In else "out",
                           member.signature.members["payload"].shape)
    return ports


def last_field(shape):
    """Bit offset of the 1-bit field ``last`` of a struct payload ``shape``, or None (no such
    field: the stream has no ``tlast``)."""
    if not isinstance(shape, data.StructLayout):
        return None
    fields = dict(shape)
    if "last" not in fields or Shape.cast(fields["last"].shape).width != 1:
        return None
    return fields["last"].offset


class AxisWrapper(wiring.Component):
    """A unit with AXI4-Stream port names, ``aclk`` and ``aresetn`` (module docstring).

    Parameters
    ----------
    unit : wiring.Component
        A unit of the registry (one ``sync`` domain, ``lib.stream`` ports, plain signals).

    Attributes
    ----------
    unit : wiring.Component
        The wrapped unit (a submodule named ``unit``).
    axis_ports : dict
        AXI prefix (``"s_axis"``, ``"m_axis_hdr"``, ...) -> ``{"port", "direction",
        "payload_width", "tdata_width", "tlast"}``: the unit's stream, its payload and
        ``tdata`` widths and ``"last"`` where the stream has ``tlast`` (else None).
    plain_signals : list of str
        The unit's plain signals, ports of the wrapper under the same names.
    latency, primitives, synth_targets, shared_modules
        The unit's, where it has them (the generator reads them).

    Raises
    ------
    ValueError
        If the unit has no stream port, a member that is neither a stream nor a plain signal,
        or a plain signal whose name an AXI port takes.
    """

    def __init__(self, unit):
        streams = stream_ports(unit.signature)
        if not streams:
            raise ValueError(f"{type(unit).__name__} has no stream ports: nothing to name "
                             f"AXI4-Stream")
        members = {CLOCK: In(1), RESET: In(1)}
        self.axis_ports = {}
        counts = {direction: sum(d == direction for d, _ in streams.values())
                  for direction in ("in", "out")}
        for name, (direction, shape) in streams.items():
            prefix = "s_axis" if direction == "in" else "m_axis"
            if counts[direction] > 1:
                prefix = f"{prefix}_{name}"
            width = Shape.cast(shape).width
            tlast = last_field(shape) is not None
            self.axis_ports[prefix] = {"port": name, "direction": direction,
                                       "payload_width": width,
                                       "tdata_width": max(8, -(-width // 8) * 8),
                                       "tlast": "last" if tlast else None}
            forward, backward = (In, Out) if direction == "in" else (Out, In)
            members[f"{prefix}_tdata"] = forward(self.axis_ports[prefix]["tdata_width"])
            members[f"{prefix}_tvalid"] = forward(1)
            members[f"{prefix}_tready"] = backward(1)
            if tlast:
                members[f"{prefix}_tlast"] = forward(1)
        self.plain_signals = []
        for name, member in unit.signature.members.items():
            if name in streams:
                continue
            if not member.is_port:
                raise ValueError(f"{type(unit).__name__}.{name} is neither a stream nor a "
                                 f"plain signal")
            if name in members:
                raise ValueError(f"{type(unit).__name__}.{name}: the name of an AXI port")
            members[name] = member
            self.plain_signals.append(name)
        self.unit = unit
        for attribute in ("latency", "primitives", "synth_targets", "shared_modules"):
            if hasattr(unit, attribute):
                setattr(self, attribute, getattr(unit, attribute))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = unit = self.unit
        # The unit's `sync` domain, defined here: its clock is aclk, its reset ~aresetn.
        m.domains.sync = sync = ClockDomain("sync")
        running = getattr(self, RESET)
        m.d.comb += [sync.clk.eq(getattr(self, CLOCK)), sync.rst.eq(~running)]
        for prefix, described in self.axis_ports.items():
            port = getattr(unit, described["port"])
            tdata, tvalid, tready = (getattr(self, f"{prefix}_{signal}")
                                     for signal in ("tdata", "tvalid", "tready"))
            width = described["payload_width"]
            offset = last_field(port.payload.shape())
            if described["direction"] == "in":
                bits = tdata[:width]
                if offset is not None:
                    bits = Cat(tdata[:offset], getattr(self, f"{prefix}_tlast"),
                               tdata[offset + 1:width])
                m.d.comb += [
                    Value.cast(port.payload).eq(bits),
                    port.valid.eq(tvalid & running),
                    tready.eq(port.ready & running),
                ]
            else:
                pad = described["tdata_width"] - width
                m.d.comb += [
                    tdata.eq(Cat(Value.cast(port.payload), Const(0, pad))),
                    tvalid.eq(port.valid & running),
                    port.ready.eq(tready & running),
                ]
                if offset is not None:
                    m.d.comb += getattr(self, f"{prefix}_tlast").eq(port.payload["last"])
        for name in self.plain_signals:
            if self.signature.members[name].flow == In:
                m.d.comb += getattr(unit, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(unit, name))
        return m
