"""What a community report is written from: its rows as the prompt's CSV tables (and whether they fit a budget),
a digest of the communities below it, and in an update the previous report with only the rows changed since
(`PreviousReports`) - the community_reports step's driver plan and its workers both use these."""

from __future__ import annotations

import csv
import hashlib
import io
import json

import polars as pl

from graphrag_ray.exec.carried import KEY_COLUMN
from graphrag_ray.exec.step import StepContext
from graphrag_ray.llm.tokens import fits


def csv_table(name: str, header: list[str], rows: list[list]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return f"-----{name}-----\n{buf.getvalue()}"


def local_context(entities: list[dict], relationships: list[dict]) -> str:
    """A community's own rows, as the report prompt shows them."""
    return "\n".join(
        [
            csv_table(
                "Entities",
                ["id", "title", "description", "degree"],
                [[e["human_readable_id"], e["title"], e["description"], e["degree"]] for e in entities],
            ),
            csv_table(
                "Relationships",
                ["id", "source", "target", "description", "combined_degree"],
                [
                    [r["human_readable_id"], r["source"], r["target"], r["description"], r["combined_degree"]]
                    for r in relationships
                ],
            ),
        ]
    )


def descendants(row: dict, by_number: dict[int, dict]) -> str:
    """A digest of (number, members) of every community below `row`: what its sub-reports were written from (a
    digest, not the lists: an item travels to a worker, and a root community's would hold every entity per level)."""
    found, stack = [], list(row["children"])
    while stack:
        child = by_number[stack.pop()]
        found.append((child["community"], sorted(child["entity_ids"])))
        stack += child["children"]
    return hashlib.blake2b(json.dumps(sorted(found)).encode(), digest_size=16).hexdigest() if found else ""


def rows_fit(entities: list[dict], relationships: list[dict], budget: int, count=None) -> bool:
    """Whether a community's own rows fit `budget` tokens: by the UTF-8 bytes bound, or with `count` by counting
    rows of up to 8 characters a token - without writing the CSV of a large community, whose descriptions'
    characters alone exceed that first."""
    chars, most = 0, budget * (8 if count is not None else 1)
    for row in (*entities, *relationships):
        chars += len(row["description"] or "")
        if chars > most:
            return False
    return fits_by(local_context(entities, relationships), budget, count)


def fits_by(text: str, budget: int, count=None) -> bool:
    """`fits` with `count`, or by the UTF-8 bytes bound alone when there is none (the driver of a full build)."""
    return fits(text, budget, count or (lambda _: budget + 1))


def changes_context(revision: dict) -> str:
    """The rows a revision is told about, as tables like a report's context (ids as the report cites them); a
    kind of change with no rows is left out."""
    tables = [
        (
            "Entities",
            ["id", "title", "description", "degree"],
            [[e["human_readable_id"], e["title"], e["description"], e["degree"]] for e in revision["entities"]],
        ),
        (
            "Relationships",
            ["id", "source", "target", "description", "combined_degree"],
            [
                [r["human_readable_id"], r["source"], r["target"], r["description"], r["combined_degree"]]
                for r in revision["relationships"]
            ],
        ),
        ("Removed entities", ["id", "title"], revision["removed_entities"]),
        ("Removed relationships", ["id", "source", "target"], revision["removed_relationships"]),
    ]
    return "\n".join(csv_table(name, header, rows) for name, header, rows in tables if rows)


class PreviousReports:
    """What an update's revisions start from: the version being updated - its communities' members, its rows'
    descriptions, its reports."""

    def __init__(self, ctx: StepContext):
        self.min_changed_share = ctx.settings.community_reports.revise_min_changed_share

        def table(name: str, *columns: str) -> pl.DataFrame:
            found = ctx.previous_table(name)
            return (
                found.select(columns)
                if found is not None and set(columns) <= set(found.columns)
                else pl.DataFrame(schema={c: pl.String for c in columns})
            )

        self.communities = {
            r["community"]: r
            for r in table("communities", "community", "level", "entity_ids", "relationship_ids").iter_rows(named=True)
        }
        self.community_of = {
            (r["level"], e): r["community"] for r in self.communities.values() for e in r["entity_ids"]
        }
        self.reports = dict(table("community_reports", "community", "full_content").iter_rows())
        carried = ctx.previous_carried("community_reports", "reports")
        self.rows = (
            {r["community"]: r for r in carried.drop(KEY_COLUMN).iter_rows(named=True)}
            if carried is not None and "changed_rows" in carried.columns
            else {}
        )
        self.entities = {
            r["id"]: r
            for r in table("entities", "id", "human_readable_id", "title", "description").iter_rows(named=True)
        }
        self.relationships = {
            r["id"]: r
            for r in table("relationships", "id", "human_readable_id", "source", "target", "description").iter_rows(
                named=True
            )
        }

    def predecessor(self, item: dict, level: int) -> int | None:
        """The community this one was: the same number (the same community, or one that gained or lost a few
        members: carry.py), else the previous community of its level holding most of its members (a new number: it
        split off, or merged what were several)."""
        if item["community"] in self.communities:
            return item["community"]
        overlap: dict[int, int] = {}
        for e in item["entities"]:
            found = self.community_of.get((level, e["id"]))
            if found is not None:
                overlap[found] = overlap.get(found, 0) + 1
        return max(overlap, key=lambda c: (overlap[c], -c)) if overlap else None

    def _gone_rows(self, gone_entities: set[str], gone_relationships: set[str]) -> list[list]:
        """The rows that left the community, as a revision tells them: [kind, id, number, title(s)] (a
        relationship of a gone entity goes with it)."""
        gone_titles = {self.entities[i]["title"] for i in gone_entities if i in self.entities}
        entities = [
            ["entity", i, self.entities[i]["human_readable_id"], self.entities[i]["title"]]
            for i in sorted(gone_entities)
            if i in self.entities
        ]
        relationships = [
            ["relationship", i, r["human_readable_id"], r["source"], r["target"]]
            for i, r in ((i, self.relationships.get(i)) for i in sorted(gone_relationships))
            if r is not None and not {r["source"], r["target"]} & gone_titles
        ]
        return entities + relationships

    def revision(self, item: dict, level: int) -> dict | None:
        """The previous report and the rows changed since, for a community that had one and changed in part."""
        number = self.predecessor(item, level)
        before, report = self.communities.get(number), self.reports.get(number)
        if before is None or report is None:
            return None
        old_entities, old_relationships = set(before["entity_ids"]), set(before["relationship_ids"])
        written = self.rows.get(number)
        unsaid = set(written["changed_rows"] or ()) if written is not None else set()

        def changed(rows, old: set, previous: dict) -> list[dict]:  # since the report was written
            return [
                r
                for r in rows
                if r["id"] not in old
                or r["id"] in unsaid
                or previous.get(r["id"], {}).get("description") != r["description"]
            ]

        entities = changed(item["entities"], old_entities, self.entities)
        relationships = changed(item["relationships"], old_relationships, self.relationships)
        rows = len(item["entities"]) + len(item["relationships"])
        present = {r["id"] for r in item["entities"]} | {r["id"] for r in item["relationships"]}
        gone_entities = old_entities - present
        gone_relationships = old_relationships - present
        # rows that left in the updates that kept the report (remembered, as a removed row is told: by id)
        remembered = [
            entry
            for entry in map(json.loads, (written or {}).get("removed_rows") or ())
            if entry[1] not in present and entry[1] not in gone_entities | gone_relationships
        ]
        removed = remembered + self._gone_rows(gone_entities, gone_relationships)
        said = {r["id"] for r in entities + relationships}
        n_changed = len(said) + len(gone_entities) + len(gone_relationships) + len(remembered)
        if written is not None and number == item["community"] and 0 < n_changed < self.min_changed_share * rows:
            # a few rows added, removed or changed since it was written: the report stays and remembers them
            kept = sorted(json.dumps(entry, ensure_ascii=False) for entry in removed)
            return {"keep": {**written, "changed_rows": sorted(said), "removed_rows": kept}}
        if n_changed == 0 or 2 * n_changed > rows:
            return None  # unchanged rows and a moved edge only, or mostly new: a fresh report
        return {
            "report": report,
            "entities": entities,
            "relationships": relationships,
            "removed_entities": sorted(entry[2:] for entry in removed if entry[0] == "entity"),
            "removed_relationships": sorted(entry[2:] for entry in removed if entry[0] == "relationship"),
        }
