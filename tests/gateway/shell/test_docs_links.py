"""The README's and docs/'s links lead somewhere a reader of the repository can follow: every
relative link names a file (or a heading) inside the repository, and no path mentioned points
outside it (the README once sent readers to ../shared/, which a clone does not have)."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.MULTILINE)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def links(text: str) -> list[str]:
    return INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text)


def heading_anchors(text: str) -> set[str]:
    """GitHub's anchors: the heading's text in lower case, punctuation dropped, spaces as '-'."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_the_link_reader_finds_inline_reference_and_anchor_links():
    text = "See [a](docs/a.md), ![i](img/x.png \"t\") and [b][1].\n\n[1]: ../outside.md\n\n## Layout and more\n"
    assert links(text) == ["docs/a.md", "img/x.png", "../outside.md"]
    assert heading_anchors(text) == {"layout-and-more"}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves_inside_the_repository(document):
    text = document.read_text()
    for target in links(text):
        if SCHEME.match(target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        resolved = (document.parent / path).resolve() if path else document
        assert resolved.is_relative_to(REPO), f"{document.name}: {target} leads outside the repository"
        assert resolved.exists(), f"{document.name}: {target} does not exist"
        if anchor and resolved.suffix == ".md":
            assert anchor in heading_anchors(resolved.read_text()), f"{document.name}: no heading for {target}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_path_mentioned_points_outside_the_repository(document):
    outside = [span for span in CODE_SPAN.findall(document.read_text())
               if re.match(r"^\.\./", span) or "/../" in span]
    assert outside == [], f"{document.name} mentions paths outside the repository"
