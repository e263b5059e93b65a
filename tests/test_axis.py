# amaranth: UnusedElaboratable=no
# (the wrapper's error tests build components that are never elaborated)
"""``qllm verilog --axis``: the AXI4-Stream form of a unit (hdl.common.axis, gen.axis) and its
cocotbext-axi bench (verif.axis_bench) against the golden adapters (docs/integration.md)."""

import json
import subprocess
import sys

import pytest
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from qllm_cores.gen import generate
from qllm_cores.hdl.common.axis import AxisWrapper, last_field
from qllm_cores.verif.axis_runner import run_axis_bench
from qllm_cores.verif.runner import BenchFailure, edit_site


def run_gen(*args, cwd):
    return subprocess.run([sys.executable, "-m", "qllm_cores.gen", *args], cwd=cwd,
                          capture_output=True, text=True)


def module_ports(text, top):
    """The port names of module ``top`` in Verilog ``text`` (its input and output
    declarations)."""
    body = text.split(f"module {top}(", 1)[1].split("endmodule", 1)[0]
    return {line.rstrip(";").split()[-1] for line in body.splitlines()
            if line.split()[:1] in (["input"], ["output"])}


# --- names, widths, manifest ------------------------------------------------------------------


def test_one_stream_each_way_takes_the_plain_axi_names(tmp_path):
    path = generate("kllm_idx_counter", {"idx_bits": 3, "n_inputs": 4}, tmp_path, axis=True)
    assert path.name == "kllm_idx_counter_axis.v"
    assert module_ports(path.read_text(), "kllm_idx_counter_axis") == {
        "aclk", "aresetn", "s_axis_tdata", "s_axis_tvalid", "s_axis_tready", "s_axis_tlast",
        "m_axis_tdata", "m_axis_tvalid", "m_axis_tready", "m_axis_tlast"}
    manifest = json.loads(path.with_suffix(".json").read_text())
    plain = json.loads(generate("kllm_idx_counter", {"idx_bits": 3, "n_inputs": 4},
                                tmp_path / "plain").with_suffix(".json").read_text())
    # The unit's manifest (ports: the tdata packing), with the wrapper's top, clock, reset.
    assert manifest["ports"] == plain["ports"] and manifest["params"] == plain["params"]
    assert manifest["unit"] == "kllm_idx_counter" and manifest["top"] == "kllm_idx_counter_axis"
    assert manifest["clock"] == {"name": "aclk", "edge": "rising"}
    assert manifest["reset"] == {"name": "aresetn", "polarity": "low", "synchronous": True}
    # i: 4 x 3-bit idx + 4-bit mask + last = 17 bits -> 3 bytes; o: 13-bit count + last.
    assert manifest["axis"] == {
        "s_axis": {"port": "i", "direction": "in", "payload_width": 17, "tdata_width": 24,
                   "tlast": "last"},
        "m_axis": {"port": "o", "direction": "out", "payload_width": 14, "tdata_width": 16,
                   "tlast": "last"}}
    header = path.read_text().split("/*")[0]
    assert "clock aclk (rising edge); reset aresetn (active low, synchronous)" in header
    assert "s_axis = i (tlast = last), m_axis = o (tlast = last)" in header


def test_several_streams_of_a_direction_carry_their_names(tmp_path):
    """oaken_dequantizer: three inputs (coo has `last`), one output, a plain flag."""
    path = generate("oaken_dequantizer", {"lanes": 4, "vec_len": 16}, tmp_path, axis=True)
    ports = module_ports(path.read_text(), "oaken_dequantizer_axis")
    expected = {"aclk", "aresetn", "coo_error", "s_axis_coo_tlast"}
    expected |= {f"{prefix}_t{signal}" for prefix in ("s_axis_hdr", "s_axis_dense",
                                                       "s_axis_coo", "m_axis")
                 for signal in ("data", "valid", "ready")}
    assert ports == expected
    axis = json.loads(path.with_suffix(".json").read_text())["axis"]
    assert {prefix: (port["port"], port["tlast"]) for prefix, port in axis.items()} == {
        "s_axis_hdr": ("hdr", None), "s_axis_dense": ("dense", None),
        "s_axis_coo": ("coo", "last"), "m_axis": ("o", None)}
    assert all(port["tdata_width"] % 8 == 0 and 0 <= port["tdata_width"] - port["payload_width"]
               < 8 for port in axis.values())


@pytest.mark.parametrize("unit,params,prefix", [
    ("kllm_concat", {"lanes": 3}, ""),
    ("kllm_idx_counter", {"idx_bits": 3}, "q_"),
    ("oaken_dequantizer", {"lanes": 4, "vec_len": 16}, ""),
    ("fp16_pcu", {"lanes": 2}, "p_"),                 # shared modules, prefixed
])
def test_the_axis_form_lints_clean_on_its_own(tmp_path, unit, params, prefix):
    from qllm_cores.verif.__main__ import lint_file

    path = generate(unit, params, tmp_path, prefix=prefix, axis=True)
    assert path.name == f"{prefix}{unit}_axis.v"
    text = path.read_text()
    modules = [line.split()[1].split("(")[0] for line in text.splitlines()
               if line.startswith("module ")]
    assert modules[0] == f"{prefix}{unit}_axis"
    assert all(name.lstrip("\\").startswith(prefix) for name in modules)
    assert lint_file(path, f"{prefix}{unit}_axis") == []


