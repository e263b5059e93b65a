"""Real tensors of a small LLM through the RTL units (issue 36, item 4).

The units' benches drive them with random beats; this module drives them with the tensors of
SmolLM2-135M (:mod:`golden.llm`) on real English text, quantized by the papers' golden
quantizers, and compares the RTL's output beats bit for bit with the units' golden adapters
(:data:`golden.adapters.MODELS`):

1. :func:`window_ids`, :func:`capture`: one float forward pass over a window of real text with
   recording hooks keeps every block linear's weight and input, the keys (after RoPE) and
   values, and the attention probabilities (:class:`Capture`).
2. One builder per unit family makes the unit's input beats and an ``info`` dict of what the
   data exercises: :func:`oaken_quantizer_inputs` (KV chunks, profiled thresholds) and
   :func:`oaken_dequantizer_inputs` (the quantizer's output); :func:`orizuru_inputs` (FP16
   tiles of block linear inputs); :func:`kllm_reductions` (KLLM's K-Means quantizers of a
   layer's weights and inputs) with :func:`idx_counter_inputs` and :func:`column_inputs`;
   :func:`p3_pe_inputs` and :func:`p3_pcu_inputs` (FP8-E4M3 inputs x BitMoD weights, and
   FP8-S0E4M4 probabilities x INT4-asymmetric values for the PCU).
3. :func:`run_on_rtl`: the unit in Verilator under random valid / ready
   (:func:`verif.runner.replay`) and the comparison with its adapter
   (:func:`verif.payload.compare_outputs`).

Readings, as in :mod:`golden.llm.schemes`: Oaken's values are the signed ``data_bits`` fixed
point with ``frac_bits`` fractional bits (saturated), one chunk per head vector of one token;
BitMoD groups of 128 inputs, a row padded with zeros to whole groups for quantization (the
padding is not sent); FP8-E4M3 scales per token; INT4-asymmetric values per head vector of
one token. Tests: ``tests/llm/test_rtl_real_tensors.py``; docs/llm.md, "The RTL on real
tensors".
"""

from dataclasses import dataclass

import numpy as np

from qllm_cores.gen import UNITS, resolve_params
from qllm_cores.golden.adapters import MODELS
from qllm_cores.golden.common.beats import pack_bits
from qllm_cores.golden.kllm import (activation_codebook, concat_indices, product_codebook,
                                    quantize_activation, quantize_weights, split_outliers)
from qllm_cores.golden.kllm.orizuru import beat_lanes
from qllm_cores.golden.llm import Hooks
from qllm_cores.golden.oaken import DEFAULT_INNER, DEFAULT_OUTER, decompose, profile_layers
from qllm_cores.golden.p3.formats import (quantize_bitmod, quantize_e4m3, quantize_int4_asym,
                                          quantize_s0e4m4)
from qllm_cores.verif.payload import compare_outputs
from qllm_cores.verif.runner import replay

__all__ = [
    "LINEAR_KINDS", "Capture", "window_ids", "capture", "linear_names", "pick",
    "fixed_point", "oaken_quantizer_inputs", "oaken_dequantizer_inputs",
    "orizuru_inputs", "KllmReductions", "kllm_reductions", "idx_counter_inputs",
    "column_inputs", "p3_pe_inputs", "p3_pcu_inputs", "RtlRun", "run_on_rtl",
]

#: The seven linear layers of a block, in the order of the forward pass.
LINEAR_KINDS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


# --------------------------------------------------------------------------- capture


@dataclass(frozen=True)
class Capture:
    """The float model's tensors on one window of text (:func:`capture`): ``ids`` the T token
    ids; ``weights`` / ``activations`` block linear name -> float32 weight ``[out, in]`` / input
    ``[T, in]``; ``keys`` (after RoPE), ``values`` float32 ``[layers, n_kv_heads, T,
    head_dim]``; ``scores`` float32 ``[layers, n_heads, T, T]`` (attention probabilities);
    ``config`` the :class:`golden.llm.Config`; ``layers`` the blocks run; ``tokens`` T."""

    ids: np.ndarray
    weights: dict
    activations: dict
    keys: np.ndarray
    values: np.ndarray
    scores: np.ndarray
    config: object
    layers: int
    tokens: int


