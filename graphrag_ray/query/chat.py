"""`graphrag-ray chat`: a conversation loop with local search, streaming output, conversation history and
numbered follow-up suggestions (as in the question-generation article's demo)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.llm.deadline import question_deadline
from graphrag_ray.query.context.history import ConversationHistory, ConversationRole
from graphrag_ray.query.local import LocalSearch
from graphrag_ray.query.question_gen import LocalQuestionGen

EXIT_WORDS = ("exit", "quit", "q")


async def chat_loop(
    local: LocalSearch,
    question_gen: LocalQuestionGen,
    read: Callable[[str], Any] = input,
    write: Callable[..., None] = print,
    question_count: int = 3,
) -> ConversationHistory:
    history = ConversationHistory()
    follow_ups: list[str] = []
    write("graphrag-ray chat (local search + question generation)")
    write("Ask a question; type a number to pick a suggested follow-up; exit or quit leaves.")
    while True:
        if follow_ups:
            write("\nYou can follow up with:")
            for i, question in enumerate(follow_ups, 1):
                write(f"  [{i}] {question}")
            write("  (or type a new question, or exit)")
        try:
            user = read("\nUser: ")
            user = (await user if inspect.isawaitable(user) else user).strip()  # `read` may be async (the CLI's)
        except EOFError:
            break
        if not user:
            continue
        if user.lower() in EXIT_WORDS:
            break
        if user.isdigit() and follow_ups:
            index = int(user) - 1
            if not 0 <= index < len(follow_ups):
                write(f"[note] pick a number from 1 to {len(follow_ups)}")
                continue
            query = follow_ups[index]
            write(f"(follow-up {index + 1}: {query})")
        else:
            query = user
        if len(query) > local.settings.query.max_question_chars:
            write(
                f"[note] that question is {len(query):,} characters, over query.max_question_chars "
                f"({local.settings.query.max_question_chars:,}): ask a shorter one"
            )
            continue
        write("Assistant: ", end="")
        pieces = []
        async with question_deadline(local.settings.query.deadline_s):  # each turn's calls end in time
            async for piece in local.stream_search(query, history):
                pieces.append(piece)
                write(piece, end="", flush=True)
        write("")
        if local.last_result is not None:
            write(local.last_result.usage_line())
        history.add_turn(ConversationRole.USER, query)
        history.add_turn(ConversationRole.ASSISTANT, "".join(pieces))
        try:
            async with question_deadline(local.settings.query.deadline_s):
                follow_ups = (await question_gen.agenerate(history.user_questions(), None, question_count)).response
        except GraphRagRayError as exc:  # the answer stands; the conversation goes on without suggestions
            follow_ups = []
            write(f"[note] no follow-up questions this time: {exc}")
    write("bye")
    return history
