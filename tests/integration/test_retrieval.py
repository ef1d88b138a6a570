"""Retrieval that means it: whole-word entity matching, a graph walk that reaches a one-hop passage, BM25 for basic
search offline, and a lexical index an update leaves as a fresh build would write it."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml

from graphrag_ray import api
from graphrag_ray.nlp.lexical import LEXICAL_DIR, LEXICAL_TABLES, LexicalIndex, joined
from graphrag_ray.query.context.entity_match import EntityMatcher
from graphrag_ray.storage.tables import current_index, read_table

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "english" / "settings.yaml"

PASSAGES = {  # a film's page names its director; only the director's page says where she was born
    "Night Harbor": "Night Harbor: Night Harbor is a 1998 drama film directed by Maren Oskarsdottir. The film "
    "follows a ferry crew through one winter.",
    "Maren Oskarsdottir": "Maren Oskarsdottir: Maren Oskarsdottir was born in Tromsø and studied painting before "
    "she made films.",
    "Blue Ferry": "Blue Ferry: Blue Ferry is a 2003 comedy film about a ferry company that goes broke in winter.",
    "Winter Crew": "Winter Crew: Winter Crew is a documentary about a ferry crew filmed in one winter.",
    "Harbor Lights": "Harbor Lights: Harbor Lights is a novel about a drama school, born of one winter in a harbor.",
}


def corpus_root(tmp: Path, passages: dict[str, str], **sections) -> Path:
    root = tmp / "films"
    (root / "input").mkdir(parents=True)
    settings = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8")) | sections
    (root / "settings.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    pl.DataFrame(
        {"id": [f"p{i}" for i in range(len(passages))], "title": list(passages), "text": list(passages.values())}
    ).write_csv(root / "input" / "films.csv")
    return root


def sources_of(root: Path, question: str, method: str) -> list[str]:
    result = asyncio.run(api.search(question, method, root, context_only=True, no_llm=True))
    return [s["text"].split(":", 1)[0] for s in result.context_data.get("sources", [])]


def test_a_one_hop_passage_enters_local_search_and_bm25_ranks_basic_search(tmp_path, ray_session, no_key):
    # one entity in the context: the film's. Her page is not among its text units - only an edge leads there
    root = corpus_root(tmp_path, PASSAGES, local_search={"top_k_entities": 1})
    api.build_index(root=root, method="fast")
    question = "Where was the director of Night Harbor born?"
    local = sources_of(root, question, "local")
    assert local[:2] == ["Night Harbor", "Maren Oskarsdottir"], local  # reached only through the director's name
    microsoft = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
    microsoft["local_search"]["text_unit_ranking"] = "graphrag"
    (root / "settings.yaml").write_text(yaml.safe_dump(microsoft), encoding="utf-8")
    assert sources_of(root, question, "local") == ["Night Harbor"], "Microsoft's order: the entity's own units"
    basic = sources_of(root, question, "basic")
    assert basic[0] == "Night Harbor" and "Maren Oskarsdottir" not in basic[:1]  # BM25: the words it shares
    folder = current_index(root / "output").local_path()
    assert all((folder / LEXICAL_DIR / name / "ids.json").exists() for name in LEXICAL_TABLES)


FILM_PAGE = {  # the film's page names two people; the question's other word says which one's page it wants
    "Night Harbor": "Night Harbor: Night Harbor is a 1998 drama film starring Ivo Lundgren, with music by Maren "
    "Oskarsdottir.",
    "Ivo Lundgren": "Ivo Lundgren: Ivo Lundgren is an actor. Ivo Lundgren was born in Bergen and grew up by the sea.",
    "Maren Oskarsdottir": "Maren Oskarsdottir: Maren Oskarsdottir is a composer. She was born in Tromsø.",
}


def test_the_question_s_other_words_choose_among_the_passages_its_names_reach(tmp_path, ray_session, no_key):
    root = corpus_root(tmp_path, FILM_PAGE, local_search={"top_k_entities": 1})
    api.build_index(root=root, method="fast")
    assert sources_of(root, "Where was the composer of Night Harbor born?", "local")[:2] == [
        "Night Harbor",
        "Maren Oskarsdottir",
    ]
    assert sources_of(root, "Where was the actor of Night Harbor born?", "local")[:2] == [
        "Night Harbor",
        "Ivo Lundgren",
    ]


REGION = {  # Nordland is named on most pages; the page the question wants does not name it
    **{
        f"Nordland {place}": f"Nordland {place}: {place} is a village in Nordland with a church and a school."
        for place in ("Bodø", "Moskenes", "Værøy", "Røst", "Flakstad", "Vestvågøy", "Hamarøy", "Steigen")
    },
    **{  # pages without it: Nordland is on 8 of 18 pages - not on most (that would make it generic), on many
        f"{title} Film": f"{title} Film: {title} is a {year} drama film set in {city}."
        for title, year, city in (
            ("Long Quay", 1971, "Bergen"),
            ("Salt Road", 1983, "Oslo"),
            ("Grey Tide", 1990, "Trondheim"),
            ("Iron Bay", 2001, "Stavanger"),
            ("Cold Light", 2005, "Tromsø"),
            ("Red Pier", 2008, "Ålesund"),
            ("Far Shore", 2011, "Narvik"),
            ("Deep Fjord", 2014, "Molde"),
            ("Night Harbor", 1998, "Kristiansand"),
        )
    },
    "Blue Ferry": "Blue Ferry: Blue Ferry is a ferry company that went broke in one hard winter.",
}


def test_a_name_on_most_pages_does_not_steer_the_walk_the_question_s_words_do(tmp_path, ray_session, no_key):
    # NORDLAND is in 8 of 18 text units: its entity points nowhere in particular, so the question is read as naming
    # nothing - by its words first (BM25), as basic search reads it. Walking from NORDLAND alone never reaches the
    # ferry company's page: nothing links it to Nordland
    root = corpus_root(tmp_path, REGION, local_search={"top_k_entities": 1})
    api.build_index(root=root, method="fast")
    question = "Which ferry company in Nordland went broke in winter?"
    assert sources_of(root, question, "local")[0] == "Blue Ferry"
    assert sources_of(root, question, "basic")[0] == "Blue Ferry"
    # the ranking is read from settings: every name seeding the walk, and the walk alone deciding - the ferry's
    # page is never reached
    set_ranking(root, seed_max_spread=1.0, walk_reach=1e9)
    assert "Blue Ferry" not in sources_of(root, question, "local")


def set_ranking(root: Path, **ranking) -> None:
    """local_search.ranking in ROOT's settings.yaml set to `ranking` (a new question reads it)."""
    settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
    settings.setdefault("local_search", {})["ranking"] = ranking
    (root / "settings.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")


