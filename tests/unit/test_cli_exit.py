"""The installed command skips the interpreter's teardown, but nothing a normal exit does that matters."""

import subprocess
import sys
import textwrap


def test_exit_now_joins_threads_runs_atexit_flushes_and_keeps_the_code(tmp_path):
    code = textwrap.dedent(f"""
        import atexit, pathlib, sys, threading, time
        from graphrag_ray.cli import exit_now
        folder = pathlib.Path({str(tmp_path)!r})
        atexit.register(lambda: (folder / "atexit").write_text("ran"))
        def late():
            time.sleep(0.3)
            (folder / "thread").write_text("finished")
        threading.Thread(target=late).start()
        sys.stdout.write("x" * 100_000)  # still in the buffer: stdout is a pipe
        exit_now(3)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 3, out.stderr
    assert len(out.stdout) == 100_000
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "finished"


def test_the_command_exit_codes_and_messages(tmp_path):
    ok = subprocess.run(
        [sys.executable, "-m", "graphrag_ray.cli", "--version"], capture_output=True, text=True, timeout=60
    )
    assert ok.returncode == 0 and ok.stdout.startswith("graphrag-ray ")
    bad = subprocess.run(
        [sys.executable, "-m", "graphrag_ray.cli", "query", "x", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    expected = f"error: {tmp_path}/settings.yaml: settings file not found (run `graphrag-ray init --root {tmp_path}`)"
    assert bad.returncode == 2 and bad.stderr.strip() == expected
    text = subprocess.run(
        [sys.executable, "-c", "from graphrag_ray.cli import exit_now; exit_now('stopped: why')"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert text.returncode == 1 and text.stderr.strip() == "stopped: why"


def test_verbose_before_or_after_the_subcommand_shows_the_traceback_and_is_kept_in_the_command_state(tmp_path):
    from graphrag_ray.cli import CommandState, app, verbose
    from tests.helpers import cli_in_process

    expected = f"error: {tmp_path}/settings.yaml: settings file not found"
    plain = cli_in_process("index", "--root", str(tmp_path))
    assert plain.returncode == 2 and plain.stderr.startswith(expected) and "Traceback" not in plain.stderr
    for args in (("--verbose", "index", "--root", str(tmp_path)), ("index", "--root", str(tmp_path), "-v")):
        run = cli_in_process(*args)
        assert run.returncode == 2 and "Traceback (most recent call last)" in run.stderr, args
        assert run.stderr.strip().splitlines()[-1].startswith(expected)
    # a question that is literally "-v" after `--` stays the question, and the state lives in the context object
    import typer

    seen = {}

    @app.command("probe-verbose", hidden=True)
    def probe(ctx: typer.Context, words: list[str] = typer.Argument(None)) -> None:
        seen["verbose"], seen["words"], seen["obj"] = verbose(ctx), words, ctx.find_root().obj

    try:
        assert cli_in_process("probe-verbose", "a", "--", "-v").returncode == 0
        assert seen["verbose"] is False and seen["words"] == ["a", "-v"] and isinstance(seen["obj"], CommandState)
        assert cli_in_process("probe-verbose", "-v", "a").returncode == 0
        assert seen["verbose"] is True and seen["words"] == ["a"]
    finally:
        app.registered_commands[:] = [c for c in app.registered_commands if c.name != "probe-verbose"]


def test_printable_strips_every_terminal_control_sequence_and_byte():
    from graphrag_ray.cli.terminal import printable

    assert printable("a\x1b]0;title\x07b") == "ab"  # OSC ended by BEL
    assert printable("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b") == "alinkb"  # OSC 8 hyperlink, ended by ST
    assert printable("kept\x1b]0;unterminated swallows the rest") == "kept"
    assert printable("a\x1b[2J\x1b[31mred\x1b[0m") == "ared"  # CSI
    assert printable("a\x9b31mb\x9d0;t\x9cc") == "abc"  # C1 CSI and OSC
    assert printable("bell\x07 back\x08 del\x7f nul\x00 vt\x0b ff\x0c") == "bell back del nul vt ff"
    assert printable("line\r\nnext\ttab\rover") == "line\nnext\ttabover"
    # a sequence cut between two streamed pieces cannot form: the ESC is gone from the first
    assert "\x1b" not in printable("text \x1b") + printable("]0;title")
    assert printable("李明 café ✓") == "李明 café ✓"
