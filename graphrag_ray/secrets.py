"""Keeps credentials out of every message, log line and file.

Every secret value seen while loading configuration is registered here; `redact` replaces each with
`***` and a logging filter applies it to every record, so even an SDK error that echoes a key is safe.
"""

from __future__ import annotations

import logging
import re

_SECRETS: set[str] = set()
_MIN_SECRET_LEN = 4  # shorter strings would redact ordinary words


def register_secret(value: str | None) -> None:
    if value and len(value) >= _MIN_SECRET_LEN:
        _SECRETS.add(value)


def redact(text: str) -> str:
    if not _SECRETS or not text:
        return text
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    # Bearer tokens of unregistered keys (e.g. echoed by a proxy) are masked too.
    return _BEARER.sub("Bearer ***", text)


_BEARER = re.compile(r"Bearer\s+[A-Za-z0-9._\-]{8,}")


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def install_log_redaction() -> None:
    """Attach the redacting filter to the root logger's handlers (and future records via the root)."""
    root = logging.getLogger()
    if not any(isinstance(f, RedactingFilter) for f in root.filters):
        root.addFilter(RedactingFilter())
    for handler in root.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
