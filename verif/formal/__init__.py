"""Formal proofs, pip only: ``qllm formal`` (``make formal``).

A proof is a *harness*: an Amaranth component that instantiates a unit, assumes the rules of
its inputs (``Assume``) and asserts a property of its outputs (``Assert``), its free inputs
listed in ``free_ports``. :func:`prove` converts it to RTLIL in ``build/formal/<case>/`` and runs
an engine of :mod:`verif.formal.engines` there (unbounded by default: k-induction, then
PDR). The properties:

* :mod:`verif.formal.stream`: the stream hold rule on every output of every unit;
* :mod:`verif.formal.counting`: the counting of beats (nothing from nothing, a bounded number
  in flight, the unit drains);
* :mod:`verif.formal.transaction`: the harness of the data properties (every output beat
  checked against the recorded input beat it answers), used by
  :mod:`verif.formal.arith_accllm` (AccLLM's packed products), :mod:`verif.formal.arith_p3_oaken`
  (the P3 PE's lanes, the Oaken decomposer's groups) and :mod:`verif.formal.orizuru` (the top-k
  order and distinct indices).

:mod:`verif.formal.cases` lists every proof, generated from the unit registry, and prints the
summary table. A proof's ``mutation`` edits the harness's RTLIL text before the proof (the tests
seed one bug per property with :func:`verif.runner.edit_site` and expect FAIL with a trace).
"""

from __future__ import annotations

import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.back import rtlil

from qllm_cores.gen.registry import UNITS
from qllm_cores.hdl.common.invariants import FORMAL

from .engines import ENGINES, run_engine

__all__ = ["FormalResult", "Proof", "prove", "harness_rtlil"]

MODELS = Path(__file__).resolve().parent.parent / "models"
_ELABORATION = threading.Lock()


@dataclass(frozen=True)
class FormalResult:
    """One proof: ``status`` PASS, FAIL, UNKNOWN or ERROR."""

    case: str
    prop: str
    engine: str
    depth: int
    status: str
    seconds: float
    folder: Path
    detail: str = ""

    @property
    def traces(self) -> list[Path]:
        """Counterexample traces (not k-induction's step traces, which start from unreachable
        states)."""
        return sorted(path for path in self.folder.rglob("*.vcd")
                      if path.name != "trace_induct.vcd")


def harness_rtlil(harness) -> str:
    """The harness as RTLIL, top module ``top``, its free inputs as ports, elaborated for a
    proof (:data:`hdl.common.invariants.FORMAL`: the units assert their invariants)."""
    return rtlil.convert(harness, ports=harness.free_ports, name="top", emit_src=False,
                         platform=FORMAL)


def prove(harness, case: str, prop: str, *, engine: str = "auto", depth: int = 8,
          build_dir: str | os.PathLike = "build", mutation=None) -> FormalResult:
    """Prove ``harness`` in ``build_dir/formal/<case>/`` with ``engine`` (``depth``: the
    k-induction or bounded depth; the trace depth bound of ``pdr``). ``mutation`` takes the
    RTLIL text and returns a deliberately broken one. The harness may name Verilog models of
    vendor primitives it instantiates (``harness.models``: file names in ``verif/models``)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {sorted(ENGINES)}, not {engine!r}")
    folder = Path(build_dir) / "formal" / case
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    with _ELABORATION:                  # proofs run in threads; the tools in processes
        text = harness_rtlil(harness)
    if mutation is not None:
        text = mutation(text)
    (folder / "top.il").write_text(text)
    models = list(getattr(harness, "models", ()))
    for model in models:
        shutil.copy(MODELS / model, folder / model)
    used, verdict = run_engine(engine, folder, depth, models)
    return FormalResult(case, prop, used, depth, verdict.status, verdict.seconds, folder,
                        verdict.detail)


@dataclass(frozen=True)
class Proof:
    """One row of the table: ``harness(unit_object)`` builds the harness around the unit built
    from ``params``."""

    unit: str
    configuration: str
    prop: str
    harness: object
    params: dict = field(default_factory=dict)
    engine: str = "auto"
    depth: int = 8
    #: Why a bounded row is bounded (shown in the table).
    note: str = ""

    @property
    def case(self) -> str:
        slug = self.prop.replace(" ", "-").replace("/", "-")
        bounded = "-bounded" if self.engine == "bmc" else ""
        return f"{self.unit}-{self.configuration}-{slug}{bounded}"

    def run(self, build_dir="build", mutation=None):
        dut = UNITS[self.unit].build(self.params)
        return prove(self.harness(dut), self.case, self.prop, engine=self.engine,
                     depth=self.depth, build_dir=build_dir, mutation=mutation)
