"""Documents in PDF, Office, HTML and EPUB files, as text that keeps their structure.

Word, PowerPoint, Excel, HTML and EPUB go through markitdown (Microsoft's converter: mammoth, python-pptx, openpyxl,
BeautifulSoup), which writes Markdown: headings stay headings, slides are marked, sheets are tables. PDFs are read
with pdfminer.six directly (the library markitdown uses for them), because markitdown joins the pages and a Sources
row should say `report.pdf p. 12`. No model weights are fetched at run time (markitdown's file-type guesser is not
used: the extension names the converter).

A document's structure is kept beside its text as marks - character offsets where a page, a slide or a heading
starts - so a text unit can be placed (`location_of`). A file that cannot be read is an `UnreadableDocument` with its
reason: encrypted, corrupt, a scan with no text layer.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import PurePosixPath

# extension -> the kind of file (index/input.py adds these to the table and text kinds it reads itself)
CONVERTED = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".html": "html",
    ".htm": "html",
    ".epub": "epub",
}
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_SLIDE = re.compile(r"^<!-- Slide number: (\d+) -->$", re.MULTILINE)


class UnreadableDocument(ValueError):
    """A file whose text cannot be had; the message is the reason a failures row gives."""


def parse_file(kind: str, raw: bytes, name: str) -> dict:
    """{title, text, structure}: one file's text and its structure (JSON, `marks`) - or UnreadableDocument."""
    if kind == "pdf":
        title, pages = None, _pdf_pages(raw)
        text, marks = "", []
        for number, page in enumerate(pages, start=1):
            page = page.strip()
            if page:
                marks.append([len(text) + (2 if text else 0), "page", str(number)])
                text = f"{text}\n\n{page}" if text else page
        if not text:
            raise UnreadableDocument(f"no text layer in {len(pages)} page(s): a scanned PDF needs OCR before indexing")
    else:
        title, text = _markitdown(kind, raw, name)
        text, marks = _slides(text.strip())
        if not text:
            raise UnreadableDocument(f"no text in this {kind} file")
    marks += markdown_marks(text) if kind != "pdf" else []
    marks.sort(key=lambda m: m[0])
    return {
        "title": title or PurePosixPath(name).name,
        "text": text,
        "structure": json.dumps({"format": kind, "marks": marks}, ensure_ascii=False),
    }


def parsed_row(file, kind: str) -> dict:
    """One file's parsed_documents row (storage/schemas.py): its text and structure, or why it cannot be read."""
    try:
        parsed = parse_file(kind, file.read_bytes(), file.name)
    except (UnreadableDocument, OSError) as exc:
        return {"source": file.source, "title": None, "text": None, "structure": None, "error": str(exc)}
    return {"source": file.source, **parsed, "error": None}


def markdown_marks(text: str) -> list[list]:
    """Where each Markdown heading starts: [[offset, "section", heading], ...]."""
    return [[m.start(), "section", m.group(1).strip()] for m in _HEADING.finditer(text)]


def location_of(marks: list[list], name: str, start: int, end: int) -> str:
    """Where the text from `start` to `end` (character offsets) of a document is: `report.pdf p. 12`,
    `report.pdf pp. 12-13`, `plan.pptx slide 3 § Budget`, `guide.docx § Installation` - its pages or slides, and
    the heading it starts under."""
    first, last = _place(marks, start), _place(marks, end)
    parts = [PurePosixPath(name).name]
    for kind, one, many in (("page", "p.", "pp."), ("slide", "slide", "slides")):
        if kind in first:
            same = first[kind] == last.get(kind, first[kind])
            parts.append(f"{one} {first[kind]}" if same else f"{many} {first[kind]}-{last[kind]}")
    if "section" in first:
        parts.append(f"§ {first['section']}")
    return " ".join(parts)


def _place(marks: list[list], offset: int) -> dict[str, str]:
    """The last page, slide and heading starting at or before `offset` (a heading belongs to its page or slide)."""
    place: dict[str, str] = {}
    for start, kind, label in marks:
        if start > offset:
            break
        if kind in ("page", "slide"):
            place.pop("section", None)
        place[kind] = label
    return place


def _slides(text: str) -> tuple[str, list[list]]:
    """markitdown's `<!-- Slide number: N -->` lines taken out of the text, kept as marks."""
    pieces = _SLIDE.split(text)  # [before, number, slide text, number, slide text, ...]
    if len(pieces) == 1:
        return text, []
    out, marks = pieces[0].strip(), []
    for number, body in zip(pieces[1::2], pieces[2::2]):
        body = body.strip()
        if body:
            out = f"{out}\n\n" if out else out
            marks.append([len(out), "slide", number])
            out += body
    return out, marks


def _pdf_pages(raw: bytes) -> list[str]:
    from pdfminer.high_level import extract_text
    from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect
    from pdfminer.pdfexceptions import PDFException
    from pdfminer.psexceptions import PSException

    try:
        text = extract_text(io.BytesIO(raw))
    except (PDFPasswordIncorrect, PDFEncryptionError):
        raise UnreadableDocument("encrypted PDF: it needs a password to be read") from None
    except (PDFException, PSException, ValueError, KeyError, TypeError, AssertionError) as exc:
        raise UnreadableDocument(f"corrupt PDF: {type(exc).__name__}: {str(exc)[:200]}") from None
    pages = text.split("\f")
    return pages[:-1] if pages and not pages[-1].strip() else pages


def _markitdown(kind: str, raw: bytes, name: str) -> tuple[str | None, str]:
    # the converter of the kind itself: markitdown's own dispatch falls back to reading a broken file as plain text
    from markitdown import StreamInfo, converters

    converter = {
        "docx": converters.DocxConverter,
        "pptx": converters.PptxConverter,
        "xlsx": converters.XlsxConverter,
        "html": converters.HtmlConverter,
        "epub": converters.EpubConverter,
    }[kind]()
    extension = next(ext for ext, k in CONVERTED.items() if k == kind)
    try:
        result = converter.convert(
            io.BytesIO(raw), StreamInfo(extension=extension, filename=PurePosixPath(name).name, charset="utf-8")
        )
    except Exception as exc:  # noqa: BLE001 - each format's library raises its own errors for a broken file
        reason = " ".join(str(exc).split())[:300] or "no detail"
        raise UnreadableDocument(f"unreadable {kind} file: {type(exc).__name__}: {reason}") from None
    return result.title, result.markdown
