"""PDF, Word, PowerPoint, Excel, HTML and Markdown files as users have them: made here with the libraries that write
them, indexed with `fast` and against the simulator with `standard`; unreadable files are failures rows and the run
goes on; text units and Sources say which file and page or section they come from; `update` parses again only the
file whose bytes changed."""

from __future__ import annotations

import re
import shutil
from asyncio import run as run_closing
from pathlib import Path

import polars as pl
import pytest

from graphrag_ray import api
from graphrag_ray.storage.tables import read_table
from tests.helpers import cli_in_process, make_root, published_index

CHUNKS = {"size": 40, "overlap": 0}  # small units: each PDF page is a unit of its own


def write_pdf(path: Path, pages: list[tuple[str, str]], password: str | None = None) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    if password:
        pdf.set_encryption(owner_password="owner", user_password=password)
    for heading, body in pages:
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 16)
        pdf.cell(0, 10, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 6, body)
    pdf.output(str(path))


# each page longer than a unit (CHUNKS): a unit within page 1, one across the break, one within page 2
FILLER = " The roastery buys green coffee every month and roasts it in small batches for the shops." * 3
REPORT_PAGES = [
    ("Harbor Report", "Alice Moreau founded Harbor Roastery in Lyon in 2019." + FILLER),
    ("Results", FILLER + " Bob Tanaka joined Harbor Roastery as head roaster. Bob Tanaka trained in Kyoto."),
]


def write_corpus(folder: Path) -> None:
    import docx
    import openpyxl
    from pptx import Presentation

    folder.mkdir(parents=True, exist_ok=True)
    write_pdf(folder / "report.pdf", REPORT_PAGES)
    write_pdf(folder / "secret.pdf", [("Secret", "Nobody may read this.")], password="hunter2")
    (folder / "broken.docx").write_bytes(b"PK\x03\x04 this is not a Word file")
    document = docx.Document()
    document.add_heading("Menu Guide", 1)
    document.add_paragraph("Carla Diaz designs the menu of Harbor Roastery.")
    document.add_heading("Seasonal Blends", 2)
    document.add_paragraph("The winter blend of Harbor Roastery comes from Kenya.")
    document.save(folder / "menu.docx")
    slides = Presentation()
    for title, body in (
        ("Expansion Plan", "Harbor Roastery opens a shop in Paris."),
        ("Budget", "David Kim approves."),
    ):
        slide = slides.slides.add_slide(slides.slide_layouts[1])
        slide.shapes.title.text, slide.placeholders[1].text = title, body
    slides.save(folder / "plan.pptx")
    book = openpyxl.Workbook()
    book.active.title = "Suppliers"
    for row in (("supplier", "country"), ("Kenya Highlands Coop", "Kenya"), ("Huila Growers", "Colombia")):
        book.active.append(row)
    book.save(folder / "suppliers.xlsx")
    (folder / "about.html").write_text(
        "<html><head><title>About Harbor</title></head><body><h1>Our Team</h1>"
        "<p>Emma Stone manages the Paris shop of Harbor Roastery.</p><script>var x = 1;</script></body></html>",
        encoding="utf-8",
    )
    (folder / "notes.md").write_text(
        "# Supply Notes\n\nFrank Ocean delivers milk to Harbor Roastery.\n\n## Roasting\n\nDark roasts on Fridays.\n",
        encoding="utf-8",
    )


def units_by_text(index) -> dict[str, str | None]:
    units = read_table(index, "text_units")
    return {" ".join(text.split()): location for text, location in units.select("text", "location").iter_rows()}


def location_of_unit(index, needle: str) -> str | None:
    return next(location for text, location in units_by_text(index).items() if needle in text)


@pytest.fixture(scope="module")
def fast(tmp_path_factory, simulator, ray_session):
    root = make_root(tmp_path_factory.mktemp("documents") / "fast", simulator.base_url, chunks=CHUNKS)
    write_corpus(root / "input")
    done = cli_in_process("index", "--method", "fast", root=root)
    return root, done


def test_every_format_becomes_documents_and_the_unreadable_ones_failures(fast):
    root, done = fast
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 input files or rows could not be read" in done.stdout
    index = published_index(root)
    documents = read_table(index, "documents")
    assert sorted(documents["title"]) == sorted(
        ["report.pdf", "menu.docx", "plan.pptx", "suppliers.xlsx", "About Harbor", "notes.md"]
    )
    failures = {r["item_id"]: r for r in read_table(index, "failures").iter_rows(named=True)}
    assert set(failures) == {"secret.pdf", "broken.docx"}
    assert failures["secret.pdf"]["reason"].startswith("encrypted PDF") and failures["secret.pdf"]["step"] == (
        "parse_documents"
    )
    assert "unreadable docx file" in failures["broken.docx"]["reason"]
    text = "\n".join(documents["text"])
    assert "Kenya Highlands Coop" in text and "| Huila Growers | Colombia |" in text  # the sheet as a table
    assert "var x" not in text  # an HTML page's scripts are not its text


