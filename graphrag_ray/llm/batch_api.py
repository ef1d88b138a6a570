"""A provider's Batch API (OpenAI, Azure OpenAI Global Batch, and OpenAI-compatible servers that copy it), through
the openai SDK: requests go up as a JSONL file (`files.create`, purpose `batch`), a batch is made of each file
(`batches.create`, completion window 24 h), polled (`batches.retrieve`), and its output and error files read back.

Each batch carries `metadata.graphrag_ray` (the digest of the requests it holds), so a command that was killed
between creating a batch and writing down its id finds it again by listing the provider's batches: nothing is
submitted twice."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from graphrag_ray.errors import LLMFatalError
from graphrag_ray.llm.outcomes import TransientLLMError
from graphrag_ray.secrets import redact

log = logging.getLogger(__name__)

TERMINAL = ("completed", "expired", "cancelled", "failed")
METADATA_KEY = "graphrag_ray"


class BatchUnsupportedError(LLMFatalError):
    """The endpoint has no Files/Batches API (a 404): one clear line, or synchronous calls by a setting."""


@dataclass
class BatchState:
    id: str
    status: str
    total: int
    completed: int
    failed: int
    output_file_id: str | None
    error_file_id: str | None

    @property
    def done(self) -> bool:
        return self.status in TERMINAL


def check_batch_endpoints(settings, model_ids: list[str]) -> None:
    """Each chat model of `model_ids` has a Batch API (`index --batch`, before anything is spent)."""
    import asyncio

    async def check_all() -> None:
        for model_id in dict.fromkeys(model_ids):
            if settings.models[model_id].type != "chat":
                continue
            api = BatchAPI(model_id, settings.models[model_id])
            try:
                await api.check()
            finally:
                await api.close()

    asyncio.run(check_all())


def split_lines(lines: list[bytes], max_requests: int, max_bytes: int) -> list[list[bytes]]:
    """Lines cut into files within the provider's limits (requests per file, bytes per file), in order."""
    files: list[list[bytes]] = []
    size = 0
    for line in lines:
        if not files or len(files[-1]) >= max_requests or size + len(line) > max_bytes:
            files.append([])
            size = 0
        files[-1].append(line)
        size += len(line)
    return files


class BatchAPI:
    """One model's endpoint's Files and Batches API."""

    def __init__(self, model_id: str, config):
        import openai

        key = config.api_key.get_secret_value() if config.api_key else ""
        if not key:
            raise LLMFatalError(f"models.{model_id}.api_key is empty: the Batch API needs it")
        self.model_id, self.config = model_id, config
        self.where = f"model '{config.model}' ({model_id}) at {config.api_base}"
        self.endpoint = "/chat/completions" if config.api_type == "azure" else "/v1/chat/completions"
        common = {"api_key": key, "max_retries": 3, "timeout": max(60.0, config.request_timeout)}
        if config.api_type == "azure":
            self.sdk = openai.AsyncAzureOpenAI(azure_endpoint=config.api_base, api_version=config.api_version, **common)
        else:
            self.sdk = openai.AsyncOpenAI(base_url=config.api_base, **common)

    async def close(self) -> None:
        await self.sdk.close()

    async def check(self) -> None:
        """That the endpoint has a Batch API (before a run spends anything): BatchUnsupportedError if not."""
        try:
            await self.sdk.batches.list(limit=1)
        except Exception as exc:  # noqa: BLE001 - translated to what a user can act on
            error = self._translated(exc, "listing batches")
            raise error if isinstance(error, LLMFatalError) else LLMFatalError(str(error)) from None

    async def submit(self, lines: list[bytes], digest: str) -> str:
        """One batch of these request lines; its id."""
        try:
            uploaded = await self.sdk.files.create(file=("requests.jsonl", b"".join(lines)), purpose="batch")
            batch = await self.sdk.batches.create(
                input_file_id=uploaded.id,
                endpoint=self.endpoint,
                completion_window="24h",
                metadata={METADATA_KEY: digest},
            )
        except Exception as exc:  # noqa: BLE001 - translated to what a user can act on
            raise self._translated(exc, "submitting a batch") from None
        return batch.id

    async def find(self, digest: str) -> list[str]:
        """Ids of the batches already made of the requests with this digest (a command killed between making
        them and writing their ids down); [] where the provider cannot list them."""
        found = []
        try:
            async for batch in self.sdk.batches.list(limit=100):
                if (batch.metadata or {}).get(METADATA_KEY) == digest and batch.status not in ("failed", "cancelled"):
                    found.append(batch.id)
        except Exception as exc:  # noqa: BLE001 - listing is a safety net, not a requirement
            log.info("%s: batches could not be listed (%s)", self.where, redact(str(exc))[:200])
        return sorted(found)

    async def state(self, batch_id: str) -> BatchState:
        try:
            batch = await self.sdk.batches.retrieve(batch_id)
        except Exception as exc:  # noqa: BLE001
            raise self._translated(exc, f"polling batch {batch_id}") from None
        counts = batch.request_counts
        return BatchState(
            batch.id,
            batch.status,
            counts.total if counts else 0,
            counts.completed if counts else 0,
            counts.failed if counts else 0,
            batch.output_file_id,
            batch.error_file_id,
        )

    async def results(self, state: BatchState) -> tuple[dict[str, dict], dict[str, str]]:
        """(custom_id -> the response body of each answered request, custom_id -> why each other one failed)."""
        answers: dict[str, dict] = {}
        failed: dict[str, str] = {}
        for file_id in (state.output_file_id, state.error_file_id):
            if not file_id:
                continue
            try:
                content = await self.sdk.files.content(file_id)
            except Exception as exc:  # noqa: BLE001
                raise self._translated(exc, f"reading the results of batch {state.id}") from None
            for raw in content.content.decode("utf-8").splitlines():
                if not raw.strip():
                    continue
                record = json.loads(raw)
                response = record.get("response") or {}
                if response.get("status_code") == 200 and isinstance(response.get("body"), dict):
                    answers[record["custom_id"]] = response["body"]
                else:
                    error = record.get("error") or (response.get("body") or {}).get("error") or {}
                    failed[record["custom_id"]] = str(error.get("code") or response.get("status_code") or "failed")
        return answers, failed

    def _translated(self, exc: Exception, doing: str) -> Exception:
        import openai

        if isinstance(exc, openai.NotFoundError) or getattr(exc, "status_code", None) == 405:
            return BatchUnsupportedError(
                f"{self.where} has no Batch API ({doing}: 404): run without --batch, or set batch.fallback: sync"
            )
        if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError, openai.BadRequestError)):
            return LLMFatalError(f"{self.where}: {doing} was refused: {redact(str(exc))[:300]}")
        return TransientLLMError(f"{self.where}: {doing} failed: {redact(str(exc))[:300]}")
