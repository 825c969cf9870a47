"""pytest: a test module's ``assert`` statements, rewritten by pytest as it imported the module.

A model defined in a test module runs the code pytest compiled from a changed tree (its asserts
rewritten to report their values), not the code the module's text compiles to. Where the control-flow
rewrite and the layout-only branch rule compare a function's source with the code running
(``onnxport.rewrite.running_source``), such a module is compiled with pytest's own rewrite
(``_pytest.assertion.rewrite.rewrite_asserts``), so the comparison holds and models in test files
rewrite as in any module. pytest marks a rewritten module with ``@pytest_ar`` in its globals; it is
imported only when such a module is compared.
"""

from __future__ import annotations

import ast

from onnxport.rewrite.running_source import register_transform


def _rewritten(namespace: dict) -> bool:
    """pytest rewrote the module's asserts (it imports ``@pytest_ar`` into the module's globals)."""
    return "@pytest_ar" in namespace


def _rewrite_asserts(tree: ast.Module, source: str, path: str) -> None:
    """``tree`` with its asserts rewritten as pytest rewrites them at import.

    Raises:
        ImportError: pytest is not importable (the comparison then counts the source as not compiling).
    """
    from _pytest.assertion.rewrite import rewrite_asserts

    rewrite_asserts(tree, source.encode(), path)


register_transform(_rewritten, _rewrite_asserts)
