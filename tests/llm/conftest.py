"""Fixtures shared by the ``golden.llm`` tests."""

import pytest


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    """One BLAS thread: on a loaded machine OpenBLAS's threads spin, and the forward pass runs
    several times slower with them (docs/llm.md)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:                                   # pragma: no cover
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
