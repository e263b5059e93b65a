"""The AXI4-Stream form of a unit (``qllm verilog --axis``): its name and its manifest.

``generate(..., axis=True)`` wraps the unit in :class:`hdl.common.axis.AxisWrapper` and
writes ``<prefix><unit>_axis.v`` (top module ``<prefix><unit>_axis``) and
``<prefix><unit>_axis.json``. The manifest is the unit's (same ``unit``, ``params``, ``ports``
layouts: the ``tdata`` packing) with the wrapper's ``top``, ``clock`` and ``reset`` and an
``axis`` section (docs/integration.md).
"""

from qllm_cores.hdl.common.axis import CLOCK, RESET, AxisWrapper

__all__ = ["SUFFIX", "axis_header", "axis_manifest", "wrap"]

#: Appended to the unit's name: the file stem and the top module of the AXI4-Stream form.
SUFFIX = "_axis"


def wrap(component, unit):
    """``component`` (a unit named ``unit``) in AXI4-Stream names; ``ValueError`` naming the
    unit if it cannot be (no stream port)."""
    try:
        return AxisWrapper(component)
    except ValueError as error:
        raise ValueError(f"--axis: unit {unit!r}: {error}") from None


def axis_manifest(described, wrapper):
    """The manifest of the AXI4-Stream form from the unit's manifest ``described`` (not
    modified): top module with :data:`SUFFIX`, clock ``aclk``, reset ``aresetn`` (active low,
    synchronous), and ``axis``: AXI prefix -> ``{"port", "direction", "payload_width",
    "tdata_width", "tlast"}`` (:attr:`~hdl.common.axis.AxisWrapper.axis_ports`)."""
    return {
        **described,
        "top": described["top"] + SUFFIX,
        "clock": {"name": CLOCK, "edge": "rising"},
        "reset": {"name": RESET, "polarity": "low", "synchronous": True},
        "axis": {prefix: dict(port) for prefix, port in wrapper.axis_ports.items()},
    }


def axis_header(described):
    """The comment line the AXI4-Stream form adds to the file header: which AXI prefix is
    which stream of the unit, and where ``tlast`` is its ``last`` field."""
    pairs = ", ".join(f"{prefix} = {port['port']}" + (" (tlast = last)" if port["tlast"] else "")
                      for prefix, port in described["axis"].items())
    return f"// AXI4-Stream form of {described['unit']}: {pairs}\n"
