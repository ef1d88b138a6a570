"""Write the parts of KubeRay's CRD schemas the manifest test needs (tests/data/kuberay/*.schema.json) from a
checkout of github.com/ray-project/kuberay (Apache-2.0):

    python scripts/kuberay_schemas.py /path/to/kuberay

Each CRD's v1 openAPIV3Schema, with every embedded Kubernetes pod template (thousands of lines of core/v1 types,
not KubeRay's) replaced by "any object"; an object schema that lists its properties refuses others, as
`kubectl apply --validate=strict` does - so a misspelt field of a RayJob or a RayService fails the test."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

KINDS = {"RayJob": "rayjobs", "RayService": "rayservices", "RayCluster": "rayclusters"}
OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "kuberay"


def pruned(schema: dict, key: str = "") -> dict:
    if (key == "template" or key.endswith("PodTemplate")) and "spec" in schema.get("properties", {}):  # core/v1
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    out = {k: v for k, v in schema.items() if k not in ("description",)}
    if "properties" in out:
        out["properties"] = {k: pruned(v, k) for k, v in out["properties"].items()}
        if not out.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in out:
            out["additionalProperties"] = False
    if isinstance(out.get("items"), dict):
        out["items"] = pruned(out["items"])
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = pruned(out["additionalProperties"])
    return out


def main() -> None:
    kuberay = Path(sys.argv[1])
    OUT.mkdir(parents=True, exist_ok=True)
    for kind, plural in KINDS.items():
        crd = yaml.safe_load((kuberay / f"ray-operator/config/crd/bases/ray.io_{plural}.yaml").read_text())
        version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
        schema = pruned(version["schema"]["openAPIV3Schema"])
        schema["properties"]["metadata"] = {"type": "object"}
        (OUT / f"{kind}.schema.json").write_text(json.dumps(schema, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {OUT / f'{kind}.schema.json'}")


if __name__ == "__main__":
    main()
