"""The four papers' quantizers, and the baselines they are compared with, as :class:`~.model.Hooks`.

Each scheme of :data:`SCHEMES` is a builder ``build(model, calibration_ids=None, **options)``
returning a :class:`Scheme`: its ``hooks`` (pass to :meth:`~.model.Model.perplexity` or
:meth:`~.model.Model.logits`), the paper and sections it follows, where it quantizes, and the
effective bits per element of each quantized tensor (:attr:`Scheme.bits`). The hooks simulate
quantization (quantize, then dequantize to float32) by calling the project's golden quantizers
of :mod:`golden.kllm`, :mod:`golden.oaken`, :mod:`golden.p3` and :mod:`golden.accllm`; this
module only adapts shapes, layouts and calibration to the model's hook points.

Common readings (choices where the papers leave the case open):

* **Which linear layers.** Weight and activation quantizers act on the seven linear layers of
  every block (``blk.{i}.attn_q`` ... ``ffn_down``); the LM head (``output``, tied to the token
  embedding in SmolLM2) stays float32 in every scheme, as is usual in the papers' evaluations.
  Weights are quantized once per name and cached (the ``weight`` hook returns the cache).
* **Groups that do not divide a row.** SmolLM2's rows are 576 or 1536 wide; a format with
  groups of 128 (P3-LLM's BitMoD, the INT4 weight baseline) pads each row with zeros to a
  multiple of the group and drops the padding after dequantization. Zeros change neither an
  absolute maximum nor a sum of squared errors, so this is the same as a shorter last group.
* **KV layout.** The ``kv`` hook sees ``[n_kv_heads, T, head_dim]``; one token's vector of one
  head is ``head_dim`` (64) values, the natural "per head" group of P3-LLM and AccLLM and one
  64-element Oaken chunk.
* **Effective bits** (:attr:`Scheme.bits`) are computed from the format with full groups:
  codes + (per-group metadata bits) / (group size) + sparse entries. Scales and zero points of
  floating type count 16 bits (FP16). Anything stored once per layer (codebooks, thresholds,
  smoothing factors) is not counted. Per-channel or per-token quantities use ``d_model`` as the
  vector length.
* **Calibration** (KLLM's activation codebooks, Oaken's thresholds) runs the float model once
  per calibration window with recording hooks; ``calibration_ids`` is one token sequence.
"""

import math
from dataclasses import dataclass, field

import numpy as np

from ..accllm.quant import (dequantize_a8, dequantize_kv4, dequantize_w2, prune_2_4,
                            quantize_a8, quantize_kv4, quantize_w2)
from ..kllm.kmeans import (activation_codebook, dequantize, dequantize_activation,
                           kmeans_codebook, kmeans_quantize, max_abs_scale, outliers_per_side,
                           quantize_activation, quantize_weights)
from ..oaken.baselines import effective_bitwidth, oaken_float_roundtrip, per_token_int4
from ..oaken.profile import DEFAULT_INNER, DEFAULT_OUTER, profile_layers
from ..p3.formats import (decode_s0e4m4, dequantize_bitmod, dequantize_e4m3,
                          dequantize_int4_asym, dequantize_int4_sym, dequantize_int8,
                          quantize_bitmod, quantize_e4m3, quantize_int4_asym, quantize_int4_sym,
                          quantize_int8, quantize_s0e4m4, smooth_keys)
from .model import Hooks

__all__ = ["Scheme", "SCHEMES", "build_scheme", "record_calibration", "FP16_BITS",
           "kllm_scheme", "oaken_scheme", "p3_scheme", "accllm_scheme",
           "int8_w8a8_scheme", "int4_w4_scheme", "int4_kv4_scheme"]

FP16_BITS = 16        # a stored floating-point scale or zero point


@dataclass(frozen=True)
class Scheme:
    """A built quantization scheme.

    ``name`` (the :data:`SCHEMES` key), ``paper`` (paper and sections), ``where`` (what is
    quantized at which hook), ``bits`` (quantized tensor -> effective bits per element, from the
    format; module docstring), ``hooks`` (the :class:`~.model.Hooks`), ``notes`` (readings
    where the paper is silent), ``state`` (calibration results: codebooks, thresholds)."""

    name: str
    paper: str
    where: str
    bits: dict
    hooks: Hooks
    notes: str = ""
    state: dict = field(default_factory=dict)


# --- shared pieces ---------------------------------------------------------------------------


def _is_block_linear(name):
    return name.startswith("blk.")


