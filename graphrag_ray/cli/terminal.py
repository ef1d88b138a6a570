"""Text from documents and models, made safe to print on a terminal.

A document (or a model copying one) can hold terminal control sequences: an OSC (`ESC ] 0 ; title BEL`) retitles
the window or, unterminated, swallows the rest of the screen; CSI moves the cursor and erases; C0 and C1 bytes
ring, backspace over or rewrite what was printed. Everything the commands print from the data goes through
`printable`: whole sequences are removed, and then every control character left (all but newline and tab), so a
sequence cut between two streamed pieces cannot form either."""

from __future__ import annotations

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
