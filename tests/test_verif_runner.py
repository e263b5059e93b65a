"""verif.runner's tool set-up: the C++ optimization of Verilator builds (QLLM_CXX_OPT)."""

import os

import pytest

from verif.runner import tool_environment


def test_cxx_optimization_reaches_make(monkeypatch):
    monkeypatch.setenv("MAKEFLAGS", "")
    monkeypatch.setenv("QLLM_CXX_OPT", "-O1")
    tool_environment()
    assert "OPT_FAST=-O1" in os.environ["MAKEFLAGS"].split()
    monkeypatch.setenv("MAKEFLAGS", "")
    monkeypatch.setenv("QLLM_CXX_OPT", "")
    tool_environment()
    assert not any(flag.startswith("OPT_FAST=") for flag in os.environ["MAKEFLAGS"].split())


def test_invalid_cxx_optimization_names_the_variable(monkeypatch):
    monkeypatch.setenv("QLLM_CXX_OPT", "-O9")
    with pytest.raises(ValueError, match=r"QLLM_CXX_OPT must be one of .*not '-O9'"):
        tool_environment()