DISTRICTS = ("Aldra", "Brekke", "Dalen")
PARISHES = {  # 307 pages: each village page shares its district with 99 others and the priest's page (a third of
    # the corpus), as long chunks of one subject share their names. The foundry's page shares none
    **{
        f"{district} Village {n}": f"{district} Village {n}: a village in {district} with a church and a school."
        for district in DISTRICTS
        for n in range(1, 101)
    },
    "Harald Vik": f"Harald Vik: Harald Vik was a priest who served in {', '.join(DISTRICTS)}.",
    "Olsen Foundry": "Olsen Foundry: the foundry cast bronze church bells for every parish on the coast.",
    **{f"Sea Chart {n}": f"Sea Chart {n}: a chart of the skerries drawn in {1700 + n}." for n in range(1, 6)},
}


def long_chapter(district: str, n: int) -> str:
    """A chapter of about 800 tokens about one village: its district and its catch, year after year."""
    years = " ".join(
        f"In {1900 + y} the fishermen of {district} Village {n} landed cod and herring at the quay." for y in range(40)
    )
    return f"{district} Village {n}: a village in {district}. {years}"


CHAPTERS = {  # 31 chapters as a book cut at 1,200 tokens would give them: each names its district, shared with a
    # third of the others, so the priest's page reaches 30 chapters - few passages, but 24,000 tokens of them
    **{f"{district} Village {n}": long_chapter(district, n) for district in DISTRICTS for n in range(1, 11)},
    "Harald Vik": f"Harald Vik: Harald Vik was a priest who served in {', '.join(DISTRICTS)}.",
    "Olsen Foundry": "Olsen Foundry: the foundry cast bronze church bells for every parish on the coast.",
}


