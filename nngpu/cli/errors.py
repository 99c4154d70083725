"""The one way a command fails: raise CLIError; `nngpu.cli.main` prints it as one line on stderr
and exits with its code."""
from __future__ import annotations


class CLIError(Exception):
    """A failure the user can act on: one line, a non-zero exit (2: bad usage or input, 1: the
    work itself failed)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def missing_extra(what: str, extra: str) -> CLIError:
    return CLIError(f"{what} needs an optional dependency: pip install 'nngpu[{extra}]'")
