"""`graphrag-ray` command line: thin typer layer over graphrag_ray.api (commands in build.py, ask.py, tools.py).

A mistake a user can make prints one line `error: ...` and exits non-zero; --verbose adds the traceback.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path

import typer
import typer.core

from graphrag_ray import __version__
from graphrag_ray.cli.terminal import printable
from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.secrets import install_log_redaction, redact

VERBOSE_FLAGS = ("--verbose", "-v")


class CommandLine(typer.core.TyperGroup):
    """The top-level group: --verbose is a root option, and users type it after the subcommand too - it is
    taken from anywhere before `--` to the root's place."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        cut = args.index("--") if "--" in args else len(args)
        flags = [a for a in args[:cut] if a in VERBOSE_FLAGS]
        return super().parse_args(ctx, flags[:1] + [a for a in args[:cut] if a not in VERBOSE_FLAGS] + args[cut:])


app = typer.Typer(
    name="graphrag-ray",
    cls=CommandLine,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="GraphRAG as a distributed, resumable batch engine on Ray.",
)
tokenizers_app = typer.Typer(help="Offline tokenizer files for tiktoken.", no_args_is_help=True)
app.add_typer(tokenizers_app, name="tokenizers")
cache_app = typer.Typer(help="The LLM response cache.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")


@dataclass
class CommandState:
    """What the whole command line decided (typer's context object, `ctx.obj`): main() reads it after an error."""

    verbose: bool = False


def verbose(ctx: typer.Context) -> bool:
    """--verbose, for a command given its context (the root's object)."""
    state = ctx.find_root().obj
    return isinstance(state, CommandState) and state.verbose


RootOpt = typer.Option(Path("."), "--root", "-r", help="project root (settings.yaml, input/, output/)")
ConfigOpt = typer.Option(None, "--config", "-c", help="settings file (default: ROOT/settings.yaml)")
OutputOpt = typer.Option(
    None,
    "--output",
    "-o",
    help="publish the index here (a folder or s3:// / gs:// URI; default: settings' output.base_dir)",
)
SkipValidationOpt = typer.Option(
    False,
    "--skip-validation",
    help="do not check the endpoints before the run (a bad key or address is then said by the first call)",
)
BatchOpt = typer.Option(
    None,
    "--batch/--no-batch",
    help="send the calls as the provider's Batch API jobs (half the price, answers within 24 h; default: the "
    "settings' batch.enabled)",
)
DetachOpt = typer.Option(
    False, "--detach", help="with the Batch API: submit the jobs and exit; the same command later collects them"
)
DataOpt = typer.Option(None, "--data", help="index folder or s3:// / gs:// URI (default: output.base_dir)")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"graphrag-ray {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="log details; show tracebacks on errors"),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="print the version and exit"
    ),
) -> None:
    if not isinstance(ctx.obj, CommandState):  # run by typer's own runner rather than main()
        ctx.obj = CommandState()
    ctx.obj.verbose = verbose
    _log_to_stderr(verbose)
    install_log_redaction()


class _OneLine(logging.Formatter):
    """A warning as a person reads it: `warning: ...`, one line (the time and the logger's name with --verbose)."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


def _log_to_stderr(verbose: bool) -> None:
    """Warnings (with --verbose, details) on stderr. The handler has a level of its own: a library that sets its
    logger to DEBUG at import (bm25s) prints nothing below it."""
    if logging.getLogger().handlers:  # configured already (an in-process command after another, or a test run)
        return
    handler = logging.StreamHandler()
    handler.setLevel(logging.INFO if verbose else logging.WARNING)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s") if verbose else _OneLine()
    )
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])


def _overrides(cache: bool, output: Path | None = None) -> dict:
    """What the flags change in every settings file the command reads (handed to the API, which hands it to
    load_settings): --no-cache turns the LLM response cache off; --output puts the index there (a path as the
    shell gave it, relative to the working directory; a URI as is)."""
    overrides: dict = {} if cache else {"cache": {"enabled": False}}
    if output is not None:
        where = str(output) if "://" in str(output) else str(Path(output).resolve())
        overrides["output"] = {"base_dir": where}
    return overrides


CacheOpt = typer.Option(
    True,
    "--cache/--no-cache",
    help="use the LLM response cache (--no-cache: ask the model for everything; nothing is read from or written to it)",
)


def _console():
    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 140)


# the commands register themselves on `app` when imported (after it exists)
from graphrag_ray.cli import ask, build, tools  # noqa: E402,F401


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@contextlib.contextmanager
def interrupted_at_once():
    """Ctrl-C ends the command wherever it waits (an `input()` inside the event loop, a stream): asyncio.run's own
    handler - which it installs only over Python's default one - cancels the main task on the first Ctrl-C, which
    a blocking read never sees. The command's, not the library's: the API leaves signals to its caller."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    state = CommandState()
    try:
        with interrupted_at_once():
            code = app(args=args, standalone_mode=False, prog_name="graphrag-ray", obj=state)
        if code == 130:  # typer turns Ctrl-C into a returned 130 (when not standalone)
            _fail("interrupted", 130, False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except GraphRagRayError as exc:
        if exc.exit_code == 0:  # not an error: a run that stopped on purpose (`--detach`) says what comes next
            sys.stdout.write(printable(redact(str(exc))) + "\n")
            sys.exit(0)
        _fail(redact(str(exc)), exc.exit_code, state.verbose)
    except typer.Abort:
        _fail("aborted", 130, False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # typer's own click: usage errors (exit 2), Abort, Exit
        if type(exc).__name__ == "Exit":
            sys.exit(getattr(exc, "exit_code", 0))
        if type(exc).__name__ == "Abort":
            _fail("aborted", 130, False)
        code = getattr(exc, "exit_code", 2)
        hint = f" (see graphrag-ray {_subcommand(args)}--help)" if code == 2 else ""
        _fail(redact(exc.format_message()) + hint, code, state.verbose)
    except KeyboardInterrupt:
        _fail("interrupted", 130, False)
    except Exception as exc:  # an engine bug: still one line unless --verbose
        _fail(
            f"unexpected {type(exc).__name__}: {redact(str(exc))} (run with --verbose for the traceback)",
            1,
            state.verbose,
        )


def _subcommand(args: list[str]) -> str:
    names = [a for a in args if not a.startswith("-")][:1]
    return (
        f"{names[0]} " if names and names[0] in {c.name or c.callback.__name__ for c in app.registered_commands} else ""
    )


def _fail(message: str, code: int, verbose: bool) -> None:
    if verbose:
        sys.stderr.write(redact(traceback.format_exc()))
    sys.stderr.write(f"error: {printable(message)}\n")  # an error may quote a document or an answer
    sys.exit(code)


def command() -> None:
    """The installed `graphrag-ray` command: main(), then a prompt exit (see exit_now)."""
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    exit_now(code)


def exit_now(code: int | str | None) -> None:
    """Leave without the interpreter's teardown, which spends a noticeable part of a short command freeing the openai / pydantic / LanceDB
    objects one by one - a sixth of a query command. Everything a normal exit does that matters runs first:
    other threads are joined, atexit handlers run (Ray's shutdown, logging, temporary folders), stdio is
    flushed. Only for the command itself: main() stays safe to call in-process."""
    import atexit
    import os
    import threading

    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = 1
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (| head) or stream: nothing more can be written anyway
            pass
    os._exit(code or 0)


if __name__ == "__main__":
    command()
