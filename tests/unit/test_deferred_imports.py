"""The deferred package initialisers: fewer imports, same behaviour. Each check runs in a fresh interpreter."""

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_openai_client_works_without_running_the_types_package_init():
    out = _run("""
        import sys
        import graphrag_ray, openai
        types = sys.modules["openai.types"]
        print(types.__dict__.get("_deferred_init_done"), "openai.types.batch" in sys.modules)
        client = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1", max_retries=0)
        client.chat.completions, client.embeddings  # the resources we use resolve their own submodules
        from openai.types import completion_usage  # a submodule named via the package: just that submodule
        print(types.__dict__.get("_deferred_init_done"))
        from openai.types import CreateEmbeddingResponse, Batch  # re-exported names: the real __init__ runs
        print(types.__dict__.get("_deferred_init_done"), Batch.__module__, types.Completion.__name__)
    """).splitlines()
    assert out[0] == "None False"  # nothing beyond what the client needs was built
    assert out[1] == "None"
    assert out[2] == "True openai.types.batch Completion"


def test_lancedb_connects_writes_and_searches_without_the_rest_client(tmp_path):
    out = _run(f"""
        import sys
        import graphrag_ray, lancedb, pyarrow as pa
        db = lancedb.connect({str(tmp_path)!r})
        table = db.create_table("v", pa.table({{"id": ["a", "b"], "vector": [[1.0, 0.0], [0.0, 1.0]]}}))
        hit = table.search([0.9, 0.1]).limit(1).to_arrow()["id"][0].as_py()
        print(hit, sys.modules["lance_namespace_urllib3_client"].__dict__.get("_deferred_init_done"))
        import lance_namespace_urllib3_client as client
        print(client.ApiClient.__name__, client.__dict__.get("_deferred_init_done"))
    """).splitlines()
    assert out[0] == "a None"
    assert out[1] == "ApiClient True"


def test_install_leaves_an_already_imported_package_alone():
    out = _run("""
        import sys, openai
        real = sys.modules["openai.types"]
        from graphrag_ray import deferred_imports
        deferred_imports.install()
        print(sys.modules["openai.types"] is real, type(real).__name__)
    """)
    assert out.split() == ["True", "module"]
