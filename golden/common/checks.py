"""Argument checks shared by the golden models (messages name the argument and the value)."""

import argparse
import sys

import numpy as np

__all__ = ["check_int", "check_int_array", "positive_int_arg", "non_negative_int_arg",
           "report_main"]


def check_int(name, value, min_value, max_value=None):
    """Return ``value`` as an int if it is an integer (not a bool) in ``min_value..max_value``
    (no upper bound when ``max_value`` is None); else raise TypeError or ValueError."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    value = int(value)
    if value < min_value or (max_value is not None and value > max_value):
        allowed = f"{min_value}..{max_value}" if max_value is not None else f">= {min_value}"
        raise ValueError(f"{name} must be in range {allowed}, not {value}")
    return value


def check_int_array(name, values, min_value, max_value, what):
    """Return ``values`` as an int64 array if it holds integers in ``min_value..max_value``.

    ``what`` describes the values in the message (``"4-bit codes"``). An empty list (which
    NumPy reads as float64) is accepted; booleans and non-integer dtypes raise TypeError, an
    element out of range raises ValueError naming the first one.
    """
    values = np.asarray(values)
    if values.size == 0 and values.dtype == np.float64:      # [] arrives as float64
        return values.astype(np.int64)
    if values.dtype == np.bool_ or not np.issubdtype(values.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, not {values.dtype}")
    if values.dtype == np.uint64 and values.size and values.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{name} must hold {what} ({min_value}..{max_value}), "
                         f"not {int(values.max())}")
    values = values.astype(np.int64)
    bad = (values < min_value) | (values > max_value)
    if bad.any():
        raise ValueError(f"{name} must hold {what} ({min_value}..{max_value}), "
                         f"not {int(values[bad].flat[0])}")
    return values


def positive_int_arg(text):
    """``argparse`` type of the report commands: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {value}")
    return value


def non_negative_int_arg(text):
    """``argparse`` type of the report commands: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, not {value}")
    return value


def report_main(parser, run, argv=None):
    """Command-line entry of a report: parse ``argv`` (default ``sys.argv[1:]``) with
    ``parser``, call ``run(args, sys.stdout)``; a ``TypeError``/``ValueError`` from the run
    (a bad argument value) becomes ``parser.error`` (message, exit status 2). Returns 0."""
    args = parser.parse_args(argv)
    try:
        run(args, sys.stdout)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    return 0
