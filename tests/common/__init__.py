"""Tests of the shared building blocks of hdl/common/."""
