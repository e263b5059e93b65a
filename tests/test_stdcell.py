"""The standard-cell flow (fpga/stdcell/) on the three open libraries of ``../shared/pdk``
(``PDK_ROOT`` when set; the ``pdk_root`` fixture): the libraries are found in the volare/ciel layout, their smallest
NAND2 is the one the PDK README states, and three units map on each library, the area Yosys
reports equal to the cell areas our Liberty reader finds, the flip-flop share and an
estimated clock. Bad input: one line, exit 2, nothing written."""

import json
from pathlib import Path

import pytest

from qllm_cores.fpga.area import find_units
from qllm_cores.fpga.stdcell import (LIBRARIES, LibraryError, facts_for, find_liberty,
                                     library_facts, stdcell_synth)
from qllm_cores.fpga.stdcell.cli import main as stdcell_main
from qllm_cores.gen.verilog import generate

ROOT = Path(__file__).resolve().parent.parent

#: The smallest 2-input NAND of each library (../shared/pdk/README.md).
NAND2 = {"sky130": ("sky130_fd_sc_hd__nand2_1", 3.7536), "ihp": ("sg13g2_nand2_1", 7.2576),
         "asap7": ("NAND2xp33_ASAP7_75t_R", 0.05832)}
#: Three small units (their defaults), mapped on every library.
UNITS = ("kllm_concat", "accllm_plain_mul", "p3_pe")


@pytest.fixture(scope="module")
def verilog(tmp_path_factory):
    folder = tmp_path_factory.mktemp("verilog")
    for unit in UNITS:
        generate(unit, {}, out_dir=folder)
    return folder


def test_the_libraries_are_found_in_the_pdk_root_layout(pdk_root):
    for library in LIBRARIES:
        files = find_liberty(library, pdk_root)
        assert files and all(path.is_file() for path in files)
        assert all(path.is_relative_to(pdk_root / LIBRARIES[library].pdk) for path in files)
    assert len(find_liberty("asap7", pdk_root)) == 5


def test_a_missing_library_names_the_pdk_root(tmp_path, monkeypatch):
    monkeypatch.delenv("PDK_ROOT", raising=False)
    with pytest.raises(LibraryError, match="PDK_ROOT is not set"):
        find_liberty("sky130")
    with pytest.raises(LibraryError, match=f"PDK_ROOT={tmp_path}"):
        find_liberty("ihp", tmp_path)
    with pytest.raises(LibraryError, match="library must be one of"):
        find_liberty("tsmc28", tmp_path)


@pytest.mark.parametrize("library", sorted(NAND2))
def test_the_nand2_is_the_readme_s(library, pdk_root):
    facts = library_facts(find_liberty(library, pdk_root))
    assert (facts.nand2, facts.nand2_area) == NAND2[library]
    assert facts.flop_timing and all(0 < q < 1000 and 0 < s < 1000
                                     for q, s in facts.flop_timing.values())


@pytest.mark.synth
@pytest.mark.parametrize("library", sorted(NAND2))
@pytest.mark.parametrize("unit", UNITS)
def test_three_units_map_on_every_library(unit, library, verilog, tmp_path, pdk_root):
    [found] = find_units(verilog, [unit])
    files = find_liberty(library, pdk_root)
    result = stdcell_synth(found.verilog, found.top, library, tmp_path, liberty=files)
    facts = facts_for(files)
    text = (tmp_path / "area.json").read_text()
    stat = json.loads(text[text.index("{"):])          # (after Yosys's "Found gzip" line)
    cells = next(iter(stat["modules"].values()))["num_cells_by_type"]
    assert {name for name in cells if name not in facts.areas} <= {"$scopeinfo"}
    assert result.area == pytest.approx(sum(facts.areas[name] * count
                                            for name, count in cells.items()
                                            if name in facts.areas), rel=1e-6)
    assert result.nand2_eq == pytest.approx(result.area / NAND2[library][1])
    assert 0 < result.ff_share <= 1 and result.flop in facts.sequential
    assert result.delay > 0 and 0 < result.fmax_mhz < 1e6 / result.delay


def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, verilog, pdk_root):
    build = tmp_path / "build"
    (build / "verilog").mkdir(parents=True)
    for path in verilog.glob("kllm_concat.*"):
        (build / "verilog" / path.name).write_bytes(path.read_bytes())
    pdk = ["--pdk-root", str(pdk_root)]
    cases = [[*pdk, "--library", "tsmc28"], ["--pdk-root", str(tmp_path / "none")],
             ["--liberty", str(tmp_path / "missing.lib")], [*pdk, "--unit", "nosuch"]]
    for extra in cases:
        status = stdcell_main(["--build-dir", str(build), *extra])
        err = capsys.readouterr().err.strip().splitlines()
        assert status == 2 and len(err) == 1 and err[0].startswith("fpga stdcell:"), extra
    assert not (build / "reports").exists()
