"""The `fast` method's graph, with no LLM: entities from an offline NLP extractor, relationships from
co-occurrence within a text unit.

Chinese: jieba word segmentation + part-of-speech tags (nr person, ns place, nt organisation, nz other proper
noun), plus common nouns repeated in the unit; English: capitalised proper-noun phrases, typed where a cue says
(organisation words, a place preposition); mixed-language text gets both. Nothing is downloaded at run time.
A pair's weight is the number of text units it co-occurs in (or its PMI); entities below `min_node_frequency`
text units, common nouns found in more than `max_concept_share` of them (generic words), pairs below the
`edge_percentile` of weights, and pairs outside both ends' `max_edges_per_entity` strongest are pruned (each
counted). English PERSONs need evidence: a title before the name or a name's shape; ALL-CAPS phrases (markup,
boilerplate) are not entities. A document's title (the `title` column, when the input gives one) is an entity of
each of its text units, whether or not the text says it.
"""

from __future__ import annotations

import math

import polars as pl

from graphrag_ray.exec.step import ItemStep, Rows, StepContext, Tables
from graphrag_ray.index.operations.documents import units_with_titles
from graphrag_ray.nlp.entities import mentions, sentences, sentences_naming
from graphrag_ray.storage.schemas import RUN_SCHEMAS

MAX_PER_UNIT = 40  # most frequent mentions of a unit kept as nodes (co-occurrence grows with the square)


class NlpGraph(ItemStep):
    name = "nlp_graph"
    settings_section = "fast"
    reads = ("text_units", "documents")
    writes = ("extracted_entities", "extracted_relationships")
    yields = {name: RUN_SCHEMAS[name] for name in ("extracted_entities", "extracted_relationships")}
    carries_results = True  # an update takes unchanged items' rows from the version it updates
    partition_size = 64

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> pl.DataFrame:
        return units_with_titles(tables).select(pl.col("id").alias("item_id"), "text", "document_title")

    async def process(self, ctx: StepContext, item: dict, models) -> Rows:
        cfg = ctx.settings.fast
        found = mentions(item["text"], cfg.concept_min_count, item.get("document_title"))
        counts: dict[str, int] = {}
        kinds: dict[str, str] = {}
        for m in found:
            name = m.name.upper() if m.name.isascii() else m.name
            counts[name] = counts.get(name, 0) + 1
            kinds.setdefault(name, m.type)
        names = sorted(counts, key=lambda n: (-counts[n], n))[:MAX_PER_UNIT]
        spans = [s for _, s in sentences(item["text"])]
        naming = sentences_naming(spans, names)
        described = {name: spans[naming[name][0]][:300] if naming[name] else "" for name in names}
        entities = [
            {"title": n, "type": kinds[n], "description": described[n], "text_unit_id": item["item_id"], "order": i}
            for i, n in enumerate(names)
        ]
        relationships = []
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                both = set(naming[a]).intersection(naming[b])
                together = spans[min(both)] if both else ""
                relationships.append(
                    {
                        "source": a,
                        "target": b,
                        "weight": 1.0,
                        "text_unit_id": item["item_id"],
                        # no sentence names both: no description (a made-up one would be quoted as the data's)
                        "description": together[:300],
                        "order": len(relationships),
                    }
                )
        return {"extracted_entities": entities, "extracted_relationships": relationships}

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        cfg = ctx.settings.fast
        ents, rels = yielded["extracted_entities"], yielded["extracted_relationships"]
        freq = ents.group_by("title").agg(
            pl.col("text_unit_id").n_unique().alias("n"),
            (pl.col("type") == "CONCEPT").all().alias("concept"),
            (pl.col("type") == "OTHER").all().alias("untyped"),
        )
        n_units = max(1, tables["text_units"].height)
        # a common noun found in too many text units says nothing about any of them (IDF's idea)
        # and so does a one-word English name of no known kind in as many (AMERICAN, BRITISH: adjectives the
        # capitalised-phrase rule takes, which would link every passage to every other)
        plain_word = pl.col("untyped") & pl.col("title").str.contains(r"^[A-Z0-9'’-]+$")
        generic = (
            ((pl.col("concept") | plain_word) & (pl.col("n") > cfg.max_concept_share * n_units))
            if n_units >= 10
            else pl.lit(False)
        )
        self.stat_update("generic_concepts_dropped", freq.filter(generic).height)
        keep = freq.filter((pl.col("n") >= cfg.min_node_frequency) & ~generic)["title"]
        dropped_nodes = freq.height - keep.len()
        ents = ents.filter(pl.col("title").is_in(keep.implode()))
        rels = rels.filter(pl.col("source").is_in(keep.implode()) & pl.col("target").is_in(keep.implode()))
        pairs = rels.group_by("source", "target").agg(pl.len().alias("count"))
        if cfg.edge_weight == "pmi" and pairs.height:
            f = dict(zip(freq["title"].to_list(), freq["n"].to_list()))
            pairs = pairs.with_columns(
                pl.struct("source", "target", "count")
                .map_elements(
                    lambda s: max(0.01, math.log(s["count"] * n_units / (f[s["source"]] * f[s["target"]]))),
                    return_dtype=pl.Float64,
                )
                .alias("score")
            )
        else:
            pairs = pairs.with_columns(pl.col("count").cast(pl.Float64).alias("score"))
        if cfg.edge_percentile > 0 and pairs.height:
            threshold = pairs["score"].quantile(cfg.edge_percentile / 100, interpolation="lower")
            strong = pairs.filter(pl.col("score") >= threshold)
        else:
            strong = pairs
        strong = _strongest_per_entity(strong, cfg.max_edges_per_entity, freq.select("title", "n"))
        self.stat_update("entities_pruned", dropped_nodes)
        self.stat_update("pairs_pruned", pairs.height - strong.height)
        # each co-occurrence contributes its share of the pair's score, so merge_graph's sum is the score
        rels = (
            rels.join(strong.select("source", "target", "score", "count"), on=["source", "target"])
            .with_columns((pl.col("score") / pl.col("count")).alias("weight"))
            .drop("score", "count")
        )
        return {"extracted_entities": ents, "extracted_relationships": rels}


def _strongest_per_entity(pairs: pl.DataFrame, k: int, spread: pl.DataFrame) -> pl.DataFrame:
    """The pairs among the k strongest of either end: a word that co-occurs with everything keeps only its
    strongest links. Ties - within one passage most pairs tie - go to the rarer other end (fewer text units): a
    film keeps its director before AMERICAN, which links to anything; then by name, for determinism."""
    ends = pl.concat(
        [
            pairs.select(pl.col("source").alias("end"), pl.col("target").alias("other"), "source", "target", "score"),
            pairs.select(pl.col("target").alias("end"), pl.col("source").alias("other"), "source", "target", "score"),
        ]
    )
    ends = ends.join(spread.rename({"title": "other", "n": "other_units"}), on="other", how="left")
    ranked = ends.sort(
        ["end", "score", "other_units", "source", "target"], descending=[False, True, False, False, False]
    ).with_columns(pl.int_range(pl.len()).over("end").alias("rank"))
    kept = ranked.filter(pl.col("rank") < k).select("source", "target").unique()
    return pairs.join(kept, on=["source", "target"], how="semi")


STEP = NlpGraph()