def _cached_weights(quantize):
    """A ``weight`` hook applying ``quantize(w) -> w'`` to block linears once per name."""
    cache = {}

    def weight(name, w):
        if not _is_block_linear(name):
            return w
        if name not in cache:
            cache[name] = np.asarray(quantize(np.asarray(w, np.float64)), np.float32)
        return cache[name]
    return weight


def _block_activations(quantize):
    """An ``activation`` hook applying ``quantize(name, x) -> x'`` to block linear inputs."""
    def activation(name, x):
        if not _is_block_linear(name):
            return x
        return np.asarray(quantize(name, np.asarray(x, np.float64)), np.float32)
    return activation


def _padded_rows(quantize, w, group):
    """``quantize`` (a ``[..., n]`` -> same-shape round trip needing ``n % group == 0``)
    applied to ``w`` padded with zeros along its last axis to a multiple of ``group``."""
    n = w.shape[-1]
    pad = -n % group
    if pad:
        w = np.concatenate([w, np.zeros(w.shape[:-1] + (pad,), w.dtype)], axis=-1)
    return quantize(w)[..., :n]


def record_calibration(model, calibration_ids, n_runs=1):
    """Run the float model on ``calibration_ids`` and record what calibration needs.

    The sequence is cut into ``n_runs`` consecutive windows of equal length (each a separate
    forward pass from position 0). Returns ``(activations, keys, values)``: ``activations``
    maps each block linear's name to its input rows ``[n_runs * T, in]`` (float64);
    ``keys`` and ``values`` are float64 ``[n_runs, n_layers, n_kv_heads, T, head_dim]``."""
    ids = np.asarray(calibration_ids)
    if ids.ndim != 1 or n_runs < 1 or ids.size < 2 * n_runs:
        raise ValueError(f"calibration_ids must be a 1-D sequence of >= {2 * n_runs} ids")
    length = ids.size // n_runs
    acts, keys, values = {}, [], []
    for run in range(n_runs):
        run_k, run_v = [], []

        def activation(name, x):
            acts.setdefault(name, []).append(np.asarray(x, np.float64))
            return x

        def kv(layer, k, v):
            run_k.append(np.asarray(k, np.float64))
            run_v.append(np.asarray(v, np.float64))
            return k, v
        model.logits(ids[run * length:(run + 1) * length], Hooks(activation=activation, kv=kv))
        keys.append(run_k)
        values.append(run_v)
    acts = {name: np.concatenate(xs) for name, xs in acts.items() if _is_block_linear(name)}
    return acts, np.array(keys), np.array(values)


def _need_calibration(name, calibration_ids):
    if calibration_ids is None:
        raise ValueError(f"scheme {name!r} needs calibration_ids (a calibration token sequence)")


# --- KLLM: K-Means weights and activations ---------------------------------------------------


def _kllm_weight(w, n_bits, kmeans_sample, seed):
    """KLLM section III-A weights (``w`` ``[out, in]``): :func:`golden.kllm.kmeans.
    quantize_weights` on ``w.T`` (its ``B`` is ``[in, out]``) with one k-means++ start
    (``n_init=1``, for cost; the golden default is 4), or, with ``kmeans_sample``, the
    same per-output-channel scaling with the codebook trained on that many randomly drawn
    normalized values (a cheaper calibration; the nearest-centroid step covers all values)."""
    b = w.T
    if kmeans_sample is None:
        q = quantize_weights(b, n_bits, seed=seed, n_init=1)
        return (dequantize(q.idx, q.centroids) * q.scale[None, :]).T
    scale = max_abs_scale(b, axis=0)
    normalized = b / np.where(scale > 0, scale, 1.0)[None, :]
    sample = np.random.default_rng(seed).choice(normalized.ravel(), kmeans_sample,
                                                replace=normalized.size < kmeans_sample)
    centroids = kmeans_codebook(sample, n_bits, seed=seed, n_init=1)
    return (dequantize(kmeans_quantize(normalized, centroids), centroids) * scale[None, :]).T


def kllm_bits(n_bits, d, fraction, index_bits=None):
    """KLLM activation bits per element of a ``d``-vector: ``n_bits`` codes, one FP16 per-token
    scale, and ``2 k`` FP16 outliers with a ``ceil(log2 d)``-bit index each
    (``k`` = :func:`golden.kllm.kmeans.outliers_per_side`)."""
    index_bits = math.ceil(math.log2(d)) if index_bits is None else index_bits
    k = outliers_per_side(d, fraction)
    return n_bits + (FP16_BITS + 2 * k * (FP16_BITS + index_bits)) / d


