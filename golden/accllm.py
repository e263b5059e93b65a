"""Golden model of AccLLM: W2A8KV4 quantization, 2:4 pruning, sparse selector and DSP packing.

Reference: Liang et al., "AccLLM: Accelerating Long-Context LLM Inference Via
Algorithm-Hardware Co-Design", section IV-A1 (2:4 semi-structured pruning), IV-B (W2A8KV4:
Eq. 7-9, Fig. 8), V-B2 (Fig. 10(c), sparse selector) and V-B3 (Fig. 10(d), DSP packing);
SPEC section 6 (``accllm_dsp_mul``). The quantizers and :func:`prune_2_4` are float models of
the paper's algorithm; :func:`sparse_select` and everything from :func:`dsp48e2_p` on are
integer models, bit-exact with the RTL.

Readings fixed here (the paper and SPEC leave them open):

* **Pruning** (IV-A1). The paper scores weights with SparseGPT's ``W^2 / diag(H^-1)`` and
  updates the remaining columns (OBS). With no calibration data (``H`` a multiple of the
  identity) the score is ``W^2``: :func:`prune_2_4` is 2:4 *magnitude* pruning along the input
  (last) axis, ties keeping the lower index, with no OBS update.
* **2-bit weights** (Eq. 7-9): group-wise (``group`` consecutive inputs of one output row)
  asymmetric, ``S = (max' - min') / 3``, ``Z = clip(round(-min' / S), 0, 3)``,
  ``q = clip(round(w / S) + Z, 0, 3)``, ``w ~ S (q - Z)``, with the learnable weight clipping
  of Eq. 9 given as its trained values: ``max' = gamma * max``, ``min' = beta * min``
  (``gamma = sigmoid(lambda)``, ``beta = sigmoid(eta)``, each in (0, 1], default 1 = no
  clipping). Rounding is half up, ``floor(v + 1/2)``. A group with ``max' == min'`` gets
  ``S = 0``, ``Z = 0`` and codes 0 (Eq. 8 would divide by zero); it reconstructs as 0, exact for
  an all-zero group such as a fully pruned one.
* **8-bit activations** (IV-B2): "each activation token an individual scaling factor" names a
  scale and no zero point, so the default is *symmetric signed* per token,
  ``s = max|x| / 127``, ``q = clip(round(x / s), -127, 127)``. Fig. 10(d) zero-extends X into B
  (unsigned activations); ``signed=False`` gives that variant, asymmetric unsigned 0..255 with a
  per-token zero point (the zero-point term ``z * sum(w)`` is then outside the DSP).
* **4-bit KV** (IV-B2, Fig. 8(b)): per token and per head, asymmetric unsigned 0..15 with scale
  and zero point as for the weights (``b = 4``, no clipping).
* **Sparse selector** (Fig. 10(c)): per group of 4 inputs the 2:4 mask's two positions, in
  index order; each output carries its 2-bit index (the multiplexer select).
* **DSP48E2** (SPEC 6, UG579): the pre-adder output AD is 27 bits and wraps; the 27 x 18
  product is exact (it fits 45 bits) and P is taken modulo 2^48, signed. Only the ``(A + D) * B``
  and accumulate (``P + (A + D) * B``) paths are modelled.
* **Field extraction** (SPEC 6): P holds signed fields at shifts ``s_0 < s_1 < ...`` with
  widths ``w_k = s_{k+1} - s_k`` (the top field up to bit 47). The fields are read bottom up
  with a borrow chain, ``f_k = sext_{w_k}(R_k mod 2^{w_k})``,
  ``R_{k+1} = (R_k - f_k) / 2^{w_k} = (R_k >> w_k) + R_k[w_k - 1]``, ``R_0 = P``. For two
  fields (modes w8/w4) this is ``p1 = sext18(P[17:0])``, ``p2 = (P >> 18) + P[17]``. It recovers
  every field exactly whenever each field's value lies in its signed ``w_k``-bit range (the
  mixed-radix signed-digit representation is unique), also when P wrapped at 48 bits, since the
  top field is read modulo ``2^{w_top}``. The simpler per-field borrow ``P[s_k - 1]`` agrees
  with the chain for single products in every configuration accepted here (the lower fields
  together stay inside ``s_k`` signed bits); the chain is what stays exact under accumulation.
* **Mode w2 and port B**: ``B = X1 + (X2 << 10)`` overflows the 18-bit signed B port for
  signed X with ``X2 = -2^7`` and ``X1 < 0``, and for unsigned X with ``X2 >= 2^7`` (8-bit X);
  :func:`b_fits` is the predicate, :func:`pack_w2` refuses those inputs and
  :func:`packed_p_w2` gives the P word an RTL that corrects B (for example through the C port)
  must produce: the exact ``(W1 + W2 2^22)(X1 + X2 2^10)``, which always fits 48 bits.
* **Weights in the DSP modes** are signed two's complement (SPEC 6); a 2-bit code ``q`` of
  :func:`quantize_w2` enters as ``q - 2`` with the zero point shifted to ``Z - 2``.
"""

from typing import NamedTuple

import numpy as np

from .checks import check_int as _check_int, check_int_array as _int_array

__all__ = [
    "W2Quant", "ActQuant", "KV4Quant", "SparseSelection", "W8Products", "W2Products",
    "A_BITS", "D_BITS", "B_BITS", "P_BITS", "AD_BITS", "W8_SHIFTS", "W2_SHIFTS",
    "prune_2_4", "quantize_w2", "dequantize_w2", "quantize_a8", "dequantize_a8",
    "quantize_kv4", "dequantize_kv4", "sparse_select", "select_by_index",
    "dsp48e2_p", "product_range", "pack_w8", "extract_w8", "b_fits", "pack_w2",
    "packed_p_w2", "extract_w2", "max_accumulation_depth", "accumulate_packed", "run_sums",
    "PE_MODES", "pe_product_bits", "pe_weights", "pe_products", "pe_run",
]

A_BITS = 27         # A input of the pre-adder (A[26:0] of the 30-bit A port)
D_BITS = 27         # D port
AD_BITS = 27        # pre-adder output (AD register)
B_BITS = 18         # B port
P_BITS = 48         # P register
W8_SHIFTS = (0, 18)                 # modes w8/w4: X*W1, X*W2
W2_SHIFTS = (0, 10, 22, 32)         # mode w2: X1*W1, X2*W1, X1*W2, X2*W2
_MODES = ("w8", "w4", "w2")


# --- result types ----------------------------------------------------------------------------


