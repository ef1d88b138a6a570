"""An OpenAI-compatible LLM simulator for tests, benchmarks and rehearsals. Never used unless configured."""