def kllm_scheme(model, calibration_ids=None, act_bits=4, weight_bits=4, fraction=0.01,
                kmeans_sample=None, seed=0):
    """KLLM (Wu et al., sections III-A, III-D, IV-C, V-A): weights of every block linear
    K-Means-quantized per output channel with one ``weight_bits`` codebook per layer; each
    activation token split by Orizuru's rule (``fraction`` total, FP16 outliers) and its
    inliers mapped to a ``act_bits`` codebook per layer trained offline on the calibration
    activations (:func:`golden.kllm.kmeans.activation_codebook`). ``kmeans_sample``: see
    :func:`_kllm_weight`. Needs ``calibration_ids``."""
    name = f"kllm-w{weight_bits}a{act_bits}"
    _need_calibration(name, calibration_ids)
    acts, _, _ = record_calibration(model, calibration_ids)
    codebooks = {}
    for layer_name, x in acts.items():            # q, k and v share their input: one codebook
        twin = layer_name.replace("attn_k", "attn_q").replace("attn_v", "attn_q")
        if twin not in codebooks:
            codebooks[twin] = activation_codebook(x, act_bits, fraction, seed=seed, n_init=1)
        codebooks[layer_name] = codebooks[twin]

    def activation(layer_name, x):
        cb = codebooks[layer_name]
        return np.stack([dequantize_activation(quantize_activation(row, cb, fraction), cb)
                         for row in x])
    d = model.config.d_model
    hooks = Hooks(weight=_cached_weights(
                      lambda w: _kllm_weight(w, weight_bits, kmeans_sample, seed)),
                  activation=_block_activations(activation))
    return Scheme(name, "KLLM, sections III-A, III-D, IV-C, V-A",
                  "block linear weights (K-Means per layer, per-output-channel scale); block "
                  "linear inputs (K-Means per layer, per-token scale, Orizuru outliers in FP16)",
                  {"weight": weight_bits + FP16_BITS / d,
                   "activation": kllm_bits(act_bits, d, fraction)}, hooks,
                  notes="attention (Q K^T, P V) stays float; codebooks unweighted (no Fisher "
                        "information)", state={"codebooks": codebooks})


# --- Oaken: offline thresholds, online KV quantization --------------------------------------


def oaken_scheme(model, calibration_ids=None, outer=DEFAULT_OUTER, inner=DEFAULT_INNER,
                 frac_bits=8, data_bits=16, n_runs=1):
    """Oaken (Kim et al., sections 4.3-4.5, 6.1): per layer, four group thresholds of K and of
    V profiled offline (:func:`golden.oaken.profile.profile_layers`, ``outer`` / ``inner``
    fractions) on the float model's KV of ``n_runs`` calibration windows; online, each
    64-element chunk (one head of one token) quantized with them
    (:func:`golden.oaken.baselines.oaken_float_roundtrip`). Values enter as the golden model's
    signed ``data_bits`` fixed point with ``frac_bits`` fractional bits (Q8.8 by default,
    saturated). Needs ``calibration_ids``."""
    _need_calibration("oaken-kv", calibration_ids)
    _, keys, values = record_calibration(model, calibration_ids, n_runs)
    one, top = 1 << frac_bits, (1 << (data_bits - 1)) - 1

    def fixed(x):
        return np.clip(np.rint(np.asarray(x, np.float64) * one), -top - 1, top).astype(np.int64)
    thresholds = {kind: profile_layers(fixed(kv), outer, inner, data_bits)
                  for kind, kv in (("k", keys), ("v", values))}
    vec_len = model.config.head_dim

    def kv(layer, k, v):
        return tuple(oaken_float_roundtrip(fixed(x), thresholds[kind][layer], vec_len) / one
                     for kind, x in (("k", k), ("v", v)))
    meta = 6 * (data_bits + frac_bits + 2) / vec_len
    bits = effective_bitwidth(outer, inner) + meta
    return Scheme("oaken-kv", "Oaken, sections 4.3-4.5, 6.1-6.2",
                  "keys (after RoPE) and values at the kv hook: per-layer offline thresholds, "
                  "4-bit middle/inner/outer groups, 8-bit COO outliers, per-chunk metadata",
                  {"key": bits, "value": bits}, Hooks(kv=kv),
                  notes=f"bits include six {data_bits + frac_bits + 2}-bit metadata values per "
                        f"{vec_len}-element chunk; without them {effective_bitwidth(outer, inner)}"
                        "; outlier share taken at the profiled outer + inner fractions",
                  state={"thresholds": thresholds})