def window_ids(model, tokens, topic="objects", offset=0):
    """``tokens`` token ids of real English text: the ``pydoc_data.topics`` entry ``topic``
    (the Python reference manual shipped with the interpreter) tokenized by ``model``, from
    token ``offset``. Raises ValueError if the text is shorter."""
    from pydoc_data.topics import topics

    ids = model.tokenize(topics[topic])
    if offset + tokens > len(ids) or tokens < 1:
        raise ValueError(f"topic {topic!r} has {len(ids)} tokens: cannot take {tokens} from "
                         f"offset {offset}")
    return np.asarray(ids[offset:offset + tokens])


def capture(model, ids):
    """One float forward pass of ``model`` (:class:`golden.llm.Model`) over ``ids`` with
    recording hooks (nothing is changed); returns the :class:`Capture`. The blocks run are the
    model's (``load_model(layers=N)`` keeps the first N)."""
    weights, activations, keys, values, scores = {}, {}, {}, {}, {}

    def weight(name, w):
        if name.startswith("blk."):
            weights[name] = w
        return w

    def activation(name, x):
        if name.startswith("blk."):
            activations[name] = np.array(x, np.float32)
        return x

    def kv(layer, k, v):
        keys[layer], values[layer] = np.array(k, np.float32), np.array(v, np.float32)
        return k, v

    def record_scores(layer, p):
        scores[layer] = np.array(p, np.float32)
        return p

    ids = np.asarray(ids)
    model.logits(ids, Hooks(weight=weight, activation=activation, kv=kv,
                            scores=record_scores))
    layers = len(keys)
    return Capture(ids, weights, activations, np.stack([keys[i] for i in range(layers)]),
                   np.stack([values[i] for i in range(layers)]),
                   np.stack([scores[i] for i in range(layers)]), model.config, layers, len(ids))


def linear_names(cap, per_block=None):
    """Block linear names of ``cap``: all seven of every block (``per_block`` None), or
    ``per_block`` of them per block, taken in turn from :data:`LINEAR_KINDS` so that
    consecutive blocks cover every kind (block ``i`` starts at kind ``i * per_block``)."""
    names = []
    for block in range(cap.layers):
        kinds = LINEAR_KINDS if per_block is None else [
            LINEAR_KINDS[(block * per_block + j) % len(LINEAR_KINDS)] for j in range(per_block)]
        names += [f"blk.{block}.{kind}" for kind in kinds]
    return names


def pick(total, count):
    """``count`` distinct indices spread evenly over ``range(total)`` (all if ``count`` is
    None or at least ``total``), first and last included."""
    if count is None or count >= total:
        return np.arange(total)
    return np.unique(np.rint(np.linspace(0, total - 1, count)).astype(np.int64))


# --------------------------------------------------------------------------- Oaken


_THRESHOLDS = ("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o")


def fixed_point(x, frac_bits=8, data_bits=16):
    """Signed ``data_bits`` fixed point with ``frac_bits`` fractional bits, rounded to nearest
    (ties to even) and saturated: the values ``golden.llm.schemes.oaken_scheme`` feeds Oaken
    (Q8.8 by default). Returns int64 of ``x``'s shape."""
    top = (1 << (data_bits - 1)) - 1
    return np.clip(np.rint(np.asarray(x, np.float64) * (1 << frac_bits)), -top - 1,
                   top).astype(np.int64)


