# amaranth: UnusedElaboratable=no
"""The stream proofs of ``oaken_quantizer`` (verif/formal/cases.py): its hold rule at
``pipeline`` 0 and its ``hdr``/``dense`` counting are proved with the unit's invariants
(:mod:`hdl.common.invariants`: credits, queue levels, the chunk buffer's beats) and the account's
lemmas, and they bite:

* the COO queue's head entry selected by the tail's bank instead of the head's
  (``coo_queue_head[0]`` -> ``coo_queue_tail[0]``): a waiting COO beat changes when the
  gearbox writes, and the hold assertion of the harness itself fails (not an invariant);
* the header queue's room ignored by ``i.ready`` (``hdr_room`` tied high): the unit takes
  chunks the header queue cannot hold, and "bounded in flight" fails from reset.

The invariants exist only in a proof's elaboration: the Verilog carries none of them.
"""

from dataclasses import replace

import pytest
from amaranth.back import verilog

from tests.formal_checks import assert_proved, assert_seeded_bug_fails
from qllm_cores.gen.registry import resolve_params
from qllm_cores.hdl.oaken.quantizer.quantizer import OakenQuantizer
from qllm_cores.hdl.p3.pcu import P3Pcu
from qllm_cores.verif.formal import cases

UNIT = "oaken_quantizer"
HEAD_FROM_TAIL = (r"connect \\S \\coo_queue_head \[0\]", r"connect \\S \\coo_queue_tail [0]")
HEADER_ROOM_IGNORED = (r"connect \\B \\hdr_room \[0\]", r"connect \\B 1'1")


def _row(prop, pipeline=0, streams=None):
    [row] = [row for row in cases.stream_proofs(UNIT)
             if row.prop == prop and row.params["pipeline"] == pipeline
             and (streams is None or row.configuration.endswith(f"streams={streams}"))]
    return row


def test_the_hold_rule_is_proved(tmp_path):
    assert_proved(_row("stream hold"), tmp_path)


def test_the_header_and_dense_counts_are_proved(tmp_path):
    row = _row("nothing from nothing", streams="hdr+dense")
    assert row.engine == "kind"
    assert_proved(row, tmp_path)


def test_the_coo_counts_are_bounded_with_a_reason():
    row = _row("drains", streams="coo")
    assert row.engine == "bmc" and "bounded by design" in row.note


def test_a_waiting_coo_beat_that_changes_fails_the_hold_proof(tmp_path):
    # (at the counting shape, where PDR finds the trace in seconds)
    _, params = resolve_params(UNIT, None, {**cases.COUNTING_SHAPES[UNIT], "pipeline": 0})
    row = replace(_row("stream hold"), params=params, configuration="seeded")
    assert_seeded_bug_fails(row, tmp_path, *HEAD_FROM_TAIL)


def test_ignoring_the_header_room_fails_bounded_in_flight(tmp_path):
    row = _row("bounded in flight", streams="hdr+dense")
    assert_seeded_bug_fails(row, tmp_path, *HEADER_ROOM_IGNORED)


@pytest.mark.parametrize("unit", [OakenQuantizer(), P3Pcu(pes=4)], ids=["quantizer", "p3_pcu"])
def test_the_verilog_carries_no_invariant(unit):
    text = verilog.convert(unit, emit_src=False)
    assert "invariant" not in text and "shadow_valid" not in text
    assert "assert" not in text
