"""Entity resolution (`resolve_entities.enabled`, off by default): one entity under several names becomes one.

Round 0 embeds the entity names (cached per name, so an update pays for new names only). Round 1 finds candidate
pairs - the name rules of nlp/aliases.py (a surname alone, a title, initials, width) and names of one type whose
embeddings are at least `similarity` alike - joins them into groups, and asks the LLM about each group (one call per
group: an unchanged group costs no call in an update). Confirmed names merge into the group's most complete name:
every mention, description and text unit is kept, relationships are re-pointed (a pair that becomes a loop is
dropped and counted), and `entity_merges` records what merged into what, by which rule and why. An answer that
cannot be used merges nothing and is recorded in `failures`.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import polars as pl

from graphrag_ray.config.prompts import fill
from graphrag_ray.errors import LLMUnavailableError
from graphrag_ray.exec.step import ItemStep, Rows, StepContext, Tables
from graphrag_ray.ids import content_id
from graphrag_ray.index.graph_rows import linked_graph
from graphrag_ray.nlp.aliases import NameForm, name_form, rule_fits, rule_pairs
from graphrag_ray.parsing.llm_output import parse_json_object
from graphrag_ray.storage.vectors import vector_matrix

STAGE = "resolve_entities"
NAMES_STAGE = "resolve_entities_names"  # the names' embeddings, counted apart from the confirmations
MERGE_SCHEMA = {
    "entity_id": pl.String,
    "entity": pl.String,
    "merged_id": pl.String,
    "merged": pl.String,
    "rule": pl.String,
    "reason": pl.String,
}
SIMILAR = "similar name embeddings"


def _every(column: str) -> pl.Expr:
    """The merged rows' lists of `column` as one list, each value once, in order."""
    return pl.col(column).list.explode(keep_nulls=False, empty_as_null=False).unique(maintain_order=True)


def _union_groups(pairs: list[tuple[str, str, str]]) -> list[list[tuple[str, str, str]]]:
    """The pairs split into connected groups, each group's pairs in order."""
    parent: dict[str, str] = {}

    def find(k: str) -> str:
        while parent.setdefault(k, k) != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for a, b, _ in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[str, list] = {}
    for pair in pairs:
        groups.setdefault(find(pair[0]), []).append(pair)
    return [groups[k] for k in sorted(groups)]


def _packed(chunks: list[list[tuple[str, str, str]]], max_names: int) -> list[list[tuple[str, str, str]]]:
    """Small groups asked together, up to `max_names` names a call (most groups are a pair: one call each would
    cost more than the whole rest of the step). The order is the groups', so the same groups pack the same way."""
    packs: list[list] = []
    size = max_names + 1
    for chunk in chunks:
        names = len({k for a, b, _ in chunk for k in (a, b)})
        if size + names > max_names:
            packs.append([])
            size = 0
        packs[-1] += chunk
        size += names
    return packs


def _chunks(pairs: list[tuple[str, str, str]], max_names: int) -> list[list[tuple[str, str, str]]]:
    """A group's pairs cut into calls of at most `max_names` names (a huge group of one surname stays askable)."""
    chunks, names = [[]], set()
    for a, b, rule in pairs:
        if chunks[-1] and len(names | {a, b}) > max_names:
            chunks.append([])
            names = set()
        chunks[-1].append((a, b, rule))
        names |= {a, b}
    return chunks


