"""`graphrag-ray index --rehearse`: run the whole job against an automatically started simulator that enforces
the configured RPM/TPM limits with a chosen latency, then report what the real run would call, spend and take. The
cluster plumbing (actors, limiter, resume, publish) is proven before money is spent. A command-layer feature, as the
simulator is: the engine never imports either.

Everything a rehearsal writes stays under RUNS_DIR/rehearsal/ (its own cache, runs and output): simulated
answers never reach the real cache or the published index.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from graphrag_ray.api import build_index
from graphrag_ray.config.load import load_settings
from graphrag_ray.config.settings import Settings
from graphrag_ray.simulate.process import SimulatorProcess

if TYPE_CHECKING:
    from graphrag_ray.index.pipeline import IndexResult

REHEARSAL_KEY = "rehearsal-not-a-real-key"


@dataclass
class Rehearsal:
    result: IndexResult
    latency: float
    rpm: int | None
    tpm: int | None

    def summary(self) -> str:
        total = self.result.ledger.total()
        tokens = total.prompt_tokens + total.completion_tokens
        wall = self.result.stats["wall_s"]
        # the limiter allows one minute's burst at once, then TPM/60 tokens per second
        bound = f"; the TPM limit alone needs {max(0, tokens - self.tpm) / self.tpm * 60:.0f}s" if self.tpm else ""
        return (
            f"rehearsal (simulator: latency {self.latency}s, RPM {self.rpm or 'unlimited'}, "
            f"TPM {self.tpm or 'unlimited'}): the real run would make {total.calls:,} calls, "
            f"{total.prompt_tokens:,} prompt + {total.completion_tokens:,} completion tokens, cost about "
            f"${total.cost:.4f}, and take about {wall:.0f}s at this latency{bound}. "
            f"Rehearsal index: {self.result.output}"
        )


def rehearsal_settings(settings: Settings, base_url: str) -> Settings:
    rehearsal = settings.model_copy(deep=True)
    base = Path(settings.output.runs_dir) / "rehearsal"
    for model in rehearsal.models.values():
        model.api_base = base_url
        model.api_type = "openai"
        model.api_key = REHEARSAL_KEY  # validated as SecretStr by assignment
    rehearsal.cache.base_dir = str(base / "cache")
    rehearsal.output.base_dir = str(base / "output")
    rehearsal.output.runs_dir = str(base / "runs")
    return rehearsal


def rehearse(
    root: str | Path = ".",
    config_file: str | Path | None = None,
    method: str = "standard",
    latency: float = 0.5,
    show_progress: bool = False,
    verbose: bool = False,
    overrides: dict | None = None,
) -> Rehearsal:
    root = Path(root).resolve()
    settings = load_settings(root, config_file, overrides)
    limits = settings.model(settings.extract_graph.model_id).rate_limit
    shutil.rmtree(root / settings.output.runs_dir / "rehearsal" / "cache", ignore_errors=True)
    # OpenAI's prompt cache modelled: the rehearsal's ledger predicts the cached prompt tokens, and prices them
    with SimulatorProcess(latency=latency, rpm=limits.rpm, tpm=limits.tpm, prompt_cache=True) as sim:
        result = build_index(
            rehearsal_settings(settings, sim.base_url),
            root,
            method=method,
            show_progress=show_progress,
            verbose=verbose,
        )
    return Rehearsal(result, latency, limits.rpm, limits.tpm)
