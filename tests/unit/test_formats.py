"""index/formats.py on files made here: a scan with no text layer, an EPUB, a Markdown file's headings, and how a
text unit's place is said across pages, slides and headings."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from graphrag_ray.index.formats import UnreadableDocument, location_of, markdown_marks, parse_file


def test_a_pdf_with_no_text_layer_is_unreadable_with_its_reason():
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.add_page()  # pages with nothing written: what a scan without OCR reads as
    with pytest.raises(UnreadableDocument, match=r"no text layer in 2 page\(s\).*OCR"):
        parse_file("pdf", bytes(pdf.output()), "scan.pdf")


def test_a_file_of_another_kind_under_a_pdf_name_is_unreadable():
    with pytest.raises(UnreadableDocument, match="corrupt PDF"):
        parse_file("pdf", b"GIF89a not a pdf at all", "photo.pdf")


def epub(chapters: list[tuple[str, str]]) -> bytes:
    """A minimal EPUB 3: container, package with a spine, one XHTML file per chapter."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("mimetype", "application/epub+zip")
        z.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
            '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
        )
        items = "".join(
            f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>' for i in range(len(chapters))
        )
        spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
        z.writestr(
            "OEBPS/content.opf",
            '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
            '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Harbor Stories</dc:title>'
            '<dc:identifier id="id">x</dc:identifier></metadata>'
            f"<manifest>{items}</manifest><spine>{spine}</spine></package>",
        )
        for i, (title, body) in enumerate(chapters):
            z.writestr(
                f"OEBPS/c{i}.xhtml",
                f'<html xmlns="http://www.w3.org/1999/xhtml"><body><h1>{title}</h1><p>{body}</p></body></html>',
            )
    return out.getvalue()


def test_an_epub_keeps_its_chapters_as_sections():
    parsed = parse_file("epub", epub([("The Storm", "Ivy Chen closed the harbor."), ("Dawn", "Boats left.")]), "b.epub")
    assert "Ivy Chen closed the harbor." in parsed["text"] and "Boats left." in parsed["text"]
    marks = json.loads(parsed["structure"])["marks"]
    sections = [label for _, kind, label in marks if kind == "section"]
    assert "The Storm" in sections and "Dawn" in sections
    at = parsed["text"].index("Boats left.")
    assert location_of(marks, "books/b.epub", at, at + 5) == "b.epub § Dawn"


def test_a_place_is_its_pages_or_slides_and_the_heading_it_starts_under():
    marks = [[0, "page", "1"], [100, "page", "2"], [150, "section", "Results"], [300, "page", "3"]]
    assert location_of(marks, "input/r.pdf", 10, 90) == "r.pdf p. 1"
    assert location_of(marks, "input/r.pdf", 90, 120) == "r.pdf pp. 1-2"
    assert location_of(marks, "input/r.pdf", 160, 200) == "r.pdf p. 2 § Results"
    assert location_of(marks, "input/r.pdf", 310, 320) == "r.pdf p. 3"  # a heading belongs to its page
    slides = [[0, "slide", "1"], [0, "section", "Plan"], [50, "slide", "2"]]
    assert location_of(slides, "p.pptx", 5, 60) == "p.pptx slides 1-2 § Plan"


def test_markdown_headings_are_marks_and_other_hashes_are_not():
    text = "# Title\n\nsome #hashtag text\n\n## Part Two ##\n#nospace\n"
    assert markdown_marks(text) == [[0, "section", "Title"], [text.index("## Part"), "section", "Part Two"]]
