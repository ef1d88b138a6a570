from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from graphrag_ray.config.load import load_settings, validate_settings
from graphrag_ray.config.render import render_settings
from graphrag_ray.config.settings import Settings
from graphrag_ray.errors import ConfigError
from graphrag_ray.secrets import redact


@pytest.mark.parametrize(
    "raw, message",
    [
        (
            {"models": {"default_chat": {"rate_limit": {"tpm": "fast"}}}},
            "models.default_chat.rate_limit.tpm: expected a positive integer, got 'fast'",
        ),
        ({"models": {"default_chat": {"rate_limt": {}}}}, "models.default_chat.rate_limt: unknown key"),
        ({"cache": {"enabled": "maybe"}}, "cache.enabled: expected true or false, got 'maybe'"),
        (
            {"models": {"default_chat": {"type": "vision"}}},
            "models.default_chat.type: expected one of 'chat', 'embedding' or 'local_embedding', got 'vision'",
        ),
        ({"nonsense": 1}, "nonsense: unknown key"),
    ],
)
def test_bad_settings_name_the_key_and_value(raw, message):
    with pytest.raises(ConfigError) as err:
        validate_settings(raw)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_env_substitution_from_environment_and_dotenv(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("MY_BASE", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("MY_KEY", raising=False)
    (tmp_path / ".env").write_text("MY_KEY=sk-from-dotenv-1234\n")
    (tmp_path / "settings.yaml").write_text(
        "models:\n  default_chat:\n    api_base: ${MY_BASE}\n    api_key: ${MY_KEY}\n"
        "    model: ${MODEL_NAME:-gpt-4o-mini}\n"
    )
    settings = load_settings(tmp_path)
    chat = settings.models["default_chat"]
    assert chat.api_base == "http://127.0.0.1:9/v1"
    assert chat.api_key.get_secret_value() == "sk-from-dotenv-1234"
    assert chat.model == "gpt-4o-mini"
    assert "sk-from-dotenv-1234" not in repr(settings)
    assert redact("key=sk-from-dotenv-1234") == "key=***"


def test_missing_settings_file_is_one_clear_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="settings file not found"):
        load_settings(tmp_path)


def test_every_key_has_a_description_and_configs_file_is_the_rendering():
    def walk(model):
        for name, info in type(model).model_fields.items():
            assert info.description, f"{type(model).__name__}.{name} has no description"
            value = getattr(model, name)
            if isinstance(value, BaseModel):
                walk(value)

    walk(Settings())
    shipped = (Path(__file__).parents[2] / "configs" / "settings.yaml").read_text(encoding="utf-8")
    assert shipped == render_settings(), "configs/settings.yaml is stale: regenerate it with scripts/render_settings.py"
    assert validate_settings(yaml.safe_load(shipped)) == Settings()


@pytest.mark.parametrize(
    "their_settings",
    [
        # Microsoft GraphRAG 2.x (`graphrag init`)
        {
            "models": {
                "default_chat_model": {"type": "openai_chat", "model": "gpt-4o-mini", "api_key": "${GRAPHRAG_API_KEY}"},
                "default_embedding_model": {"type": "openai_embedding", "model": "text-embedding-3-small"},
            },
            "input": {"type": "file", "file_type": "text", "base_dir": "input"},
            "vector_store": {"default_vector_store": {}},
            "umap": {"enabled": False},
            "snapshots": {"graphml": False},
        },
        # 3.x
        {
            "completion_models": {"default_completion_model": {"model_provider": "openai", "model": "gpt-4.1"}},
            "embedding_models": {"default_embedding_model": {"model": "text-embedding-3-large"}},
            "input_storage": {"type": "file", "base_dir": "input"},
            "chunking": {"size": 1200},
        },
    ],
)
def test_a_microsoft_graphrag_settings_file_is_named_as_theirs_in_one_line(tmp_path, their_settings):
    import yaml

    (tmp_path / "settings.yaml").write_text(yaml.safe_dump(their_settings))
    with pytest.raises(ConfigError, match="is a Microsoft GraphRAG settings file") as raised:
        load_settings(tmp_path)
    assert "\n" not in str(raised.value) and "docs/from-msgraphrag.md" in str(raised.value)