class W2Quant(NamedTuple):
    """Group-wise 2-bit weights (AccLLM Eq. 7-9).

    Attributes
    ----------
    q : numpy.ndarray of uint8, shape of ``w``
        Codes 0..3.
    scale, zero : numpy.ndarray, shape ``w.shape[:-1] + (n_groups,)``
        Per-group step ``S`` (float64) and zero point ``Z`` (int64, 0..3).
    group : int
    """

    q: np.ndarray
    scale: np.ndarray
    zero: np.ndarray
    group: int


class ActQuant(NamedTuple):
    """Per-token 8-bit activations (AccLLM section IV-B2).

    Attributes
    ----------
    q : numpy.ndarray of int16, shape of ``x``
        -127..127 (signed) or 0..255 (unsigned).
    scale, zero : numpy.ndarray, shape ``x.shape[:-1] + (1,)``
        Per-token step (float64) and zero point (int64; 0 when signed).
    """

    q: np.ndarray
    scale: np.ndarray
    zero: np.ndarray


class KV4Quant(NamedTuple):
    """Per-token, per-head 4-bit KV (AccLLM section IV-B2, Fig. 8(b)).

    Attributes
    ----------
    q : numpy.ndarray of uint8, shape of ``kv``
        Codes 0..15.
    scale, zero : numpy.ndarray, shape ``kv.shape[:-1] + (n_heads,)``
        Per-token per-head step (float64) and zero point (int64, 0..15).
    head_dim : int
    """

    q: np.ndarray
    scale: np.ndarray
    zero: np.ndarray
    head_dim: int


class SparseSelection(NamedTuple):
    """Output of the 2:4 sparse selector, one entry per group of 4 inputs.

    Attributes
    ----------
    x1, x2 : numpy.ndarray
        The selected inputs, ``x1`` at the lower index.
    idx1, idx2 : numpy.ndarray of int64
        Their positions 0..3 within the group, ``idx1 < idx2``.
    """

    x1: np.ndarray
    x2: np.ndarray
    idx1: np.ndarray
    idx2: np.ndarray


class W8Products(NamedTuple):
    """Products of modes w8/w4: ``p1 = x * w1``, ``p2 = x * w2`` (int64)."""

    p1: np.ndarray
    p2: np.ndarray


class W2Products(NamedTuple):
    """Products of mode w2, ``p_ij = x_i * w_j`` (int64), in SPEC 6 output order."""

    p11: np.ndarray
    p22: np.ndarray
    p12: np.ndarray
    p21: np.ndarray


# --- argument checks -------------------------------------------------------------------------


def _signed_range(bits):
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _x_range(x_bits, x_signed):
    return _signed_range(x_bits) if x_signed else (0, (1 << x_bits) - 1)


def _float_array(name, values):
    values = np.asarray(values)
    if values.dtype == np.bool_ or not (np.issubdtype(values.dtype, np.floating)
                                        or np.issubdtype(values.dtype, np.integer)):
        raise TypeError(f"{name} must hold real numbers, not {values.dtype}")
    values = values.astype(np.float64)
    if values.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension, not shape ()")
    if not np.isfinite(values).all():
        raise ValueError(f"{name} must be finite, not {values[~np.isfinite(values)].flat[0]}")
    return values


def _check_bool(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, not {value!r}")
    return bool(value)


def _check_mode(mode):
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a string, not {mode!r}")
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, _MODES))}, not {mode!r}")
    return mode


def _round_half_up(v):
    return np.floor(v + 0.5)


def _sext(v, bits):
    """Read the low ``bits`` bits of int64 ``v`` as a signed two's complement value."""
    half = np.int64(1 << (bits - 1))
    return ((v + half) & np.int64((1 << bits) - 1)) - half


def _fields(shifts):
    return tuple(b - a for a, b in zip(shifts, shifts[1:] + (P_BITS,)))


# --- pruning and quantization (float models) -------------------------------------------------


