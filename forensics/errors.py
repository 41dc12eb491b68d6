"""Exceptions raised by the library. The CLI turns every ForensicsError into ``Error: …`` and exit 1.

    ForensicsError
    ├── InputError           a path that cannot be read, a bad option value
    ├── UnknownSourceError   ``--source`` names no registered source
    └── ParseError           a record a grammar rejected, raised only with ``on_error="raise"``
"""

from __future__ import annotations


class ForensicsError(Exception):
    """Base of every error the library raises on purpose."""


class InputError(ForensicsError):
    """A path that does not exist or cannot be read, or an option value that makes no sense."""


class UnknownSourceError(ForensicsError):
    """A source name that is not registered; the message suggests the closest name."""


class ParseError(ForensicsError):
    """A record that its family's grammar rejected (raised only when the caller asks for it)."""

    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(f"{file}:{line}: {message}")
        self.file = file
        self.line = line
