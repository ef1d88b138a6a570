"""Every configuration key, with its default and a one-line description.

This module is the configuration reference: `graphrag-ray init` renders it (descriptions as comments)
into settings.yaml, and `configs/settings.yaml` is that rendering. Unknown keys are errors (extra=forbid).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())


def doc(default, description: str, **kw):
    """A field with its default and its one-line description (shown in settings.yaml)."""
    return Field(default=default, description=description, **kw)


class RateLimitConfig(Section):
    rpm: int | None = doc(None, "requests per minute for this model across the whole job (null: no limit)", gt=0)
    tpm: int | None = doc(None, "tokens per minute (prompt + completion) across the whole job (null: no limit)", gt=0)


class RetryConfig(Section):
    max_attempts: int = doc(10, "attempts per request on 429, 5xx, timeouts and dropped connections", gt=0)
    initial_wait: float = doc(1.0, "seconds before the first retry; doubles each attempt", gt=0)
    max_wait: float = doc(60.0, "longest wait between two attempts, in seconds", gt=0)
    jitter: float = doc(1.0, "random seconds added to each wait so workers do not retry in lockstep", ge=0)


class PriceConfig(Section):
    input_per_1m: float = doc(0.0, "price in USD per 1M prompt tokens (for estimates and the ledger)", ge=0)
    output_per_1m: float = doc(0.0, "price in USD per 1M completion tokens", ge=0)


class ModelConfig(Section):
    type: Literal["chat", "embedding"] = doc("chat", "chat (completions) or embedding")
    api_type: Literal["openai", "azure"] = doc("openai", "openai: any OpenAI-compatible server; azure: Azure OpenAI")
    api_base: str = doc("https://api.openai.com/v1", "base URL of the OpenAI-compatible endpoint")
    api_version: str | None = doc(None, "Azure OpenAI api-version (azure only)")
    api_key: SecretStr | None = doc(None, "API key; use ${ENV_VAR} so the key stays out of the file")
    model: str = doc("gpt-4o-mini", "model name (Azure: the deployment name)")
    encoding: str | None = doc(None, "tiktoken encoding for counting tokens (null: chosen from the model name)")
    max_tokens: int = doc(4000, "max completion tokens per call (reserved against the TPM limit)", gt=0)
    temperature: float = doc(0.0, "sampling temperature", ge=0, le=2)
    request_timeout: float = doc(180.0, "seconds before one request is abandoned and retried", gt=0)
    concurrency: int = doc(16, "requests in flight at once per worker process", gt=0)
    dimensions: int | None = doc(None, "embedding size to request (embedding models that support it)", gt=0)
    batch_size: int = doc(16, "texts per embedding request", gt=0)
    batch_max_tokens: int = doc(8191, "max tokens per embedding request", gt=0)
    rate_limit: RateLimitConfig = doc(RateLimitConfig(), "limits shared by every worker on every node")
    retry: RetryConfig = doc(RetryConfig(), "retry policy (the SDK's own retries are off)")
    price: PriceConfig = doc(PriceConfig(), "prices used for cost estimates and the usage ledger")


def _default_models() -> dict[str, ModelConfig]:
    return {
        "default_chat": ModelConfig(type="chat", api_key=SecretStr("${GRAPHRAG_API_KEY}"),
                                    price=PriceConfig(input_per_1m=0.15, output_per_1m=0.60)),
        "default_embedding": ModelConfig(type="embedding", model="text-embedding-3-small",
                                         api_key=SecretStr("${GRAPHRAG_API_KEY}"),
                                         price=PriceConfig(input_per_1m=0.02)),
    }


class CacheConfig(Section):
    enabled: bool = doc(True, "cache LLM responses so a re-run of the same work makes no calls")
    base_dir: str = doc("cache", "cache folder, relative to the root (on a cluster: shared storage)")


class ReportingConfig(Section):
    ledger_file: str = doc("ledger.json", "usage ledger written next to the output at the end of each command")


class Settings(Section):
    models: dict[str, ModelConfig] = Field(default_factory=_default_models,
                                           description="model entries, referred to by id from each stage")
    cache: CacheConfig = doc(CacheConfig(), "LLM response cache")
    reporting: ReportingConfig = doc(ReportingConfig(), "usage reporting")

    def model(self, model_id: str) -> ModelConfig:
        from graphrag_ray.errors import ConfigError

        if model_id not in self.models:
            raise ConfigError(f"models.{model_id}: no such model entry (have: {', '.join(sorted(self.models))})")
        return self.models[model_id]
