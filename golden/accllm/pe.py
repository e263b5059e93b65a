"""Golden model of ``accllm_pe``: the AccLLM processing element, per-beat mode (w8, w4 with
KV4 zero points, w2), two products per beat, accumulation with a sticky overflow.

Reference: Liang et al., "AccLLM: Accelerating Long-Context LLM Inference Via
Algorithm-Hardware Co-Design", section V-B3 (Fig. 10(d-1), (d-2)) and IV-B2 (KV4, Fig. 8(b));
contract section 10. Integer models, bit-exact with the RTL; the products are those of
:mod:`golden.accllm.dsp_mul`'s packing.
"""

import numpy as np

from ..common.checks import check_int as _check_int
from ..common.checks import check_int_array as _int_array
from .checks import check_bool as _check_bool
from .checks import sext as _sext
from .checks import signed_range as _signed_range
from .checks import x_range as _x_range
from .dsp_mul import product_range

__all__ = ["PE_MODES", "pe_product_bits", "pe_weights", "pe_products", "pe_run"]

#: ``mode`` field values of ``accllm_pe`` (contract 10): 0 = w8, 1 = w4, 2 = w2 (3 is reserved).
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
    """The signed weight an ``accllm_pe`` beat multiplies by (contract 10), element-wise.

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
    """The two products one ``accllm_pe`` beat adds to ``s1`` and ``s2`` (contract 10).

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

    contract section 10. After reset both sums and the sticky ``overflow`` are 0; a beat with
    ``first`` clears them before adding its own products. Every beat adds its own mode's two
    products (:func:`pe_products`) to the exact running sums: the mode may change from beat
    to beat inside a dot product. ``overflow`` is set by a beat after which either exact
    running sum lies outside the signed ``acc_bits`` range, and stays set until the next
    ``first``. A beat with ``last`` emits ``(s1, s2, overflow)`` after its own update; without
    ``first`` on the next beat the sums and the flag carry on. The sums are given modulo
    ``2^acc_bits`` as signed values: the exact sums while ``overflow`` is 0 (the contract leaves them
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
