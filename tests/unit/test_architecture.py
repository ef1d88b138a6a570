"""The layers README's architecture section draws, checked on the source: imports point one way, Ray lives in the
execution package (and the limiter's actor), storage backends are told apart only in storage, and importing or
running the library leaves other packages' modules and the environment as they were."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "graphrag_ray"

# What each part of graphrag_ray may import (besides itself). Read top-down: the command layer (cli, rehearse,
# the simulator) over api, over eval, over explore (export, view, report), over index and query (siblings), over
# exec, over llm and storage and config; parsing, nlp, ids, errors and secrets are leaves everyone may use.
LEAVES = {"parsing", "nlp", "ids", "errors", "secrets", "_configs"}
BASE = {"config", "storage", "llm"}
ALLOWED: dict[str, set[str]] = {
    "cli": {"__init__", "api", "rehearse", "simulate", "serve"} | BASE | LEAVES,
    "serve": {"query", "exec"} | BASE | LEAVES,  # Ray Serve deployments over the query engines
    "rehearse": {"api", "simulate"} | BASE | LEAVES,
    "simulate": BASE | LEAVES,
    "api": {"eval", "explore", "index", "query", "exec"} | BASE | LEAVES,
    "eval": {"explore", "query", "exec"} | BASE | LEAVES,
    "explore": {"query"} | BASE | LEAVES,
    "index": {"exec"} | BASE | LEAVES,
    "query": {"exec"} | BASE | LEAVES,
    "exec": BASE | LEAVES,
    "llm": {"config", "storage"} | LEAVES,
    "storage": {"config"} | LEAVES,
    "config": LEAVES,
    **{leaf: {"errors"} for leaf in LEAVES},
    "__init__": set(),
}


def _part(path: Path) -> str:
    first = path.relative_to(PACKAGE).parts[0]
    return "__init__" if first == "__init__.py" else first.removesuffix(".py")


def _imports(tree: ast.AST):
    """(module, line) of every import, leaving out those under `if TYPE_CHECKING:` (annotations only)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, node.lineno


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def test_imports_point_one_way():
    wrong = []
    for path, tree in _sources():
        part = _part(path)
        assert part in ALLOWED, f"{path}: a new part of the package; give it a place in ALLOWED (and README)"
        for module, line in _imports(tree):
            if module == "graphrag_ray":
                target = "__init__"
            elif module.startswith("graphrag_ray."):
                target = module.split(".")[1]
            else:
                continue
            if target != part and target not in ALLOWED[part]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({part}) imports {module}")
    assert not wrong, "wrong-way imports:\n" + "\n".join(wrong)


def test_the_checker_catches_a_wrong_way_import(tmp_path):
    """The check above is not vacuous: the same reading of a module that imports upward finds it."""
    tree = ast.parse("from graphrag_ray.api import search\nif TYPE_CHECKING:\n    import graphrag_ray.cli\n")
    assert [m for m, _ in _imports(tree)] == ["graphrag_ray.api"]
    assert "api" not in ALLOWED["index"] and "index" not in ALLOWED["query"] and "query" not in ALLOWED["index"]
    assert "simulate" not in ALLOWED["api"] and "exec" not in ALLOWED["llm"]


STEPS = "graphrag_ray.index.steps"


def _step_imports(tree: ast.AST, own: str | None = None) -> list[str]:
    """The index steps a module imports (`own`: the module's own name, left out)."""
    return [m for m, _ in _imports(tree) if (m == STEPS or m.startswith(STEPS + ".")) and m != own]


def test_a_step_imports_operations_never_another_step_and_nothing_uses_a_step_as_a_library():
    """Steps are run by the executor, not called: what two steps (or a step and estimate, prompt-tune) share is
    in index/operations/. Only the pipeline knows steps, by name (importlib, from the methods' lists)."""
    wrong = []
    for path, tree in _sources():
        rel = path.relative_to(PACKAGE)
        own = "graphrag_ray." + ".".join(rel.with_suffix("").parts)
        wrong += [f"{rel} imports {m}" for m in _step_imports(tree, own)]
    assert not wrong, "steps used as libraries:\n" + "\n".join(wrong)
    assert (PACKAGE / "index" / "operations").is_dir()