def oaken_quantizer_inputs(cap, params, layers=None, tokens=None, outer=DEFAULT_OUTER,
                           inner=DEFAULT_INNER):
    """``oaken_quantizer`` input beats from the captured keys and values.

    Per layer and per kind (K, V), four thresholds are profiled (Oaken section 4.3,
    :func:`golden.oaken.profile_layers` with ``outer`` / ``inner``) on that layer's captured
    fixed-point values (:func:`fixed_point` with the unit's ``frac_bits`` / ``data_bits``): the
    window is its own profiling run. Every chunk is ``vec_len`` consecutive values of one
    head vector of one token (``head_dim`` must be a multiple of ``vec_len``), sent as
    ``vec_len / lanes`` beats each carrying its layer's thresholds. Chunk order: layer, K then
    V, KV head, token, position in the head vector. ``layers`` (indices) and ``tokens``
    (positions) select a part of the capture (None: all).

    Returns ``(inputs, info)``: ``inputs`` ``{"i": fields}``; ``info`` holds ``chunks``,
    ``thresholds`` (``{"k"|"v": [per layer 4-tuple]}``), ``groups`` (element counts of the
    middle, inner and outer groups, :func:`golden.oaken.decompose`) and ``outlier_chunks``
    (chunks with an inner or outer element: each gives COO entries)."""
    lanes, vec_len = params["lanes"], params["vec_len"]
    frac, bits = params["frac_bits"], params["data_bits"]
    head_dim = cap.keys.shape[-1]
    if head_dim % vec_len:
        raise ValueError(f"head_dim {head_dim} is not a multiple of vec_len {vec_len}")
    layers = np.arange(cap.layers) if layers is None else np.asarray(layers)
    tokens = np.arange(cap.tokens) if tokens is None else np.asarray(tokens)
    kv = {"k": fixed_point(cap.keys, frac, bits), "v": fixed_point(cap.values, frac, bits)}
    thresholds = {kind: profile_layers(x[None], outer, inner, bits) for kind, x in kv.items()}
    xs, ts = [], []
    groups = np.zeros(3, np.int64)
    outlier_chunks = 0
    for layer in layers:
        for kind in ("k", "v"):
            t = thresholds[kind][layer]
            chunks = kv[kind][layer][:, tokens].reshape(-1, vec_len)   # heads, tokens, pieces
            g = decompose(chunks, t, bits)["group"]
            groups += np.bincount(g.ravel(), minlength=3)
            outlier_chunks += int((g != 0).any(axis=1).sum())
            xs.append(chunks.reshape(-1, lanes))
            ts.append(np.tile(np.asarray(t, np.int64), (len(chunks) * (vec_len // lanes), 1)))
    x, t = np.concatenate(xs), np.concatenate(ts)
    fields = {"x": x, **{name: t[:, j] for j, name in enumerate(_THRESHOLDS)}}
    info = {"chunks": len(x) * lanes // vec_len, "thresholds": thresholds,
            "groups": {"middle": int(groups[0]), "inner": int(groups[1]),
                       "outer": int(groups[2])},
            "outlier_chunks": outlier_chunks}
    return {"i": fields}, info


def oaken_dequantizer_inputs(quantized):
    """``oaken_dequantizer`` input beats: the ``hdr``, ``dense`` and ``coo`` streams of an
    ``oaken_quantizer`` output (``{port: fields}``, e.g. its RTL output from
    :func:`run_on_rtl`), which have the dequantizer's layouts."""
    return {port: dict(quantized[port]) for port in ("hdr", "dense", "coo")}


# --------------------------------------------------------------------------- KLLM: Orizuru


def orizuru_inputs(cap, n, names=None, tokens=None, fraction=0.01):
    """``orizuru`` input beats: block linear inputs in binary16, each token's row cut into
    ``row / n`` vectors of ``n`` consecutive elements (the row length must be a multiple of
    ``n``; a vector of n > 1024 spans several beats, :func:`golden.kllm.orizuru.beat_lanes`).

    ``names`` the linear layers (default all of the capture, :func:`linear_names`), ``tokens``
    the positions (default all). Order: layer, token, tile.

    Returns ``(inputs, info)``: ``info["vectors"]``; ``info["token_outliers"]`` (bool,
    ``(vectors, n)``): the lanes that are outliers of their whole token by KLLM's rule
    (:func:`golden.kllm.split_outliers` at ``fraction`` on the token's binary16 row), the ones
    a hierarchy of Orizuru units must find; ``info["outlier_vectors"]``: vectors holding one."""
    names = linear_names(cap) if names is None else list(names)
    tokens = np.arange(cap.tokens) if tokens is None else np.asarray(tokens)
    xs, outliers = [], []
    for name in names:
        rows = cap.activations[name][tokens].astype(np.float16)
        if rows.shape[1] % n:
            raise ValueError(f"{name}: row length {rows.shape[1]} is not a multiple of n = {n}")
        xs.append(rows.view(np.uint16).astype(np.int64).reshape(-1, n))
        outliers.append(np.stack([split_outliers(row, fraction)[2] for row in rows])
                        .reshape(-1, n))
    x, token_outliers = np.concatenate(xs), np.concatenate(outliers)
    info = {"vectors": len(x), "token_outliers": token_outliers,
            "outlier_vectors": int(token_outliers.any(axis=1).sum())}
    return {"i": {"x": x.reshape(-1, beat_lanes(n))}}, info


# --------------------------------------------------------------------------- KLLM: indices


@dataclass(frozen=True)
class KllmReductions:
    """A layer's K-Means-quantized real operands and its dot products (:func:`kllm_reductions`):
    ``name`` the linear layer; ``a_idx`` int64 ``(tokens, K)`` activation indices (0 at
    outliers), ``counted`` bool ``(tokens, K)`` the counter's lane mask (False at outliers),
    ``a_scale`` ``(tokens,)`` per-token scales; ``b_idx`` int64 ``(K, columns)`` weight
    indices, ``b_scale`` ``(columns,)`` per-output-channel scales; ``ca``, ``cb`` the
    normalized centroids (float64); ``a_bits``, ``b_bits``; ``pairs`` int64 ``(R, 2)``: the
    reductions, row ``(token, column)`` indexing ``a_idx`` and ``b_idx``."""

    name: str
    a_idx: np.ndarray
    counted: np.ndarray
    a_scale: np.ndarray
    b_idx: np.ndarray
    b_scale: np.ndarray
    ca: np.ndarray
    cb: np.ndarray
    a_bits: int
    b_bits: int
    pairs: np.ndarray


def kllm_reductions(cap, name, a_bits=4, b_bits=4, tokens=4, columns=4, fraction=0.01,
                    seed=0):
    """KLLM's quantization (section III-A) of one linear layer's real operands.

    The layer's activation codebook (``2**a_bits`` normalized centroids) is trained on every
    captured input row of the layer (:func:`golden.kllm.activation_codebook`, one k-means++
    start); ``tokens`` rows spread over the window (:func:`pick`) are quantized with Orizuru's
    outlier rule at ``fraction`` (:func:`golden.kllm.quantize_activation`). The weight codebook
    (``2**b_bits`` centroids, per-output-channel scale) is trained on the whole layer
    (:func:`golden.kllm.quantize_weights` of ``W^T``, one start); ``columns`` output channels
    spread over the layer are kept. Every (token, column) pair is one reduction of length K.
    Returns a :class:`KllmReductions`."""
    x = np.asarray(cap.activations[name], np.float64)
    w = np.asarray(cap.weights[name], np.float64)
    ca = activation_codebook(x, a_bits, fraction, seed=seed, n_init=1)
    rows = pick(len(x), tokens)
    quantized = [quantize_activation(x[t], ca, fraction) for t in rows]
    wq = quantize_weights(w.T, b_bits, seed=seed + 1, n_init=1)
    cols = pick(w.shape[0], columns)
    pairs = np.array([(t, c) for t in range(len(rows)) for c in range(len(cols))], np.int64)
    return KllmReductions(
        name, np.stack([q.idx for q in quantized]), np.stack([q.counted for q in quantized]),
        np.array([q.scale for q in quantized]), wq.idx[:, cols], wq.scale[cols], ca,
        wq.centroids, a_bits, b_bits, pairs)


def _reduction_beats(red, n):
    """Lanes of every reduction in beats of ``n``: ``(a, b, mask, last)``, each reduction
    ``ceil(K / n)`` beats (padding lanes masked, index 0)."""
    t, c = red.pairs[:, 0], red.pairs[:, 1]
    k = red.a_idx.shape[1]
    per = -(-k // n)
    a = np.zeros((len(t), per * n), np.int64)
    b = np.zeros_like(a)
    mask = np.zeros(a.shape, bool)
    a[:, :k], b[:, :k], mask[:, :k] = red.a_idx[t], red.b_idx[:, c].T, red.counted[t]
    last = np.zeros((len(t), per), np.int64)
    last[:, -1] = 1
    return (a.reshape(-1, n), b.reshape(-1, n), mask.reshape(-1, n), last.ravel())


def idx_counter_inputs(red, params):
    """``kllm_idx_counter`` (``kk`` mode) input beats of the reductions of ``red``
    (:class:`KllmReductions`): per lane the concatenated index ``(a << b_bits) | b``
    (:func:`golden.kllm.concat_indices`), the activation outliers and the padding masked, one
    reduction per (token, column), ``last`` on its final beat. The unit's ``idx_bits`` must be
    ``a_bits + b_bits``. Returns ``{"i": fields}``."""
    if params["mode"] != "kk" or params["idx_bits"] != red.a_bits + red.b_bits:
        raise ValueError(f"a kk counter of idx_bits {red.a_bits + red.b_bits} is needed, not "
                         f"{params['mode']} with idx_bits {params['idx_bits']}")
    a, b, mask, last = _reduction_beats(red, params["n_inputs"])
    return {"i": {"idx": concat_indices(a, b, red.a_bits, red.b_bits), "mask": pack_bits(mask),
                  "last": last}}


#: All-masked beats of the reduction that opens :func:`column_inputs` (see there).
COLUMN_GUARD_BEATS = 16


def column_inputs(red, params):
    """``kllm_column`` (``kk`` mode) input beats of the reductions of ``red``
    (:class:`KllmReductions`).

    ``cb``: one codebook load, the offline Cartesian product of the normalized centroids
    rounded to binary16 (entry ``(i << b_bits) | j`` = ``fp16(ca[i] * cb[j])``,
    :func:`golden.kllm.product_codebook`). ``i``: first one all-masked reduction of
    :data:`COLUMN_GUARD_BEATS` beats (output +0.0 whatever the codebook; with random valid on
    both streams it makes sure the load waits at the first reduction boundary, as the
    adapter's own stimulus does), then one reduction per (token, column) with ``a`` and ``b``
    indices and the activation outliers masked. The unit's ``a_bits`` / ``b_bits`` must be
    those of ``red``. Returns ``{"cb": fields, "i": fields}``; the output is one beat per
    reduction (the guard's first): the normalized dot product ``y`` of the inliers."""
    if params["mode"] != "kk" or (params["a_bits"], params["b_bits"]) != (red.a_bits,
                                                                           red.b_bits):
        raise ValueError(f"a kk column of a_bits {red.a_bits}, b_bits {red.b_bits} is needed")
    n = params["n_inputs"]
    with np.errstate(over="ignore", under="ignore"):
        entries = product_codebook(red.ca, red.cb).astype(np.float16)
    if not np.isfinite(entries).all():
        raise ValueError("a product codebook entry overflows binary16")
    value = entries.view(np.uint16).astype(np.int64)
    cb_last = np.zeros(len(value), np.int64)
    cb_last[-1] = 1
    a, b, mask, last = _reduction_beats(red, n)
    guard = COLUMN_GUARD_BEATS
    zeros = np.zeros((guard, n), np.int64)
    guard_last = (np.arange(guard) == guard - 1).astype(np.int64)
    return {"cb": {"value": value, "last": cb_last},
            "i": {"a": np.concatenate([zeros, a]), "b": np.concatenate([zeros, b]),
                  "mask": np.concatenate([np.zeros(guard, np.int64), pack_bits(mask)]),
                  "last": np.concatenate([guard_last, last])}}


# --------------------------------------------------------------------------- P3-LLM


def _bitmod_rows(w, group):
    """BitMoD codes and per-group ``sv_sel`` / scales of the rows ``w`` (``[rows, K]``), each
    row padded with zeros to a multiple of ``group`` for quantization; codes cut back to K."""
    k = w.shape[1]
    padded = np.concatenate([w, np.zeros((len(w), -k % group))], axis=1)
    codes, sv_sel, scales = quantize_bitmod(padded, group)
    return codes[:, :k].astype(np.int64), sv_sel.astype(np.int64), scales


def _group_spans(k, group):
    """``(start, stop)`` of every group of ``group`` inputs in a row of ``k`` (the last one may
    be shorter); starts and lengths must be multiples of 4 (one PE beat)."""
    spans = [(s, min(s + group, k)) for s in range(0, k, group)]
    if any(s % 4 or e % 4 for s, e in spans):
        raise ValueError(f"groups of {group} in rows of {k} do not fall on 4-lane beats")
    return spans


def _p3_stream(chunks, reuse=1):
    """Input fields of dot products ``(act, wgt, act_fmt, wgt_fmt, sv_sel, zp)`` (per-beat
    arrays and two formats), each with ``first`` / ``last`` on its first / final beat; at
    ``reuse`` > 1 dot product i on slot ``i % reuse``."""
    names = ("act", "wgt", "act_fmt", "wgt_fmt", "sv_sel", "zp", "first", "last", "slot")
    fields = {name: [] for name in names[:8 if reuse == 1 else 9]}
    for number, (act, wgt, act_fmt, wgt_fmt, sv_sel, zp) in enumerate(chunks):
        beats = np.arange(len(act))
        for name, value in zip(names, (act, wgt, beats * 0 + act_fmt, beats * 0 + wgt_fmt,
                                       sv_sel, zp, beats == 0, beats == beats[-1],
                                       beats * 0 + number % reuse)):
            if name in fields:
                fields[name].append(np.asarray(value, np.int64))
    return {name: np.concatenate(values) for name, values in fields.items()}


def p3_pe_inputs(cap, names, tokens=2, rows=2, group=128):
    """``p3_pe`` input beats: FP8-E4M3 codes of real block linear inputs times BitMoD codes of
    the layer's real weights (P3-LLM sections IV-C, IV-D, V-C).

    For each linear layer of ``names``, ``tokens`` input rows (per-token E4M3 scale over the
    row, :func:`golden.p3.formats.quantize_e4m3`) and ``rows`` weight rows (BitMoD per
    ``group`` inputs, :func:`golden.p3.formats.quantize_bitmod`), spread evenly (:func:`pick`).
    Every (token, weight row, group) is one dot product, ``first`` on its first beat and
    ``last`` on its final one: the group's scale applies to its sum as a whole. Beat j of a dot
    product holds inputs ``4j..4j+3`` of the group, ``act_fmt`` = ``wgt_fmt`` = 0, the group's
    ``sv_sel``, ``zp`` 0.

    Returns ``(inputs, info)``: ``info`` holds ``dot_products``, ``beats``, ``sv_sel`` (the
    BitMoD variants used, sorted), ``special`` (lanes with the special-value code 0b1000),
    ``act_exponents`` (distinct E4M3 exponent fields) and ``parts`` (per dot product:
    ``(name, token, row, start, stop, act_scale, w_scale)`` to rebuild real values)."""
    chunks, parts = [], []
    for name in names:
        x = np.asarray(cap.activations[name], np.float64)
        w = np.asarray(cap.weights[name], np.float64)
        t_idx, r_idx = pick(len(x), tokens), pick(len(w), rows)
        act, a_scale = quantize_e4m3(x[t_idx])
        codes, sv_sel, w_scale = _bitmod_rows(w[r_idx], group)
        for ti, t in enumerate(t_idx):
            for ri, r in enumerate(r_idx):
                for g, (s, e) in enumerate(_group_spans(x.shape[1], group)):
                    beats = (e - s) // 4
                    chunks.append((act[ti, s:e].reshape(beats, 4), codes[ri, s:e].reshape(
                        beats, 4), 0, 0, np.full(beats, sv_sel[ri, g]), np.zeros(beats)))
                    parts.append((name, int(t), int(r), s, e, float(a_scale[ti, 0]),
                                  float(w_scale[ri, g])))
    out = _p3_stream(chunks)
    info = {"dot_products": len(parts), "beats": len(out["first"]),
            "sv_sel": sorted(set(out["sv_sel"].tolist())), "special": int((out["wgt"] == 8).sum()),
            "act_exponents": sorted(set(((out["act"] >> 3) & 15).ravel().tolist())),
            "parts": parts}
    return {"i": out}, info


def p3_pcu_inputs(cap, params, names, tokens=1, attention=None, group=128):
    """``p3_pcu`` input beats from real tensors: GEMV tiles and P3-LLM's attention P x V.

    * **GEMV** (sections IV-C, IV-D, V-C): for each linear layer of ``names`` and ``tokens``
      input rows (E4M3 per token), the first ``pes`` weight rows (PE j = output row j, BitMoD
      per ``group``); one dot product per group, as in :func:`p3_pe_inputs`, ``sv_sel[j]`` the
      group's variant of row j.
    * **P x V** (sections IV-A, IV-B): ``attention`` is a list of ``(layer, head, query)``:
      the query token's attention probabilities over tokens ``0..query`` of ``head``, FP16
      then FP8-S0E4M4 (:func:`golden.p3.formats.quantize_s0e4m4`, ``act_fmt`` 1), times the
      values of its KV head, INT4-asymmetric per head vector of one token
      (:func:`golden.p3.formats.quantize_int4_asym` with ``group`` = ``head_dim``,
      ``wgt_fmt`` 1); PE j = value dimension j of each tile of ``pes`` dimensions. A PE beat
      has one ``zp`` for its four lanes while every token has its own zero point, so every
      beat carries one token: lane ``t % 4`` holds token t's probability and value code, the
      other lanes code 0 (a zero activation).

    At ``reuse`` > 1 dot product i (GEMV first, then P x V) uses accumulator slot
    ``i % reuse``. Returns ``(inputs, info)``: ``info`` holds
    ``dot_products``, ``beats``, ``gemv_beats``, ``attention_beats``, ``sv_sel`` (BitMoD
    variants used), ``special`` (special-value weight codes), ``zp`` (distinct value zero
    points), ``score_codes`` (non-zero S0E4M4 codes sent) and ``score_exponents`` (their
    distinct exponent fields)."""
    pes = params["pes"]
    chunks = []                                   # (act, wgt, act_fmt, wgt_fmt, sv_sel, zp)
    for name in names:
        x = np.asarray(cap.activations[name], np.float64)
        w = np.asarray(cap.weights[name], np.float64)[:pes]
        act, _ = quantize_e4m3(x[pick(len(x), tokens)])
        codes, sv_sel, _ = _bitmod_rows(w, group)
        for row in act.astype(np.int64):
            for g, (s, e) in enumerate(_group_spans(x.shape[1], group)):
                beats = (e - s) // 4
                wgt = codes[:, s:e].reshape(pes, beats, 4).transpose(1, 0, 2)
                chunks.append((row[s:e].reshape(beats, 4), wgt, 0, 0,
                               np.tile(sv_sel[:, g], (beats, 1)), np.zeros((beats, pes))))
    gemv_chunks = len(chunks)
    zps, score_codes = set(), []
    heads_per_kv = cap.config.n_heads // cap.config.n_kv_heads
    head_dim = cap.values.shape[-1]
    if head_dim % pes:
        raise ValueError(f"head_dim {head_dim} is not a multiple of pes {pes}")
    for layer, head, query in attention or ():
        v = np.asarray(cap.values[layer, head // heads_per_kv], np.float64)[:query + 1]
        q, zp, _ = quantize_int4_asym(v, head_dim)
        zp = zp[:, 0].astype(np.int64)
        zps.update(zp.tolist())
        p = quantize_s0e4m4(cap.scores[layer, head, query, :query + 1].astype(np.float16))
        score_codes += [int(c) for c in p if c]
        lane = np.arange(query + 1) % 4
        act = np.zeros((query + 1, 4), np.int64)
        act[np.arange(query + 1), lane] = p
        for d0 in range(0, head_dim, pes):
            wgt = np.zeros((query + 1, pes, 4), np.int64)
            wgt[np.arange(query + 1), :, lane] = q[:, d0:d0 + pes]
            chunks.append((act, wgt, 1, 1, np.zeros((query + 1, pes)),
                           np.repeat(zp[:, None], pes, axis=1)))
    out = _p3_stream(chunks, params["reuse"])
    gemv_beats = int(sum(len(c[0]) for c in chunks[:gemv_chunks]))
    info = {"dot_products": len(chunks), "beats": len(out["first"]), "gemv_beats": gemv_beats,
            "attention_beats": len(out["first"]) - gemv_beats,
            "sv_sel": sorted(set(out["sv_sel"][:gemv_beats].ravel().tolist())),
            "special": int((out["wgt"][:gemv_beats] == 8).sum()),
            "zp": sorted(zps), "score_codes": len(score_codes),
            "score_exponents": sorted({c >> 4 for c in score_codes})}
    return {"i": out}, info


# --------------------------------------------------------------------------- running the RTL


@dataclass(frozen=True)
class RtlRun:
    """One unit run on given beats (:func:`run_on_rtl`): ``got`` and ``want`` (``{port:
    fields}``, the RTL's and the golden adapter's output beats), ``problems`` (the lines of
    :func:`verif.payload.compare_outputs`: empty when bit-exact), ``params`` (resolved)."""

    got: dict
    want: dict
    problems: list
    params: dict


def run_on_rtl(unit, inputs, params=None, *, config=None, valid_probability=0.7,
               ready_probability=0.6, seed=0, name="real-tensors"):
    """Run ``unit`` (Verilator, :func:`verif.runner.replay`, the build shared with every run
    of the same configuration) on the input beats ``inputs`` (``{port: fields}``) with random
    valid / ready at the given probabilities, and compare its output with the unit's golden
    adapter (``UNITS[unit].golden``, :data:`golden.adapters.MODELS`) on the same beats.

    ``params`` (overrides) and ``config`` (a registry configuration) select the unit's
    parameters as :func:`gen.resolve_params` does. Returns an :class:`RtlRun`; the run itself
    raises :class:`verif.runner.BenchFailure` if the simulation fails (e.g. fewer output beats
    than the golden model gives, within the bench's cycle limit)."""
    _, resolved = resolve_params(unit, config, params)
    model = MODELS[UNITS[unit].golden.rsplit(":", 1)[1]]
    want = model.expected(resolved, inputs)
    beats = {port: len(next(iter(fields.values()))) for port, fields in want.items()}
    got = replay(unit, dict(params or {}), inputs, beats, config=config,
                 valid_probability=valid_probability, ready_probability=ready_probability,
                 seed=seed, name=name)
    return RtlRun(got, want, compare_outputs(got, want, model.equal), resolved)
