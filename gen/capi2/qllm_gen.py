"""FuseSoC runs this file (``qllm_gen`` of ``qllm_cores.core``): the generator is
:func:`qllm_cores.gen.fusesoc.main`."""

import sys

try:
    from qllm_cores.gen.fusesoc import main
except ImportError as error:
    sys.exit(f"qllm_gen: error: {sys.executable} cannot import qllm_cores ({error}): install "
             f"qllm-cores into the python3 that FuseSoC finds on PATH")

sys.exit(main())