@pytest.mark.parametrize(
    ("corpus", "far", "walk_alone"),
    [
        # 307 short pages: HARALD VIK's page shares a district with 300 of them - many passages
        (PARISHES, lambda reach: reach.passages >= 300, {"walk_reach": 1e9}),
        # 31 long chapters: his page reaches 30 - few passages, but 24,000 tokens of them
        (CHAPTERS, lambda reach: reach.passages == 30 and reach.tokens > 20_000, {"walk_reach_tokens": 1e9}),
    ],
    ids=["many-short-pages", "few-long-chunks"],
)
def test_in_a_corpus_whose_passages_share_their_names_widely_the_question_s_words_rank_local_sources(
    tmp_path, ray_session, no_key, corpus, far, walk_alone
):
    # a walk from HARALD VIK spreads over most of the corpus: it says little about which passage is wanted, and the
    # answer's page is one it never reaches. The walk's weight follows how far the names reach - in passages and in
    # the text they hold - so here the question's words rank the Sources (no threshold between corpora decides it)
    from graphrag_ray.config.ranking import RankingConfig

    root = corpus_root(tmp_path, corpus, local_search={"top_k_entities": 1})
    api.build_index(root=root, method="fast")
    settings, data, _ = api.open_index(root)
    harald = [e["id"] for e in data.entity_rows.values() if e["title"] == "HARALD VIK"]
    reach = data.graph_walk.reach(harald, RankingConfig())
    assert far(reach), reach
    question = "Which foundry cast the bronze bells for the churches where Harald Vik served?"
    local = sources_of(root, question, "local")
    assert set(local[:2]) == {"Olsen Foundry", "Harald Vik"}, local  # both passages the answer needs, first
    set_ranking(root, **walk_alone)  # that reach not counted: the walk decides, and the foundry is never reached
    walked = sources_of(root, question, "local")
    assert walked[0] == "Harald Vik" and "Olsen Foundry" not in walked, walked


SONGS = {  # a title with a lower-case word, which a model (here the simulator) may not list as a name
    "Me and Bobby McGee": 'Me and Bobby McGee: "Me and Bobby McGee" is a song written by Kris Kristofferson, '
    "originally performed by Roger Miller.",
    "Roger Miller": "Roger Miller: Roger Dean Miller was an American singer. His son Dean Miller is a singer too.",
    "Janis Joplin": "Janis Joplin: Janis Joplin was an American singer who recorded songs in San Francisco.",
    "Fred Foster": "Fred Foster: Fred Foster was a record producer in Nashville.",
}


def test_the_standard_method_makes_a_document_s_title_an_entity_of_its_text_units(tmp_path, simulator, ray_session):
    from tests.helpers import make_root

    root = make_root(tmp_path / "songs", simulator.base_url)
    (root / "input").mkdir()
    pl.DataFrame({"id": ["s0", "s1", "s2", "s3"], "title": list(SONGS), "text": list(SONGS.values())}).write_csv(
        root / "input" / "songs.csv"
    )
    api.build_index(root=root)
    settings, data, _ = api.open_index(root)
    by_title = {e["title"]: e for e in data.entity_rows.values()}
    unit_text = {u["id"]: u["text"] for u in data.text_units.iter_rows(named=True)}
    song = by_title["ME AND BOBBY MCGEE"]  # the model did not list it; the page's title is its entity
    assert [unit_text[u] for u in song["text_unit_ids"]] == [SONGS["Me and Bobby McGee"]]
    assert "Kris Kristofferson" in song["description"]  # the sentence naming it, not a made-up one
    question = "Who is the child of the performer of song Me And Bobby Mcgee?"
    assert set(sources_of(root, question, "local")[:2]) == {"Me and Bobby McGee", "Roger Miller"}


UNTITLED_TEXT = {  # the input's title column names each page; the texts never repeat their own title
    "Night Harbor": "A 1998 drama film directed by Maren Oskarsdottir. It follows a ferry crew through one winter.",
    "Maren Oskarsdottir": "She was born in Tromsø and studied painting before she made films.",
    "Blue Ferry": "A 2003 comedy film about a ferry company that goes broke in winter.",
}


def test_a_document_s_title_column_is_an_entity_of_its_text_units(tmp_path, ray_session, no_key):
    root = corpus_root(tmp_path, UNTITLED_TEXT)
    (root / "input" / "notes.txt").write_text("A ferry left the harbor at dawn.\n", encoding="utf-8")
    api.build_index(root=root, method="fast")
    settings, data, _ = api.open_index(root)
    by_title = {e["title"]: e for e in data.entity_rows.values()}
    unit_text = {u["id"]: u["text"] for u in data.text_units.iter_rows(named=True)}
    assert [unit_text[u] for u in by_title["NIGHT HARBOR"]["text_unit_ids"]] == [UNTITLED_TEXT["Night Harbor"]]
    assert [unit_text[u] for u in by_title["BLUE FERRY"]["text_unit_ids"]] == [UNTITLED_TEXT["Blue Ferry"]]
    assert "NOTES.TXT" not in by_title  # a file name the loader made the title is no name
    result = asyncio.run(api.search("What is Night Harbor about?", "local", root, context_only=True, no_llm=True))
    assert result.context_data["sources"][0]["text"] == UNTITLED_TEXT["Night Harbor"]


