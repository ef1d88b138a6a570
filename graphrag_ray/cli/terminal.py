"""Text from documents and models, made safe to print on a terminal.

A document (or a model copying one) can hold terminal control sequences: an OSC (`ESC ] 0 ; title BEL`) retitles
the window or, unterminated, swallows the rest of the screen; CSI moves the cursor and erases; C0 and C1 bytes
ring, backspace over or rewrite what was printed. Everything the commands print from the data goes through
`printable`: whole sequences are removed, and then every control character left (all but newline and tab), so a
sequence cut between two streamed pieces cannot form either."""

from __future__ import annotations

import contextlib
import re
import sys

# ESC-introduced sequences: CSI (ESC [ … final byte), OSC / DCS / SOS / PM / APC (ESC ] P X ^ _ … up to BEL or
# ST, or to the end of the text when unterminated), and the two-byte ones (ESC and one character)
_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c|$)"
    r"|\x1b[@-Z\\-_ -/]?"
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with no terminal control sequence and no control character but newline and tab (a carriage return
    before a newline is kept as the newline)."""
    if not text:
        return text
    text = _SEQUENCES.sub("", text.replace("\r\n", "\n"))
    return _CONTROLS.sub("", text)


def write_out(text: str = "", end: str = "\n", flush: bool = False, stream=None) -> None:
    """print() for the data's text: made printable first."""
    out = stream or sys.stdout
    out.write(printable(str(text)) + end)
    if flush:
        out.flush()


class LineReader:
    """Lines typed at a prompt, read without blocking the event loop: Ctrl-C at the prompt cancels the command at
    once (a blocking input() is not interrupted when the signal lands on another of the process's threads). Reads
    the descriptor itself, keeping what arrived beyond a line for the next one; where the loop cannot watch the
    descriptor (a regular file), it reads it plainly."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdin
        self.pending = b""
        self.ended = False

    async def __call__(self, prompt: str = "") -> str:
        import asyncio
        import os

        sys.stdout.write(prompt)
        sys.stdout.flush()
        fd = self.stream.fileno()
        while b"\n" not in self.pending and not self.ended:
            loop = asyncio.get_running_loop()
            ready = loop.create_future()
            try:
                loop.add_reader(fd, lambda ready=ready: ready.done() or ready.set_result(None))
            except (PermissionError, OSError):  # a regular file: always readable
                ready.set_result(None)
            else:
                try:
                    await ready
                finally:
                    loop.remove_reader(fd)
            chunk = os.read(fd, 65536)
            self.pending += chunk
            self.ended = not chunk
        if not self.pending and self.ended:
            raise EOFError
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode("utf-8", errors="replace").rstrip("\r")


@contextlib.contextmanager
def asyncio_handles_ctrl_c():
    """Around an asyncio.run whose waits are all awaits (a query, a chat whose prompt is read by LineReader):
    Ctrl-C cancels its main task, which ends its streams and closes its clients cleanly, then asyncio.run raises
    KeyboardInterrupt ("error: interrupted", 130) - never a KeyboardInterrupt raised inside a stream's write."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # asyncio.run installs its own over it
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
