"""`graphrag-ray prompt-tune`: prompts fitted to the corpus, as Microsoft GraphRAG's `prompt-tune` does.

Samples text units evenly across the corpus, detects its language (Chinese, English or mixed), asks the chat
model once for the domain, an analyst persona, the entity types that matter and one worked example, and writes
the extraction, summary and report prompts into `prompts/` - the shipped ones with a domain section, the chosen
entity types and the example added, in the corpus's language. The example is kept only if its records parse.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from graphrag_ray.config.prompts import default_prompts
from graphrag_ray.errors import GraphRagRayError, UsageError
from graphrag_ray.exec.step import StepContext
from graphrag_ray.index.units import corpus_units
from graphrag_ray.parsing.llm_output import parse_json_object
from graphrag_ray.storage.edited import replace_keeping_copy
from graphrag_ray.storage.location import resolve
from graphrag_ray.storage.tables import current_index

_CJK = re.compile(r"[\u3400-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]")
LANGUAGES = {"Chinese": "中文", "English": "English", "mixed": "the language of each text (Chinese or English)"}

TUNE_PROMPT = """You are setting up a knowledge-graph extraction for a collection of documents. Below are sample \
passages from it (language: {language}).

---Samples---
{samples}

Reply with JSON only, every value written in {language}:
{{"domain": "<the subject area of these documents, a short phrase>",
 "persona": "<one sentence: the expert who would analyse these documents>",
 "entity_types": ["<3 to 8 kinds of entity that matter in this domain, short nouns>"],
 "example": {{"text": "<one of the sample passages, copied>",
              "entities": [{{"name": "...", "type": "<one of entity_types>", "description": "..."}}],
              "relationships": [{{"source": "...", "target": "...", "description": "...", "strength": <1-10>}}]}}}}"""


SELECTIONS = ("even", "random", "top", "all", "auto")


@dataclass
class TuneOptions:
    """What `prompt-tune` is told (Microsoft GraphRAG's flags, same names). Unset ones are found in the corpus."""

    limit: int = 12  # text units shown to the model (even, random, top)
    selection_method: str = "even"  # even: spread over the corpus; random (seeded); top: the first; all;
    #                                      auto: the `k` nearest the centroid of `n_subset_max` random ones' vectors
    n_subset_max: int = 300
    k: int = 15
    domain: str | None = None  # given: not asked of the model
    language: str | None = None  # given: not detected
    discover_entity_types: bool = True  # off: the prompt keeps reading settings' extract_graph.entity_types
    max_tokens: int = 4000  # the samples' budget in the tuning prompt
    chunk_size: int | None = None  # text units cut for the samples (settings' chunks otherwise)
    overlap: int | None = None
    output: Path | None = None  # folder the prompts go to (where settings read them otherwise)

    def __post_init__(self):
        if self.selection_method not in SELECTIONS:
            raise UsageError(f"--selection-method {self.selection_method}: one of {', '.join(SELECTIONS)}")
        if self.limit < 1 or self.k < 1 or self.max_tokens < 100:
            raise UsageError("--limit and --k must be at least 1, --max-tokens at least 100")


@dataclass
class TunedPrompts:
    language: str
    domain: str
    persona: str
    entity_types: list[str]
    example_kept: bool
    prompts: dict[str, str] = field(default_factory=dict)  # relative path -> text
    written: list[Path] = field(default_factory=list)
    kept_copies: list[Path] = field(default_factory=list)  # the prompts they replaced
    index_published: bool = False  # built with the prompts they replaced
    elsewhere: list[tuple[str, Path]] = field(default_factory=list)  # (settings key, file) written under --output
    samples: int = 0

    def summary(self) -> str:
        """What was chosen and written, one line each (the command prints it)."""
        lines = [
            f"language: {self.language}",
            f"domain: {self.domain}",
            f"persona: {self.persona}",
            f"entity types: {', '.join(self.entity_types)}",
            f"worked example: {'added' if self.example_kept else 'not usable, left out'}",
            f"samples: {self.samples} text units",
        ]
        lines += [f"wrote {path}" for path in self.written] or ["dry run: nothing written"]
        lines += [f"kept the previous prompt as {path}" for path in self.kept_copies]
        if self.elsewhere:
            lines.append(
                "settings.yaml still reads the previous prompts; to use these set "
                + ", ".join(f"{key}: {path}" for key, path in self.elsewhere)
            )
        elif self.written and self.index_published:
            lines.append(
                "the published index was built with the previous prompts: `graphrag-ray update` will "
                "refuse the new ones - run a full `graphrag-ray index` to use them"
            )
        return "\n".join(lines)


def detect_language(texts: list[str]) -> str:
    cjk = sum(len(_CJK.findall(t)) for t in texts)
    latin = sum(len(_LATIN.findall(t)) for t in texts) / 4  # letters per word, roughly: compare words with words
    share = cjk / max(1.0, cjk + latin)
    return "Chinese" if share > 0.7 else "English" if share < 0.2 else "mixed"


def sample_units(units: list[dict], count: int) -> list[str]:
    """`count` text units spread evenly over the corpus (the same ones every time)."""
    if len(units) <= count:
        return [u["text"] for u in units]
    step = len(units) / count
    return [units[int(i * step)]["text"] for i in range(count)]


def select_units(units: list[dict], options: TuneOptions, models, settings) -> list[str]:
    """The samples, by Microsoft GraphRAG's selection methods (plus `even`, ours and the default)."""
    import random

    method = options.selection_method
    if method == "even":
        return sample_units(units, options.limit)
    if method == "top":
        return [u["text"] for u in units[: options.limit]]
    if method == "all":
        return [u["text"] for u in units]
    picked = sorted(
        random.Random(0).sample(
            range(len(units)), min(len(units), options.limit if method == "random" else options.n_subset_max)
        )
    )
    texts = [units[i]["text"] for i in picked]
    if method == "random":
        return texts
    import numpy as np  # auto: the most typical passages, nearest the subset's centroid

    vectors = np.stack(models.run(models.embedding(settings.embed_text.model_id).embed(texts, stage="prompt_tune")))
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    nearest = np.argsort(-(vectors @ vectors.mean(axis=0)), kind="stable")[: options.k]
    return [texts[i] for i in sorted(nearest)]


def within_budget(samples: list[str], budget: int, count) -> list[str]:
    """Samples, each cut to 1,500 characters, while their tokens fit the budget (at least one)."""
    kept, used = [], 0
    for text in samples:
        text = text[:1500]
        used += count(text)
        if kept and used > budget:
            break
        kept.append(text)
    return kept


def tune(ctx: StepContext, models, options: TuneOptions | None = None, dry_run: bool = False) -> TunedPrompts:
    options = options or TuneOptions()
    settings = ctx.settings
    if options.chunk_size or options.overlap is not None:
        chunks = settings.chunks.model_copy(
            update={k: v for k, v in (("size", options.chunk_size), ("overlap", options.overlap)) if v is not None}
        )
        ctx = StepContext(settings.model_copy(update={"chunks": chunks}), ctx.root)
    _, units, _ = corpus_units(ctx)
    if not units:
        raise GraphRagRayError(f"prompt-tune: no text in {ctx.root / settings.input.base_dir}")
    cfg = settings.extract_graph
    chat = models.chat(cfg.model_id)
    samples = within_budget(select_units(units, options, models, settings), options.max_tokens, chat.tokenizer.count)
    language = _language(options.language) or detect_language(samples)
    written_in = LANGUAGES.get(language, language)
    prompt = TUNE_PROMPT.format(
        language=written_in, samples="\n\n".join(f"[{i + 1}] {s}" for i, s in enumerate(samples))
    )
    if options.domain:
        prompt += f"\nThe domain is given: {options.domain}. Reply with it as the domain."
    if not options.discover_entity_types:
        prompt += f"\nThe entity types are given: use exactly {json.dumps(list(cfg.entity_types), ensure_ascii=False)}."
    answer = models.run(
        chat.chat(
            [{"role": "user", "content": prompt}],
            stage="prompt_tune",
            json_mode=True,
            validate=partial(_usable, types_asked=options.discover_entity_types),
            max_tokens=4000,
        )
    )
    chosen = parse_json_object(answer.content)
    types = (
        [str(t).strip().upper() for t in chosen.get("entity_types") or [] if str(t).strip()][:8]
        if options.discover_entity_types
        else [str(t).upper() for t in cfg.entity_types]
    )
    domain = options.domain or str(chosen["domain"]).strip()
    persona = str(chosen["persona"]).strip()
    example = _example_block(chosen.get("example"), types)
    shipped = default_prompts()
    section = f"-Domain-\n{domain}. {persona}\nThe documents are written in {written_in}; write in it too.\n\n"
    extraction = shipped["extract_graph.txt"]
    if options.discover_entity_types:  # otherwise `{entity_types}` stays: the settings' types fill it
        extraction = extraction.replace("{entity_types}", ",".join(types))
    extraction = extraction.replace("-Steps-", section + "-Steps-", 1)
    if example:
        extraction = extraction.replace("######################\n-Real Data-", example + "-Real Data-", 1)
    result = TunedPrompts(language, domain, persona, types, bool(example), samples=len(samples))
    result.prompts = {
        cfg.prompt: extraction,
        settings.summarize_descriptions.prompt: section + shipped["summarize_descriptions.txt"],
        settings.community_reports.prompt: section + shipped["community_report.txt"],
    }
    if not dry_run:
        keys = {
            cfg.prompt: "extract_graph.prompt",
            settings.summarize_descriptions.prompt: "summarize_descriptions.prompt",
            settings.community_reports.prompt: "community_reports.prompt",
        }
        for relative, text in result.prompts.items():
            path = Path(options.output) / Path(relative).name if options.output else ctx.root / relative
            copy = replace_keeping_copy(path, text)
            result.written.append(path)
            result.kept_copies += [copy] if copy else []
            if path.resolve() != (ctx.root / relative).resolve():
                result.elsewhere.append((keys[relative], path))
        result.index_published = current_index(resolve(ctx.root, settings.output.base_dir)) is not None
    return result


def _language(asked: str | None) -> str | None:
    """A language the user named, as our detection names it when it is one of those."""
    if not asked:
        return None
    known = {name.lower(): name for name in LANGUAGES} | {written.lower(): name for name, written in LANGUAGES.items()}
    return known.get(asked.strip().lower(), asked.strip())


def _usable(content: str, types_asked: bool = True) -> bool:
    data = parse_json_object(content)
    types = data.get("entity_types") if data else None
    return bool(
        data and (not types_asked or (isinstance(types, list) and types)) and data.get("domain") and data.get("persona")
    )


def _example_block(example, types: list[str]) -> str:
    """The model's worked example in the extraction format (with the prompt's delimiter placeholders), or "" when
    it is not usable: a passage, and at least one entity of a chosen type."""
    if not isinstance(example, dict) or not str(example.get("text") or "").strip():
        return ""
    records = []
    for e in example.get("entities") or []:
        if isinstance(e, dict) and e.get("name") and str(e.get("type", "")).upper() in types:
            records.append(
                '("entity"{tuple_delimiter}'
                + "{tuple_delimiter}".join(
                    _flat(v) for v in (e["name"], str(e["type"]).upper(), e.get("description", ""))
                )
                + ")"
            )
    if not records:
        return ""
    for r in example.get("relationships") or []:
        if isinstance(r, dict) and r.get("source") and r.get("target"):
            strength = r.get("strength") if isinstance(r.get("strength"), (int, float)) else 5
            records.append(
                '("relationship"{tuple_delimiter}'
                + "{tuple_delimiter}".join(
                    _flat(v) for v in (r["source"], r["target"], r.get("description", ""), strength)
                )
                + ")"
            )
    return (
        "######################\n-Example-\n######################\n"
        f"Entity_types: {','.join(types)}\nText:\n{_flat(example['text'])}\n######################\nOutput:\n"
        + "\n{record_delimiter}\n".join(records)
        + "\n{completion_delimiter}\n\n######################\n"
    )


def _flat(value) -> str:
    """One line, with no braces a template fill would read as a placeholder."""
    return " ".join(str(value).split()).replace("{", "(").replace("}", ")")
