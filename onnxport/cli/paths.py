"""Output paths checked before any work starts: a file the command would write only at the end
(``-o``, ``--report``, ``--dot``) must have a directory that exists and can be written."""

from __future__ import annotations

import os

from onnxport.errors import SaveError


def check_output_paths(paths: dict[str, str | None]) -> None:
    """Raise ``SaveError`` (one line, exit code 2) for the first ``{option: path}`` that cannot be
    written: its directory is missing or not writable, or the path is a directory. None is skipped."""
    for option, path in paths.items():
        if not path:
            continue
        full = os.path.abspath(path)
        directory = os.path.dirname(full)
        if os.path.isdir(full):
            raise SaveError(f"{option} {path} is a directory: give a file path")
        if not os.path.isdir(directory):
            raise SaveError(f"{option}: the directory {directory} does not exist (create it first)")
        if not os.access(directory, os.W_OK | os.X_OK):
            raise SaveError(f"{option}: the directory {directory} is not writable")
