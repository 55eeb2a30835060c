"""The text of a document written to a collection: plain text, Markdown, PDF (pypdf) and HTML
(the standard library's parser). Anything else is refused with 415; a document that cannot be
read, or holds no text, with 422."""

from __future__ import annotations

import io
import logging
import re
from html.parser import HTMLParser

from gateway.web.errors import ApiError, ValidationFailed

logger = logging.getLogger(__name__)

TEXT = "text/plain"
MARKDOWN = "text/markdown"
PDF = "application/pdf"
HTML = "text/html"
CONTENT_TYPES = (TEXT, MARKDOWN, PDF, HTML)
ALIASES = {"text/x-markdown": MARKDOWN, "application/xhtml+xml": HTML}
EXTENSIONS = {".txt": TEXT, ".text": TEXT, ".md": MARKDOWN, ".markdown": MARKDOWN, ".pdf": PDF,
              ".html": HTML, ".htm": HTML}
GENERIC = ("", "application/octet-stream")


def content_type_of(declared: str | None, filename: str = "") -> str:
    """The supported content type a document is read as (parameters such as charset dropped; a
    generic or missing type is taken from the file name), or 415."""
    base = (declared or "").split(";")[0].strip().lower()
    base = ALIASES.get(base, base)
    if base in GENERIC and "." in filename:
        base = EXTENSIONS.get(filename[filename.rfind("."):].lower(), base)
    if base not in CONTENT_TYPES:
        shown = base or "none"
        raise ApiError(415, f"Content type '{shown}' is not supported; send one of {', '.join(CONTENT_TYPES)}.",
                       code="unsupported_media_type")
    return base


def charset_of(declared: str | None) -> str | None:
    match = re.search(r"charset=\"?([\w.:-]+)", declared or "", re.IGNORECASE)
    return match.group(1) if match else None


def extract_text(data: bytes, content_type: str, *, charset: str | bytes | None = None) -> str:
    """The document's text, whitespace tidied. 422 when nothing readable is in it."""
    if content_type == PDF:
        text = _pdf_text(data)
    else:
        decoded = decode(data, charset)
        text = html_text(decoded) if content_type == HTML else decoded
    text = tidy(text)
    if not text:
        raise ValidationFailed({"file": ["No text could be extracted from the document."]})
    return text


def decode(data: bytes, charset: str | bytes | None = None) -> str:
    if isinstance(charset, bytes):  # Django's multipart parser may hand it over undecoded
        charset = charset.decode("latin-1")
    if charset:
        try:
            return data.decode(charset)
        except (LookupError, UnicodeDecodeError):
            pass
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def tidy(text: str) -> str:
    """Spaces and tabs collapsed, at most one blank line between paragraphs, no NUL characters."""
    text = text.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")
    lines = [re.sub(r"[ \t\f\v\u00a0]+", " ", line).strip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _pdf_text(data: bytes) -> str:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ValidationFailed({"file": ["The PDF is encrypted."]})
        return "\n\n".join(page.extract_text() or "" for page in reader.pages)
    except ValidationFailed:
        raise
    except Exception as exc:  # pypdf raises many types on malformed input; none of them is our bug
        logger.info("unreadable PDF: %s", exc.__class__.__name__)
        raise ValidationFailed({"file": ["The PDF could not be read."]}) from None


BLOCKS = {"address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption", "figure",
          "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p",
          "pre", "section", "table", "td", "th", "title", "tr", "ul"}
SKIPPED = {"script", "style", "noscript", "template", "svg", "head"}


class _TextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0
        self.in_title = False

    def handle_starttag(self, tag, attrs):
        if tag == "title":
            self.in_title = True
        elif tag in SKIPPED:
            self.skipping += 1
        if tag in BLOCKS:
            self.parts.append("\n\n")

    def handle_startendtag(self, tag, attrs):
        if tag in BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag == "title":
            self.in_title = False
        elif tag in SKIPPED and self.skipping:
            self.skipping -= 1
        if tag in BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if self.in_title or not self.skipping:
            self.parts.append(data)


def html_text(html: str) -> str:
    """The visible text of a page (and its title), one paragraph per block element."""
    parser = _TextParser()
    parser.feed(html)
    parser.close()
    return "".join(parser.parts)
