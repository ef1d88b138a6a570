"""Public Python API. The CLI and jobs/ are thin layers over it: every command is one call here.

project.py    a project's files (new, or from a Microsoft GraphRAG project), model checks, tokenizers, Ray
indexing.py   build, update, estimate, prompt-tune, the cache, the published versions
search.py     every query method (one answer, streamed, or over given tables) and the chat loop
explore.py    evaluation, graph export, the graph view, the report
"""

from graphrag_ray.api.datasets import read_tables
from graphrag_ray.api.explore import evaluate, export_graph, write_graph_view, write_index_report
from graphrag_ray.api.indexing import (
    build_index,
    clear_cache,
    estimate_index,
    index_methods,
    list_versions,
    prompt_tune,
    submission_id,
    update_index,
)
from graphrag_ray.api.project import check_models, init_from_msgraphrag, init_project, install_tokenizers, join_ray
from graphrag_ray.api.search import (
    basic_search,
    basic_search_streaming,
    chat,
    check_question,
    drift_search,
    drift_search_streaming,
    global_search,
    global_search_streaming,
    local_search,
    local_search_streaming,
    open_index,
    search,
    search_streaming,
)
from graphrag_ray.config.load import load_settings
from graphrag_ray.query.methods import MethodSpec, eval_methods, query_methods, register_method

__all__ = [
    "MethodSpec",
    "eval_methods",
    "query_methods",
    "register_method",
    "read_tables",
    "basic_search",
    "basic_search_streaming",
    "build_index",
    "chat",
    "check_models",
    "check_question",
    "clear_cache",
    "drift_search",
    "drift_search_streaming",
    "estimate_index",
    "evaluate",
    "export_graph",
    "global_search",
    "global_search_streaming",
    "index_methods",
    "init_from_msgraphrag",
    "init_project",
    "install_tokenizers",
    "join_ray",
    "list_versions",
    "load_settings",
    "local_search",
    "local_search_streaming",
    "open_index",
    "prompt_tune",
    "search",
    "search_streaming",
    "submission_id",
    "update_index",
    "write_graph_view",
    "write_index_report",
]
