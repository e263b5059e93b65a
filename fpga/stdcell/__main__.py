"""``qllm stdcell``: the same as ``qllm stdcell``."""

import sys

from .cli import main

sys.exit(main())
