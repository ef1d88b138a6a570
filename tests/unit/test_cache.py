"""The folder cache: append-only segments, one per writing process, never a partial entry read."""

from __future__ import annotations

import json
import pickle
import shutil
import threading

import graphrag_ray.storage.kv as cache_module
from graphrag_ray.llm.cache import cache_key, open_cache
from graphrag_ray.storage.kv import SEGMENTS_DIR, SegmentLog


def _key(i: int) -> str:
    return "0" + cache_key("chat", "gpt-4o-mini", {"messages": [{"role": "user", "content": f"q{i}"}]})[1:]


def _fresh_process_view(folder) -> SegmentLog:
    """What another process sees: its own SegmentLog over the same shard folder (all test keys are in shard 0)."""
    return SegmentLog(folder / SEGMENTS_DIR / "0")


def _segment_files(folder) -> list:
    return sorted((folder / SEGMENTS_DIR).rglob("*.seg"))


def test_keys_are_sharded_by_their_first_hex_digit(tmp_path):
    cache = open_cache(tmp_path)
    keys = [cache_key("chat", "m", {"i": i}) for i in range(64)]
    for key in keys:
        cache.put(key, {"k": key})
    assert {p.parent.name for p in _segment_files(tmp_path)} == {key[0] for key in keys}
    assert all(cache.get(key) == {"k": key} for key in keys)


def test_entries_round_trip_and_are_seen_by_a_new_process(tmp_path):
    cache = open_cache(tmp_path)
    for i in range(50):
        cache.put(_key(i), {"content": f"answer {i} 李明", "prompt_tokens": i})
    assert cache.get(_key(7)) == {"content": "answer 7 李明", "prompt_tokens": 7}
    assert cache.get(_key(99)) is None
    other = _fresh_process_view(tmp_path)
    assert json.loads(other.read(_key(49))) == {"content": "answer 49 李明", "prompt_tokens": 49}
    assert len(other.index) == 50
    assert len(_segment_files(tmp_path)) == 1  # one segment per writing process (and shard)


def test_an_incomplete_record_is_never_indexed_until_it_is_whole(tmp_path):
    open_cache(tmp_path).put(_key(1), {"content": "whole"})
    segment = _segment_files(tmp_path)[0]
    payload = json.dumps({"content": "being written"}).encode()
    record = f"{_key(2)} {len(payload)}\n".encode() + payload + b"\n"
    with open(segment, "ab") as handle:
        handle.write(record[:-10])  # a writer mid-append, or one that crashed there
    reader = _fresh_process_view(tmp_path)
    assert json.loads(reader.read(_key(1))) == {"content": "whole"}
    assert reader.read(_key(2)) is None
    with open(segment, "ab") as handle:
        handle.write(record[-10:])
    reader.last_scan = float("-inf")  # past the rescan interval
    assert json.loads(reader.read(_key(2))) == {"content": "being written"}


def test_a_damaged_segment_stops_at_the_damage_and_never_returns_garbage(tmp_path):
    segments = tmp_path / SEGMENTS_DIR / "0"
    segments.mkdir(parents=True)
    good = json.dumps({"content": "ok"}).encode()
    (segments / "other-1-x.seg").write_bytes(
        f"{_key(1)} {len(good)}\n".encode() + good + b"\n" + f"{_key(2)} 5\nabc".encode() + b"X" * 40
    )
    reader = _fresh_process_view(tmp_path)
    assert json.loads(reader.read(_key(1))) == {"content": "ok"}
    assert reader.read(_key(2)) is None


def test_two_processes_see_each_others_new_entries_after_the_rescan_interval(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "RESCAN_INTERVAL_S", 0.0)
    first, second = _fresh_process_view(tmp_path), _fresh_process_view(tmp_path)
    first.append(_key(1), b'{"content": "from the first"}')
    assert second.read(_key(1)) == b'{"content": "from the first"}'
    second.append(_key(2), b'{"content": "from the second"}')
    assert first.read(_key(2)) == b'{"content": "from the second"}'
    assert len(_segment_files(tmp_path)) == 2


def test_a_deleted_cache_folder_is_a_miss_and_writing_starts_a_new_segment(tmp_path):
    cache = open_cache(tmp_path)
    cache.put(_key(1), {"content": "a"})
    shutil.rmtree(tmp_path / SEGMENTS_DIR)
    assert cache.get(_key(1)) is None
    cache.put(_key(1), {"content": "b"})
    assert cache.get(_key(1)) == {"content": "b"}
    assert json.loads(_fresh_process_view(tmp_path).read(_key(1))) == {"content": "b"}


def test_threads_appending_at_once_leave_every_record_whole(tmp_path):
    cache = open_cache(tmp_path)

    def write(offset: int) -> None:
        for i in range(offset, offset + 200):
            cache.put(_key(i), {"content": "x" * (i % 997), "i": i})

    threads = [threading.Thread(target=write, args=(n * 1000,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reader = _fresh_process_view(tmp_path)
    assert reader.read(_key(0)) is not None and len(reader.index) == 800
    for n in range(4):
        for i in (n * 1000, n * 1000 + 199):
            assert json.loads(reader.read(_key(i)))["i"] == i


def test_a_pickled_cache_carries_only_its_folder(tmp_path):
    cache = open_cache(tmp_path)
    cache.put(_key(1), {"content": "a"})
    data = pickle.dumps(cache)
    assert str(tmp_path).encode() in data and len(data) < 300 + len(str(tmp_path)), "no index or handle travels"
    assert pickle.loads(data).get(_key(1)) == {"content": "a"}
