"""Issue 16: the query side tried as a user would - each defect found that way, shown fixed. CLI items go through a
subprocess, as a user runs them."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

from graphrag_ray import api
from graphrag_ray.simulate.process import SimulatorProcess
from tests.helpers import cli, cli_in_process, published_index
from tests.integration.test_index import coffee_root
from tests.integration.test_query import synthetic_tree

CLI = [sys.executable, "-m", "graphrag_ray.cli"]


@pytest.fixture(scope="module")
def root(tmp_path_factory, simulator, ray_session):
    project = coffee_root(tmp_path_factory.mktemp("as_a_user"), simulator.base_url)
    settings = yaml.safe_load((project / "settings.yaml").read_text())
    settings["extract_claims"] = {"enabled": True}
    (project / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True))
    api.build_index(root=project)
    return project


def one_line(out) -> str:
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


def settings_file(root: Path, base_url: str, name: str) -> Path:
    """ROOT's settings with the models pointed at another simulator."""
    settings = yaml.safe_load((root / "settings.yaml").read_text())
    for model in settings["models"].values():
        model["api_base"] = base_url
    path = root / name
    path.write_text(yaml.safe_dump(settings, allow_unicode=True))
    return path


def copy_of_index(root: Path, dest: Path) -> Path:
    shutil.copytree(published_index(root).local_path(), dest)
    return dest


# 1 --------------------------------------------------------------------------------------------------------------
def test_claims_reach_local_search(root):
    result = asyncio.run(api.search("李明", "local", root, context_only=True))
    assert "-----Claims-----\nid|entity|object_id|type|status|start_date|end_date|description" in result.context_text
    assert any(c["entity"] == "李明" for c in result.context_data["claims"])
    out = published_index(root).local_path()
    frames = {
        n: pl.read_parquet(out / f"{n}.parquet").to_pandas()
        for n in ("entities", "communities", "community_reports", "text_units", "relationships", "covariates")
    }
    _, context = asyncio.run(api.local_search(config=api.load_settings(root), query="李明", root=root, **frames))
    assert context["claims"], "covariates given to the API are used"


# 2 --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["local", "global", "drift", "basic"])
def test_a_level_deeper_than_the_index_uses_the_deepest(root, method):
    deepest = asyncio.run(api.search("李明", method, root, context_only=True, community_level=0))
    deeper = asyncio.run(api.search("李明", method, root, context_only=True, community_level=99))
    assert deeper.context_text == deepest.context_text


def test_a_negative_level_is_an_error_and_verbose_says_which_level_is_used(root):
    out = cli_in_process("query", "李明", "--community-level", "-1", root=root)
    assert out.returncode == 2 and "--community-level -1" in one_line(out)
    out = cli("-v", "query", "李明", "--community-level", "2", "--context-only", root=root)  # logging: a process
    assert out.returncode == 0 and "deeper than the index's deepest level (0): using 0" in out.stderr


