"""The README's and docs/'s links lead somewhere a reader of the repository can follow: every
relative link names a file (or a heading) inside the repository, and no path mentioned points
outside it (the README once sent readers to ../shared/, which a clone does not have).

And the product cites only what it holds: no tracked file names a document that lives beside the
repository rather than in it (OUTSIDE_NAMES; what the product needs of them is in docs/design.md
and the decision records, docs/decisions/README.md), and every `docs/<file>.md` or
`docs/<folder>/<file>.md` a file cites exists, with the section it names (`(docs/design.md, "Models")`)
as one of its headings or the bold lead of one of its paragraphs. The decision records' index lists
every record, and only them. This file is the one place that may spell the forbidden names."""

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
THIS_FILE = Path(__file__).resolve()
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
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


# Documents kept beside the repository, never in it: a clone has none of them, so nothing may cite them.
OUTSIDE_NAMES = ("DESIGN.md", "faults.md", "SPEC.md", "../shared")
# The product's and the docs' files, as `git ls-files` pathspecs (`*` matches across folders too).
PRODUCT_FILES = ("*.py", "*.md", "*.txt", "*.toml", "*.html", "bin/*", "Procfile", ".ci/run", ".importlinter",
                 ".env.example")
# A document under docs/, in a folder of it or not ("decisions/0109-response-cache.md").
DOCS_PATH = re.compile(r"(?<![\w./-])docs/((?:[\w.-]+/)*[\w.-]+\.md)")
SECTION_CITATION = re.compile(r'(?<![\w./-])docs/((?:[\w.-]+/)*[\w.-]+\.md),? "([^"\n]+)"')
DECISIONS = REPO / "docs" / "decisions"
RECORD_NAME = re.compile(r"^(\d{4})-[a-z0-9]+(?:-[a-z0-9]+)*\.md$")


def tracked_files() -> list[Path]:
    """The tracked files of PRODUCT_FILES that are in the working tree, this file excepted."""
    listed = subprocess.run(["git", "ls-files", "-z", "--", *PRODUCT_FILES], cwd=REPO, capture_output=True,
                            check=True).stdout.decode()
    paths = (REPO / name for name in listed.split("\0") if name)
    return [path for path in paths if path.is_file() and path.resolve() != THIS_FILE]


def outside_names(text: str) -> list[str]:
    return [name for name in OUTSIDE_NAMES if name in text]


def sections(text: str) -> list[str]:
    """What a citation may name: a heading's text, or the bold words a paragraph opens with (code
    spans' backticks dropped: "cache_control" names the heading "`cache_control`: carried ...")."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE)
    leads = re.findall(r"^\*\*(.+?)\*\*", text, re.MULTILINE)
    return [s.replace("`", "").strip().rstrip(".").lower() for s in headings + leads]


def names_section(text: str, section: str) -> bool:
    """The section is a heading or a paragraph's bold lead, or the opening words of one
    ("Metrics and JSON logs" for the heading "Metrics and JSON logs (issue 14)")."""
    wanted = section.replace("`", "").strip().rstrip(".").lower()
    return any(found.startswith(wanted) for found in sections(text))


def test_the_citation_readers_find_names_paths_and_sections():
    text = 'As ../shared/DESIGN.md says; see docs/a.md and (docs/b.md, "Counters"), not x/docs/c.md.'
    assert outside_names(text) == ["DESIGN.md", "../shared"]
    assert outside_names("docs/design.md, the design") == []  # our own design doc is not the outside one
    assert DOCS_PATH.findall(text) == ["a.md", "b.md"]
    assert SECTION_CITATION.findall(text) == [("b.md", "Counters")]
    nested = 'See docs/decisions/0001-a.md and (docs/decisions/0002-b.md, "Who gets in"), not x/docs/d/e.md.'
    assert DOCS_PATH.findall(nested) == ["decisions/0001-a.md", "decisions/0002-b.md"]
    assert SECTION_CITATION.findall(nested) == [("decisions/0002-b.md", "Who gets in")]
    doc = ("# T\n\n## Metrics and JSON logs (issue 14)\n\n**Celery is pinned to 5.6.3 (with kombu).** Why.\n\n"
           "### `cache_control`: carried\n")
    assert names_section(doc, "Metrics and JSON logs")
    assert names_section(doc, "cache_control") and names_section(doc, "`cache_control`: carried")
    assert names_section(doc, "Celery is pinned to 5.6.3")
    assert not names_section(doc, "Why")


def test_the_tracked_files_are_read():
    files = {path.relative_to(REPO).as_posix() for path in tracked_files()}
    assert {"README.md", "docs/design.md", "gateway/settings/__init__.py", "Procfile", ".ci/run", "bin/test"} <= files
    assert "tests/gateway/shell/test_docs_links.py" not in files


def test_no_file_cites_a_document_outside_the_repository():
    naming = {path.relative_to(REPO).as_posix(): names for path in tracked_files()
              if (names := outside_names(path.read_text(errors="replace")))}
    assert naming == {}, "cite the repository's own docs instead (docs/design.md, docs/decisions/README.md)"


def test_every_cited_doc_exists_with_its_section():
    missing, unknown_sections = set(), set()
    for path in tracked_files():
        text = path.read_text(errors="replace")
        where = path.relative_to(REPO).as_posix()
        missing |= {(where, f"docs/{name}") for name in DOCS_PATH.findall(text) if not (REPO / "docs" / name).is_file()}
        for name, section in SECTION_CITATION.findall(text):
            doc = REPO / "docs" / name
            if doc.is_file() and not names_section(doc.read_text(), section):
                unknown_sections.add((where, f'docs/{name}, "{section}"'))
    assert missing == set(), "cited docs that do not exist"
    assert unknown_sections == set(), "cited sections that are no heading or bold paragraph lead of their doc"


def test_the_decision_index_lists_every_record_once():
    """docs/decisions/: one record per decision, numbered 0001, 0002, ... without a gap, each opening with
    its title, and README.md links each record exactly once (and nothing that is not one)."""
    records = sorted(path.name for path in DECISIONS.glob("*.md") if path.name != "README.md")
    assert records, "no decision records"
    assert all(RECORD_NAME.match(name) for name in records), "records are named NNNN-short-slug.md"
    assert [int(RECORD_NAME.match(name)[1]) for name in records] == list(range(1, len(records) + 1))
    for name in records:
        assert (DECISIONS / name).read_text().startswith("# "), f"{name} opens with its # title"
    linked = [target for target in links((DECISIONS / "README.md").read_text()) if RECORD_NAME.match(target)]
    assert sorted(linked) == records, "README.md links every record once"
