"""What every settings section is made of: a pydantic model refusing unknown keys, fields with a default and a
one-line description (`graphrag-ray init` renders them as settings.yaml's comments)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())


def doc(default, description: str, **kw):
    """A field with its default and its one-line description (shown in settings.yaml)."""
    return Field(default=default, description=description, **kw)
