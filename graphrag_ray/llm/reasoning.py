"""Reasoning models' answers as they arrive: the reasoning apart from the answer (`reasoning_content` / `reasoning`
fields, `<think>` blocks inside the content, whole or split across a stream's pieces) and its token count."""

from __future__ import annotations

from graphrag_ray.parsing.llm_output import visible_answer


def reasoning_tokens_of(usage: dict) -> int:
    details = usage.get("completion_tokens_details") or {}
    return int(details.get("reasoning_tokens") or usage.get("reasoning_tokens") or 0)


def split_reasoning(content: str, message: dict) -> tuple[str, str]:
    """(the answer, its reasoning): reasoning_content / reasoning fields (DeepSeek, vLLM, OpenRouter) and <think>
    blocks inside the content (Ollama, llama.cpp, QwQ) are taken out of the answer."""
    reasoning = str(message.get("reasoning_content") or message.get("reasoning") or "")
    if "think>" in content.lower():
        answer = visible_answer(content)
        return answer, reasoning + content[: max(0, len(content) - len(answer))]
    return content, reasoning


class ThinkFilter:
    """Removes <think>...</think> from a streamed answer whose pieces may split the tags."""

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self):
        self.pending, self.thinking, self.reasoning = "", False, []
        self.closed, self.started = False, False  # a reasoning block ended / the answer's text has begun

    def feed(self, piece: str) -> str:
        return self._begun(self._feed(piece))

    def _begun(self, text: str) -> str:
        """The answer without the blank lines that follow a reasoning block."""
        if not self.started and self.closed:
            text = text.lstrip()
        self.started = self.started or bool(text)
        return text

    def _feed(self, piece: str) -> str:
        self.pending += piece
        shown = []
        while self.pending:
            tag = self.CLOSE if self.thinking else self.OPEN
            at = self.pending.lower().find(tag)
            if at >= 0:
                (self.reasoning if self.thinking else shown).append(self.pending[:at])
                self.pending, self.thinking = self.pending[at + len(tag) :], not self.thinking
                self.closed = self.closed or not self.thinking
                continue
            keep = next(
                (
                    k
                    for k in range(min(len(tag) - 1, len(self.pending)), 0, -1)
                    if tag.startswith(self.pending[-k:].lower())
                ),
                0,
            )  # a tag's beginning: wait for more
            cut = len(self.pending) - keep
            (self.reasoning if self.thinking else shown).append(self.pending[:cut])
            self.pending = self.pending[cut:]
            break
        return "".join(shown)

    def flush(self) -> str:
        rest, self.pending = self.pending, ""
        if self.thinking:
            self.reasoning.append(rest)
            return ""
        return self._begun(rest)
