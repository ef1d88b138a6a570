"""Vector search as queries do it: small tables exactly (numpy, no LanceDB import), indexed ones with refinement."""

from __future__ import annotations

import numpy as np
import pytest

from graphrag_ray.storage.vectors import FLAT_SUFFIX, FlatVectors, LanceVectors, open_searchable, write_vectors


def _clustered(rows: int, dim: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, dim))
    return (centres[rng.integers(0, 20, rows)] + 0.6 * rng.normal(size=(rows, dim))).astype(np.float32)


def _exact(matrix: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    scores = unit @ (query / np.linalg.norm(query))
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]


def test_a_small_table_is_searched_exactly_from_its_flat_copy(tmp_path):
    matrix = _clustered(500, 16)
    ids = [f"r{i:04d}" for i in range(500)]
    write_vectors(tmp_path, "entity_description", ids, [""] * 500, matrix, ann_index_rows=1000)
    assert (tmp_path / f"entity_description{FLAT_SUFFIX}").exists()
    search = open_searchable(tmp_path, "entity_description")
    assert isinstance(search, FlatVectors)
    query = matrix[7] + 0.1
    assert search.nearest(query.tolist(), 5) == [ids[i] for i in _exact(matrix, query, 5)]


@pytest.mark.parametrize("ann_index, default_refine", [("ivf_hnsw_sq", 5), ("ivf_pq", 40)])
def test_an_indexed_table_is_searched_with_probes_and_refinement(tmp_path, ann_index, default_refine):
    matrix = _clustered(3000, 32)
    ids = [f"r{i:04d}" for i in range(3000)]
    write_vectors(tmp_path, "entity_description", ids, [""] * 3000, matrix, ann_index_rows=1000, ann_index=ann_index)
    assert open_searchable(tmp_path, "entity_description").refine_factor == default_refine  # by the table's index
    search = open_searchable(tmp_path, "entity_description", nprobes=32, refine_factor=10)
    assert isinstance(search, LanceVectors) and not (tmp_path / f"entity_description{FLAT_SUFFIX}").exists()
    assert str(search.vector_index().index_type).upper().replace("_", "") == ann_index.upper().replace("_", "")
    assert search.refine_factor == 10 and not search.exact
    rng = np.random.default_rng(5)
    recalls = []
    for row in rng.integers(0, 3000, 20):
        query = matrix[row] + 0.2 * rng.normal(size=32).astype(np.float32)
        expected = {ids[i] for i in _exact(matrix, query, 10)}
        recalls.append(len(expected & set(search.nearest(query.tolist(), 10))) / 10)
    assert sum(recalls) / len(recalls) >= 0.9


def test_a_table_indexed_for_another_metric_is_ranked_by_cosine_exactly(tmp_path, capfd):
    """Microsoft GraphRAG's LanceDB tables carry an IVF_FLAT index built for L2: a cosine query on it would be
    answered by brute force with a warning each time - it is searched exactly, by cosine, from the start."""
    import lancedb
    import pyarrow as pa

    rng = np.random.default_rng(3)
    matrix = (rng.normal(size=(400, 16)) * rng.uniform(0.1, 10, size=(400, 1))).astype(np.float32)  # unnormalised
    ids = [f"m{i:03d}" for i in range(400)]
    table = lancedb.connect(str(tmp_path)).create_table(
        "entity_description",
        data=pa.table({"id": ids, "vector": pa.FixedSizeListArray.from_arrays(pa.array(matrix.ravel()), 16)}),
    )
    table.create_index(metric="l2", vector_column_name="vector", index_type="IVF_FLAT", num_partitions=4)
    search = open_searchable(tmp_path, "entity_description")
    assert isinstance(search, LanceVectors) and search.exact
    for row in (3, 77, 250):
        query = matrix[row] * 0.01 + rng.normal(size=16).astype(np.float32)
        assert search.nearest(query.tolist(), 5) == [ids[i] for i in _exact(matrix, query, 5)]
    assert "incompatible with index metric" not in capfd.readouterr().err


def test_a_query_vector_of_other_dimensions_is_named_not_called_unreadable(tmp_path):
    from graphrag_ray.errors import GraphRagRayError

    for rows, name in ((50, "entity_description"), (3000, "text_unit_text")):  # flat copy; LanceDB with an index
        data = _clustered(rows, 8)
        write_vectors(tmp_path, name, [f"r{i}" for i in range(rows)], [""] * rows, data, ann_index_rows=1000)
        with pytest.raises(GraphRagRayError, match="holds 8-dimension vectors and the query's embedding has 4"):
            open_searchable(tmp_path, name).nearest([0.1, 0.2, 0.3, 0.4], 3)
