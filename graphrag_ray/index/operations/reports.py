"""A community report's shape, whoever writes it (the LLM's reports, the fast method's extractive ones): what makes
an answer a report, and the markdown `full_content` rendered from one."""

from __future__ import annotations


def valid_report(data: dict | None) -> bool:
    return (
        bool(data)
        and isinstance(data.get("title"), str)
        and isinstance(data.get("summary"), str)
        and isinstance(data.get("findings"), list)
    )


def render_markdown(report: dict) -> str:
    parts = [f"# {report['title']}", "", report["summary"], ""]
    for finding in report.get("findings") or []:
        if isinstance(finding, dict):
            parts += [f"## {finding.get('summary', '')}", "", str(finding.get("explanation", "")), ""]
        else:
            parts += [f"## {finding}", ""]
    return "\n".join(parts).strip() + "\n"


def rows_report(entities: list[dict], relationships: list[dict]) -> dict:
    """The report of a community too small to be worth a call (`community_reports.min_llm_entities`), written from
    its own rows: a pair's model report would only restate its relationship. Ranked low, and saying how it was made."""
    names = [e["title"] for e in entities]
    described = [r["description"] for r in relationships if (r.get("description") or "").strip()]
    summary = " ".join(described) or " ".join(e["description"] for e in entities if e.get("description"))
    findings = [{"summary": e["title"], "explanation": e.get("description") or ""} for e in entities]
    return {
        "title": " and ".join(names),
        "summary": summary or " and ".join(names),
        "findings": findings,
        "rating": 1.0,
        "rating_explanation": f"a community of {len(names)} entities, written from its rows with no model call",
    }
