"""One row of ``python -m qllm_cores.golden.paper``'s table (:class:`Row`), and how a number of
ours is said to agree with the paper's (:func:`agree`, :func:`agree_points`)."""

from typing import NamedTuple

__all__ = ["Row", "agree", "agree_points"]


class Row(NamedTuple):
    """One line of the table.

    ``quote`` is the exact substring of the paper text that ``paper_value`` renders (None when
    the paper gives no number); ``values`` holds our numbers for programmatic checks.
    """

    paper: str
    quantity: str
    paper_value: str
    ours: str
    how_computed: str
    agreement: str
    key: str
    quote: str = None
    values: dict = None


def _decimals(text):
    return len(text.split(".")[1]) if "." in text else 0


def agree(ours, paper_text, reason=""):
    """'matches' when ``ours`` rounds to the paper's number at its quoted precision, else
    'within x%' (plus ``reason``)."""
    paper = float(paper_text)
    if abs(ours - paper) < 1e-9:
        return "matches"
    if abs(round(ours, _decimals(paper_text)) - paper) < 1e-9:
        return "matches at the paper's precision"
    pct = 100 * abs(ours - paper) / abs(paper)
    return f"within {pct:.1f}%" + (f": {reason}" if reason else "")


def agree_points(ours, paper_text, reason=""):
    """Like :func:`agree` for percentages: the difference in percentage points."""
    paper = float(paper_text)
    if abs(round(ours, _decimals(paper_text)) - paper) < 1e-9:
        return "matches" + ("" if abs(ours - paper) < 1e-9 else " at the paper's precision")
    return f"differs by {ours - paper:+.1f} points" + (f": {reason}" if reason else "")
