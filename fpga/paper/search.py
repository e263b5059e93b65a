"""The depth search of ``make paper``: per row and library, the shallowest ``pipeline`` depth
whose estimated clock (the standard-cell flow's, :mod:`fpga.stdcell.flow`) meets the paper's
clock scaled to the library by FO4 delay, and depth 0 beside it.

Target on a library = paper clock x 28 nm FO4 / the library's FO4 (:func:`target_mhz`). The
search assumes the estimated clock does not fall as the depth grows: depth 0 first (always
reported); if it misses, one guess from its clock, then the deepest, then bisection between
the deepest miss and the shallowest hit (:meth:`DepthSearch.wanted`): at most
3 + ceil(log2(max depth)) syntheses per design, library and clock.
A design and depth is synthesised once per library however many rows ask for it; each
synthesis is :func:`run_synthesis` (the Verilog generated in the worker, then
:func:`fpga.stdcell.stdcell_job`, cached in ``build/cache``). Jobs run on a local process pool
as the searches ask for them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

from qllm_cores.fpga.area import find_units
from qllm_cores.fpga.jobs import Failure, LocalExecutor, call, result_of
from qllm_cores.fpga.stdcell import stdcell_job
from qllm_cores.gen.verilog import generate

from .rows import Design

__all__ = ["DepthSearch", "run_searches", "run_synthesis", "target_mhz"]


def target_mhz(paper_mhz: float, fo4_28nm_ps: float, fo4_library_ps: float) -> float:
    """The paper's clock on a library of FO4 delay ``fo4_library_ps``: ``paper_mhz`` x
    ``fo4_28nm_ps`` / ``fo4_library_ps``."""
    return paper_mhz * fo4_28nm_ps / fo4_library_ps


def run_synthesis(design: Design, depth: int, library: str, build_dir: str,
                  cache_dir: str | None, liberty) -> dict:
    """Job: generate ``design`` at ``pipeline=depth`` into
    ``<build_dir>/paper/verilog/<library>/<slug>/p<depth>/`` and map it to ``library``
    (:func:`fpga.stdcell.stdcell_job`); returns its result dict."""
    root = Path(build_dir) / "paper"
    out_dir = root / "verilog" / library / design.slug / f"p{depth}"
    generate(design.unit, {**dict(design.overrides), "pipeline": depth}, out_dir,
             config=design.config)
    unit = find_units(out_dir, [design.unit])[0]
    return stdcell_job(unit, library, root / "stdcell" / design.slug / f"p{depth}",
                       None if cache_dir is None else Path(cache_dir), liberty)


@dataclass
class DepthSearch:
    """The search of one design on one library for one ``target`` clock (MHz).

    ``depths``: the legal depths. :meth:`wanted` reads ``known`` (depth -> result dict or
    `~fpga.jobs.Failure`, shared by every search of the same design and library) and names
    the depth to synthesise next; once it names none, ``chosen`` is the answer and ``met``
    whether it meets the target."""

    target: float
    depths: range
    chosen: int | None = None
    met: bool = False

    def meets(self, result: dict) -> bool:
        return result["fmax_mhz"] >= self.target

    def wanted(self, known: dict) -> list[int]:
        """The depth to synthesise next (a list of at most one; empty when done).

        Depth 0 first. If it misses at clock f, a guess: the depth at which its path, cut
        evenly, would meet the target, ceil(target / f) - 1 (within 1..max); if that misses
        too, the deepest (if it misses, the answer is the deepest, marked not met); once a
        depth meets, bisection between it and the deepest miss below it. A failed synthesis
        counts as a miss without a clock (the guess after a failed depth 0 is 1)."""
        if self.done():
            return []
        if 0 not in known:
            return [0]
        hits = sorted(depth for depth, result in known.items()
                      if not isinstance(result, Failure) and self.meets(result))
        last = self.depths[-1]
        if not hits:
            lo = max(known)
            if lo >= last:
                self.chosen, self.met = last, False       # even the deepest misses
                return []
            if lo > 0:
                return [last]
            if isinstance(known[0], Failure):
                return [1]
            guess = math.ceil(self.target / known[0]["fmax_mhz"]) - 1
            return [min(max(guess, 1), last)]
        hi = hits[0]
        if hi == 0:
            self.chosen, self.met = 0, True
            return []
        lo = max(depth for depth in known if depth < hi)  # a miss (0 at least)
        if hi - lo <= 1:
            self.chosen, self.met = hi, True
            return []
        return [(lo + hi) // 2]

    def done(self) -> bool:
        return self.chosen is not None


def run_searches(searches: dict, designs: dict, libraries: dict, build_dir: Path,
                 cache_dir: Path | None, jobs: int, progress) -> tuple[dict, list]:
    """Run every search to its end, ``jobs`` syntheses at a time.

    ``searches``: key -> `DepthSearch`, the key a tuple ``(design key, library, ...)``;
    ``designs``: design key -> `Design`; ``libraries``: library -> Liberty files. Returns
    ``(results, failures)``: ``results[(design key, library)][depth]`` = result dict (or a
    `~fpga.jobs.Failure`), ``failures`` the failed jobs.

    A free worker takes a search's next depth before any depth 0 still waiting (a search is a
    chain of syntheses: its later steps decide the wall time), then the designs with the most
    depths first (their searches are the likeliest to go on)."""
    results: dict = {}
    queued: dict = {}                       # (pair, depth) -> priority, not yet submitted
    running: set = set()
    failures: list = []
    started = time.perf_counter()
    order = {key[0]: index for index, key in enumerate(searches)}
    count = 0

    def priority(pair, depth):
        return (depth == 0, -len(pair[0].depths()), order[pair[0]], pair[1])

    def refill(executor):
        for key, search in searches.items():
            pair = (key[0], key[1])
            for depth in search.wanted(results.setdefault(pair, {})):
                if (pair, depth) not in running:
                    queued.setdefault((pair, depth), priority(pair, depth))
        while queued and len(running) < jobs:
            pair, depth = min(queued, key=queued.get)
            del queued[pair, depth]
            running.add((pair, depth))
            executor.submit((pair, depth), call, run_synthesis, designs[pair[0]], depth,
                            pair[1], str(build_dir),
                            None if cache_dir is None else str(cache_dir),
                            [str(path) for path in libraries[pair[1]]])

    with LocalExecutor(jobs) as executor:
        refill(executor)
        for (pair, depth), outcome in executor.completed():
            running.discard((pair, depth))
            result = result_of((pair, depth), outcome)
            count += 1
            if isinstance(result, Failure):
                failures.append(result)
                status = "FAILED " + result.headline
            else:
                status = (f"{result['nand2_eq']:,.0f} NAND2-eq, {result['fmax_mhz']:.0f} MHz"
                          + (" (cached)" if result.get("cached") else
                             f" ({result['seconds']:.0f} s)"))
            progress(f"[{count}, {time.perf_counter() - started:.0f} s] "
                     f"{designs[pair[0]].label} pipeline={depth} on {pair[1]}: {status}")
            results[pair][depth] = result
            refill(executor)
    return results, failures
