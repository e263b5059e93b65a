"""The two checks every proof test makes: a row is proved (PASS, no counterexample trace),
and a bug seeded in the harness's RTLIL (``verif.runner.edit_site``) fails it with a trace."""

from qllm_cores.verif.runner import edit_site

__all__ = ["assert_proved", "assert_seeded_bug_fails"]


def assert_proved(proof, folder):
    """Run ``proof`` in ``folder``: PASS, and no trace."""
    result = proof.run(folder)
    assert result.status == "PASS", (result.detail, result.folder)
    assert result.traces == []


def assert_seeded_bug_fails(proof, folder, pattern, replacement, sites=1):
    """Run ``proof`` with ``pattern`` replaced at ``sites`` places of its RTLIL: FAIL, with
    a non-empty counterexample trace."""
    result = proof.run(folder, mutation=lambda text: edit_site(text, pattern, replacement,
                                                                sites=sites))
    assert result.status == "FAIL", (result.detail, result.folder)
    assert result.traces and all(trace.stat().st_size > 0 for trace in result.traces)
