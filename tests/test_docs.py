"""The documentation's own links: every relative link of README.md and docs/ names a file or
folder of the repository (the pages moved once; a stale link is a defect)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: ``[text](target)`` with an optional ``#anchor``; absolute URLs are not checked.
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


def _pages():
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_relative_link_resolves():
    broken = {}
    for page in _pages():
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            if not (page.parent / target).exists():
                broken.setdefault(page.relative_to(ROOT).as_posix(), []).append(target)
    assert broken == {}


def test_the_link_reader_finds_links(tmp_path):
    text = "see [a](docs/a.md#x), [b](https://example.org) and [c](../c/)"
    assert LINK.findall(text) == ["docs/a.md", "https://example.org", "../c/"]


def test_the_contract_has_a_section_for_every_cited_number():
    """Code cites "contract section N": the contract has every such N as a heading."""
    headings = set(re.findall(r"^## (\d+)\.", (ROOT / "docs" / "contract.md").read_text(), re.M))
    cited = set()
    for folder in ("hdl", "golden", "gen", "verif", "fpga", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            cited |= set(re.findall(r"contract sections? (\d+)", path.read_text()))
            cited |= set(re.findall(r"contract (\d+)\b", path.read_text()))
    assert cited and cited <= headings, sorted(cited - headings)
