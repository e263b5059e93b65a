"""verif.runner's C++ optimization of Verilator builds (QLLM_CXX_OPT, ``cxx_opt``)."""

import os

import pytest

from qllm_cores.verif.runner import cxx_environment, cxx_optimization


def test_cxx_optimization_comes_from_the_argument_then_the_environment(monkeypatch):
    monkeypatch.setenv("QLLM_CXX_OPT", "-O1")
    assert cxx_optimization() == "-O1"
    assert cxx_optimization("-Os") == "-Os"
    monkeypatch.delenv("QLLM_CXX_OPT")
    assert cxx_optimization() == ""


def test_cxx_optimization_reaches_make_for_one_build_only(monkeypatch):
    monkeypatch.setenv("MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include")
    with cxx_environment("-O0"):
        assert os.environ["MAKEFLAGS"].split() == ["CFG_CXXFLAGS_PCH_I=-include", "OPT_FAST=-O0"]
    assert os.environ["MAKEFLAGS"] == "CFG_CXXFLAGS_PCH_I=-include"
    with cxx_environment(""):
        assert "OPT_FAST" not in os.environ["MAKEFLAGS"]


def test_invalid_cxx_optimization_names_the_variable(monkeypatch):
    monkeypatch.setenv("QLLM_CXX_OPT", "-O9")
    with pytest.raises(ValueError, match=r"QLLM_CXX_OPT must be one of .*not '-O9'"):
        cxx_optimization()
