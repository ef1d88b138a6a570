"""`graphrag-ray prompt-tune`: prompts fitted to the corpus, as Microsoft GraphRAG's `prompt-tune` does.

Samples text units evenly across the corpus, detects its language (Chinese, English or mixed), asks the chat
model once for the domain, an analyst persona, the entity types that matter and one worked example, and writes
the extraction, summary and report prompts into `prompts/` - the shipped ones with a domain section, the chosen
entity types and the example added, in the corpus's language. The example is kept only if its records parse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from graphrag_ray.config.prompts import default_prompts
from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.exec.step import StepContext
from graphrag_ray.index.units import corpus_units
from graphrag_ray.llm.client import run as run_async
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


@dataclass
class TunedPrompts:
    language: str
    domain: str
    persona: str
    entity_types: list[str]
    example_kept: bool
    prompts: dict[str, str] = field(default_factory=dict)   # relative path -> text
    written: list[Path] = field(default_factory=list)
    kept_copies: list[Path] = field(default_factory=list)  # the prompts they replaced
    index_published: bool = False  # built with the prompts they replaced

    def summary(self) -> str:
        """What was chosen and written, one line each (the command prints it)."""
        lines = [f"language: {self.language}", f"domain: {self.domain}", f"persona: {self.persona}",
                 f"entity types: {', '.join(self.entity_types)}",
                 f"worked example: {'added' if self.example_kept else 'not usable, left out'}"]
        lines += [f"wrote {path}" for path in self.written] or ["dry run: nothing written"]
        lines += [f"kept the previous prompt as {path}" for path in self.kept_copies]
        if self.written and self.index_published:
            lines.append("the published index was built with the previous prompts: `graphrag-ray update` will "
                         "refuse the new ones - run a full `graphrag-ray index` to use them")
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


def tune(ctx: StepContext, models, sample: int = 12, dry_run: bool = False) -> TunedPrompts:
    _, units, _ = corpus_units(ctx)
    if not units:
        raise GraphRagRayError(f"prompt-tune: no text in {ctx.root / ctx.settings.input.base_dir}")
    samples = sample_units(units, sample)
    language = detect_language(samples)
    written_in = LANGUAGES[language]
    cfg = ctx.settings.extract_graph
    prompt = TUNE_PROMPT.format(language=written_in, samples="\n\n".join(f"[{i + 1}] {s[:1500]}"
                                                                         for i, s in enumerate(samples)))
    answer = run_async(models.chat(cfg.model_id).chat([{"role": "user", "content": prompt}], stage="prompt_tune",
                                                     json_mode=True, validate=_usable, max_tokens=4000))
    chosen = parse_json_object(answer.content)
    types = [str(t).strip().upper() for t in chosen["entity_types"] if str(t).strip()][:8]
    domain, persona = str(chosen["domain"]).strip(), str(chosen["persona"]).strip()
    example = _example_block(chosen.get("example"), types)
    shipped = default_prompts()
    section = f"-Domain-\n{domain}. {persona}\nThe documents are written in {written_in}; write in it too.\n\n"
    extraction = shipped["extract_graph.txt"].replace("{entity_types}", ",".join(types))
    extraction = extraction.replace("-Steps-", section + "-Steps-", 1)
    if example:
        extraction = extraction.replace("######################\n-Real Data-", example + "-Real Data-", 1)
    result = TunedPrompts(language, domain, persona, types, bool(example))
    result.prompts = {cfg.prompt: extraction,
                      ctx.settings.summarize_descriptions.prompt: section + shipped["summarize_descriptions.txt"],
                      ctx.settings.community_reports.prompt: section + shipped["community_report.txt"]}
    if not dry_run:
        for relative, text in result.prompts.items():
            path = ctx.root / relative
            copy = replace_keeping_copy(path, text)
            result.written.append(path)
            result.kept_copies += [copy] if copy else []
        result.index_published = current_index(resolve(ctx.root, ctx.settings.output.base_dir)) is not None
    return result


def _usable(content: str) -> bool:
    data = parse_json_object(content)
    return bool(data and isinstance(data.get("entity_types"), list) and data["entity_types"]
                and data.get("domain") and data.get("persona"))


def _example_block(example, types: list[str]) -> str:
    """The model's worked example in the extraction format (with the prompt's delimiter placeholders), or "" when
    it is not usable: a passage, and at least one entity of a chosen type."""
    if not isinstance(example, dict) or not str(example.get("text") or "").strip():
        return ""
    records = []
    for e in example.get("entities") or []:
        if isinstance(e, dict) and e.get("name") and str(e.get("type", "")).upper() in types:
            records.append('("entity"{tuple_delimiter}' + "{tuple_delimiter}".join(
                _flat(v) for v in (e["name"], str(e["type"]).upper(), e.get("description", ""))) + ")")
    if not records:
        return ""
    for r in example.get("relationships") or []:
        if isinstance(r, dict) and r.get("source") and r.get("target"):
            strength = r.get("strength") if isinstance(r.get("strength"), (int, float)) else 5
            records.append('("relationship"{tuple_delimiter}' + "{tuple_delimiter}".join(
                _flat(v) for v in (r["source"], r["target"], r.get("description", ""), strength)) + ")")
    return ("######################\n-Example-\n######################\n"
            f"Entity_types: {','.join(types)}\nText:\n{_flat(example['text'])}\n######################\nOutput:\n"
            + "\n{record_delimiter}\n".join(records) + "\n{completion_delimiter}\n\n######################\n")


def _flat(value) -> str:
    """One line, with no braces a template fill would read as a placeholder."""
    return " ".join(str(value).split()).replace("{", "(").replace("}", ")")
