"""Golden model of AccLLM's DSP packing: the DSP48E2 arithmetic, two products per DSP (modes
w8/w4) or four (mode w2), their extraction from P, and accumulation in P.

Reference: Liang et al., "AccLLM: Accelerating Long-Context LLM Inference Via
Algorithm-Hardware Co-Design", section V-B3 (Fig. 10(d), DSP packing); contract section 6
(``accllm_dsp_mul``). Integer models, bit-exact with the RTL.

Readings fixed here (the paper and the contract leave them open):

* **DSP48E2** (contract 6, UG579): the pre-adder output AD is 27 bits and wraps; the 27 x 18
  product is exact (it fits 45 bits) and P is taken modulo 2^48, signed. Only the ``(A + D) * B``
  and accumulate (``P + (A + D) * B``) paths are modelled.
* **Field extraction** (contract 6): P holds signed fields at shifts ``s_0 < s_1 < ...`` with
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
* **Weights in the DSP modes** are signed two's complement (contract 6); a 2-bit code ``q`` of
  :func:`quantize_w2` enters as ``q - 2`` with the zero point shifted to ``Z - 2``.
"""

from typing import NamedTuple

import numpy as np

from ..common.checks import check_int as _check_int
from ..common.checks import check_int_array as _int_array
from .checks import check_bool as _check_bool
from .checks import sext as _sext
from .checks import signed_range as _signed_range
from .checks import x_range as _x_range

__all__ = [
    "W8Products", "W2Products",
    "A_BITS", "D_BITS", "B_BITS", "P_BITS", "AD_BITS", "W8_SHIFTS", "W2_SHIFTS",
    "dsp48e2_p", "product_range", "pack_w8", "extract_w8", "b_fits", "pack_w2",
    "packed_p_w2", "extract_w2", "max_accumulation_depth", "accumulate_packed", "run_sums",
]

A_BITS = 27         # A input of the pre-adder (A[26:0] of the 30-bit A port)
D_BITS = 27         # D port
AD_BITS = 27        # pre-adder output (AD register)
B_BITS = 18         # B port
P_BITS = 48         # P register
W8_SHIFTS = (0, 18)                 # modes w8/w4: X*W1, X*W2
W2_SHIFTS = (0, 10, 22, 32)         # mode w2: X1*W1, X2*W1, X1*W2, X2*W2
_MODES = ("w8", "w4", "w2")


class W8Products(NamedTuple):
    """Products of modes w8/w4: ``p1 = x * w1``, ``p2 = x * w2`` (int64)."""

    p1: np.ndarray
    p2: np.ndarray


class W2Products(NamedTuple):
    """Products of mode w2, ``p_ij = x_i * w_j`` (int64), in contract 6 output order."""

    p11: np.ndarray
    p22: np.ndarray
    p12: np.ndarray
    p21: np.ndarray


def _check_mode(mode):
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a string, not {mode!r}")
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, _MODES))}, not {mode!r}")
    return mode


def _fields(shifts):
    return tuple(b - a for a, b in zip(shifts, shifts[1:] + (P_BITS,)))


# --- DSP48E2 ---------------------------------------------------------------------------------


def dsp48e2_p(a, d, b, c=0):
    """Compute the DSP48E2 output ``P = ((A + D) mod 2^27) * B (+ C) mod 2^48`` (signed).

    contract section 6; UG579 pre-adder and multiplier: the pre-adder output AD is 27 bits wide,
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
    """Pack one activation and two weights into the DSP ports, modes w8/w4 (contract 6).

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
    """Recover ``p1 = x w1`` and ``p2 = x w2`` from P (modes w8/w4, contract 6).

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
    """Tell whether ``B = X1 + (X2 << 10)`` fits the signed 18-bit B port (contract 6, mode w2).

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
    """Pack two activations and two 2-bit weights into the DSP ports, mode w2 (contract 6).

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
    """Recover ``p11, p22, p12, p21`` (``p_ij = x_i w_j``) from a mode-w2 P word (contract 6).

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