# --- P3-LLM: BitMoD weights, FP8 activations, INT4-asym KV, S0E4M4 scores --------------------


def _bitmod(w, group):
    codes, sv_sel, scales = quantize_bitmod(w, group)
    return dequantize_bitmod(codes, sv_sel, scales, group)


def _int4_asym(x, group):
    q, zp, scales = quantize_int4_asym(x, group)
    return dequantize_int4_asym(q, zp, scales, group)


def p3_kv(k, v, head_dim):
    """P3-LLM section IV-A on one block's ``[heads, T, head_dim]`` keys and values: keys
    smoothed per channel by their max magnitude over all tokens (every token of a forward pass
    is a prefill token, :func:`golden.p3.formats.smooth_keys`), both INT4-asymmetric per head
    of one token, keys multiplied back by the factors (the factors are folded into the query
    in the paper; the product is the same)."""
    k_s, factors = smooth_keys(k)
    k_hat = _int4_asym(k_s, head_dim) * factors[..., None, :]
    return k_hat, _int4_asym(np.asarray(v, np.float64), head_dim)


def p3_scores(p):
    """P3-LLM section IV-B: probabilities rounded to FP16, then to FP8-S0E4M4 (no scale)."""
    return decode_s0e4m4(quantize_s0e4m4(np.asarray(p, np.float32).astype(np.float16)))


def p3_scheme(model, calibration_ids=None, group=128):
    """P3-LLM (Chen et al., sections IV-A to IV-D, V-B): BitMoD weights per ``group`` inputs,
    FP8-E4M3 activations per token, INT4-asymmetric KV per head with key smoothing, FP8-S0E4M4
    attention probabilities. No calibration."""
    head_dim, d = model.config.head_dim, model.config.d_model

    def activation(name, x):
        codes, scales = quantize_e4m3(x)
        return dequantize_e4m3(codes, scales)
    hooks = Hooks(weight=_cached_weights(lambda w: _padded_rows(
                      lambda x: _bitmod(x, group), w, group)),
                  activation=_block_activations(activation),
                  kv=lambda layer, k, v: p3_kv(k, v, head_dim),
                  scores=lambda layer, p: p3_scores(p))
    kv_bits = 4 + (FP16_BITS + 4) / head_dim
    return Scheme("p3", "P3-LLM, sections II-C, IV-A to IV-D, V-B",
                  "block linear weights (BitMoD FP4, per group), block linear inputs (FP8-E4M3 "
                  "per token), keys and values (INT4-asym per head, keys smoothed), attention "
                  "probabilities (FP8-S0E4M4)",
                  {"weight": 4 + (FP16_BITS + 2) / group, "activation": 8 + FP16_BITS / d,
                   "key": kv_bits, "value": kv_bits, "scores": 8.0}, hooks,
                  notes=f"KV group = head_dim {head_dim} (the paper's heads are 128); rows not a "
                        f"multiple of {group} padded with zeros; BitMoD metadata: FP16 scale "
                        "and 2-bit special-value selector per group")


# --- AccLLM: 2:4 pruning, W2, A8, KV4 --------------------------------------------------------


def accllm_scheme(model, calibration_ids=None, group=64):
    """AccLLM (Liang et al., sections IV-A1, IV-B): block linear weights 2:4 magnitude-pruned
    along the input axis (:func:`golden.accllm.quant.prune_2_4`) then 2-bit group-wise
    asymmetric (``group`` inputs, no clipping); block linear inputs 8-bit per token (signed);
    keys and values 4-bit asymmetric per token and head. No calibration."""
    head_dim, d = model.config.head_dim, model.config.d_model

    def weight(w):
        return dequantize_w2(quantize_w2(prune_2_4(w)[0], group))

    def kv(layer, k, v):
        return tuple(dequantize_kv4(quantize_kv4(x, head_dim)) for x in (k, v))
    hooks = Hooks(weight=_cached_weights(weight),
                  activation=_block_activations(lambda name, x: dequantize_a8(quantize_a8(x))),
                  kv=kv)
    kv_bits = 4 + (FP16_BITS + 4) / head_dim
    return Scheme("accllm-w2-kv4", "AccLLM, sections IV-A1, IV-B (W2A8KV4)",
                  "block linear weights (2:4 pruned, 2-bit per group), block linear inputs "
                  "(INT8 per token), keys and values (INT4-asym per token and head)",
                  {"weight": 0.5 * (2 + 2) + (FP16_BITS + 2) / group,
                   "activation": 8 + FP16_BITS / d, "key": kv_bits, "value": kv_bits}, hooks,
                  notes="weight bits per dense element: half the elements kept, each a 2-bit "
                        "code and a 2-bit position in its group of 4, plus an FP16 scale and a "
                        "2-bit zero per group; clipping factors 1 (no LoRA / training here)")


