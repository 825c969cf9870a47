"""Models in modules a test writes to a file: imported as Python imports them, and the file edited after."""

import importlib.util
import os
import sys
from types import ModuleType


def import_file(path, name: str, register: bool = False) -> ModuleType:
    """The module ``name`` executed from the file ``path`` (``register``: put in ``sys.modules`` first, as an
    import does)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def edit_after_import(path, text: str) -> None:
    """``path`` rewritten to ``text``, its modification time a second later than it was (whatever the clock's
    grain), as an edit after the import."""
    path.write_text(text)
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
