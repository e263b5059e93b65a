"""Shared pytest configuration."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The benches here are short: a Verilator build's C++ compile is most of their time, and -O0
# compiles it about twice as fast as Verilator's -Os (verif.runner.cxx_optimization).
os.environ.setdefault("QLLM_CXX_OPT", "-O0")