def test_text_units_say_the_file_and_page_or_section(fast):
    index = published_index(fast[0])
    assert location_of_unit(index, "Alice Moreau founded") == "report.pdf p. 1"
    assert location_of_unit(index, "Bob Tanaka joined") == "report.pdf p. 2"
    assert "report.pdf pp. 1-2" in units_by_text(index).values()  # the unit across the page break
    assert location_of_unit(index, "Carla Diaz designs") == "menu.docx § Menu Guide"
    assert location_of_unit(index, "Emma Stone") == "about.html § Our Team"
    assert location_of_unit(index, "Frank Ocean").startswith("notes.md") and "§ Supply Notes" in location_of_unit(
        index, "Frank Ocean"
    )
    assert location_of_unit(index, "opens a shop in Paris") == "plan.pptx slides 1-2 § Expansion Plan"
    # the page markers of a PowerPoint file are structure, not text to extract names from
    assert not any("Slide number" in t for t in units_by_text(index))


def test_a_sources_row_names_the_file_and_page(fast):
    root, _ = fast
    result = run_closing(api.search("Who joined Harbor Roastery as head roaster?", "basic", root))
    assert "id|source|text" in result.context_text
    assert "report.pdf p. 2" in result.context_text
    rows = result.context_data["sources"]
    assert any(r.get("source") == "report.pdf p. 2" and "Bob Tanaka" in r["text"] for r in rows)


def test_update_parses_again_only_the_pdf_that_changed(fast, tmp_path):
    root = tmp_path / "changed"
    shutil.copytree(fast[0], root)
    write_pdf(root / "input" / "report.pdf", [REPORT_PAGES[0], ("Results", FILLER + " Gina Park replaced Bob Tanaka.")])
    updated = api.update_index(root=root)
    parse = updated.stats["steps"]["parse_documents"]
    assert parse["items"] == 1 and parse["carried_items"] == 6  # the PDF; the rest (the two unreadable too) kept
    assert location_of_unit(updated.index, "Gina Park replaced") == "report.pdf p. 2"
    assert not any("Bob Tanaka joined" in t for t in units_by_text(updated.index))
    assert set(read_table(updated.index, "failures")["item_id"]) == {"secret.pdf", "broken.docx"}


def test_standard_method_extracts_from_parsed_documents(tmp_path, simulator, ray_session):
    root = make_root(tmp_path / "standard", simulator.base_url, chunks=CHUNKS)
    write_corpus(root / "input")
    (root / "input" / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # a type no converter reads
    result = api.build_index(root=root)
    entities = set(read_table(result.index, "entities")["title"])
    assert {"BOB TANAKA", "CARLA DIAZ", "HARBOR ROASTERY"} <= entities, entities
    units = read_table(result.index, "text_units")
    assert {"report.pdf p. 1", "report.pdf pp. 1-2", "report.pdf p. 2", "menu.docx § Menu Guide"} <= set(
        units["location"]
    )
    assert units.filter(pl.col("location").is_null()).is_empty()  # every unit of these formats is placed
    failures = dict(read_table(result.index, "failures").select("item_id", "reason").iter_rows())
    assert set(failures) == {"secret.pdf", "broken.docx", "photo.png"}
    assert failures["photo.png"].startswith("file type .png is not read (supported: .csv")


def test_several_indexes_one_with_pages_one_without_share_one_sources_table(fast, tmp_path, simulator):
    plain = make_root(tmp_path / "plain", simulator.base_url, chunks=CHUNKS)
    (plain / "input").mkdir()
    (plain / "input" / "notes.txt").write_text("Bob Tanaka roasts coffee for Harbor Roastery at night.\n")
    api.build_index(root=plain, method="fast")
    result = run_closing(api.search("Who is Bob Tanaka?", "local", [fast[0], plain], context_only=True, no_llm=True))
    sources = result.context_text.split("-----Sources-----\n", 1)[1].split("\n-----", 1)[0].splitlines()
    assert sources[0] == "id|source|text"
    # a row starts `<index>:<id>|` (its text may run over several lines): laid out in the same three columns
    rows = [line.split("|", 2) for line in sources[1:] if re.match(r"^[\w-]+:\d+\|", line)]
    assert rows and all(len(row) == 3 for row in rows)
    assert any(row[1] == "report.pdf p. 2" for row in rows) and any(row[1] == "" for row in rows)
