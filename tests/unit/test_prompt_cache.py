"""OpenAI's prompt caching as the simulator models it, and the routing hint sent to OpenAI's endpoint."""

from __future__ import annotations

from types import SimpleNamespace

from graphrag_ray.llm.model import ChatModel
from graphrag_ray.simulate.prompt_cache import PrefixCache


def test_the_longest_earlier_prefix_is_cached_in_128_token_steps_from_1024():
    cache = PrefixCache()
    first = list(range(1500))
    assert cache.serve(first, 1500) == 0  # nothing earlier
    assert cache.serve(first, 1500) == 1408  # 1024 + 3 x 128: the whole prompt, down to a step
    shares_1100 = first[:1100] + [99_999] * 400
    assert cache.serve(shares_1100, 1500) == 1024
    assert cache.serve(list(range(900)), 900) == 0  # under 1,024 tokens: never cached


def test_prompt_cache_key_goes_to_openai_only_and_stays_out_of_the_cache_key():
    openai_model = SimpleNamespace(config=SimpleNamespace(api_base="https://api.openai.com/v1"))
    local = SimpleNamespace(config=SimpleNamespace(api_base="http://127.0.0.1:8080/v1"))
    params = {"max_tokens": 10}
    assert ChatModel._as_sent(openai_model, params, "extract_graph") == {
        "max_tokens": 10,
        "prompt_cache_key": "graphrag-ray-extract_graph",
    }
    assert ChatModel._as_sent(local, params, "extract_graph") == params and params == {"max_tokens": 10}
