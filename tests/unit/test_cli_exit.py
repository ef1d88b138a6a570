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
    ok = subprocess.run([sys.executable, "-m", "graphrag_ray.cli", "--version"], capture_output=True, text=True,
                        timeout=60)
    assert ok.returncode == 0 and ok.stdout.startswith("graphrag-ray ")
    bad = subprocess.run([sys.executable, "-m", "graphrag_ray.cli", "query", "x", "--root", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    expected = f"error: {tmp_path}/settings.yaml: settings file not found (run `graphrag-ray init --root {tmp_path}`)"
    assert bad.returncode == 2 and bad.stderr.strip() == expected
    text = subprocess.run([sys.executable, "-c", "from graphrag_ray.cli import exit_now; exit_now('stopped: why')"],
                          capture_output=True, text=True, timeout=60)
    assert text.returncode == 1 and text.stderr.strip() == "stopped: why"