def test_last_field_rule():
    assert last_field(data.StructLayout({"x": 8, "last": 1})) == 8
    assert last_field(data.StructLayout({"last": 2})) is None       # not a flag
    assert last_field(data.StructLayout({"first": 1})) is None
    assert last_field(data.ArrayLayout(1, 4)) is None


class _NoStreams(wiring.Component):
    flag: Out(1)

    def elaborate(self, platform):
        raise AssertionError("never elaborated")


class _Clash(wiring.Component):
    i: In(stream.Signature(4))
    aclk: Out(1)

    def elaborate(self, platform):
        raise AssertionError("never elaborated")


def test_the_wrapper_refuses_what_it_cannot_name():
    with pytest.raises(ValueError, match="_NoStreams has no stream ports"):
        AxisWrapper(_NoStreams())
    with pytest.raises(ValueError, match=r"_Clash.aclk: the name of an AXI port"):
        AxisWrapper(_Clash())


def test_cli_axis_with_prefix_and_bad_input(tmp_path):
    result = run_gen("verilog", "--axis", "--unit", "kllm_concat", "--set", "lanes=2",
                     "--prefix", "x_", "--out", str(tmp_path / "v"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "v").iterdir()) == ["x_kllm_concat_axis.json",
                                                                 "x_kllm_concat_axis.v"]
    # A bad parameter: one line, exit 2, nothing written.
    result = run_gen("verilog", "--axis", "--unit", "kllm_concat", "--set", "lanes=0",
                     "--out", str(tmp_path / "w"), cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "lanes" in result.stderr and not (tmp_path / "w").exists()


# --- cocotbext-axi benches against the golden adapters ----------------------------------------


@pytest.mark.sim
def test_kllm_concat_axis_matches_the_golden_adapter():
    metrics = run_axis_bench("kllm_concat", {"lanes": 4}, beats=200)
    assert metrics["axis"]["beats_out"] == {"m_axis": 200}
    # Gaps and backpressure: 200 beats took well over 200 cycles.
    assert metrics["axis"]["cycles"] > 250
    # The bench fails on a wrong model...
    with pytest.raises(BenchFailure, match=r"mismatches(.|\n)*o\.y beat 0"):
        run_axis_bench("kllm_concat", {"lanes": 4}, beats=200, wrong_model=True, name="wrong")
    # ... and on a wrapper that ignores the sink's backpressure (beats are lost).
    deaf = ("deaf", lambda text: edit_site(
        text, r"assign o__ready = m_axis_tready & aresetn;", "assign o__ready = 1'h1;"))
    with pytest.raises(BenchFailure, match="beats received"):
        run_axis_bench("kllm_concat", {"lanes": 4}, beats=200, mutation=deaf)


#: The offset of `last` in kllm_idx_counter's input at n_inputs=4, idx_bits=3 (4 x 3 + 4).
LAST_BIT = 16


@pytest.mark.sim
def test_kllm_idx_counter_axis_frames_follow_tlast():
    """Input frames end at the reductions' `last` beats (the `last` bit in tdata is sent
    inverted), output frames at the final bin of each readout."""
    params = {"idx_bits": 3, "n_inputs": 4}
    metrics = run_axis_bench("kllm_idx_counter", params, beats=96)
    assert metrics["axis"]["beats_out"]["m_axis"] % 8 == 0 and \
        metrics["axis"]["beats_out"]["m_axis"] >= 8
    # A wrapper that took `last` from tdata instead of tlast fails...
    from_tdata = ("last_from_tdata", lambda text: edit_site(
        text, r"\(s_axis_tlast\)", f"(s_axis_tdata[{LAST_BIT}])"))
    with pytest.raises(BenchFailure, match="mismatches"):
        run_axis_bench("kllm_idx_counter", params, beats=96, mutation=from_tdata)
    # ... and so does one whose output tlast is not the `last` field (every beat a frame).
    stuck = ("tlast_high", lambda text: edit_site(
        text, r"assign m_axis_tlast = [^;]+;", "assign m_axis_tlast = 1'h1;"))
    with pytest.raises(BenchFailure, match="tlast is not the last field"):
        run_axis_bench("kllm_idx_counter", params, beats=96, mutation=stuck)


@pytest.mark.sim
def test_oaken_dequantizer_axis_with_three_input_streams():
    metrics = run_axis_bench("oaken_dequantizer", {"lanes": 4, "vec_len": 16}, beats=8)
    assert metrics["axis"]["beats_out"] == {"m_axis": 8 * 16 // 4}
    assert metrics["axis"]["signals"] == {"coo_error": 0}
    with pytest.raises(BenchFailure, match="beat 0"):
        run_axis_bench("oaken_dequantizer", {"lanes": 4, "vec_len": 16}, beats=8,
                       wrong_model=True, name="wrong")