# --- baselines -------------------------------------------------------------------------------


def int8_w8a8_scheme(model, calibration_ids=None):
    """The W8A8 baseline (SmoothQuant-style, compared with by AccLLM and KLLM, without the
    smoothing): block linear weights symmetric INT8 per output channel, inputs symmetric INT8
    per token (:func:`golden.p3.formats.quantize_int8`)."""
    d = model.config.d_model

    def int8(x):
        return dequantize_int8(*quantize_int8(x))
    hooks = Hooks(weight=_cached_weights(int8),
                  activation=_block_activations(lambda name, x: int8(x)))
    return Scheme("int8-w8a8", "baseline W8A8 (AccLLM section VI-A; KLLM section V)",
                  "block linear weights (INT8 per output channel), inputs (INT8 per token)",
                  {"weight": 8 + FP16_BITS / d, "activation": 8 + FP16_BITS / d}, hooks)


def int4_w4_scheme(model, calibration_ids=None, group=128):
    """The INT4 weight-only baseline of P3-LLM's BitMoD comparison: block linear weights
    symmetric INT4 per ``group`` inputs (:func:`golden.p3.formats.quantize_int4_sym`)."""
    def int4(x):
        return dequantize_int4_sym(*quantize_int4_sym(x, group), group)
    return Scheme("int4-w4", "baseline INT4 weights (P3-LLM sections IV-C, VI)",
                  "block linear weights (symmetric INT4 per group)",
                  {"weight": 4 + FP16_BITS / group},
                  Hooks(weight=_cached_weights(lambda w: _padded_rows(int4, w, group))))


def bitmod_w4_scheme(model, calibration_ids=None, group=128):
    """BitMoD weights alone (P3-LLM section IV-C, Table VI's "4-bit BitMoD weight quant" step):
    block linear weights BitMoD FP4 per ``group`` inputs, as in :func:`p3_scheme`, nothing else
    quantized; the counterpart of :func:`int4_w4_scheme` at the same group."""
    return Scheme("bitmod-w4", "P3-LLM section IV-C (BitMoD weights only)",
                  "block linear weights (BitMoD FP4 per group)",
                  {"weight": 4 + (FP16_BITS + 2) / group},
                  Hooks(weight=_cached_weights(lambda w: _padded_rows(
                      lambda x: _bitmod(x, group), w, group))),
                  notes="BitMoD metadata: FP16 scale and 2-bit special-value selector per group")


def int4_kv4_scheme(model, calibration_ids=None, group=64):
    """The uniform 4-bit KV baseline of Oaken's comparison: keys and values asymmetric INT4
    per token in groups of ``group`` channels, FP16 scale and zero
    (:func:`golden.oaken.baselines.per_token_int4`)."""
    def kv(layer, k, v):
        return tuple(per_token_int4(x, group).recon for x in (k, v))
    bits = 4 + 2 * FP16_BITS / group
    return Scheme("int4-kv4", "baseline per-token INT4 KV (Oaken sections 6.1-6.2)",
                  "keys and values (asymmetric INT4 per token and group of channels)",
                  {"key": bits, "value": bits}, Hooks(kv=kv))


def _kllm(act_bits):
    def build(model, calibration_ids=None, **options):
        return kllm_scheme(model, calibration_ids, act_bits=act_bits, **options)
    build.__doc__ = f"``kllm_scheme(..., act_bits={act_bits})``."
    return build


#: Scheme name -> builder ``(model, calibration_ids=None, **options) -> Scheme``.
SCHEMES = {
    "kllm-w4a4": _kllm(4),
    "kllm-w4a3": _kllm(3),
    "oaken-kv": oaken_scheme,
    "p3": p3_scheme,
    "accllm-w2-kv4": accllm_scheme,
    "int8-w8a8": int8_w8a8_scheme,
    "int4-w4": int4_w4_scheme,
    "bitmod-w4": bitmod_w4_scheme,
    "int4-kv4": int4_kv4_scheme,
}


def build_scheme(name, model, calibration_ids=None, **options):
    """``SCHEMES[name](model, calibration_ids, **options)``; KeyError lists the names."""
    if name not in SCHEMES:
        raise KeyError(f"unknown scheme {name!r}; known: {', '.join(SCHEMES)}")
    return SCHEMES[name](model, calibration_ids, **options)

