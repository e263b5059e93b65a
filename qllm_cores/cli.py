"""The ``qllm`` command: one entry point for the command lines of :mod:`qllm_cores.gen`,
:mod:`qllm_cores.verif` and :mod:`qllm_cores.fpga`.

``qllm <command> ...`` runs what ``python -m qllm_cores.<package> <command> ...`` runs:

* ``list``, ``verilog``, ``elaboration``: :mod:`qllm_cores.gen` (units, Verilog emission);
* ``sim``, ``bench``, ``lint``, ``formal``: :mod:`qllm_cores.verif` (benches, proofs);
* ``model-report``: :mod:`qllm_cores.golden.llm.report` (perplexity of SmolLM2-135M per
  quantization scheme, beside the papers' claims);
* every other command (``area``, ``fmax``, ``report``, ``sweep``, ``stdcell``, ``bitstream``,
  ``host``, ...): :mod:`qllm_cores.fpga`.
"""

import importlib
import sys

__all__ = ["COMMANDS", "REPORTS", "main"]

#: Command -> the package whose ``__main__`` runs it.
COMMANDS = {
    **dict.fromkeys(("list", "verilog", "elaboration"), "qllm_cores.gen"),
    **dict.fromkeys(("sim", "bench", "lint", "formal"), "qllm_cores.verif"),
}
#: Command -> the module whose ``main(argv)`` runs it (``argv`` without the command name).
REPORTS = {"model-report": "qllm_cores.golden.llm.report"}
_FPGA = "qllm_cores.fpga"


def main(argv=None):
    """Run ``qllm`` with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[0].replace("\n", " "))
        print("usage: qllm <command> [options]; commands: " + ", ".join(
            [*COMMANDS, *REPORTS, *_fpga_commands()]) + ". `qllm <command> --help` for each.")
        return 0 if argv else 2
    if argv[0] in REPORTS:
        return importlib.import_module(REPORTS[argv[0]]).main(argv[1:]) or 0
    package = COMMANDS.get(argv[0], _FPGA)
    return importlib.import_module(f"{package}.__main__").main(argv) or 0


def _fpga_commands():
    from qllm_cores.fpga.__main__ import COMMANDS as STUDIES

    return ["area", *STUDIES]


if __name__ == "__main__":
    raise SystemExit(main())