def test_the_lexical_index_after_add_edit_delete_equals_a_fresh_build(tmp_path, ray_session, no_key):
    root = corpus_root(tmp_path, PASSAGES)
    api.build_index(root=root, method="fast")
    final = dict(PASSAGES)
    final.pop("Winter Crew")
    final["Blue Ferry"] = final["Blue Ferry"].replace("comedy", "musical")
    final["Cold Dock"] = "Cold Dock: Cold Dock is a 2011 thriller directed by Maren Oskarsdottir."
    frame = pl.DataFrame(
        {
            "id": [f"p{i}" for i in range(len(PASSAGES))] + ["p9"],
            "title": list(PASSAGES) + ["Cold Dock"],
            "text": list(PASSAGES.values()) + [final["Cold Dock"]],
        }
    )
    frame = frame.filter(pl.col("title") != "Winter Crew").with_columns(
        pl.when(pl.col("title") == "Blue Ferry")
        .then(pl.lit(final["Blue Ferry"]))
        .otherwise(pl.col("text"))
        .alias("text")
    )
    frame.write_csv(root / "input" / "films.csv")
    updated = api.update_index(root=root)
    assert updated.stats["kind"] == "update"
    fresh = tmp_path / "fresh"
    (fresh / "input").mkdir(parents=True)
    shutil.copy(EXAMPLE, fresh / "settings.yaml")
    frame.write_csv(fresh / "input" / "films.csv")
    api.build_index(root=fresh, method="fast")
    ours, theirs = (current_index(r / "output").local_path() / LEXICAL_DIR for r in (root, fresh))
    for name in ("text_units", "entities"):  # the graph after an update is a fresh build's: so is its index
        files = sorted(p.name for p in (ours / name).iterdir())
        assert files == sorted(p.name for p in (theirs / name).iterdir()) and "ids.json" in files
        for file in files:
            assert (ours / name / file).read_bytes() == (theirs / name / file).read_bytes(), (name, file)
    # reports an update kept or revised may read otherwise than fresh ones: their index is of the published ones
    published = read_table(current_index(root / "output"), "community_reports")
    rebuilt = tmp_path / "rebuilt"
    LexicalIndex.build(published["id"].to_list(), joined(published, LEXICAL_TABLES["community_reports"])).save(rebuilt)
    for file in sorted(p.name for p in rebuilt.iterdir()):
        assert (ours / "community_reports" / file).read_bytes() == (rebuilt / file).read_bytes(), file
    assert "Cold Dock" in sources_of(root, "Which thriller did Maren Oskarsdottir direct?", "basic")
    assert "Winter Crew" not in sources_of(root, "Which documentary follows a ferry crew?", "basic")


ROWS = {
    f"e{i}": {"id": f"e{i}", "title": title, "text_unit_ids": units}
    for i, (title, units) in enumerate(
        [
            ("LA", ["u1"]),
            ("ME", ["u2"]),
            ("ICH", ["u3"]),
            ("THE", ["u4"]),
            ("LOS ANGELES", ["u5"]),
            ("AMERICAN", [f"u{k}" for k in range(12)]),
            ("DIRECTOR", ["u6"]),
            ("李明", ["u7"]),
            ("咖啡店", ["u8"]),
            ("MAREN OSKARSDOTTIR", ["u9"]),
            ("OSKARSDOTTIR", ["u9", "u10"]),
        ]
    )
}


@pytest.mark.parametrize(
    "question, expected",
    [
        ("Was it later the same film, which one?", []),  # no title inside a word
        ("Who was born in Los Angeles, and was she American?", ["LOS ANGELES"]),  # in most units: generic
        ("Where was the director of Night Harbor born?", []),  # "director": a word, not a name
        ("where was the director born", ["DIRECTOR"]),  # lower case says nothing by case
        ("Where did Maren Oskarsdottir study?", ["MAREN OSKARSDOTTIR"]),  # the longest of overlapping names
        ("李明的咖啡店在哪里？", ["李明", "咖啡店"]),  # Chinese: titles standing in it
        ("李明喜欢咖啡吗？", ["李明"]),  # 咖啡店 is not in 咖啡
    ],
)
def test_entities_are_matched_by_whole_words(question, expected):
    matcher = EntityMatcher(ROWS, unit_count=20)
    assert sorted(ROWS[e]["title"] for e, _ in matcher.named(question)) == sorted(expected)
