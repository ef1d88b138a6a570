"""Store (local paths and URIs through pyarrow filesystems), object-store publishing and the cache on a store."""

from __future__ import annotations

import polars as pl

from graphrag_ray.llm.cache import open_cache, pack_vectors, unpack_vectors
from graphrag_ray.storage.kv import ObjectKV, SegmentKV
from graphrag_ray.storage.location import Store, as_location, is_uri, resolve
from graphrag_ray.storage.tables import CURRENT_POINTER, current_index, publish, read_table, write_table


def test_locations_keep_uris_and_root_relative_paths(tmp_path):
    assert resolve(tmp_path, "output") == tmp_path / "output"
    assert resolve(tmp_path, "s3://b/x/") == "s3://b/x"
    assert as_location("gs://b/idx") == "gs://b/idx" and is_uri("gs://b/idx")
    assert as_location(str(tmp_path)) == tmp_path


def test_store_reads_writes_lists_and_skips_hidden_names(tmp_path):
    store = Store(f"file://{tmp_path}/data")
    assert store.read_bytes("missing.txt") is None
    store.write_bytes("a/one.csv", b"1")
    store.write_bytes("b.txt", "中文".encode())
    store.write_bytes(".hidden/x.csv", b"h")
    store.write_bytes("_tmp.csv", b"t")
    assert [f.relative for f in store.list_files()] == ["a/one.csv", "b.txt"]
    assert [f.relative for f in store.list_files("**/*.csv")] == ["a/one.csv"]
    assert store.read_bytes("b.txt").decode() == "中文"
    assert not [p for p in (tmp_path / "data").rglob("*.tmp-*")], "no temp file left behind"


def test_publish_to_a_store_switches_current_and_keeps_two_versions(tmp_path):
    output = f"file://{tmp_path}/bucket/index"
    versions = []
    for n in range(3):

        def build(staged, n=n):
            write_table(pl.DataFrame({"id": [f"e{n}"], "title": [f"T{n}"]}), staged, "entities", typed=False)
            write_table(
                pl.DataFrame({"id": [f"r{i}" for i in range(5)], "x": list(range(5))}),
                staged,
                "big",
                partition_rows=2,
                typed=False,
            )
            return staged

        version, staged = publish(output, build)
        versions.append(version.location)
        assert not staged.exists()
    assert current_index(output).location == versions[-1]
    assert Store(output).read_bytes(CURRENT_POINTER).decode() == versions[-1].rsplit("/", 1)[1]
    assert read_table(versions[-1], "entities")["title"].to_list() == ["T2"]
    assert sorted(read_table(versions[-1], "big")["id"].to_list()) == [f"r{i}" for i in range(5)]
    kept = {f.relative.split("/", 1)[0] for f in Store(output).child("versions").list_files()}
    assert kept == {v.rsplit("/", 1)[1] for v in versions[1:]}
    assert current_index(f"file://{tmp_path}/bucket/nothing-here") is None


def test_cache_on_a_store_round_trips_and_vectors_pack_exactly(tmp_path):
    cache = open_cache(f"file://{tmp_path}/cache")
    assert isinstance(cache.store, ObjectKV) and cache.enabled
    assert cache.get("ab" * 32) is None
    cache.put("ab" * 32, {"content": "答案", "prompt_tokens": 3})
    assert cache.get("ab" * 32) == {"content": "答案", "prompt_tokens": 3}
    assert isinstance(open_cache(tmp_path / "local").store, SegmentKV) and not open_cache(None).enabled
    vectors = [[0.25, -1.5, 3.0], [1e-3, 2.0, 0.0]]
    packed = pack_vectors(vectors)
    assert set(packed) == {"vectors_f32", "shape"} and packed["shape"] == [2, 3]
    assert [[round(x, 6) for x in row] for row in unpack_vectors(packed)] == [[0.25, -1.5, 3.0], [0.001, 2.0, 0.0]]


def test_publish_to_a_folder_is_the_same_scheme_and_a_failed_build_changes_nothing(tmp_path):
    import pytest

    output = tmp_path / "output"
    write_table(pl.DataFrame({"id": ["e0"], "title": ["OLD"]}), output, "entities", typed=False)  # copied by hand
    assert read_table(current_index(output), "entities")["title"].to_list() == ["OLD"]

    def build(title):
        def write(folder):
            write_table(pl.DataFrame({"id": ["e1"], "title": [title]}), folder, "entities", typed=False)
            return folder

        return write

    first, _ = publish(output, build("NEW"))
    assert (output / CURRENT_POINTER).exists()
    assert current_index(output) == first and first.local_path().parent == output / "versions"
    assert read_table(current_index(output), "entities")["title"].to_list() == ["NEW"]

    def broken(folder):
        build("HALF")(folder)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        publish(output, broken)
    assert current_index(output) == first, "readers still see the last good version"
    assert sorted(p.name for p in (output / "versions").iterdir()) == [first.local_path().name], (
        "no staging folder is left behind"
    )
    second, _ = publish(output, build("NEWER"))
    third, _ = publish(output, build("NEWEST"))
    assert sorted(p.name for p in (output / "versions").iterdir()) == sorted(
        [second.local_path().name, third.local_path().name]
    ), "the newest two versions are kept"
