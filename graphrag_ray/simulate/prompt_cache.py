"""OpenAI's prompt caching, as its documentation describes it, for the simulator (`--prompt-cache`): a prompt of at
least 1,024 tokens is served from the cache for the longest prefix it shares with an earlier request, in steps of
128 tokens beyond the first 1,024; the response says so in `usage.prompt_tokens_details.cached_tokens`. (OpenAI
evicts after minutes of disuse and routes by a prefix hash; the simulator keeps every prefix for the run, so its
figures are what a well-routed, busy workload gets.)"""

from __future__ import annotations

import hashlib

CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128


def prompt_token_ids(tokenizer, messages: list[dict]) -> list[int]:
    """The prompt as one token sequence, message after message (role, then content) - the order a server reads it in,
    so two prompts share a cached prefix exactly as far as their messages agree."""
    ids: list[int] = []
    for message in messages:
        ids += tokenizer.encode(f"<|{message.get('role', '')}|>")
        ids += tokenizer.encode(str(message.get("content") or ""))
    return ids


class PrefixCache:
    def __init__(self):
        self.prefixes: set[bytes] = set()

    def _digests(self, ids: list[int]) -> list[tuple[int, bytes]]:
        """(length, digest of ids[:length]) for every length the cache can serve: 1,024, 1,152, 1,280, ..."""
        out, chain, start = [], hashlib.sha256(), 0
        for length in range(CACHE_MIN_TOKENS, len(ids) + 1, CACHE_STEP_TOKENS):
            chain.update(b"".join(i.to_bytes(4, "little") for i in ids[start:length]))
            out.append((length, chain.copy().digest()))
            start = length
        return out

    def serve(self, ids: list[int], prompt_tokens: int) -> int:
        """Prompt tokens of this request served from the cache (at most `prompt_tokens`); its prefixes are cached."""
        cached = 0
        for length, digest in self._digests(ids):
            if digest in self.prefixes:
                cached = length
            self.prefixes.add(digest)
        return min(cached, prompt_tokens)

    def clear(self) -> None:
        self.prefixes.clear()