def prune_2_4(w):
    """Apply 2:4 semi-structured magnitude pruning along the input (last) axis.

    AccLLM section IV-A1 (block size ``Bs = 4``, two of every four weights removed), with the
    importance ``W^2`` (SparseGPT's score for ``H`` a multiple of the identity; no OBS update).

    Parameters
    ----------
    w : array_like of float, shape (..., n)
        Weights, ``n`` a multiple of 4; every block is 4 consecutive entries of the last axis.

    Returns
    -------
    pruned : numpy.ndarray of float64, shape of ``w``
        ``w`` with the two smaller-magnitude weights of each block set to 0.
    mask : numpy.ndarray of bool, shape of ``w``
        True at the kept weights: exactly two per block, the two largest ``|w|``; among equal
        magnitudes the lower index is kept.

    Raises
    ------
    TypeError
        If ``w`` is not real.
    ValueError
        If ``w`` is 0-d, not finite, or its last axis is not a multiple of 4.
    """
    w = _float_array("w", w)
    n = w.shape[-1]
    if n % 4:
        raise ValueError(f"w must have a last axis that is a multiple of 4, not {n}")
    blocks = np.abs(w).reshape(w.shape[:-1] + (n // 4, 4))
    order = np.argsort(-blocks, axis=-1, kind="stable")      # stable: lower index first
    mask = np.zeros(blocks.shape, dtype=bool)
    np.put_along_axis(mask, order[..., :2], True, axis=-1)
    mask = mask.reshape(w.shape)
    return np.where(mask, w, 0.0), mask


def _asym_quant(v, bits, vmax, vmin):
    """Asymmetric ``bits``-bit quantization of ``v`` against the (broadcast) range."""
    levels = (1 << bits) - 1
    span = vmax - vmin
    scale = span / levels
    safe = np.where(scale > 0, scale, 1.0)
    zero = np.where(scale > 0, np.clip(_round_half_up(-vmin / safe), 0, levels), 0.0)
    q = np.clip(_round_half_up(v / safe) + zero, 0, levels)
    q = np.where(scale > 0, q, 0.0)
    return q, scale, zero


def _unit_factor(name, value, shape):
    value = np.asarray(value)
    if value.dtype == np.bool_ or not (np.issubdtype(value.dtype, np.floating)
                                       or np.issubdtype(value.dtype, np.integer)):
        raise TypeError(f"{name} must hold real numbers, not {value.dtype}")
    value = value.astype(np.float64)
    bad = ~((value > 0) & (value <= 1))                     # also rejects NaN
    if bad.any():
        raise ValueError(f"{name} must be in (0, 1], not {value[bad].flat[0]}")
    try:
        return np.broadcast_to(value, shape)
    except ValueError:
        raise ValueError(f"{name} must broadcast to the group shape {shape}, "
                         f"not shape {value.shape}") from None


def quantize_w2(w, group=64, gamma=1.0, beta=1.0):
    """Quantize weights to 2 bits, group-wise asymmetric with learnable weight clipping.

    AccLLM section IV-B1, Eq. 7-9 (see the module docstring for the exact reading): per group
    of ``group`` consecutive entries of the last (input) axis, ``max' = gamma * max``,
    ``min' = beta * min``, ``S = (max' - min') / 3``, ``Z = clip(round(-min'/S), 0, 3)``,
    ``q = clip(round(w/S) + Z, 0, 3)``.

    For a group with ``min' <= 0 <= max'`` every ``w`` in ``[min', max']`` reconstructs within
    ``S / 2`` and 0 reconstructs exactly (so 2:4-pruned zeros stay zero); values outside the
    clipped range go to code 0 or 3.

    Parameters
    ----------
    w : array_like of float, shape (..., n)
        ``n`` a multiple of ``group``.
    group : int
        Group size, 1..n (default 64, the paper's).
    gamma, beta : float or array_like
        Trained clipping factors ``sigmoid(lambda)``, ``sigmoid(eta)`` of Eq. 9, in (0, 1],
        scalar or broadcastable to ``w.shape[:-1] + (n // group,)``.

    Returns
    -------
    W2Quant

    Raises
    ------
    TypeError
        If ``group`` is not an integer or ``w``, ``gamma``, ``beta`` are not real.
    ValueError
        If ``group`` does not divide the last axis, or ``gamma``/``beta`` are outside (0, 1].
    """
    w = _float_array("w", w)
    n = w.shape[-1]
    group = _check_int("group", group, 1, max(n, 1))
    if n % group:
        raise ValueError(f"group must divide the last axis of w ({n}), not {group}")
    g = w.reshape(w.shape[:-1] + (n // group, group))
    gamma = _unit_factor("gamma", gamma, g.shape[:-1])
    beta = _unit_factor("beta", beta, g.shape[:-1])
    vmax = gamma * g.max(axis=-1)
    vmin = beta * g.min(axis=-1)
    q, scale, zero = _asym_quant(g, 2, vmax[..., None], vmin[..., None])
    return W2Quant(q.reshape(w.shape).astype(np.uint8), scale[..., 0],
                   zero[..., 0].astype(np.int64), group)


def dequantize_w2(qw):
    """Reconstruct ``S (q - Z)`` from a :class:`W2Quant` (AccLLM Eq. 7).

    Returns
    -------
    numpy.ndarray of float64, shape of ``qw.q``
    """
    if not isinstance(qw, W2Quant):
        raise TypeError(f"qw must be a W2Quant, not {type(qw).__name__}")
    q = qw.q.astype(np.float64)
    g = q.reshape(q.shape[:-1] + (q.shape[-1] // qw.group, qw.group))
    return (qw.scale[..., None] * (g - qw.zero[..., None])).reshape(q.shape)


def quantize_a8(x, signed=True):
    """Quantize activations to 8 bits per token (one scale per row of the last axis).

    AccLLM section IV-B2, Fig. 8(a) left. ``signed=True`` (default, the paper's text: a scale
    per token, no zero point): ``s = max|x| / 127``, ``q = clip(round(x / s), -127, 127)``,
    zero point 0. ``signed=False`` (Fig. 10(d)'s zero-extended X): asymmetric unsigned,
    ``s = (max - min) / 255``, ``z = clip(round(-min / s), 0, 255)``,
    ``q = clip(round(x / s) + z, 0, 255)``. Either way a token with ``min <= 0 <= max``
    reconstructs within ``s / 2``. An all-zero (signed) or constant (unsigned) token gets
    ``s = 0`` and codes 0.

    Parameters
    ----------
    x : array_like of float, shape (..., hidden)
    signed : bool

    Returns
    -------
    ActQuant
    """
    x = _float_array("x", x)
    signed = _check_bool("signed", signed)
    if signed:
        scale = np.abs(x).max(axis=-1, keepdims=True) / 127
        safe = np.where(scale > 0, scale, 1.0)
        q = np.where(scale > 0, np.clip(_round_half_up(x / safe), -127, 127), 0.0)
        zero = np.zeros(scale.shape, dtype=np.int64)
    else:
        q, scale, zero = _asym_quant(x, 8, x.max(axis=-1, keepdims=True),
                                     x.min(axis=-1, keepdims=True))
        zero = zero.astype(np.int64)
    return ActQuant(q.astype(np.int16), scale, zero)


def dequantize_a8(qa):
    """Reconstruct ``s (q - z)`` from an :class:`ActQuant`."""
    if not isinstance(qa, ActQuant):
        raise TypeError(f"qa must be an ActQuant, not {type(qa).__name__}")
    return qa.scale * (qa.q.astype(np.float64) - qa.zero)


def quantize_kv4(kv, head_dim):
    """Quantize keys or values to 4 bits per token and per head, asymmetric.

    AccLLM section IV-B2, Fig. 8(b): the ``head_dim`` elements of one head of one token share
    a step ``S = (max - min) / 15`` and zero point ``Z = clip(round(-min/S), 0, 15)``;
    ``q = clip(round(kv/S) + Z, 0, 15)``. A head with ``min <= 0 <= max`` reconstructs within
    ``S / 2``.

    Parameters
    ----------
    kv : array_like of float, shape (..., n_heads * head_dim)
        One row per token; heads are consecutive slices of ``head_dim`` entries.
    head_dim : int
        1..last axis, dividing it.

    Returns
    -------
    KV4Quant
    """
    kv = _float_array("kv", kv)
    n = kv.shape[-1]
    head_dim = _check_int("head_dim", head_dim, 1, max(n, 1))
    if n % head_dim:
        raise ValueError(f"head_dim must divide the last axis of kv ({n}), not {head_dim}")
    g = kv.reshape(kv.shape[:-1] + (n // head_dim, head_dim))
    q, scale, zero = _asym_quant(g, 4, g.max(axis=-1, keepdims=True),
                                 g.min(axis=-1, keepdims=True))
    return KV4Quant(q.reshape(kv.shape).astype(np.uint8), scale[..., 0],
                    zero[..., 0].astype(np.int64), head_dim)


def dequantize_kv4(qkv):
    """Reconstruct ``S (q - Z)`` from a :class:`KV4Quant`."""
    if not isinstance(qkv, KV4Quant):
        raise TypeError(f"qkv must be a KV4Quant, not {type(qkv).__name__}")
    q = qkv.q.astype(np.float64)
    g = q.reshape(q.shape[:-1] + (q.shape[-1] // qkv.head_dim, qkv.head_dim))
    return (qkv.scale[..., None] * (g - qkv.zero[..., None])).reshape(q.shape)


# --- sparse selector -------------------------------------------------------------------------


def sparse_select(x, mask):
    """Select the two inputs of every group of 4 that meet a kept 2:4 weight (Fig. 10(c)).

    Parameters
    ----------
    x : array_like, shape (..., n)
        Inputs (any dtype; returned unchanged), ``n`` a multiple of 4.
    mask : array_like of bool or 0/1 integers, shape of ``x``
        The 2:4 pattern of the pruned weights (e.g. from :func:`prune_2_4`).

    Returns
    -------
    SparseSelection
        Arrays of shape (..., n // 4): ``x1 = x[4g + idx1]``, ``x2 = x[4g + idx2]``,
        ``idx1 < idx2`` the two set positions of the group's mask.

    Raises
    ------
    TypeError
        If ``mask`` holds values other than booleans or integers.
    ValueError
        If the shapes differ, the last axis is not a multiple of 4, ``mask`` holds values other
        than 0/1, or a group of ``mask`` does not have exactly two ones.
    """
    x = np.asarray(x)
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        mask = _int_array("mask", mask, 0, 1, "0/1 values").astype(bool)
    if x.ndim == 0 or x.shape != mask.shape:
        raise ValueError(f"mask must have the shape of x {x.shape}, not {mask.shape}")
    n = x.shape[-1]
    if n % 4:
        raise ValueError(f"x must have a last axis that is a multiple of 4, not {n}")
    m = mask.reshape(mask.shape[:-1] + (n // 4, 4))
    count = m.sum(axis=-1)
    if (count != 2).any():
        where = np.argwhere(count != 2)[0]
        raise ValueError(f"mask must have exactly two ones in every group of 4, not "
                         f"{int(count[tuple(where)])} in group {tuple(int(i) for i in where)}")
    idx = np.argsort(~m, axis=-1, kind="stable")[..., :2]     # set positions, ascending
    g = x.reshape(m.shape)
    sel = np.take_along_axis(g, idx, axis=-1)
    return SparseSelection(sel[..., 0], sel[..., 1], idx[..., 0].astype(np.int64),
                           idx[..., 1].astype(np.int64))


def select_by_index(x, idx1, idx2):
    """Select ``x[4g + idx1]`` and ``x[4g + idx2]`` per group of 4, for any 2-bit indices.

    The multiplexers of the sparse selector (Fig. 10(c)) driven by raw indices. For the indices
    of a valid 2:4 mask (``idx1 < idx2``) this equals :func:`sparse_select`; indices in another
    order, or equal, are selected as they are (``idx1 == idx2`` gives the same input twice).

    Parameters
    ----------
    x : array_like, shape (..., n)
        Inputs (any dtype; returned unchanged), ``n`` a multiple of 4.
    idx1, idx2 : array_like of int
        Indices 0..3, broadcastable with ``x.shape[:-1] + (n // 4,)`` (e.g. an extra axis of
        weight rows sharing ``x``, with ``x[..., None, :]``).

    Returns
    -------
    (x1, x2) : tuple of numpy.ndarray
        The broadcast shape of ``x.shape[:-1] + (n // 4,)``, ``idx1`` and ``idx2``.

    Raises
    ------
    TypeError
        If an index is not an integer.
    ValueError
        If ``x`` is 0-d or its last axis is not a multiple of 4, an index is outside 0..3, or
        the shapes do not broadcast.
    """
    x = np.asarray(x)
    if x.ndim == 0:
        raise ValueError("x must have at least one dimension, not shape ()")
    n = x.shape[-1]
    if n % 4:
        raise ValueError(f"x must have a last axis that is a multiple of 4, not {n}")
    idx1 = _int_array("idx1", idx1, 0, 3, "2-bit indices")
    idx2 = _int_array("idx2", idx2, 0, 3, "2-bit indices")
    groups = x.reshape(x.shape[:-1] + (n // 4, 4))
    try:
        shape = np.broadcast_shapes(groups.shape[:-1], idx1.shape, idx2.shape)
    except ValueError:
        raise ValueError(f"idx1 {idx1.shape} and idx2 {idx2.shape} must broadcast with the "
                         f"groups of x {groups.shape[:-1]}") from None
    groups = np.broadcast_to(groups, shape + (4,))
    x1 = np.take_along_axis(groups, np.broadcast_to(idx1, shape)[..., None], axis=-1)
    x2 = np.take_along_axis(groups, np.broadcast_to(idx2, shape)[..., None], axis=-1)
    return x1[..., 0], x2[..., 0]


# --- DSP48E2 ---------------------------------------------------------------------------------


def dsp48e2_p(a, d, b, c=0):
    """Compute the DSP48E2 output ``P = ((A + D) mod 2^27) * B (+ C) mod 2^48`` (signed).

    SPEC section 6; UG579 pre-adder and multiplier: the pre-adder output AD is 27 bits wide,
    so ``A + D`` wraps to a signed 27-bit value before the 27 x 18 multiply; the product is
    exact (it fits 45 bits) and the 48-bit P wraps. ``c`` is an optional 48-bit addend (the
    accumulated P of a previous cycle, or the C port), default 0.

    Parameters
    ----------
    a, d : array_like of int
        Signed 27-bit (-2^26..2^26 - 1).
    b : array_like of int
        Signed 18-bit (-2^17..2^17 - 1).
    c : array_like of int
        Signed 48-bit.

    Returns
    -------
    numpy.ndarray of int64
        P, signed 48-bit, broadcast shape.
    """
    a = _int_array("a", a, *_signed_range(A_BITS), f"signed {A_BITS}-bit values")
    d = _int_array("d", d, *_signed_range(D_BITS), f"signed {D_BITS}-bit values")
    b = _int_array("b", b, *_signed_range(B_BITS), f"signed {B_BITS}-bit values")
    c = _int_array("c", c, *_signed_range(P_BITS), f"signed {P_BITS}-bit values")
    ad = _sext(a + d, AD_BITS)
    return _sext(ad * b + c, P_BITS)


def product_range(x_bits, w_bits, x_signed=True):
    """Return ``(min, max)`` of ``x * w`` over x (``x_bits``, signed or not) and signed w.

    Both bounds are attained; a signed x needs ``x_bits + w_bits`` bits for the product
    ``(-2^(x_bits-1)) (-2^(w_bits-1))``, an unsigned x needs ``x_bits + w_bits`` bits for
    ``(2^x_bits - 1) (-2^(w_bits-1))`` (``x_bits > 1``).
    """
    x_bits = _check_int("x_bits", x_bits, 1, 32)
    w_bits = _check_int("w_bits", w_bits, 1, 32)
    x_signed = _check_bool("x_signed", x_signed)
    xs = _x_range(x_bits, x_signed)
    ws = _signed_range(w_bits)
    corners = [p * q for p in xs for q in ws]
    return min(corners), max(corners)


def _depth(shifts, x_bits, w_bits, x_signed):
    """Largest N with N products of every field in that field's signed range (0: none fit)."""
    lo, hi = product_range(x_bits, w_bits, x_signed)
    n = None
    for width in _fields(shifts):
        fmin, fmax = _signed_range(width)
        k = min(fmax // hi if hi > 0 else 1 << 62, fmin // lo if lo < 0 else 1 << 62)
        n = k if n is None else min(n, k)
    return n


def _check_w8_config(w_bits, x_bits, x_signed):
    x_signed = _check_bool("x_signed", x_signed)
    w_bits = _check_int("w_bits", w_bits, 1, 8)      # W2 * 2^18 + W1 within the 27-bit AD
    x_bits = _check_int("x_bits", x_bits, 1, B_BITS if x_signed else B_BITS - 1)
    if _depth(W8_SHIFTS, x_bits, w_bits, x_signed) < 1:
        lo, hi = product_range(x_bits, w_bits, x_signed)
        fmin, fmax = _signed_range(W8_SHIFTS[1])
        raise ValueError(f"x_bits={x_bits} and w_bits={w_bits} give products {lo}..{hi}, "
                         f"beyond the 18-bit low field of P ({fmin}..{fmax}): "
                         f"x_bits + w_bits must be at most 18")
    return w_bits, x_bits, x_signed


def _check_w2_config(x_bits, x_signed):
    x_signed = _check_bool("x_signed", x_signed)
    x_bits = _check_int("x_bits", x_bits, 1, 32)
    if _depth(W2_SHIFTS, x_bits, 2, x_signed) < 1:
        lo, hi = product_range(x_bits, 2, x_signed)
        raise ValueError(f"x_bits={x_bits} gives products {lo}..{hi}, beyond the 10-bit "
                         f"fields of P (-512..511): x_bits must be at most 8")
    return x_bits, x_signed


def pack_w8(x, w1, w2, w_bits, x_bits=8, x_signed=True):
    """Pack one activation and two weights into the DSP ports, modes w8/w4 (SPEC 6).

    ``A = W2 << 18``, ``D = W1`` (both sign-extended to 27 bits), ``B = X`` (sign- or
    zero-extended to 18 bits), so ``P = (A + D) B = X W1 + (X W2 << 18)`` (Fig. 10(d-1)).

    Exactness (with :func:`extract_w8`). ``A + D = W2 2^18 + W1`` lies in the signed 27-bit
    range iff ``w_bits <= 8`` (``|W2 2^18 + W1| <= 2^7 2^18 + 2^7 < 2^26``; for ``w_bits = 9``,
    ``W2 = W1 = -2^8`` gives ``-2^26 - 2^8``), so the pre-adder never wraps. Both products lie
    in :func:`product_range`, which needs ``x_bits + w_bits`` signed bits; the low field is
    ``P[17:0]``, so ``x_bits + w_bits <= 18`` is necessary and sufficient for ``p1``, and the
    high field (30 bits) then holds ``p2`` too. B holds X iff ``x_bits <= 18`` (signed) or
    ``<= 17`` (unsigned), implied by the previous limit.

    Parameters
    ----------
    x : array_like of int
        Activations, ``x_bits`` wide, signed or unsigned.
    w1, w2 : array_like of int
        Signed ``w_bits``-bit weights (broadcast with ``x``).
    w_bits : int
        1..8 (8: LoRA weights, 4: K/V).
    x_bits : int
        1..18 - w_bits.
    x_signed : bool

    Returns
    -------
    (A, D, B) : tuple of numpy.ndarray of int64

    Raises
    ------
    ValueError
        If the widths break the limits above (the message names the limit) or a value is out
        of its range (the message names ``x``, ``w1`` or ``w2``).
    """
    w_bits, x_bits, x_signed = _check_w8_config(w_bits, x_bits, x_signed)
    what = f"{'signed' if x_signed else 'unsigned'} {x_bits}-bit values"
    x = _int_array("x", x, *_x_range(x_bits, x_signed), what)
    w1 = _int_array("w1", w1, *_signed_range(w_bits), f"signed {w_bits}-bit values")
    w2 = _int_array("w2", w2, *_signed_range(w_bits), f"signed {w_bits}-bit values")
    x, w1, w2 = np.broadcast_arrays(x, w1, w2)
    return w2 << W8_SHIFTS[1], w1.copy(), x.copy()


def _chain(p, shifts):
    r = p
    out = []
    for width in _fields(shifts):
        f = _sext(r, width)
        out.append(f)
        r = (r - f) >> width
    return out


def _check_p(p):
    return _int_array("p", p, *_signed_range(P_BITS), f"signed {P_BITS}-bit values")


def extract_w8(p, w_bits, x_bits=8, x_signed=True):
    """Recover ``p1 = x w1`` and ``p2 = x w2`` from P (modes w8/w4, SPEC 6).

    ``p1 = sext18(P[17:0])`` and ``p2 = sext30((P >> 18) + P[17])``: P[17] is the sign of the
    low field, which borrowed ``2^18`` from the high one. Exact for every P of
    :func:`pack_w8` (and for sums of at most :func:`max_accumulation_depth` of them) under the
    width limits proved there, which are checked here too.

    Parameters
    ----------
    p : array_like of int
        Signed 48-bit P words.
    w_bits, x_bits, x_signed
        As for :func:`pack_w8`.

    Returns
    -------
    W8Products
    """
    _check_w8_config(w_bits, x_bits, x_signed)
    p1, p2 = _chain(_check_p(p), W8_SHIFTS)
    return W8Products(p1, p2)


def b_fits(x1, x2, x_bits=8, x_signed=True):
    """Tell whether ``B = X1 + (X2 << 10)`` fits the signed 18-bit B port (SPEC 6, mode w2).

    Closed form: ``X2 2^10`` spans ``-2^(x_bits+9)..(2^(x_bits-1)-1) 2^10`` (signed) or
    ``0..(2^x_bits - 1) 2^10`` (unsigned), X1 adds less than ``2^x_bits`` in magnitude.
    For ``x_bits <= 7`` B always fits. For ``x_bits = 8``: signed X fails exactly when
    ``X2 = -128`` and ``X1 < 0`` (``B < -2^17``); unsigned X fails exactly when ``X2 >= 128``
    (``B >= 2^17``).

    Parameters
    ----------
    x1, x2 : array_like of int
        Activations, ``x_bits`` wide, signed or not.
    x_bits : int
        1..8.
    x_signed : bool

    Returns
    -------
    numpy.ndarray of bool, broadcast shape
    """
    x_bits, x_signed = _check_w2_config(x_bits, x_signed)
    what = f"{'signed' if x_signed else 'unsigned'} {x_bits}-bit values"
    x1 = _int_array("x1", x1, *_x_range(x_bits, x_signed), what)
    x2 = _int_array("x2", x2, *_x_range(x_bits, x_signed), what)
    x1, x2 = np.broadcast_arrays(x1, x2)
    if x_bits < 8:
        return np.ones(x1.shape, dtype=bool)
    if x_signed:
        return ~((x2 == -128) & (x1 < 0))
    return x2 < 128


def _w2_operands(x1, x2, w1, w2, x_bits, x_signed):
    x_bits, x_signed = _check_w2_config(x_bits, x_signed)
    what = f"{'signed' if x_signed else 'unsigned'} {x_bits}-bit values"
    x1 = _int_array("x1", x1, *_x_range(x_bits, x_signed), what)
    x2 = _int_array("x2", x2, *_x_range(x_bits, x_signed), what)
    w1 = _int_array("w1", w1, -2, 1, "signed 2-bit values")
    w2 = _int_array("w2", w2, -2, 1, "signed 2-bit values")
    return [*np.broadcast_arrays(x1, x2, w1, w2), x_bits, x_signed]


def pack_w2(x1, x2, w1, w2, x_bits=8, x_signed=True):
    """Pack two activations and two 2-bit weights into the DSP ports, mode w2 (SPEC 6).

    ``A = W1`` (sign-extended), ``D = W2 << 22``, ``B = X1 + (X2 << 10)`` (Fig. 10(d-2)), so
    ``P = X1 W1 + (X2 W1 << 10) + (X1 W2 << 22) + (X2 W2 << 32)``. ``A + D`` is at most
    ``2^23 + 1`` in magnitude (no pre-adder wrap). The fields at 0, 10, 22, 32 are 10, 12, 10 and
    16 bits wide; each product needs ``x_bits + 2`` bits, so ``x_bits <= 8``.

    Parameters
    ----------
    x1, x2 : array_like of int
        Activations (x1 the lower-index one of the sparse selector), ``x_bits`` wide.
    w1, w2 : array_like of int
        Signed 2-bit weights.
    x_bits : int
        1..8.
    x_signed : bool

    Returns
    -------
    (A, D, B) : tuple of numpy.ndarray of int64

    Raises
    ------
    ValueError
        If ``x_bits > 8``, a value is out of range, or B does not fit its 18-bit signed port
        (see :func:`b_fits`; use :func:`packed_p_w2` for the P word a correcting RTL makes).
    """
    x1, x2, w1, w2, x_bits, x_signed = _w2_operands(x1, x2, w1, w2, x_bits, x_signed)
    b = x1 + (x2 << 10)
    bad = ~b_fits(x1, x2, x_bits, x_signed)
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        lo, hi = _signed_range(B_BITS)
        raise ValueError(f"B = x1 + (x2 << 10) must fit the 18-bit signed B port ({lo}..{hi}), "
                         f"not {int(b[i])} (x1={int(x1[i])}, x2={int(x2[i])})")
    return w1.copy(), w2 << 22, b


def packed_p_w2(x1, x2, w1, w2, x_bits=8, x_signed=True):
    """Return the exact mode-w2 P word ``(W1 + W2 2^22)(X1 + X2 2^10)`` for any inputs.

    Equal to ``dsp48e2_p(*pack_w2(...))`` wherever :func:`b_fits`; where B does not fit, this is
    the P that an RTL correcting B must produce. Its magnitude is below ``(2^23 + 2) 2^18 <
    2^42``, so it is a valid 48-bit P.
    """
    x1, x2, w1, w2, _, _ = _w2_operands(x1, x2, w1, w2, x_bits, x_signed)
    return (w1 + (w2 << 22)) * (x1 + (x2 << 10))


def extract_w2(p, x_bits=8, x_signed=True):
    """Recover ``p11, p22, p12, p21`` (``p_ij = x_i w_j``) from a mode-w2 P word (SPEC 6).

    Borrow chain over the fields at 0, 10, 22, 32 (widths 10, 12, 10, 16):
    ``p11 = sext10(P[9:0])``, ``R1 = (P >> 10) + P[9]``, ``p21 = sext12(R1[11:0])``,
    ``R2 = (R1 >> 12) + R1[11]``, ``p12 = sext10(R2[9:0])``, ``R3 = (R2 >> 10) + R2[9]``,
    ``p22 = sext16(R3[15:0])``. Exact when each field's value lies in its signed width:
    always for one product (``x_bits + 2 <= 10`` bits), and for sums of at most
    :func:`max_accumulation_depth` products.

    Parameters
    ----------
    p : array_like of int
        Signed 48-bit P words.
    x_bits, x_signed
        As for :func:`pack_w2` (checked).

    Returns
    -------
    W2Products
    """
    _check_w2_config(x_bits, x_signed)
    p11, p21, p12, p22 = _chain(_check_p(p), W2_SHIFTS)
    return W2Products(p11, p22, p12, p21)


# --- accumulation ----------------------------------------------------------------------------


def _mode_widths(mode, x_bits, w_bits, x_signed):
    mode = _check_mode(mode)
    if mode == "w2":
        if w_bits is not None and w_bits != 2:
            raise ValueError(f"w_bits must be 2 in mode 'w2', not {w_bits!r}")
        x_bits, x_signed = _check_w2_config(x_bits, x_signed)
        return mode, W2_SHIFTS, x_bits, 2, x_signed
    if w_bits is None:
        w_bits = 8 if mode == "w8" else 4
    w_bits, x_bits, x_signed = _check_w8_config(w_bits, x_bits, x_signed)
    return mode, W8_SHIFTS, x_bits, w_bits, x_signed


def max_accumulation_depth(mode, x_bits=8, w_bits=None, x_signed=True):
    """Return the largest N for which a sum of N packed P words still extracts exactly.

    Derivation. Summing P words sums every field: field k holds ``F_k = sum of N products``
    from :func:`product_range` ``[lo, hi]``, and the borrow chain recovers all fields exactly
    iff every ``F_k`` lies in its signed ``w_k``-bit range (P wrapping at 48 bits does not
    matter: the top field is read modulo ``2^{w_top}``). Over all inputs ``F_k`` spans
    ``[N lo, N hi]``, hence

        N = min over fields k of min(floor((2^(w_k - 1) - 1) / hi), floor(2^(w_k - 1) / -lo)),

    and N + 1 fails for the input that repeats the extreme product. The narrowest field
    decides: ``P[17:0]`` in modes w8/w4, the 10-bit fields at 0 and 22 in mode w2 (all four
    fields count, since the unit may output p12 and p21 and p22 sits above them).

    Values for 8-bit X: w8 signed 7 (the figure of Xilinx WP486 for INT8 packing: 7 x 2^14 <
    2^17 <= 8 x 2^14), w8 unsigned 4, w4 signed 127, w4 unsigned 64, w2 signed or unsigned 1
    (no guard bits below X2 W1 and X2 W2: 2 x 256 > 511 and 2 x (-510) < -512).

    Parameters
    ----------
    mode : {"w8", "w4", "w2"}
    x_bits : int
    w_bits : int or None
        Default 8 (w8), 4 (w4), 2 (w2, the only value allowed).
    x_signed : bool

    Returns
    -------
    int
    """
    _, shifts, x_bits, w_bits, x_signed = _mode_widths(mode, x_bits, w_bits, x_signed)
    return _depth(shifts, x_bits, w_bits, x_signed)


def accumulate_packed(p, mode, x_bits=8, w_bits=None, x_signed=True, axis=0):
    """Sum packed P words as the DSP's 48-bit accumulator does and extract the exact sums.

    Parameters
    ----------
    p : array_like of int
        Signed 48-bit P words; the ``axis`` dimension (length N) is summed.
    mode, x_bits, w_bits, x_signed
        As for :func:`max_accumulation_depth`.
    axis : int

    Returns
    -------
    W8Products or W2Products
        Sums of the products over the N words.

    Raises
    ------
    ValueError
        If N is 0 or exceeds :func:`max_accumulation_depth` (the message names the limit).
    """
    mode, shifts, x_bits, w_bits, x_signed = _mode_widths(mode, x_bits, w_bits, x_signed)
    p = _check_p(p)
    if p.ndim == 0:
        raise ValueError("p must have at least one dimension (the accumulated one), not ()")
    axis = _check_int("axis", axis, -p.ndim, p.ndim - 1)
    n = p.shape[axis]
    limit = _depth(shifts, x_bits, w_bits, x_signed)
    if not 1 <= n <= limit:
        raise ValueError(f"the number of accumulated P words N must be in 1..{limit} (the "
                         f"maximum accumulation depth of mode {mode!r} with x_bits={x_bits}, "
                         f"w_bits={w_bits}, x_signed={x_signed}), not {n}")
    total = np.zeros(p.shape[:axis % p.ndim] + p.shape[axis % p.ndim + 1:], dtype=np.int64)
    for word in np.moveaxis(p, axis, 0):                   # 48-bit wrap at every step
        total = _sext(total + word, P_BITS)
    fields = _chain(total, shifts)
    if mode == "w2":
        p11, p21, p12, p22 = fields
        return W2Products(p11, p22, p12, p21)
    return W8Products(*fields)


def run_sums(products, last, depth):
    """Sums of products over accumulation runs: a run ends at a ``last`` beat or at its
    ``depth``-th beat, whichever comes first (the ``acc_depth`` interface of
    ``accllm_dsp_mul``; a run cut at the depth reports ``last`` = 0).

    Parameters
    ----------
    products : dict of str to array_like of int
        One product per beat for each name (all the same length).
    last : array_like of int
        1 on the beat that ends a run.
    depth : int
        Longest run (at least 1).

    Returns
    -------
    dict of str to numpy.ndarray of int64
        One sum per run for each product name, and ``"last"``: the ``last`` bit of the beat
        that ended the run.
    """
    depth = _check_int("depth", depth, 1, None)
    last = np.asarray(last, dtype=np.int64).ravel() != 0
    products = {name: np.asarray(values, dtype=np.int64) for name, values in products.items()}
    beat = np.arange(last.size)
    # Position of each beat after the previous `last` (a new run starts after every `last`);
    # runs are cut every `depth` beats in between.
    starts = np.concatenate(([True], last[:-1]))
    position = beat - np.maximum.accumulate(np.where(starts, beat, 0))
    ends = np.flatnonzero(last | ((position + 1) % depth == 0))   # beats after it: no output
    run_starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.intp)
    out = {}
    for name, values in products.items():
        out[name] = (np.add.reduceat(values[:ends[-1] + 1], run_starts) if ends.size
                     else np.zeros(0, np.int64)).astype(np.int64)
    out["last"] = last[ends].astype(np.int64)
    return out


# --- accllm_pe: per-beat mode, KV4 zero points, accumulation (SPEC section 10) ---------------

#: ``mode`` field values of ``accllm_pe`` (SPEC 10): 0 = w8, 1 = w4, 2 = w2 (3 is reserved).
PE_MODES = {"w8": 0, "w4": 1, "w2": 2}
_PE_W_BITS = (8, 4, 2)


def _pe_config(x_bits, x_signed, acc_bits=None):
    x_bits = _check_int("x_bits", x_bits, 2, 8)
    x_signed = _check_bool("x_signed", x_signed)
    if acc_bits is None:
        return x_bits, x_signed, None
    need = pe_product_bits(x_bits, x_signed)
    acc_bits = _check_int("acc_bits", acc_bits, need, 48)
    return x_bits, x_signed, acc_bits


def pe_product_bits(x_bits=8, x_signed=True):
    """Signed width of the widest product of ``accllm_pe`` (mode w8: ``x * w``, 8-bit w).

    The smallest ``acc_bits`` the PE accepts: every single product (of every mode, KV4
    included: ``|q - zp| <= 15``) fits it. 16 for 8-bit X, signed or not.
    """
    x_bits = _check_int("x_bits", x_bits, 1, 32)
    lo, hi = product_range(x_bits, 8, _check_bool("x_signed", x_signed))
    width = 1
    while lo < -(1 << (width - 1)) or hi > (1 << (width - 1)) - 1:
        width += 1
    return width


def pe_weights(mode, w, kv4=0, zp=0):
    """The signed weight an ``accllm_pe`` beat multiplies by (SPEC 10), element-wise.

    ``w`` is the 8-bit field (any bit pattern, read as -128..127 or 0..255): mode w8 reads all
    8 bits signed, mode w4 the low 4 bits signed (``kv4`` = 0) or the unsigned KV4 code of the
    low 4 bits minus the zero point ``zp`` (``kv4`` = 1: -15..15), mode w2 the low 2 bits
    signed; the bits above are ignored. ``kv4`` and ``zp`` are ignored outside mode w4.

    Parameters
    ----------
    mode : array_like of int
        0 (w8), 1 (w4) or 2 (w2).
    w : array_like of int
        -128..255.
    kv4 : array_like of 0/1
    zp : array_like of int
        0..15.

    Returns
    -------
    numpy.ndarray of int64, the broadcast shape
    """
    mode = _int_array("mode", mode, 0, 2, "modes 0 (w8), 1 (w4), 2 (w2)")
    w = _int_array("w", w, -128, 255, "8-bit fields") & 0xFF
    kv4 = _int_array("kv4", kv4, 0, 1, "0/1 values")
    zp = _int_array("zp", zp, 0, 15, "4-bit zero points")
    w8 = _sext(w, 8)
    w4 = np.where(kv4 == 1, (w & 15) - zp, _sext(w & 15, 4))
    w2 = _sext(w & 3, 2)
    return np.where(mode == 0, w8, np.where(mode == 1, w4, w2)).astype(np.int64)


def pe_products(mode, x1, x2, w1, w2, kv4=0, zp=0, x_bits=8, x_signed=True):
    """The two products one ``accllm_pe`` beat adds to ``s1`` and ``s2`` (SPEC 10).

    Modes w8 and w4 (Fig. 10(d-1)): ``x1 * w1`` and ``x1 * w2`` (one activation, two weights
    of adjacent output channels; ``x2`` is ignored). Mode w2 (Fig. 10(d-2)):
    ``x1 * w1`` and ``x2 * w2`` (two activations picked by the sparse selector for two weight
    rows). Weights as :func:`pe_weights` reads them.

    Returns
    -------
    (t1, t2) : tuple of numpy.ndarray of int64, the broadcast shape
    """
    x_bits, x_signed, _ = _pe_config(x_bits, x_signed)
    what = f"{'signed' if x_signed else 'unsigned'} {x_bits}-bit values"
    x1 = _int_array("x1", x1, *_x_range(x_bits, x_signed), what)
    x2 = _int_array("x2", x2, *_x_range(x_bits, x_signed), what)
    mode = _int_array("mode", mode, 0, 2, "modes 0 (w8), 1 (w4), 2 (w2)")
    v1 = pe_weights(mode, w1, kv4, zp)
    v2 = pe_weights(mode, w2, kv4, zp)
    return x1 * v1, np.where(mode == 2, x2, x1) * v2


def _pe_flags(name, values, n):
    values = _int_array(name, values, 0, 1, "0/1 values")
    values = np.broadcast_to(values, (n,)) if values.ndim == 0 else values
    if values.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), not {values.shape}")
    return values.astype(bool)


def pe_run(mode, x1, x2, w1, w2, kv4, zp, first, last, *, acc_bits=32, x_bits=8,
           x_signed=True):
    """Run a stream of beats through ``accllm_pe`` and return one result per ``last`` beat.

    SPEC section 10. After reset both sums and the sticky ``overflow`` are 0; a beat with
    ``first`` clears them before adding its own products. Every beat adds its own mode's two
    products (:func:`pe_products`) to the exact running sums: the mode may change from beat
    to beat inside a dot product. ``overflow`` is set by a beat after which either exact
    running sum lies outside the signed ``acc_bits`` range, and stays set until the next
    ``first``. A beat with ``last`` emits ``(s1, s2, overflow)`` after its own update; without
    ``first`` on the next beat the sums and the flag carry on. The sums are given modulo
    ``2^acc_bits`` as signed values: the exact sums while ``overflow`` is 0 (SPEC leaves them
    unspecified once it is set; an ``acc_bits`` two's complement accumulator gives these).

    Parameters
    ----------
    mode, x1, x2, w1, w2, kv4, zp : array_like of int, shape (n,) (or scalars)
        Per-beat fields, ranges as in :func:`pe_weights` and :func:`pe_products`.
    first, last : array_like of 0/1, shape (n,)
    acc_bits : int
        Accumulator width, :func:`pe_product_bits` .. 48 (default 32).
    x_bits : int
        2..8 (default 8).
    x_signed : bool

    Returns
    -------
    dict of numpy.ndarray, one entry per ``last`` beat in stream order
        ``s1``, ``s2`` (int64) and ``overflow`` (int64, 0/1).

    Raises
    ------
    TypeError, ValueError
        If an argument has a wrong type, value or shape (the message names it).
    """
    x_bits, x_signed, acc_bits = _pe_config(x_bits, x_signed, acc_bits)
    t1, t2 = pe_products(mode, x1, x2, w1, w2, kv4, zp, x_bits, x_signed)
    t1, t2 = np.atleast_1d(t1), np.atleast_1d(t2)
    if t1.ndim != 1:
        raise ValueError(f"the beat fields must be one-dimensional, not of shape {t1.shape}")
    n = t1.shape[0]
    first = _pe_flags("first", first, n)
    last = _pe_flags("last", last, n)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return {"s1": empty, "s2": empty.copy(), "overflow": empty.copy()}
    starts = first.copy()
    starts[0] = True                                         # reset acts as a first
    start_of = np.flatnonzero(starts)[np.cumsum(starts) - 1]

    def running(values):                                     # segment prefix sums, inclusive
        c = np.concatenate([np.zeros(1, np.int64), np.cumsum(values, dtype=np.int64)])
        return c[1:] - c[start_of]

    lo, hi = _signed_range(acc_bits)
    s1, s2 = running(t1), running(t2)                        # |products| < 2^16: exact
    out = (s1 < lo) | (s1 > hi) | (s2 < lo) | (s2 > hi)
    overflow = running(out.astype(np.int64)) > 0
    return {"s1": _sext(s1, acc_bits)[last], "s2": _sext(s2, acc_bits)[last],
            "overflow": overflow[last].astype(np.int64)}
