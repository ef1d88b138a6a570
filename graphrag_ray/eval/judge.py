"""Win rates from the pairwise judgments (runner.JudgeAnswers makes them)."""

from __future__ import annotations

import math

import polars as pl

from graphrag_ray.eval.runner import CRITERIA


def win_rates(judgments: pl.DataFrame) -> pl.DataFrame:
    """Per (method_a, method_b, criterion): A's win rate over questions (both orders averaged; a tie is 0.5)
    with a 95% confidence interval (normal approximation on the per-question scores)."""
    rows = []
    if judgments.height == 0:
        return pl.DataFrame(
            schema={
                "method_a": pl.String,
                "method_b": pl.String,
                "criterion": pl.String,
                "win_rate": pl.Float64,
                "ci_low": pl.Float64,
                "ci_high": pl.Float64,
                "questions": pl.Int64,
            }
        )
    per_question = judgments.group_by("question_id", "method_a", "method_b").agg([pl.col(c).mean() for c in CRITERIA])
    for (a, b), group in per_question.group_by(["method_a", "method_b"], maintain_order=True):
        for criterion in CRITERIA:
            scores = group[criterion].to_list()
            n = len(scores)
            mean = sum(scores) / n
            sd = math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1)) if n > 1 else 0.0
            half = 1.96 * sd / math.sqrt(n) if n > 1 else 0.5
            rows.append(
                {
                    "method_a": a,
                    "method_b": b,
                    "criterion": criterion,
                    "win_rate": round(mean, 4),
                    "ci_low": round(max(0.0, mean - half), 4),
                    "ci_high": round(min(1.0, mean + half), 4),
                    "questions": n,
                }
            )
    return pl.DataFrame(rows).sort("method_a", "method_b", "criterion")
