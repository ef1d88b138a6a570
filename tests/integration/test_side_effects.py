"""Importing graphrag_ray and building an index in-process leave other packages' modules and the environment as
they were (a full index build: an integration test, not a unit one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "graphrag_ray"


PROBE = r"""
import json, os, sys
import polars  # sets _RJEM_MALLOC_CONF for its allocator at import: its doing, not ours
before_env = dict(os.environ)
before = {k: id(v) for k, v in sys.modules.items()}
import graphrag_ray
from graphrag_ray import api
result = api.build_index(root=sys.argv[1], method="fast")
ours = ("graphrag_ray", "tests", "__main__")
others = {k: v for k, v in sys.modules.items() if k.split(".")[0] not in ours}
print(json.dumps({
    "replaced": sorted(k for k, v in others.items() if k in before and id(v) != before[k]),
    "blocked": sorted(k for k, v in others.items() if v is None),
    "stand_ins": sorted(k for k, v in others.items() if type(v).__module__.split(".")[0] == "graphrag_ray"),
    "env": sorted(k for k in set(before_env) | set(os.environ) if before_env.get(k) != os.environ.get(k)),
    "entities": result.stats["rows"]["entities"]}))
"""


def test_importing_and_indexing_change_no_other_module_and_no_environment_variable(tmp_path):
    """In a fresh interpreter: import graphrag_ray, build an index in-process (the offline method, local
    executor); sys.modules holds no replaced or stand-in entry of another package and os.environ is as before."""
    import shutil

    import yaml

    examples = PACKAGE.parent / "examples" / "english"
    root = tmp_path / "english"
    shutil.copytree(examples / "input", root / "input")
    settings = yaml.safe_load((examples / "settings.yaml").read_text())
    settings.setdefault("workers", {})["executor"] = "local"
    (root / "settings.yaml").write_text(yaml.safe_dump(settings))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(root)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["entities"] > 0, "an index was built"
    assert report["replaced"] == [] and report["stand_ins"] == [], report
    assert report["blocked"] == [], "no module is blocked by a None entry"
    assert report["env"] == [], f"environment variables changed: {report['env']}"
