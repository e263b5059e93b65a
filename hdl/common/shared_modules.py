"""Components emitted once as a Verilog module and instantiated by name.

A design built from many identical units (KLLM's 273 16-input Orizuru units for a 4096-wide
vector) elaborates each unit again if every copy is an Amaranth submodule: 273 netlists for one
circuit. :class:`SharedModules` lets the design choose at elaboration time: by default a unit
is an ordinary submodule (the Amaranth simulator runs the design as usual); once ``emit`` is
set (``gen.verilog`` sets it before converting), a unit becomes an ``Instance`` of a named
module, the first component of each name is kept in :attr:`SharedModules.modules`, and the
generator converts each of them once and appends its Verilog to the top's.
"""

from amaranth.hdl import ClockSignal, Instance, ResetSignal, Value
from amaranth.lib.wiring import In

__all__ = ["SharedModules"]


class SharedModules:
    """The shared units of one design, by Verilog module name.

    Attributes
    ----------
    emit : bool
        False (default): :meth:`add` adds the component as a submodule. True: an ``Instance``
        of the module named ``module`` (set by the generator before elaboration).
    modules : dict
        Module name -> the first component added under that name (filled when ``emit``).
    prefix : str
        Prepended to the name of every module instantiated (set by the generator with
        ``emit``, so that several configurations share one Verilog project); the keys of
        :attr:`modules` stay unprefixed.
    """

    def __init__(self):
        self.emit = False
        self.modules = {}
        self.prefix = ""

    def add(self, m, name, module, component):
        """Add ``component`` to ``m`` as ``name``: a submodule, or an ``Instance`` of the
        Verilog module ``module`` connected to the component's own port signals (so the
        parent drives and reads ``component``'s members either way).

        Every component added under one ``module`` name must elaborate to the same circuit
        (the caller names the module after the parameters that shape it). The module's ports
        are named as :func:`amaranth.back.verilog.convert` names a component's members, with
        the ``sync`` domain's ``clk`` and ``rst``.
        """
        if not self.emit:
            m.submodules[name] = component
            return
        self.modules.setdefault(module, component)
        # The component's own netlist is the module's (converted once, from the first one
        # added); this copy only lends its port signals, so it is used without elaboration.
        component._MustUse__used = True
        ports = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
        for path, member, value in component.signature.flatten(component):
            direction = "i" if member.flow == In else "o"
            ports[f"{direction}_{'__'.join(str(part) for part in path)}"] = Value.cast(value)
        m.submodules[name] = Instance(self.prefix + module, **ports)
