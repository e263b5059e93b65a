# amaranth: UnusedElaboratable=no
"""The quick proofs of ``make formal`` (verif/formal.py, SymbiYosys from PyPI): the stream hold
rule holds on a unit, and the proof bites: a unit that withdraws a waiting output beat fails
with a counterexample trace written beside the proof."""

from gen.registry import resolve_params
from hdl.kllm_concat import KllmConcat
from tests.concat_mutants import WithdrawingConcat
from verif.formal import prove_stream_hold


def test_the_hold_rule_is_proved_on_the_concat_unit(tmp_path):
    params = resolve_params("kllm_concat", None, {"lanes": 2, "pipeline": 0})[1]
    result = prove_stream_hold(KllmConcat(**params), "concat", build_dir=tmp_path)
    assert result.status == "PASS", (result.folder / "hold" / "logfile.txt").read_text()[-2000:]
    assert result.traces == []


def test_a_withdrawn_beat_fails_with_a_trace(tmp_path):
    params = resolve_params("kllm_concat", None, {"lanes": 2})[1]
    result = prove_stream_hold(WithdrawingConcat(**params), "withdrawing", build_dir=tmp_path)
    assert result.status == "FAIL"
    assert result.traces and all(trace.stat().st_size > 0 for trace in result.traces)
