"""Where everything is kept, local or in object storage.

schemas.py   every table's columns and types, in one place
tables.py    Parquet tables: atomic writes, hive partitions, the publish scheme (versions)
location.py  a Store: a local path or an object-storage URI
vectors.py   the LanceDB vector tables
kv.py        key-value blobs for the LLM response cache
edited.py    files a user edits (settings, prompts), rewritten without losing what was there
"""
