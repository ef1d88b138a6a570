"""Conversation history, as in Microsoft GraphRAG (user/assistant turns; the last N user turns go first)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class ConversationRole(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


@dataclass
class ConversationTurn:
    role: ConversationRole
    content: str


@dataclass
class ConversationHistory:
    turns: list[ConversationTurn] = field(default_factory=list)

    def add_turn(self, role: ConversationRole | str, content: str) -> None:
        self.turns.append(ConversationTurn(ConversationRole(role), content))

    def user_questions(self) -> list[str]:
        return [t.content for t in self.turns if t.role == ConversationRole.USER]

    def recent(self, max_user_turns: int) -> list[ConversationTurn]:
        """The turns from the Nth-last user turn on."""
        if max_user_turns <= 0:
            return []
        users = [i for i, t in enumerate(self.turns) if t.role == ConversationRole.USER]
        if not users:
            return []
        start = users[-max_user_turns] if len(users) >= max_user_turns else users[0]
        return self.turns[start:]