class ResolveEntities(ItemStep):
    name = "resolve_entities"
    uses_llm, settings_section = True, "resolve_entities"
    prompt_keys = ("prompt",)
    reads = ("merged_entities", "merged_relationships")
    writes = ("resolved_entities", "resolved_relationships", "entity_merges")
    publishes = ("entity_merges",)  # which names were merged, and why
    yields = {
        "name_vectors": {"key": pl.String, "vector": pl.Binary},  # float32 bytes
        "merges": {
            "group": pl.String,
            "canonical": pl.String,
            "merged": pl.String,
            "rule": pl.String,
            "reason": pl.String,
        },
    }
    partition_size = 256  # names embedded 256 at a time (the model's batch_size splits them); groups asked at once

    def estimate(self, corpus) -> list:
        """Projected: a confirmation call per candidate group (a share of the entities), and the names embedded
        in batches when similarity pairs names."""
        from graphrag_ray.index.estimate import CANDIDATE_GROUP_SHARE, RESOLVE_CONTEXT, RESOLVE_OUTPUT
        from graphrag_ray.llm.tokens import tokenizer_for

        cfg = corpus.settings.resolve_entities
        chat = corpus.settings.model(cfg.model_id)
        tok = tokenizer_for(chat.model, chat.encoding)
        entities = corpus.entities
        groups = max(1.0, entities * CANDIDATE_GROUP_SHARE) if entities > 1 else 0.0  # at least one to ask
        template = tok.count(corpus.ctx.prompt(cfg.prompt))
        stages = [
            corpus.stage(
                "resolve_entities",
                cfg.model_id,
                groups,
                groups * (template + RESOLVE_CONTEXT),
                groups * RESOLVE_OUTPUT,
                False,
            )
        ]
        if cfg.similarity <= 1:
            names = corpus.settings.model(cfg.embedding_model_id)
            stages.append(
                corpus.stage(
                    "resolve_entities_names",
                    cfg.embedding_model_id,
                    entities / names.batch_size,
                    entities * 6,
                    0,
                    False,
                )
            )
        return stages

    def model_ids(self, settings) -> list[str]:
        cfg = settings.resolve_entities
        if not cfg.enabled:
            return []
        return [cfg.model_id] + ([cfg.embedding_model_id] if cfg.similarity <= 1 else [])

    def rounds(self, ctx: StepContext, tables: Tables) -> int:
        return 2  # names embedded, then groups confirmed

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> list[dict]:
        cfg = ctx.settings.resolve_entities
        if not cfg.enabled:
            return []
        entities = tables["merged_entities"]
        if round_index == 0:
            if cfg.similarity > 1:
                return []
            return [
                {"item_id": r["key"], "text": r["title"]} for r in entities.select("key", "title").iter_rows(named=True)
            ]
        rows = {
            r["key"]: r
            for r in entities.select("key", "title", "type", "types", "descriptions", "frequency").iter_rows(named=True)
        }
        forms = [name_form(k, r["title"]) for k, r in rows.items()]
        pairs = {
            (a, b): rule
            for a, b, rule in rule_pairs(forms, cfg.max_candidates_per_name)
            if self._same_kind(rows[a]["types"], rows[b]["types"])
            and rule_fits(rule, self._kinds(rows[a]["types"], rows[b]["types"]))
        }
        for a, b in self._similar(earlier.get("name_vectors"), rows, forms, cfg):
            pairs.setdefault((a, b), SIMILAR)
        items = []
        chunks = [
            c
            for g in _union_groups(sorted((a, b, rule) for (a, b), rule in pairs.items()))
            for c in _chunks(g, cfg.max_group)
        ]
        for chunk in _packed(chunks, cfg.max_group):
            keys = sorted({k for a, b, _ in chunk for k in (a, b)})
            evidence = [
                {
                    "key": k,
                    "title": rows[k]["title"],
                    "type": rows[k]["type"] or "unknown",
                    "mentions": rows[k]["frequency"],
                    "description": " | ".join(rows[k]["descriptions"] or [])[: cfg.description_chars],
                }
                for k in keys
            ]
            items.append(
                {
                    "item_id": content_id("resolve", json.dumps([evidence, chunk], ensure_ascii=False)),
                    "entities": evidence,
                    "pairs": [list(p) for p in chunk],
                }
            )
        return items

    @staticmethod
    def _same_kind(a: list[str] | None, b: list[str] | None) -> bool:
        """Extracted with one type at least once (an entity with no type may be anything)."""
        return not a or not b or bool(set(a) & set(b))

    @staticmethod
    def _kinds(a: list[str] | None, b: list[str] | None) -> set[str]:
        """The types two candidates may share (an untyped one takes the other's)."""
        a, b = {t.upper() for t in a or []}, {t.upper() for t in b or []}
        return (a & b) if a and b else (a or b)

    @staticmethod
    def _similar(vectors: pl.DataFrame | None, rows: dict, forms: list[NameForm], cfg) -> list[tuple[str, str]]:
        """Pairs of one type whose name embeddings are at least cfg.similarity alike (each name's closest
        `max_candidates_per_name`), compared block by block so memory stays small."""
        if vectors is None or not vectors.height or cfg.similarity > 1:
            return []
        vectors = vectors.sort("key")
        keys = vectors["key"].to_list()
        matrix = vector_matrix(vectors["vector"])
        # a new array, not in place: the column's buffer is read-only
        matrix = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        found = set()
        for start in range(0, len(keys), 256):  # 256 rows against all: a few hundred MB at 100k names
            sims = matrix[start : start + 256] @ matrix.T
            for i, row in enumerate(sims, start):
                close = np.nonzero(row >= cfg.similarity)[0]
                close = close[np.argsort(-row[close], kind="stable")][: cfg.max_candidates_per_name + 1]
                for j in close:
                    if j != i and ResolveEntities._same_kind(rows[keys[i]]["types"], rows[keys[j]]["types"]):
                        found.add((min(keys[i], keys[j]), max(keys[i], keys[j])))
        return sorted(found)

    async def process_batch(self, ctx: StepContext, items: list[dict], models) -> Rows:
        if "text" not in items[0]:  # round 1's groups: one call each, all at once
            rows: Rows = {"merges": [], "failures": []}
            for answer in await asyncio.gather(*(self.process(ctx, item, models) for item in items)):
                for name, found in answer.items():
                    rows[name] += found
            return rows
        embedder = models.embedding(ctx.settings.resolve_entities.embedding_model_id)
        try:
            vectors = await embedder.embed([it["text"] for it in items], stage=NAMES_STAGE)
        except LLMUnavailableError as exc:  # without vectors the name rules still find candidates
            return {
                "failures": [{**self.failure_row(it, f"name embedding: {exc}"), "source": it["text"]} for it in items]
            }
        return {
            "name_vectors": [
                {"key": it["item_id"], "vector": np.asarray(v, dtype=np.float32).tobytes()}
                for it, v in zip(items, vectors)
            ]
        }

    async def process(self, ctx: StepContext, item: dict, models) -> Rows:
        cfg = ctx.settings.resolve_entities
        by_title = {e["title"]: e["key"] for e in item["entities"]}
        title_of = {e["key"]: e["title"] for e in item["entities"]}
        rule_of = {frozenset((a, b)): rule for a, b, rule in item["pairs"]}
        prompt = fill(
            ctx.prompt(cfg.prompt),
            candidates="\n".join(f"- {e['title']} [{e['type']}]: {e['description']}" for e in item["entities"]),
            pairs="\n".join(f"- {title_of[a]} ~ {title_of[b]} ({rule})" for a, b, rule in item["pairs"]),
        )
        try:
            answer = await models.chat(cfg.model_id).chat(
                [{"role": "user", "content": prompt}],
                stage=STAGE,
                json_mode=True,
                validate=lambda content: isinstance((parse_json_object(content) or {}).get("merges"), list),
            )
        except LLMUnavailableError as exc:
            return {
                "failures": [{**self.failure_row(item, exc, "nothing merged"), "source": ", ".join(sorted(by_title))}]
            }
        shorts = {a for a, _, _ in item["pairs"]}
        mentions = {e["key"]: e["mentions"] for e in item["entities"]}
        merges = []
        for group in (parse_json_object(answer.content) or {}).get("merges") or []:
            if not isinstance(group, dict) or not isinstance(group.get("names"), list):
                self.stat_update("unreadable_merge_groups")  # a malformed entry merges nothing
                continue
            keys = list(
                dict.fromkeys(by_title[n] for n in (group.get("names") or []) if isinstance(n, str) and n in by_title)
            )
            if len(keys) < 2:
                continue
            # the name kept is the most complete one (never a short form of another), then the most mentioned
            canonical = min(
                keys,
                key=lambda k: (
                    any(frozenset((k, o)) in rule_of for o in keys if o != k) and k in shorts,
                    -mentions[k],
                    -len(title_of[k]),
                    k,
                ),
            )
            for key in keys:
                # a merge no asked pair supports (an answer naming two unrelated candidates) is not taken on trust
                rules = [rule_of[frozenset((key, o))] for o in keys if o != key and frozenset((key, o)) in rule_of]
                if key != canonical and rules:
                    merges.append(
                        {
                            "group": item["item_id"],
                            "canonical": canonical,
                            "merged": key,
                            "rule": rules[0],
                            "reason": str(group.get("reason") or "")[:500],
                        }
                    )
        return {"merges": merges}

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        entities, relationships = tables["merged_entities"], tables["merged_relationships"]
        into = self._targets(yielded["merges"])
        if not into:
            return {
                "resolved_entities": entities,
                "resolved_relationships": relationships,
                "entity_merges": pl.DataFrame(schema=MERGE_SCHEMA),
            }
        target = pl.col("key").replace(into)
        merged = (
            entities.with_columns(target.alias("into"), (pl.col("key") == target).alias("is_target"))
            .sort("is_target", "key", descending=[True, False])
            .group_by("into", maintain_order=True)
            .agg(
                _every("descriptions"),
                _every("text_unit_ids"),
                pl.col("title").first(),
                pl.col("id").first(),
                pl.col("type").filter(pl.col("type") != "").first(),
            )
            .rename({"into": "key"})
            .with_columns(pl.col("type").fill_null(""), pl.col("text_unit_ids").list.len().alias("frequency"))
        )
        rels = relationships.with_columns(pl.col("skey").replace(into), pl.col("tkey").replace(into))
        self.stat_update("loops_dropped", rels.filter(pl.col("skey") == pl.col("tkey")).height)
        rels = (
            rels.filter(pl.col("skey") != pl.col("tkey"))
            .sort("skey", "tkey", "id")
            .group_by("skey", "tkey", maintain_order=True)
            .agg(_every("descriptions"), _every("text_unit_ids"), pl.col("weight").sum())
        )
        self.stat_update("entities_merged", len(into))
        resolved_entities, resolved_relationships = linked_graph(
            merged.select("key", "title", "type", "descriptions", "text_unit_ids", "frequency", "id"), rels, ctx
        )
        return {
            "resolved_entities": resolved_entities,
            "resolved_relationships": resolved_relationships,
            "entity_merges": self._record(yielded["merges"], into, entities),
        }

    @staticmethod
    def _targets(merges: pl.DataFrame) -> dict[str, str]:
        """merged key -> the key it ends in. A name claimed by two groups stays with the first (sorted), and
        chains (A into B, B into C) end at the last, so one pass of `replace` applies them."""
        into: dict[str, str] = {}
        for row in merges.sort("group", "canonical", "merged").iter_rows(named=True):
            if row["merged"] not in into and row["merged"] != row["canonical"]:
                into[row["merged"]] = row["canonical"]
        for key in list(into):
            seen = {key}
            while into[key] in into and into[into[key]] not in seen:
                seen.add(into[key])
                into[key] = into[into[key]]
            if into[key] == key:
                del into[key]
        return into

    @staticmethod
    def _record(merges: pl.DataFrame, into: dict[str, str], entities: pl.DataFrame) -> pl.DataFrame:
        names = dict(zip(entities["key"].to_list(), entities["title"].to_list()))
        ids = dict(zip(entities["key"].to_list(), entities["id"].to_list()))
        why = {r["merged"]: r for r in merges.iter_rows(named=True)}
        rows = [
            {
                "entity_id": ids[target],
                "entity": names[target],
                "merged_id": ids[key],
                "merged": names[key],
                "rule": why[key]["rule"],
                "reason": why[key]["reason"],
            }
            for key, target in sorted(into.items())
        ]
        return pl.DataFrame(rows, schema=MERGE_SCHEMA).sort("entity", "merged")


STEP = ResolveEntities()
