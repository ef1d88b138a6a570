"""What chat front ends and their users send besides questions, read before any search:

- Open WebUI's background tasks: besides each question it asks the same model for a chat title, tags, follow-up
  questions, search queries (its default task templates, in its source `backend/open_webui/config.py`, open with
  `### Task:` and end with the chat history in `<chat_history>`). They are no GraphRAG questions: answered by the
  chat model directly (`serve.ui_tasks: model`) or not asked at all (`skip`: a minimal answer in the JSON shape
  the template asks for) - never as four searches;
- LightRAG's query-mode prefixes (`/local …`, `/global …`, `/hybrid …`, `/mix …`, `/naive …`, `/bypass …`), which
  its users' scripts and its Ollama-API test script put in the message: the method, mapped to ours (naive is
  basic search, mix is hybrid, bypass is the chat model with no retrieval).
"""

from __future__ import annotations

import json
import re

UI_TASK_OPENING = "### Task:"
# the JSON key each of Open WebUI's default templates asks its answer in -> the task's name
UI_TASK_KEYS = {
    '"title"': "title",
    '"tags"': "tags",
    '"follow_ups"': "follow_ups",
    '"queries"': "queries",
    '"text"': "autocomplete",
}
LIGHTRAG_MODES = {"local": "local", "global": "global", "hybrid": "hybrid", "mix": "hybrid", "naive": "basic"}
DIRECT = "direct"  # the chat model answers the messages as they are: no retrieval
_PREFIX = re.compile(r"^\s*/(local|global|hybrid|mix|naive|bypass)\b\s*", re.IGNORECASE)


def _last_user(messages: list[dict]) -> tuple[int, str]:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            content = messages[i].get("content")
            return i, content if isinstance(content, str) else ""
    return -1, ""


def ui_task(messages: list[dict]) -> str | None:
    """The Open WebUI task the last user message is ("title", "tags", "follow_ups", "queries", "autocomplete",
    "other"), or None for a question."""
    _, text = _last_user(messages)
    if not text.lstrip().startswith(UI_TASK_OPENING) or "<chat_history>" not in text and "<text>" not in text:
        return None
    return next((task for key, task in UI_TASK_KEYS.items() if key in text), "other")


def skipped_answer(task: str) -> str:
    """What a skipped task is answered with: the empty JSON its template asks for (Open WebUI keeps its own title)."""
    empty = {"title": {"title": ""}, "tags": {"tags": []}, "follow_ups": {"follow_ups": []}, "queries": {"queries": []}}
    return json.dumps(empty.get(task, {"text": ""}))


def mode_prefix(messages: list[dict]) -> tuple[str | None, list[dict]]:
    """(the method a LightRAG-style prefix names, the messages without it), or (None, the messages)."""
    i, text = _last_user(messages)
    found = _PREFIX.match(text) if i >= 0 else None
    if found is None:
        return None, messages
    word = found.group(1).lower()
    stripped = [*messages[:i], {**messages[i], "content": text[found.end() :]}, *messages[i + 1 :]]
    return (DIRECT if word == "bypass" else LIGHTRAG_MODES[word]), stripped
