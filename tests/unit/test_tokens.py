import os
import subprocess
import sys

from graphrag_ray.llm.tokens import Tokenizer, cache_key, encoding_for_model, search_dirs


def test_encodings_load_offline_from_the_installed_files(tmp_path):
    # A fresh process with an empty TIKTOKEN_CACHE_DIR and no route to the download host must still count.
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=str(tmp_path), HTTPS_PROXY="http://127.0.0.1:9",
               HTTP_PROXY="http://127.0.0.1:9")
    code = ("from graphrag_ray.llm.tokens import Tokenizer;"
            "print(Tokenizer('cl100k_base').count('李明在杭州开咖啡店 hello'), Tokenizer('o200k_base').count('hi'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    a, b = map(int, out.stdout.split())
    assert a > 5 and b == 1


def test_model_to_encoding_and_cache_key_names():
    assert encoding_for_model("gpt-4o-mini") == "o200k_base"
    assert encoding_for_model("gpt-4-turbo") == "cl100k_base"
    assert cache_key("cl100k_base") == "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
    assert any((d / cache_key("o200k_base")).exists() for d in search_dirs())
    tok = Tokenizer("cl100k_base")
    assert tok.decode(tok.encode("咖啡 coffee")) == "咖啡 coffee"