def test_the_step_check_catches_a_step_importing_another():
    tree = ast.parse(
        "from graphrag_ray.index.steps.embed import Embed\n"
        "from graphrag_ray.index.operations.embedding import EmbeddingStep\n"
        "import graphrag_ray.index.steps.chunk\n"
    )
    assert _step_imports(tree, "graphrag_ray.index.steps.embed_text_units") == [
        "graphrag_ray.index.steps.embed",
        "graphrag_ray.index.steps.chunk",
    ]


def _item_step_assignments(tree: ast.AST, item_steps: set[str]) -> list[str]:
    """`self.NAME = ...` (or +=) in a method of a class deriving from one of `item_steps`: state on the shipped
    step. `__init__` may set what the step is made with (the eval steps' index and methods): configuration."""
    found = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        if not {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in cls.bases} & item_steps:
            continue
        methods = [
            f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name != "__init__"
        ]
        for node in (n for f in methods for n in ast.walk(f)):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, (ast.AugAssign, ast.AnnAssign))
                else []
            )
            found += [
                f"{cls.name}.{t.attr}"
                for t in targets
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
            ]
    return found


def test_an_item_step_keeps_no_run_state_its_plan_does():
    """An item step travels to every worker with every partition, and the in-process pool's workers share it with
    the driver: what a run keeps between its driver calls (an update's previous version, later rounds' items) is on
    its plan (exec/step.py ItemPlan), which is never shipped; the step's methods assign nothing to it."""
    sources = list(_sources())
    item_steps = {"ItemStep"}
    for _ in range(3):  # the classes deriving from one (EmbeddingStep), found by name across the package
        item_steps |= {
            c.name
            for _, tree in sources
            for c in ast.walk(tree)
            if isinstance(c, ast.ClassDef) and {getattr(b, "id", "") for b in c.bases} & item_steps
        }
    assert {"CommunityReports", "EmbeddingStep", "Embed", "ExtractGraph"} <= item_steps
    wrong = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path, tree in sources
        for name in _item_step_assignments(tree, item_steps)
    ]
    assert not wrong, "item steps holding state (move it to their plan):\n" + "\n".join(wrong)
    caught = _item_step_assignments(
        ast.parse("class Reports(ItemStep):\n    def items(self):\n        self._waiting = []\n"), {"ItemStep"}
    )
    assert caught == ["Reports._waiting"], "the check catches state set on a step"


def test_every_package_is_shipped():
    """A built wheel holds every package under graphrag_ray/ (the default settings and prompts included): the
    packages are discovered, not listed by hand - a hand-kept list once left out `graphrag_ray.cli`."""
    import tomllib

    from setuptools import find_packages

    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert isinstance(config["packages"], dict), "packages are found, not a list"
    shipped = set(find_packages(str(PACKAGE.parent), include=config["packages"]["find"]["include"]))
    on_disk = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("__init__.py")}
    assert on_disk <= shipped and {"graphrag_ray.cli", "graphrag_ray._configs"} <= shipped
    assert (PACKAGE / "_configs" / "settings.yaml").is_file() and (PACKAGE / "_configs" / "prompts").is_dir()


# modules outside exec/ and serve/ that use Ray, each for a Ray API it exists to serve
RAY_USERS = {
    "llm/ratelimit.py": "the limiter actor shared by a run's workers",
    "llm/metrics.py": "ray.util.metrics, where calls are paid (a no-op outside Ray)",
    "api/datasets.py": "Ray Data in (build_index(documents=)) and out (read_tables)",
}


def test_ray_is_imported_only_by_the_execution_package_serve_and_the_ray_apis_they_name():
    found = sorted(
        str(path.relative_to(PACKAGE))
        for path, tree in _sources()
        if any(m == "ray" or m.startswith("ray.") for m, _ in _imports(tree))
    )
    assert found and all(f.startswith(("exec/", "serve/")) or f in RAY_USERS for f in found), found


def test_storage_backends_are_told_apart_only_in_storage():
    markers = ("is_uri(", ".remote", "local_path(", "pyarrow.fs", "pafs.")
    found = []
    for path, _ in _sources():
        rel = str(path.relative_to(PACKAGE))
        if rel.startswith("storage/"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if any(marker in code for marker in markers) and ".remote(" not in code:
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "backend checks outside storage:\n" + "\n".join(found)
