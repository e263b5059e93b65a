"""Argument checks shared by Oaken's offline models (:mod:`.profile`, :mod:`.baselines`;
messages name the argument and the value)."""

import math
import numbers

import numpy as np

from ..common.checks import check_int_array as _check_int_array

__all__ = ["check_fraction", "check_ratios", "check_samples", "check_float_array"]


def check_fraction(name, value, low=0.0, high=1.0):
    """``value`` as a float if it is a real number in ``low..high``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, not {value!r}")
    value = float(value)
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{name} must be in range {low:g}..{high:g}, not {value!r}")
    return value


def check_ratios(outer, inner, outer_split):
    """The group fractions as floats, each in 0..1, with ``outer + inner <= 1``."""
    outer = check_fraction("outer", outer)
    inner = check_fraction("inner", inner)
    outer_split = check_fraction("outer_split", outer_split)
    if outer + inner > 1.0 + 1e-12:
        raise ValueError(f"outer + inner must be at most 1 (middle = 1 - outer - inner), "
                         f"not {outer!r} + {inner!r} = {outer + inner!r}")
    return outer, inner, outer_split


def check_samples(name, values, min_ndim, data_bits, shape_doc):
    """``values`` as int64: signed ``data_bits``-bit fixed-point KV values, at least
    ``min_ndim``-D and not empty (``shape_doc`` names the expected shape)."""
    values = np.asarray(values)
    if values.dtype == np.bool_ or not np.issubdtype(values.dtype, np.integer):
        raise TypeError(f"{name} must hold integers (fixed-point KV values), not {values.dtype}")
    if values.ndim < min_ndim:
        raise ValueError(f"{name} must have shape {shape_doc}, not {values.shape}")
    if 0 in values.shape:
        raise ValueError(f"{name} must not be empty, not of shape {values.shape}")
    lo, hi = -(1 << (data_bits - 1)), (1 << (data_bits - 1)) - 1
    return _check_int_array(name, values, lo, hi, f"signed {data_bits}-bit values")


def check_float_array(name, values, min_ndim=1):
    """``values`` as float64: finite real numbers, non-empty, at least ``min_ndim``-D."""
    values = np.asarray(values)
    if values.dtype == np.bool_ or not (np.issubdtype(values.dtype, np.integer)
                                        or np.issubdtype(values.dtype, np.floating)):
        raise TypeError(f"{name} must hold real numbers, not {values.dtype}")
    if values.ndim < min_ndim or 0 in values.shape:
        raise ValueError(f"{name} must be a non-empty array with at least {min_ndim} "
                         f"dimension(s), not of shape {values.shape}")
    values = values.astype(np.float64)
    if not np.isfinite(values).all():
        raise ValueError(f"{name} must hold finite values")
    return values
