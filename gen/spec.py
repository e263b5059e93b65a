# amaranth: UnusedElaboratable=no
# (Components built here are handed to a converter, a bench or a board build; one a constructor
# refused half-way, or one built only for its signature, is not a forgotten submodule.)
"""What the registry holds about a unit (:class:`UnitSpec`, :class:`ReportConfig`) and how it
names code (:func:`load_object`); the units themselves are in ``gen/units/``, one module per
paper, gathered in :data:`gen.registry.UNITS`."""

import importlib
import inspect
from dataclasses import dataclass, field
from functools import cached_property

__all__ = ["ReportConfig", "UnitSpec", "load_object"]


def load_object(reference):
    """The object a ``"module:name"`` string names (``name`` may be dotted: ``"m:Class.attr"``),
    imported on demand: the registry names factories and golden adapters without importing
    them.

    Raises
    ------
    ValueError
        If ``reference`` is not of the form ``"module:name"``.
    ImportError, AttributeError
        If the module or the name does not exist.
    """
    module_name, sep, name = str(reference).partition(":")
    if not sep or not module_name or not name:
        raise ValueError(f"expected a 'module:name' reference, not {reference!r}")
    target = importlib.import_module(module_name)
    for part in name.split("."):
        target = getattr(target, part)
    return target


@dataclass(frozen=True)
class ReportConfig:
    """One row of ``make report`` for a unit (:mod:`fpga.report` builds its rows from these).

    Attributes
    ----------
    config : str or None
        Named configuration of the unit, or None for the defaults.
    overrides : tuple of (str, value)
        Parameters set on top of the configuration.
    baseline_of : str, tuple of str or None
        Label(s) of the report row(s) (``unit@config``) this row is a second baseline of
        (the report's ratio table compares them with it too).
    fmax : bool
        Whether to place and route the row (False: area only, the reason given where the row
        is listed).
    fmax_skip : tuple of str
        Devices of the report's Fmax columns (``fpga.fmax`` targets) not tried for this row:
        it goes straight to the column's next, larger device (the reason given where the row
        is listed).
    """

    config: str | None = None
    overrides: tuple = ()
    baseline_of: str | tuple[str, ...] | None = None
    fmax: bool = True
    fmax_skip: tuple[str, ...] = ()


@dataclass(frozen=True)
class UnitSpec:
    """How to build one unit.

    Parameters
    ----------
    name : str
        Unit name; also the Verilog top module and the file stem in ``build/verilog``.
    factory : str
        ``"module:Class"`` of the :class:`amaranth.lib.wiring.Component`, imported lazily so
        that listing units does not elaborate anything.
    configs : dict
        Named configurations from the papers: name -> parameter overrides.
    testbench : str
        Dotted name of the cocotb test module in ``verif``.
    golden : str or None
        ``"qllm_cores.golden.<paper>.beats:<name>"``: the unit's beat-level golden adapter
        (:class:`golden.common.beats.BeatModel`: input beats -> expected output beats), shared by
        the bench and the board host; resolved lazily (:func:`load_object`, or
        ``verif.bench.golden_model(unit)``).
    doc : str or None
        The unit's documentation, relative to the repository root (``docs/units/...``).
    report : tuple of ReportConfig
        The unit's rows of ``make report`` (its registered baseline's rows are derived).
    benchmark : str or None
        ``"module:function"`` printing the unit's throughput table (``make bench``).
    summary : str
        One line for ``qllm list``.
    baseline : str or None
        Unit to compare area with (``make area`` prints the ratio when both are synthesized).
    ops_per_cycle : int or None
        Operations (MACs, comparisons...) per cycle at full rate, for area-efficiency figures.
    result : str
        What one result of the unit is (``"MAC"``, ``"vector"``...): a unit and its baseline
        name the same thing, so their throughputs compare.
    rate : callable or None
        ``rate(params) -> float``: results per cycle at full rate (no backpressure, the
        pipeline full) for resolved ``params``; throughput = Fmax x rate.
    """

    name: str
    factory: str
    configs: dict = field(default_factory=dict)
    testbench: str | None = None
    golden: str | None = None
    doc: str | None = None
    report: tuple = ()
    benchmark: str | None = None
    summary: str = ""
    baseline: str | None = None
    ops_per_cycle: int | None = None
    result: str = "beat"
    rate: object = None

    @cached_property
    def defaults(self):
        """Every constructor parameter with its default, read from the factory's signature
        (keyword-only parameters, in order); ``None`` where the unit chooses (``orizuru``'s
        ``structure``, the counter's ``weight_bits`` outside mode ``ik``)."""
        signature = inspect.signature(load_object(self.factory))
        return {name: parameter.default for name, parameter in signature.parameters.items()
                if parameter.kind is inspect.Parameter.KEYWORD_ONLY}

    def resolved(self, component):
        """The parameters ``component`` was built with, as it resolved them (a ``None``
        default replaced by what the unit chose; parameters that do not apply, i.e. still
        ``None``, left out): what the manifest records."""
        return {name: getattr(component, name) for name in self.defaults
                if getattr(component, name, None) is not None}

    def results_per_cycle(self, params):
        """Results per cycle at full rate for resolved ``params`` (None if not declared)."""
        return None if self.rate is None else float(self.rate(params))

    def build(self, params):
        """Return the component for fully resolved ``params``."""
        return load_object(self.factory)(**params)
