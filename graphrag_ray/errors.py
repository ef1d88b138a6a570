"""Errors a user can cause. The CLI prints these as one line (no traceback unless --verbose)."""

from __future__ import annotations


class GraphRagRayError(Exception):
    """A mistake the user can fix: bad config, missing input, bad API key, unreachable endpoint..."""

    exit_code = 1


class ConfigError(GraphRagRayError):
    """settings.yaml (or an override) is invalid."""

    exit_code = 2


class UsageError(GraphRagRayError):
    """A command-line value that cannot be used (an unknown method, a negative level, an empty question): the
    same exit code as a flag the parser itself refuses."""

    exit_code = 2


class QuestionTooLong(UsageError):
    """A question over query.max_question_chars: the client's mistake (400 from `serve`); the command exits 1, as a
    question it cannot send."""

    exit_code = 1


class InputError(GraphRagRayError):
    """The input documents cannot be used."""


class IndexMissingError(GraphRagRayError):
    """A query asked for an index (or a table of it) that does not exist."""


class IndexDamagedError(IndexMissingError):
    """A table or vector table of the index exists but cannot be read, or has a column of the wrong type."""


class LLMFatalError(GraphRagRayError):
    """The model endpoint refused the request in a way retrying cannot fix (400/401/403/404)."""


class LLMUnavailableError(GraphRagRayError):
    """The endpoint stayed unreachable or failing after the whole retry budget."""


class EndpointError(GraphRagRayError):
    """A model endpoint cannot be used at all: unreachable, the key refused, the model unknown (found by the
    check before spending; never a reason to carry on with less)."""


class UnusableAnswerError(LLMUnavailableError):
    """The model answered, twice, with something that cannot be used (not in the format asked, invalid JSON)."""


class StepFailedError(GraphRagRayError):
    """Too many of a step's items failed to publish the index."""


class RunLockedError(GraphRagRayError):
    """Another run holds the root's lock."""
