# amaranth: UnusedElaboratable=no
"""The quick proofs of ``make formal`` (verif/formal/, pip only) on the concat unit: the stream
hold rule and the three counting properties are proved, and each proof bites: one bug seeded in
the unit's netlist (``edit_site`` on the proof's RTLIL) per property fails it with a
counterexample trace written beside the proof."""

import pytest

from qllm_cores.gen.registry import resolve_params
from qllm_cores.verif.formal import Proof
from qllm_cores.verif.formal.counting import PROPERTIES as COUNTING
from qllm_cores.verif.formal.counting import StreamCountHarness
from qllm_cores.verif.formal.stream import StreamHoldHarness
from qllm_cores.verif.runner import edit_site

PARAMS = resolve_params("kllm_concat", None, {"lanes": 2})[1]

# Sites in the concat unit's netlist: its stage's clock enable is ``~o.valid | o.ready``, and
# the next ``o.valid`` is ``i.valid`` when enabled.
ALWAYS_ENABLED = (r"connect \\B \\o__ready \[0\]\n(\s*)connect \\Y \\concat_ce",
                  r"connect \\B 1'1\n\1connect \\Y \\concat_ce")
VALID_FROM_NOTHING = (r"assign \$2 \[0\] \\i__valid \[0\]", r"assign $2 [0] 1'1")
VALID_NEVER = (r"assign \$2 \[0\] \\i__valid \[0\]", r"assign $2 [0] 1'0")

SEEDED = {  # property -> the bug that must fail it
    "stream hold": ALWAYS_ENABLED,               # overwrites a waiting beat
    "nothing from nothing": VALID_FROM_NOTHING,  # offers a beat no input gave
    "bounded in flight": ALWAYS_ENABLED,         # keeps taking inputs while the output waits
    "drains": VALID_NEVER,                       # takes inputs and never answers
}


def proof(prop):
    if prop == "stream hold":
        return Proof("kllm_concat", "lanes=2", prop, StreamHoldHarness, PARAMS)
    return Proof("kllm_concat", "lanes=2", prop,
                 lambda dut: StreamCountHarness(dut, "kllm_concat", PARAMS, prop), PARAMS)


@pytest.mark.parametrize("prop", ["stream hold", *COUNTING])
def test_proved_on_the_concat_unit(prop, tmp_path):
    result = proof(prop).run(tmp_path)
    assert result.status == "PASS", result
    assert result.traces == []


@pytest.mark.parametrize("prop", ["stream hold", *COUNTING])
def test_a_seeded_bug_fails_with_a_trace(prop, tmp_path):
    pattern, replacement = SEEDED[prop]
    result = proof(prop).run(tmp_path, mutation=lambda text: edit_site(text, pattern,
                                                                       replacement))
    assert result.status == "FAIL", result
    assert result.traces and all(trace.stat().st_size > 0 for trace in result.traces)
