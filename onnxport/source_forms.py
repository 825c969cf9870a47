"""Statement forms: transforms of a library function's parsed source that capture computes another way
(one masked attention for a loop over pieces, a blocked triangular inverse for a row-by-row
substitution), shared by the two readers of library source.

A capture patch installs a form's variant of each loaded library function it changes
(``capture.source_variants.function_variant``). The rewrite of Python control flow
(``rewrite.module.rewrite_function``) compiles its own copy of a function from the same source; it
applies the registered forms first, so a function that both holds a form and is rewritten (a loop
over chunks around a row substitution) keeps the form. A form changes only the exact statements it
recognizes, with the same result (it leaves them as they are where they are not that form), and only
in the modules it names.
"""

from __future__ import annotations

import ast
from typing import Callable

Form = Callable[[ast.FunctionDef], bool]
_FORMS: list[tuple[tuple[str, ...], Form]] = []


def register_form(form: Form, *, modules: tuple[str, ...]) -> Form:
    """Apply ``form`` (changes a ``FunctionDef`` in place, returns whether it changed it) to functions
    of modules whose name starts with one of ``modules`` when their source is rewritten; returns ``form``."""
    _FORMS.append((modules, form))
    return form


def apply_forms(func: ast.FunctionDef, module: str | None) -> bool:
    """Apply every registered form of ``module``'s functions to ``func``; whether one changed it."""
    changed = False
    for modules, form in _FORMS:
        if module and module.startswith(modules):
            changed = form(func) or changed
    return changed
