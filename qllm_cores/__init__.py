"""qllm-cores: verified, parameterized RTL for the key units of four LLM-accelerator papers
(KLLM, Oaken, P3-LLM, AccLLM), with bit-exact golden models, benches, proofs and open
FPGA / standard-cell flows.

Subpackages: :mod:`qllm_cores.hdl` (Amaranth components), :mod:`qllm_cores.golden` (NumPy
models), :mod:`qllm_cores.gen` (unit registry, Verilog emission), :mod:`qllm_cores.verif`
(benches, proofs), :mod:`qllm_cores.fpga` (synthesis flows, reports). In a source checkout
they are the repository's top-level folders (``hdl/`` is ``qllm_cores.hdl``), mapped by the
package build (``pyproject.toml``); the command line is ``qllm`` (:mod:`qllm_cores.cli`).
"""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("qllm-cores")
except PackageNotFoundError:          # imported from a checkout that was never installed
    __version__ = "0.1.0+unknown"

__all__ = ["__version__"]
