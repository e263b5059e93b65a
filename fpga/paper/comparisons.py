# amaranth: UnusedElaboratable=no
# (the components are converted to RTLIL, not elaborated into a design)
"""Orizuru's comparisons counted in the RTL: the magnitude comparators of the elaborated
component, beside KLLM's formula and the golden model's count.

:func:`rtl_comparators` converts a registered unit to RTLIL (Amaranth's own netlist, before any
synthesis) and counts its ``$lt``/``$le``/``$gt``/``$ge`` cells whose operands are at least
``min_width`` bits wide (Orizuru's value keys are 16 bits; the tree structure widens them with
the availability and tie bits), instances of submodules multiplied through the hierarchy. In
the unrolled structure (``pipeline`` >= 1) every comparison of a vector is a comparator of its
own, used once per vector, so the count is the comparisons per vector; the paper's
time-multiplexed trees reuse n/2 initialisation comparators and one per tree for the
maintenances, so there it counts hardware, not comparisons.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from amaranth.back import rtlil

from qllm_cores.gen.registry import resolve_params

__all__ = ["OrizuruCount", "orizuru_counts", "rtl_comparators"]

_COMPARE_CELLS = ("$lt", "$le", "$gt", "$ge")
_MODULE = re.compile(r"^module (\S+)$(.*?)^end$", re.M | re.S)
_CELL = re.compile(r"^\s*cell (\S+) \S+$(.*?)^\s*end$", re.M | re.S)
_WIDTH = re.compile(r"parameter \\([AB])_WIDTH (\d+)")


def rtl_comparators(unit: str, config: str | None = None, overrides: dict | None = None,
                    *, min_width: int = 16) -> int:
    """Magnitude comparators with both operands at least ``min_width`` bits wide in the RTLIL
    of ``unit`` (registered; ``config`` and ``overrides`` as for
    :func:`gen.registry.resolve_params`), counted through the module hierarchy."""
    spec, params = resolve_params(unit, config, overrides or {})
    text = rtlil.convert(spec.build(params), name="top", emit_src=False)
    local, children = {}, {}
    for name, body in _MODULE.findall(text):
        comparators, instances = 0, Counter()
        for kind, cell in _CELL.findall(body):
            if kind in _COMPARE_CELLS:
                widths = dict(_WIDTH.findall(cell))
                if all(int(widths.get(side, 0)) >= min_width for side in "AB"):
                    comparators += 1
            elif not kind.startswith("$"):
                instances[kind] += 1
        local[name], children[name] = comparators, instances

    def total(module, seen=()):
        if module in seen:
            raise ValueError(f"recursive module {module} in the RTLIL of {unit}")
        return local.get(module, 0) + sum(
            count * total(child, seen + (module,)) for child, count in children[module].items()
            if child in local)

    top = "\\top" if "\\top" in local else "top"
    return total(top)


@dataclass(frozen=True)
class OrizuruCount:
    """Comparisons of one Orizuru configuration: the paper's formula, the golden model's count
    and the RTL's comparators."""

    n: int
    k: int
    formula: float
    golden: int
    unrolled: int
    tree: int


def orizuru_counts(n: int = 16, k: int = 2) -> OrizuruCount:
    """KLLM's ``1.5N + 2k log2(N)``, the golden model's count
    (:func:`golden.kllm.orizuru.comparison_count`) and :func:`rtl_comparators` of the unrolled
    structure (``pipeline=3``: comparisons per vector) and of the tree structure (the paper's
    time-multiplexed trees: hardware comparators) at ``n`` inputs and ``k`` per side."""
    from qllm_cores.golden.kllm.orizuru import comparison_count

    levels = n.bit_length() - 1
    return OrizuruCount(
        n, k, 1.5 * n + 2 * k * levels, int(comparison_count(n, k)),
        rtl_comparators("orizuru", overrides={"n": n, "k": k, "structure": "unrolled",
                                              "pipeline": 3}),
        rtl_comparators("orizuru", overrides={"n": n, "k": k, "structure": "tree"}))
