"""Argument checks and integer helpers shared by the AccLLM golden models (messages name the
argument and the value)."""

import numpy as np

__all__ = ["signed_range", "x_range", "check_bool", "sext"]


def signed_range(bits):
    """``(min, max)`` of a signed ``bits``-bit value."""
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def x_range(x_bits, x_signed):
    """``(min, max)`` of an ``x_bits``-bit activation, signed or unsigned."""
    return signed_range(x_bits) if x_signed else (0, (1 << x_bits) - 1)


def check_bool(name, value):
    """``value`` as a bool if it is one (``numpy.bool_`` included); else TypeError."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, not {value!r}")
    return bool(value)


def sext(v, bits):
    """Read the low ``bits`` bits of int64 ``v`` as a signed two's complement value."""
    half = np.int64(1 << (bits - 1))
    return ((v + half) & np.int64((1 << bits) - 1)) - half
