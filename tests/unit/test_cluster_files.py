"""cluster/ files parse and hold the fields they must."""

from pathlib import Path

import pytest
import yaml

CLUSTER = Path(__file__).resolve().parents[2] / "cluster"
RAY_VERSION = "2.60"


def load(name):
    return yaml.safe_load((CLUSTER / name).read_text())


def test_runtime_env_ships_no_secrets():
    env = load("runtime_env.yaml")
    assert env["working_dir"] == "."
    assert "**/.env" in env["excludes"] and ".venv" in env["excludes"]
    assert not any(k.endswith(("_KEY", "_TOKEN", "SECRET", "PASSWORD")) for k in env.get("env_vars", {}))


def test_ray_up_yaml_has_a_cpu_less_head_and_autoscaling_workers():
    cfg = load("aws.yaml")
    assert cfg["provider"]["type"] == "aws"
    head = cfg["available_node_types"][cfg["head_node_type"]]
    assert head["resources"] == {"CPU": 0}
    worker = cfg["available_node_types"]["worker"]
    assert worker["max_workers"] > worker["min_workers"] >= 0 and cfg["max_workers"] >= worker["max_workers"]
    dockerfile = (CLUSTER / "Dockerfile").read_text()
    assert f"rayproject/ray:{RAY_VERSION}" in dockerfile and "tokenizers install" in dockerfile


def test_kuberay_manifests():
    cluster = load("kuberay/raycluster.yaml")
    job = load("kuberay/rayjob.yaml")
    assert cluster["kind"] == "RayCluster" and job["kind"] == "RayJob"
    for spec in (cluster["spec"], job["spec"]["rayClusterSpec"]):
        assert spec["rayVersion"].startswith(RAY_VERSION)
        assert spec["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
        env = spec["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]
        by_name = {e["name"]: e for e in env}
        assert by_name["RAY_AUTH_MODE"]["value"] == "token"
        assert "secretKeyRef" in by_name["RAY_AUTH_TOKEN"]["valueFrom"]
        assert "secretKeyRef" in by_name["GRAPHRAG_API_KEY"]["valueFrom"]
    assert job["spec"]["shutdownAfterJobFinishes"] is True
    assert job["spec"]["ttlSecondsAfterFinished"] > 0 and job["spec"]["activeDeadlineSeconds"] > 0
    assert "jobs/index.py" in job["spec"]["entrypoint"]


def test_kuberay_manifests_validate_against_kuberay_s_crd_schemas():
    """Strictly (a misspelt field fails), against KubeRay's own schemas (tests/data/kuberay, pruned of the pod
    templates); the RayService's serveConfigV2 against Ray Serve's config schema."""
    import json

    import jsonschema
    from ray.serve.schema import ServeDeploySchema

    schemas = Path(__file__).resolve().parents[1] / "data" / "kuberay"
    for name in ("raycluster", "rayjob", "rayservice"):
        manifest = load(f"kuberay/{name}.yaml")
        schema = json.loads((schemas / f"{manifest['kind']}.schema.json").read_text())
        jsonschema.validate(manifest, schema)
    job, service = load("kuberay/rayjob.yaml"), load("kuberay/rayservice.yaml")
    assert job["spec"]["backoffLimit"] >= 1
    serve_config = ServeDeploySchema.model_validate(yaml.safe_load(service["spec"]["serveConfigV2"]))
    deployments = serve_config.applications[0].deployments
    assert deployments and all(d.autoscaling_config for d in deployments)
    misspelt = {**job, "spec": {**job["spec"], "backofLimit": 2}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(misspelt, json.loads((schemas / "RayJob.schema.json").read_text()))


def test_submission_id_is_deterministic(tmp_path):
    import shutil

    from graphrag_ray.index.pipeline import submission_id

    examples = Path(__file__).resolve().parents[2] / "examples" / "coffee_shop"
    a, b = tmp_path / "a", tmp_path / "b"
    for target in (a, b):
        shutil.copytree(examples, target, ignore=shutil.ignore_patterns("output", "cache", "runs"))
    assert submission_id(a) == submission_id(b) == submission_id(a)
    (b / "input" / "extra.txt").write_text("another document")
    assert submission_id(a) != submission_id(b)
    assert submission_id(a).startswith("graphrag-ray-standard-")
