"""Tool commands: the LLM simulator and the offline tokenizer files."""

from __future__ import annotations

from pathlib import Path

import typer

from graphrag_ray.cli import app, tokenizers_app


@app.command("simulate-llm")
def simulate_llm(
    host: str = typer.Option("127.0.0.1", help="address to bind (loopback unless told otherwise)"),
    port: int = typer.Option(8765, help="port (0: any free port)"),
    seed: int = typer.Option(0, help="seed of the deterministic faults"),
    latency: float = typer.Option(0.0, help="seconds added to every request"),
    latency_per_token: float = typer.Option(0.0, help="seconds added per completion token"),
    embedding_latency: float | None = typer.Option(
        None, help="seconds added to every embedding request (default: --latency)"
    ),
    rpm: int | None = typer.Option(None, help="server-side requests/min limit (429 beyond)"),
    tpm: int | None = typer.Option(None, help="server-side tokens/min limit (429 beyond)"),
    api_key: str | None = typer.Option(None, envvar="SIMULATOR_API_KEY", help="require this key (401 otherwise)"),
    models: str | None = typer.Option(None, help="comma-separated known model names (404 for others)"),
    embedding_dim: int = typer.Option(256, help="embedding vector size"),
    fault_429: float = typer.Option(0.0, help="fraction of requests answered 429 + Retry-After"),
    fault_500: float = typer.Option(0.0, help="fraction answered 500"),
    fault_503: float = typer.Option(0.0, help="fraction answered 503"),
    fault_hang: float = typer.Option(0.0, help="fraction that hang past the client timeout"),
    fault_drop: float = typer.Option(0.0, help="fraction whose connection is dropped mid-answer"),
    fault_malformed: float = typer.Option(0.0, help="fraction answered with truncated/garbled content"),
    retry_after: float = typer.Option(0.05, help="Retry-After seconds announced with an injected 429"),
    hang_seconds: float = typer.Option(600.0, help="how long a hung request sleeps"),
    limits_after: str | None = typer.Option(
        None, help="limits that change mid-run: 'SECONDS=RPM/TPM,...' (e.g. 60=75/7500; an empty side means no limit)"
    ),
    answer_mode: str = typer.Option("normal", help="normal | no-delimiter | garbage (sloppy models)"),
    no_usage: bool = typer.Option(False, help="answer without usage figures (as llama.cpp's server streams)"),
    float_embeddings: bool = typer.Option(
        False, help="send embeddings as JSON floats even when base64 is asked for (servers that ignore encoding_format)"
    ),
    stream_stall: float = typer.Option(0.0, help="seconds a streamed answer stalls after its first piece"),
    fail_containing: str = typer.Option(
        "", help="chat requests holding this text always get a 500 (a permanent fault)"
    ),
    refuse_containing: str = typer.Option(
        "", help="chat requests holding this text always get a 400 that names no parameter (a fatal refusal)"
    ),
    model_family: str = typer.Option(
        "plain", help="plain | openai-reasoning | deepseek-reasoner | think-tags (how reasoning models' servers answer)"
    ),
    answer_shape: str = typer.Option(
        "clean",
        help="how answers are written: clean | closed-gt | "
        "strength-braces | numbered | numbered-one-line | bulleted | curly | "
        "broken-delimiter | prose-around | twice | fenced-json | prose-gleaning",
    ),
    reasoning_tokens: int = typer.Option(200, help="about how many tokens a reasoning family thinks per request"),
    stream_rate: float = typer.Option(0.0, help="tokens per second generated, as a slow local server (0: at once)"),
    serial: bool = typer.Option(False, help="one answer at a time; an abandoned one is generated to its end"),
    busy_models: bool = typer.Option(False, help="GET /models waits while an answer is generated (llama.cpp)"),
    cut_streams: bool = typer.Option(
        False, help="end a stream with [DONE] and no finish_reason when another request waits (llama-cpp-python)"
    ),
    prefill_rate: float = typer.Option(0.0, help="prompt tokens read per second before the first byte (0: at once)"),
    prompt_cache: bool = typer.Option(
        False, help="OpenAI's prompt caching: prompts of 1,024+ tokens reuse an earlier one's prefix (cached_tokens)"
    ),
    batch_latency: float = typer.Option(0.3, help="seconds a Batch API job takes besides its answers"),
    batch_fail_every: int = typer.Option(0, help="every n-th line of a batch fails (0: none)"),
    batch_expire_after: int = typer.Option(0, help="a batch expires after answering this many lines (0: never)"),
    no_batches: bool = typer.Option(False, help="no Files/Batches endpoints (a provider without a Batch API)"),
) -> None:
    """Run the OpenAI-compatible simulator (for tests, benchmarks and rehearsals; costs nothing)."""
    from graphrag_ray.simulate.config import SimulatorConfig, parse_limit_changes
    from graphrag_ray.simulate.faults import FaultRates
    from graphrag_ray.simulate.server import serve

    faults = FaultRates(
        fault_429, fault_500, fault_503, fault_hang, fault_drop, fault_malformed, retry_after, hang_seconds
    )
    config = SimulatorConfig(
        seed=seed,
        latency=latency,
        latency_per_token=latency_per_token,
        embedding_latency=embedding_latency,
        rpm=rpm,
        tpm=tpm,
        api_key=api_key,
        models=[m for m in (models or "").split(",") if m],
        embedding_dim=embedding_dim,
        faults=faults,
        answer_mode=answer_mode,
        limits_after=parse_limit_changes(limits_after or ""),
        no_usage=no_usage,
        stream_stall=stream_stall,
        fail_containing=fail_containing,
        float_embeddings=float_embeddings,
        model_family=model_family,
        answer_shape=answer_shape,
        reasoning_tokens=reasoning_tokens,
        refuse_containing=refuse_containing,
        stream_rate=stream_rate,
        serial=serial,
        busy_models=busy_models,
        cut_streams=cut_streams,
        prefill_rate=prefill_rate,
        prompt_cache=prompt_cache,
        batch_latency=batch_latency,
        batch_fail_every=batch_fail_every,
        batch_expire_after=batch_expire_after,
        no_batches=no_batches,
    )
    serve(config, host, port)


@tokenizers_app.command("install")
def tokenizers_install(
    dest: Path | None = typer.Option(None, help="target folder"),
    wheel: Path | None = typer.Option(None, help="a litellm wheel already downloaded"),
) -> None:
    """Fetch cl100k_base and o200k_base (from the litellm wheel on PyPI) so token counting works offline."""
    from graphrag_ray.api import install_tokenizers

    for path in install_tokenizers(dest, wheel):
        typer.echo(f"tokenizer file ready: {path}")
