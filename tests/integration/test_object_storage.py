"""Input, output and cache on object storage (s3:// against a local S3-compatible server) and on a shared path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from graphrag_ray.query.index_data import IndexData
from graphrag_ray.storage.location import Store
from graphrag_ray.storage.tables import current_index, read_table
from tests.helpers import cli, make_root

COFFEE = Path(__file__).resolve().parents[2] / "examples" / "coffee_shop" / "input" / "coffee_shop.csv"
BUCKET = "graphrag-test"


@pytest.fixture(scope="module")
def s3_env():
    moto_server = pytest.importorskip("moto.server")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ENDPOINT": endpoint,
        "AWS_ALLOW_HTTP": "true",
    }  # the last two: LanceDB's object_store
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import pyarrow.fs as pafs

    pafs.S3FileSystem(endpoint_override=endpoint, scheme="http", allow_bucket_creation=True).create_dir(BUCKET)
    yield env
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    server.stop()


def _cli(root: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    # its own local Ray instance, so the worker processes inherit the storage environment as on a real node
    full_env = {**os.environ, **env, "RAY_ADDRESS": "local"}
    return cli(*args, root=root, env=full_env, timeout=600)


def test_index_and_query_with_input_output_and_cache_in_s3(tmp_path, simulator, s3_env):
    Store(f"s3://{BUCKET}/corpus").write_bytes("coffee_shop.csv", COFFEE.read_bytes())
    output, cache = f"s3://{BUCKET}/index", f"s3://{BUCKET}/cache"
    root = make_root(
        tmp_path / "proj",
        simulator.base_url,
        input={"base_dir": f"s3://{BUCKET}/corpus"},
        output={"base_dir": output},
        cache={"base_dir": cache},
    )
    first = _cli(root, "index", env=s3_env)
    assert first.returncode == 0, first.stderr[-2000:]
    assert not (root / "output").exists() and not (root / "cache").exists()

    store = Store(output)
    version = current_index(output).location
    assert version.startswith(f"{output}/versions/")
    index = IndexData.load(output)  # the URI of the output: CURRENT names the version
    titles = set(index.entities["title"].to_list())
    assert {"李明", "王芳", "张伟"} <= titles
    assert index.community_reports.height >= 1
    raw = json.loads(store.read_bytes(version.removeprefix(output + "/") + "/stats.json"))
    assert raw["total"]["calls"] > 0
    assert len(Store(cache).list_files("*.json")) >= raw["total"]["calls"]  # every paid call cached in S3
    lance_files = [f for f in store.list_files() if ".lance/" in f.relative]
    assert lance_files, "vector tables are written to the bucket too"

    answer = _cli(root, "query", "--method", "local", "李明在哪里工作?", env=s3_env)
    assert answer.returncode == 0, answer.stderr[-2000:]
    assert answer.stdout.strip()

    second = _cli(root, "index", "--no-resume", env=s3_env)  # new run, same cache in S3: nothing paid again
    assert second.returncode == 0, second.stderr[-2000:]
    newer = current_index(output).location
    assert newer != version
    stats = json.loads(store.read_bytes(newer.removeprefix(output + "/") + "/stats.json"))
    assert stats["total"]["calls"] == 0 and stats["total"]["cache_hits"] >= raw["total"]["calls"]
    assert IndexData.load(output).entities.equals(index.entities)


def test_two_projects_share_a_cache_and_output_on_a_shared_path(tmp_path, simulator, ray_session):
    """Nodes of a cluster see one shared folder (NFS, EFS, Filestore): a second project (another node's checkout)
    pointing its cache there pays nothing for work the first one did."""
    from graphrag_ray.api import build_index

    shared = tmp_path / "shared-fs"
    input_dir = shared / "input"
    input_dir.mkdir(parents=True)
    shutil.copy(COFFEE, input_dir / "coffee_shop.csv")
    sections = dict(input={"base_dir": str(input_dir)}, cache={"base_dir": str(shared / "cache")})
    first_root = make_root(
        tmp_path / "node-a", simulator.base_url, output={"base_dir": str(shared / "index")}, **sections
    )
    second_root = make_root(tmp_path / "node-b", simulator.base_url, **sections)
    first = build_index(root=first_root)
    assert first.stats["total"]["calls"] > 0
    assert (shared / "index" / "CURRENT").exists()
    second = build_index(root=second_root)
    assert second.stats["total"]["calls"] == 0
    # every answer is a cache hit: one per call, and one per text for embeddings (cached per text)
    texts = sum(read_table(first.index, t).height for t in ("entities", "text_units", "community_reports"))
    assert second.ledger.total("embed").cache_hits == texts
    assert second.ledger.total().cache_hits - texts == first.ledger.total().calls - first.ledger.total("embed").calls
    assert IndexData.load(second_root / "output").entities.equals(IndexData.load(shared / "index").entities)
