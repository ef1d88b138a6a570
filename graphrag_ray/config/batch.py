"""`batch`: indexing through the provider's Batch API (`index --batch`): half the price, outside the synchronous
rate limits, answers within the completion window (usually minutes)."""

from __future__ import annotations

from typing import Literal

from graphrag_ray.config.sections import Section, doc


class BatchConfig(Section):
    enabled: bool = doc(
        False,
        "send every chat call of the item steps (extraction and its gleaning rounds, claims, summaries, reports "
        "level by level) as Batch API jobs instead of synchronous calls (`index --batch` / `--no-batch`)",
    )
    detach: bool = doc(
        False, "submit the jobs and exit, saying how to collect them (`--detach`); the same command collects"
    )
    partition_size: int = doc(
        5_000,
        "work items per partition in batch mode: each partition's calls of one pass go up as one job (fewer, larger "
        "jobs than the synchronous partitions)",
        gt=0,
    )
    max_requests_per_file: int = doc(50_000, "requests per input file (OpenAI's limit: 50,000)", gt=0)
    max_file_mb: float = doc(190.0, "MB per input file (OpenAI's limit: 200 MB)", gt=0)
    poll_interval_s: float = doc(30.0, "seconds between two looks at a job's status", gt=0)
    resubmit: int = doc(
        2, "times the failed or expired lines of a job go into another job before they are sent synchronously", ge=0
    )
    fallback: Literal["fail", "sync"] = doc(
        "fail", "an endpoint with no Batch API: stop with one line (fail), or make the calls synchronously (sync)"
    )
