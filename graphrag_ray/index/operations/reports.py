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
