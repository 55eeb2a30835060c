"""Reading the console's pages as its theme (django-unfold) writes them, for the tests:
a list's column headers, cells and rows, a change page's section by its title, its labels, its
read-only values and its submit buttons, and the page's title. One place that knows the markup, so
a test says what it checks ("the cost column shows ...") rather than how the theme draws it."""

from __future__ import annotations

import html as html_lib
import re

TAG = re.compile(r"<[^>]+>")


def text(fragment: str) -> str:
    """The text a person reads in `fragment`: tags dropped, entities read, spaces collapsed."""
    return " ".join(html_lib.unescape(TAG.sub(" ", fragment)).split())


def list_headers(page: str) -> list[str]:
    """The change list's columns by field name, in order (the selection box's column left out)."""
    return re.findall(r'<th class="[^"]*\bcolumn-(\w+)\b', page)


def list_cells(page: str, field: str) -> list[str]:
    """The text of each row's cell of `field`, top to bottom."""
    return [text(cell) for cell in re.findall(
        rf'<t[dh] class="field-{re.escape(field)}\b[^"]*"[^>]*>(.*?)</t[dh]>', page, re.S)]


def list_rows(page: str) -> list[dict[str, str]]:
    """Each row of the change list: field → the text of its cell."""
    rows = []
    for row in re.findall(r'<tr class="data-row[^"]*"[^>]*>(.*?)</tr>', page, re.S):
        rows.append({name: text(cell) for name, cell in
                     re.findall(r'<t[dh] class="field-(\w+)\b[^"]*"[^>]*>(.*?)</t[dh]>', row, re.S)})
    return rows


def section(page: str, title: str) -> str:
    """The markup of the change page's section (fieldset) titled `title`; '' when there is none."""
    for fieldset in re.findall(r"<fieldset\b.*?</fieldset>", page, re.S):
        heading = re.search(r"<h2\b[^>]*>(.*?)</h2>", fieldset, re.S)
        if heading and text(heading.group(1)) == title:
            return fieldset
    return ""


def section_titles(page: str) -> list[str]:
    titles = []
    for fieldset in re.findall(r"<fieldset\b.*?</fieldset>", page, re.S):
        heading = re.search(r"<h2\b[^>]*>(.*?)</h2>", fieldset, re.S)
        if heading:
            titles.append(text(heading.group(1)))
    return titles


def labels(page: str) -> dict[str, str]:
    """The form's labels: the id of the field each names → its text (without the required field's "*")."""
    return {field: text(REQUIRED.sub("", label)) for field, label in re.findall(
        r'<label[^>]*\bfor="(id_[\w-]+)"[^>]*>(.*?)</label>', page, re.S)}


REQUIRED = re.compile(r"<span[^>]*>\*</span>")
ONE_LABEL = r"<label\b[^>]*>((?:(?!<label\b).)*?)</label>"


def readonly(page: str) -> dict[str, str]:
    """The change page's read-only values: label → text shown."""
    return {text(label): text(value) for label, value in re.findall(
        ONE_LABEL + r"\s*</div>\s*<div[^>]*>\s*<div class=\"readonly\b[^\"]*\">(.*?)</div>", page, re.S)}


def submit_buttons(page: str) -> set[str]:
    """The names of the change form's submit buttons (_save, _continue, _addanother...)."""
    return set(re.findall(r'<button type="submit" form="\w+_form" name="(\w+)"', page))


def title(page: str) -> str:
    found = re.search(r"<title>(.*?)</title>", page, re.S)
    return text(found.group(1)) if found else ""
