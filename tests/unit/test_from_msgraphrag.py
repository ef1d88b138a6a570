"""Microsoft GraphRAG 2.x settings (`models:` with typed entries, per-minute limits) translated to ours."""

from __future__ import annotations

import yaml

from graphrag_ray.api import init_from_msgraphrag
from graphrag_ray.config.from_msgraphrag import read_msgraphrag
from graphrag_ray.config.load import load_settings, validate_settings

TWO_X = {  # the shape `graphrag init` 2.x writes, with an Azure chat model and the options users set
    "models": {
        "default_chat_model": {
            "type": "azure_openai_chat",
            "model": "gpt-4o",
            "deployment_name": "gpt4o-prod",
            "api_base": "https://example.openai.azure.com",
            "api_version": "2024-08-01-preview",
            "api_key": "literal-secret-key-123",
            "requests_per_minute": 300,
            "tokens_per_minute": 150000,
            "max_retries": 7,
            "concurrent_requests": 12,
            "async_mode": "threaded",
            "model_supports_json": True,
        },
        "default_embedding_model": {
            "type": "openai_embedding",
            "model": "text-embedding-3-small",
            "api_key": "${GRAPHRAG_API_KEY}",
            "encoding_model": "cl100k_base",
        },
        "cheap_chat": {
            "type": "openai_chat",
            "model": "gpt-4o-mini",
            "api_key": "${OTHER_KEY}",
            "frequency_penalty": 0.5,
        },
    },
    "input": {
        "type": "file",
        "file_type": "csv",
        "base_dir": "docs",
        "file_pattern": ".*\\.csv$",
        "text_column": "body",
    },
    "chunks": {"size": 600, "overlap": 50},
    "extract_graph": {"model_id": "default_chat_model", "entity_types": ["drug", "disease"], "max_gleanings": 0},
    "summarize_descriptions": {"model_id": "cheap_chat", "max_length": 300},
    "community_reports": {"model_id": "default_chat_model", "max_length": 1500},
    "cluster_graph": {"max_cluster_size": 20, "seed": 7, "use_lcc": True},
    "cache": {"type": "none"},
    "umap": {"enabled": False},
    "embed_graph": {"enabled": True},
    "local_search": {
        "chat_model_id": "cheap_chat",
        "embedding_model_id": "default_embedding_model",
        "top_k_entities": 20,
    },
    "global_search": {"chat_model_id": "default_chat_model", "dynamic_search_threshold": 2},
}


def test_a_2x_file_becomes_valid_settings_with_what_was_left_out_said(tmp_path):
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "settings.yaml").write_text(yaml.safe_dump(TWO_X), encoding="utf-8")
    translated = read_msgraphrag(tmp_path / "theirs" / "settings.yaml", tmp_path / "ours")
    settings = validate_settings(translated.settings)
    chat, embedding, cheap = (settings.models[m] for m in ("default_chat", "default_embedding", "cheap_chat"))
    assert (chat.api_type, chat.model, chat.api_version) == ("azure", "gpt4o-prod", "2024-08-01-preview")
    assert (chat.rate_limit.rpm, chat.rate_limit.tpm, chat.retry.max_attempts, chat.concurrency) == (300, 150000, 7, 12)
    assert (embedding.type, embedding.encoding, cheap.model) == ("embedding", "cl100k_base", "gpt-4o-mini")
    assert translated.env == {"GRAPHRAG_API_KEY": "literal-secret-key-123"}
    assert chat.api_key.get_secret_value() == "${GRAPHRAG_API_KEY}", "the literal key is not in our settings"
    assert (
        settings.summarize_descriptions.model_id,
        settings.local_search.chat_model_id,
        settings.extract_graph.model_id,
        settings.global_search.chat_model_id,
    ) == ("cheap_chat", "cheap_chat", "default_chat", "default_chat")
    assert (
        settings.input.file_type,
        settings.input.file_pattern,
        settings.input.text_column,
        settings.input.base_dir,
    ) == ("csv", "*.csv", "body", "../theirs/docs")
    assert (settings.chunks.size, settings.chunks.overlap, settings.cluster_graph.seed) == (600, 50, 7)
    assert settings.extract_graph.entity_types == ["drug", "disease"] and settings.extract_graph.max_gleanings == 0
    assert settings.cache.enabled is False and settings.global_search.dynamic_threshold == 2
    notes = "\n".join(translated.notes)
    for said in (
        "cluster_graph.use_lcc: no counterpart",
        "embed_graph: no counterpart",
        "models.cheap_chat.frequency_penalty: no counterpart",
        "moved into .env as GRAPHRAG_API_KEY",
    ):
        assert said in notes, notes
    assert "umap" not in notes, "a feature their file turns off loses nothing"
    assert "literal-secret-key-123" not in notes


def test_init_puts_a_literal_key_into_env_and_never_rewrites_an_existing_one(tmp_path):
    their = tmp_path / "theirs" / "settings.yaml"
    their.parent.mkdir()
    their.write_text(yaml.safe_dump(TWO_X), encoding="utf-8")
    ours = tmp_path / "ours"
    written, _ = init_from_msgraphrag(ours, their)
    assert ours / "settings.yaml" in written
    assert "literal-secret-key-123" not in (ours / "settings.yaml").read_text(encoding="utf-8")
    assert "GRAPHRAG_API_KEY=literal-secret-key-123" in (ours / ".env").read_text(encoding="utf-8")
    assert load_settings(ours).models["default_chat"].api_key.get_secret_value() == "literal-secret-key-123"

    (ours / ".env").write_text("GRAPHRAG_API_KEY=my-own-key\n", encoding="utf-8")
    init_from_msgraphrag(ours, their, force=True)
    assert (ours / ".env").read_text(encoding="utf-8") == "GRAPHRAG_API_KEY=my-own-key\n"
    assert list(ours.glob("settings.yaml.*.bak")) == [], "an unedited settings file needs no copy"


def test_their_init_template_s_max_retries_minus_one_means_their_default(tmp_path):
    """`graphrag init` (2.x) writes `max_retries: -1`: their default, so ours applies; and with no output folder of
    theirs yet, nothing says one is read."""
    two_x = yaml.safe_load(yaml.safe_dump(TWO_X))
    two_x["models"]["default_chat_model"]["max_retries"] = -1
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "settings.yaml").write_text(yaml.safe_dump(two_x), encoding="utf-8")
    translated = read_msgraphrag(tmp_path / "theirs" / "settings.yaml", tmp_path / "ours")
    settings = validate_settings(translated.settings)
    assert (
        settings.models["default_chat"].retry.max_attempts == type(settings.models["default_chat"].retry)().max_attempts
    )
    notes = "\n".join(translated.notes)
    assert "is read as it is" not in notes and "no index of theirs in" in notes
    (tmp_path / "theirs" / "output").mkdir()
    again = read_msgraphrag(tmp_path / "theirs" / "settings.yaml", tmp_path / "ours")
    assert "is read as it is" in "\n".join(again.notes)