# 3 --------------------------------------------------------------------------------------------------------------
def test_chat_goes_on_when_follow_up_generation_fails(root):
    with SimulatorProcess(fail_containing="generating a bulleted list of") as failing:
        config = settings_file(root, failing.base_url, "failing_followups.yaml")
        out = subprocess.run(
            [*CLI, "chat", "--root", str(root), "-c", str(config)],
            input="李明开了什么店？\nexit\n",
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert out.returncode == 0, out.stderr
    assert "Assistant: " in out.stdout and "[note] no follow-up questions this time:" in out.stdout
    assert out.stdout.rstrip().endswith("bye")


# 4 and 9 ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stalling(root):
    """A simulator whose streamed answers pause 3 s after their first piece."""
    with SimulatorProcess(stream_stall=3) as sim:
        yield settings_file(root, sim.base_url, "stalling.yaml")


def test_auto_streams_its_answer(root, stalling):
    proc = subprocess.Popen(
        [
            *CLI,
            "query",
            "李明是谁？(auto stream)",
            "--method",
            "auto",
            "--streaming",
            "--root",
            str(root),
            "-c",
            str(stalling),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.read(1)
    first = time.monotonic()
    rest = proc.stdout.read()
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    assert time.monotonic() - first >= 2.0, "the first piece came before the pause, not with the whole answer"
    assert rest and b"route: local" in proc.stderr.read()


@pytest.mark.parametrize("command", [["query", "李明是谁？(interrupted)", "--streaming"], ["chat"]])
def test_ctrl_c_exits_130_with_one_line(root, stalling, command):
    proc = subprocess.Popen(
        [*CLI, *command, "--root", str(root), "-c", str(stalling)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    if command[0] == "query":
        proc.stdout.read(1)  # the answer has begun (and pauses)
    else:
        while b"User:" not in proc.stdout.read1(4096):  # waiting for the user's question
            pass
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and err.decode().strip() == "error: interrupted"
    again = cli("query", "李明", "--context-only", root=root)  # the cache is still readable
    assert again.returncode == 0, again.stderr


def test_ctrl_c_at_the_chat_prompt_leaves_at_once_in_a_terminal(root, stalling):
    """In a real terminal (a pty: Ctrl-C is the terminal's, sent to the foreground process group) at the `User:`
    prompt: exit 130 within a second, no Enter needed."""
    import os
    import pty

    pid, terminal = pty.fork()
    if pid == 0:  # the child: the command, with the pty as its controlling terminal
        os.execv(sys.executable, [*CLI, "chat", "--root", str(root), "-c", str(stalling)])
    seen = b""
    deadline = time.monotonic() + 120
    while b"User:" not in seen and time.monotonic() < deadline:
        seen += os.read(terminal, 4096)
    assert b"User:" in seen, seen
    time.sleep(0.3)
    os.write(terminal, b"\x03")  # Ctrl-C typed
    pressed, status = time.monotonic(), None
    while time.monotonic() - pressed < 5:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.02)
    took = time.monotonic() - pressed
    if status is None or not done:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    output = b""
    try:
        while chunk := os.read(terminal, 4096):
            output += chunk
    except OSError:  # the pty closes with its child
        pass
    assert done and os.waitstatus_to_exitcode(status) == 130, (status, output)
    assert took < 1.0, took
    assert b"error: interrupted" in output and b"Traceback" not in output, output


def test_ctrl_c_during_a_streamed_answer_is_one_line_every_time(root, stalling):
    """Twenty times: interrupted while the answer streams (it pauses after its first piece), the command ends the
    stream cleanly - one line, no asyncio traceback from inside the stream's write."""

    def interrupted() -> tuple[int, str]:
        proc = subprocess.Popen(
            [*CLI, "query", "李明是谁？(interrupted again)", "--streaming", "--root", str(root), "-c", str(stalling)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        proc.stdout.read(1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        return proc.returncode, err.decode()

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: interrupted(), range(20)))
    bad = [(code, err) for code, err in runs if code != 130 or err.strip() != "error: interrupted"]
    assert not bad, bad[:3]


# 5 --------------------------------------------------------------------------------------------------------------
def test_leaving_a_stream_early_is_quiet(root, stalling):
    piped = subprocess.run(
        " ".join(
            [
                *CLI,
                "query",
                "'李明是谁？(left early)'",
                "--streaming",
                "--root",
                str(root),
                "-c",
                str(stalling),
                "| head -c 6",
            ]
        ),
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
        errors="replace",
    )
    assert piped.stdout and "Traceback" not in piped.stderr and "never retrieved" not in piped.stderr
    # a bare `break` (the generator is closed by the loop's end) and the careful form (contextlib.aclosing)
    bare = "    async for piece in api.local_search_streaming('李明是谁？(break)', ROOT):\n"
    careful = (
        "    async with contextlib.aclosing(api.local_search_streaming('李明是谁？(aclosing)', ROOT)) as s:\n"
        "     async for piece in s:\n"
    )
    noises = ("Traceback", "never retrieved", "Unclosed client session", "Unclosed connector")
    for loop in (bare, careful):
        script = (
            f"import asyncio, contextlib\nfrom graphrag_ray import api\nROOT = {str(root)!r}\n"
            f"async def main():\n{loop}        print('piece', piece); break\nasyncio.run(main())\n"
        )
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "piece" in out.stdout, out.stderr
        for noise in noises:
            assert noise not in out.stderr, out.stderr


# 6 --------------------------------------------------------------------------------------------------------------
def test_missing_vector_tables_are_an_error_and_nothing_is_written(root, tmp_path):
    copy = copy_of_index(root, tmp_path / "no_vectors")
    shutil.rmtree(copy / "lancedb")
    out = cli_in_process("query", "李明", "--data", str(copy), root=root)
    assert out.returncode == 1 and "vector table 'entity_description' is missing" in one_line(out)
    assert not (copy / "lancedb").exists(), "a query never writes into an index"


def test_api_without_a_root_writes_nothing_into_the_current_folder(root, tmp_path):
    script = (
        f"import asyncio, polars as pl\nfrom graphrag_ray import api\n"
        f"out = {str(published_index(root).local_path())!r}\n"
        f"frames = {{n: pl.read_parquet(f'{{out}}/{{n}}.parquet') for n in ('entities', 'communities', "
        f"'community_reports', 'text_units', 'relationships')}}\n"
        f"settings = api.load_settings({str(root)!r})\n"
        f"response, _ = asyncio.run(api.local_search(config=settings, query='李明', **frames))\n"
        f"print(bool(response))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr
    assert "matching entities by name only" in out.stderr  # the fallback is said
    assert list(tmp_path.iterdir()) == []


# 7 --------------------------------------------------------------------------------------------------------------
def test_damaged_tables_are_named(root, tmp_path):
    truncated = copy_of_index(root, tmp_path / "truncated")
    data = (truncated / "entities.parquet").read_bytes()
    (truncated / "entities.parquet").write_bytes(data[: len(data) // 2])
    out = cli_in_process("query", "李明", "--data", str(truncated), root=root)
    assert out.returncode == 1 and f"{truncated}/entities.parquet cannot be read" in one_line(out)

    retyped = copy_of_index(root, tmp_path / "retyped")
    entities = pl.read_parquet(retyped / "entities.parquet")
    entities.with_columns(pl.col("degree").cast(pl.String) + "x").write_parquet(retyped / "entities.parquet")
    out = cli_in_process("query", "李明", "--data", str(retyped), root=root)
    assert out.returncode == 1 and "entities.parquet: column 'degree' is String, Int64 expected" in one_line(out)

    damaged = copy_of_index(root, tmp_path / "damaged_vectors")
    (damaged / "lancedb" / "entity_description.flat.arrow").write_bytes(b"not arrow")
    out = cli_in_process("query", "李明", "--data", str(damaged), root=root)
    assert out.returncode == 1 and "entity_description.flat.arrow cannot be read" in one_line(out)


# 8 --------------------------------------------------------------------------------------------------------------
def test_question_size_is_bounded_and_long_questions_come_from_a_file_or_stdin(root, tmp_path):
    long = tmp_path / "long.txt"
    long.write_text("咖啡" * 50_000, encoding="utf-8")
    out = cli_in_process("query", "--query-file", str(long), "--method", "drift", root=root)
    assert out.returncode == 1 and "over query.max_question_chars (4,000)" in one_line(out)
    question = tmp_path / "question.txt"
    question.write_text("李明\n", encoding="utf-8")
    from_file = cli("query", "--query-file", str(question), "--context-only", root=root)
    from_stdin = cli("query", "-", "--context-only", root=root, input="李明\n")
    assert from_file.returncode == from_stdin.returncode == 0, from_file.stderr + from_stdin.stderr
    assert "-----Entities-----" in from_file.stdout and from_file.stdout == from_stdin.stdout


# 10 -------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, message",
    [
        (["query", "x", "--community-level", "abc"], "Invalid value for '--community-level'"),
        (["query", "x", "--methd", "local"], "No such option: --methd"),
        (["query", "x", "--query", "y"], "QUESTION and --query were both given"),
    ],
)
def test_usage_mistakes_exit_2_naming_the_flag(root, args, message):
    out = cli_in_process(*args, root=root)
    assert out.returncode == 2 and message in one_line(out)


# 11 -------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, message", [(["query", " "], "empty query"), (["query", "x", "--method", "magic"], "unknown method")]
)
def test_questions_are_checked_before_the_index_is_looked_for(args, message, tmp_path):
    out = cli_in_process(*args, "--data", str(tmp_path / "no_index_here"), root=tmp_path)
    assert out.returncode == 2 and message in one_line(out)  # not "no index at ..."


# 12 -------------------------------------------------------------------------------------------------------------
def test_context_only_shows_what_dynamic_selection_selected(root):
    from graphrag_ray.llm.models import Models
    from graphrag_ray.query.global_search import GlobalSearch

    settings = api.load_settings(root)
    settings.global_search.executor = "local"
    engine = GlobalSearch(
        synthetic_tree(),
        Models.create(settings, root),
        settings,
        root=root,
        community_level=1,
        dynamic_community_selection=True,
    )
    context = asyncio.run(engine.context_only("Which coffee shop sells espresso and latte?"))
    titles = [r["title"] for r in context.context_data["reports"]]
    assert len(titles) == context.details["dynamic_kept"] == 4 and all(t.startswith("咖啡") for t in titles)
    assert context.llm_calls == context.details["dynamic_calls"] == 1  # both levels rated in one call


def test_drift_context_only_labels_its_sections(root):
    out = cli_in_process("query", "李明", "--method", "drift", "--context-only", root=root)
    assert out.returncode == 0
    assert out.stdout.count("-----Reports-----") == 1 and "-----Primer Reports-----" in out.stdout
    assert "=== primer:" in out.stdout and "=== local context of the question" in out.stdout


# 13 -------------------------------------------------------------------------------------------------------------
def test_contextual_is_the_routed_mode(root):
    out = cli_in_process("query", "李明开了什么店？", "--method", "contextual", root=root)
    assert out.returncode == 0 and out.stdout.startswith("route: local (rule: names 李明)"), out.stderr


# 14 -------------------------------------------------------------------------------------------------------------
def test_output_is_quiet_and_the_footer_tells_paid_calls_from_cached(root, tmp_path, simulator):
    project = coffee_root(tmp_path / "quiet", simulator.base_url)
    out = cli("index", root=project, timeout=300)
    assert out.returncode == 0 and "WARN" not in out.stderr and "lance" not in out.stderr.lower(), out.stderr
    first = cli("query", "李明开了什么店？(footer)", root=root)
    again = cli("query", "李明开了什么店？(footer)", root=root)
    assert ", 2 LLM calls, " in first.stderr and "from the cache" not in first.stderr  # embedding + answer
    assert ", 0 LLM calls + 2 from the cache, 0 prompt + 0 output tokens" in again.stderr


# 15 -------------------------------------------------------------------------------------------------------------
def test_a_query_on_a_small_index_does_not_load_lancedb(root):
    script = (
        f"import sys\nfrom graphrag_ray.cli import main\n"
        f"main(['query', '李明', '--root', {str(root)!r}])\n"
        f"print('lancedb loaded:', 'lancedb' in sys.modules, 'pandas loaded:', 'pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "lancedb loaded: False pandas loaded: False" in out.stdout, out.stdout + out.stderr
