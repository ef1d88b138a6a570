import os
import subprocess
import sys

from graphrag_ray.llm.tokens import Tokenizer, at_most_tokens, cache_key, encoding_for_model, fits, search_dirs


def test_encodings_load_offline_from_the_installed_files(tmp_path):
    # A fresh process with an empty TIKTOKEN_CACHE_DIR and no route to the download host must still count.
    env = dict(
        os.environ, TIKTOKEN_CACHE_DIR=str(tmp_path), HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9"
    )
    code = (
        "from graphrag_ray.llm.tokens import Tokenizer;"
        "print(Tokenizer('cl100k_base').count('李明在杭州开咖啡店 hello'), Tokenizer('o200k_base').count('hi'))"
    )
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


def test_parsed_encoding_is_kept_in_marshal_form_and_rebuilt_when_the_file_changes(tmp_path, monkeypatch):
    import shutil

    import tiktoken

    from graphrag_ray.llm.tokens import load_encoding_file

    source_dir = next(d for d in search_dirs() if (d / cache_key("cl100k_base")).exists())
    source = tmp_path / cache_key("cl100k_base")
    shutil.copyfile(source_dir / cache_key("cl100k_base"), source)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(source_dir))
    reference = tiktoken.get_encoding("cl100k_base")  # tiktoken's own parse
    text = "李明在杭州开咖啡店, supplier of coffee beans 1234 <|endoftext|>"

    first = load_encoding_file("cl100k_base", source)  # parses, writes the marshal file
    parsed = list(tmp_path.glob(f"{source.name}.ranks-py*.marshal"))
    assert len(parsed) == 1 and parsed[0].stat().st_size > 1_000_000
    second = load_encoding_file("cl100k_base", source)  # read back from it
    for enc in (first, second):
        assert enc.encode(text, disallowed_special=()) == reference.encode(text, disallowed_special=())
        assert enc.encode(text, allowed_special="all") == reference.encode(text, allowed_special="all")
        assert enc.n_vocab == reference.n_vocab

    # a changed source file (other mtime) is parsed again, and the marshal file rewritten with its stamp
    os.utime(source, ns=(1_000_000_000, 1_000_000_000))
    before = parsed[0].read_bytes()
    third = load_encoding_file("cl100k_base", source)
    assert parsed[0].read_bytes() != before
    assert third.encode(text, disallowed_special=()) == reference.encode(text, disallowed_special=())

    # a damaged marshal file is ignored (and replaced), never trusted
    parsed[0].write_bytes(b"not marshal")
    assert load_encoding_file("cl100k_base", source).encode("coffee") == reference.encode("coffee")
    assert parsed[0].stat().st_size > 1_000_000


def test_the_byte_bound_never_says_a_text_fits_that_does_not():
    texts = [
        "李明在杭州开了一家咖啡店，咖啡豆来自云南普洱。",
        "Alice Martin met Bob Chen in 2024.",
        "🙂☕️ x " * 40,
        "\x00\x01 <|endoftext|> " * 10,
        "ﾊﾟﾝ ㌀ 𠀀𠀁 " * 20,
        "",
    ]
    for encoding in ("cl100k_base", "o200k_base"):
        tok = Tokenizer(encoding)
        for text in texts:
            exact = tok.count(text)
            assert exact <= at_most_tokens(text), (encoding, text[:20])
            for limit in (exact - 1, exact, exact + 1):
                assert fits(text, limit, tok.count) == (exact <= limit), (encoding, text[:20], limit)
        assert tok.count_repeated("咖啡 coffee") == tok.count("咖啡 coffee") == tok.count_repeated("咖啡 coffee")
