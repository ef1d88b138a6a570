"""English entity spotting (the offline `fast` method's, and the simulator's stand-in for a model's extraction): a
word capitalised only because it opens a sentence, a line or a list item, or a date, is not an entity; names are."""

from __future__ import annotations

from graphrag_ray.nlp.entities import mentions
from graphrag_ray.simulate.responders import graph_of

CHANGELOG = """bash (5.2.15-2) unstable; urgency=medium

  * Add support for the loong64 architecture.
  * Add a patch from upstream to fix the build with GCC 13.
  * Regenerate the configure script. Thanks to Helmut Grohne.
  * Some tests now run in Readline mode (Closes: #1029385).
  * Don't install the bashbug manual page.

 -- Matthias Klose <doko@debian.org>  Tue, 07 Mar 2023 11:20:54 +0100

bash (5.2.15-1) unstable; urgency=medium

  * New upstream release. Consider the Readline changes in Bash before you add new bindings.

 -- Matthias Klose <doko@debian.org>  Wed, 01 Feb 2023 09:10:11 +0100
"""


def names(text: str) -> set[str]:
    return {m.name for m in mentions(text)}


def test_sentence_openers_and_dates_are_not_entities_and_names_are():
    found = names(CHANGELOG)
    assert {"Matthias Klose", "Helmut Grohne", "Readline", "Bash", "GCC"} <= found, found
    # common openers ("Add", "Some", "Don't", "New", "Thanks"), a word the text also writes in lower case ("Add" /
    # "add", "Consider"), one that opens several lines and never stands inside one ("Regenerate" would, with two),
    # a weekday and a month
    assert not found & {"Add", "Some", "Don't", "New", "Thanks", "Consider", "Tue", "Wed", "Mar", "Feb", "Closes"}, (
        found
    )


def test_a_name_that_opens_sentences_of_prose_stays_a_name():
    text = "Alice met Bob in Paris. Alice later called Carol. Bob stayed."
    assert names(text) >= {"Alice", "Bob", "Carol", "Paris"}
    assert "Regenerate" not in names("* Regenerate the docs.\n* Regenerate the tests.\n")
    assert {"Regenerate", "Regenerate Labs"} <= names("Regenerate Labs hired Dana. It bought Regenerate in May.")
    assert "May" not in names("Regenerate Labs hired Dana. It bought Regenerate in May.")


def test_the_simulated_model_extracts_what_a_model_would_from_a_changelog():
    entities, relationships = graph_of(CHANGELOG, ["ORGANIZATION", "PERSON", "GEO", "EVENT"])
    assert {"MATTHIAS KLOSE", "HELMUT GROHNE", "READLINE"} <= set(entities), entities
    assert not set(entities) & {"ADD", "TUE", "WED", "SOME", "NEW", "CLOSES", "DON'T"}, entities


def test_two_names_joined_by_and_are_two_entities_and_a_possessive_names_its_owner():
    text = (
        '"Changed It" is a song by singer Nicki Minaj and American rapper Lil Wayne. He was the son of Emperor '
        "Lothair I and Ermengarde of Tours. It was the title track on Frank Sinatra's album. Mohammed bin Salman "
        "spoke."
    )
    found = names(text)
    assert {
        "Nicki Minaj",
        "Lil Wayne",
        "Emperor Lothair I",
        "Ermengarde of Tours",
        "Frank Sinatra",
        "Mohammed bin Salman",
    } <= found, found
    assert not {n for n in found if " and " in n or n.endswith(("'s", "’s"))}, found
    for m in mentions(text):  # each mention's offset is where its name is written
        assert text[m.start : m.start + len(m.name)] == m.name, m


def test_a_name_never_spans_a_line_break_and_a_title_line_is_its_documents_entity():
    """`Title\\ntext` (HippoRAG's files, Markdown, wiki dumps) as `Title: text`: the title is a name of its own."""
    from graphrag_ray.nlp.entities import title_line

    newline = {m.name for m in mentions("Christopher Nolan\nChristopher Edward Nolan is a British film director.")}
    colon = {m.name for m in mentions("Christopher Nolan: Christopher Edward Nolan is a British film director.")}
    assert "Christopher Nolan" in newline and "Christopher Nolan" in colon
    assert not any("\n" in name for name in newline)
    assert all("\n" not in m.name for m in mentions("Ada Marsh\nGrey Point\n- Lighthouse Keeper\n| Fresnel Lens |"))
    assert title_line("# The Lighthouse of Ada\nSome text.") == "The Lighthouse of Ada"  # a Markdown heading
    assert title_line("Inception\nInception is a 2010 science fiction film.") == "Inception"
    assert title_line("It was a dark night.\nThe keeper slept.") is None  # prose opens the text
    assert title_line("Inception") is None  # a title with nothing under it is no document's title
    assert title_line("MAIN CONTENT STARTS HERE\nThe firewall ...") is None  # boilerplate, not a title
    assert title_line("<div class=x>\nText") is None
    assert "李明的咖啡店" in {m.name for m in mentions("李明的咖啡店\n2024年3月，李明决定在杭州开一家咖啡店。")}


def test_a_document_title_is_a_name_of_its_text_unless_it_is_a_file_name():
    from graphrag_ray.nlp.entities import given_title

    found = mentions("He was born in 1970 and directed films.", 2, "Christopher Nolan")
    assert [(m.name, m.type) for m in found] == [("Christopher Nolan", "TITLE")]
    assert [m.name for m in mentions("Christopher Nolan directed films.", 2, "christopher nolan")] == [
        "Christopher Nolan"
    ]  # said in the text already: one mention, as written there
    assert given_title("  The   Great Gatsby ") == "The Great Gatsby"
    for made_up in ("report.txt", "corpus.csv#12", "", None, "1999", "word " * 20):
        assert given_title(made_up) is None, made_up


def test_a_units_titles_are_its_documents_title_and_a_title_line_only_where_the_document_opens():
    from graphrag_ray.nlp.entities import titles_of

    page = "Roger Miller\nRoger Dean Miller was an American singer."
    assert titles_of(page, "Roger Miller", page) == ["Roger Miller"]  # the column and the first line: once
    assert titles_of(page, "notes.txt", page) == ["Roger Miller"]  # a file name is no title; the first line is
    later_chunk = "Fix the build\nThe release also fixes the manual."  # a chunk cut mid-document
    assert titles_of(later_chunk, "notes.txt", "Changelog\n  * first release") == []
    assert titles_of(later_chunk, "Vim Help", "Changelog\n  * first release") == ["Vim Help"]
