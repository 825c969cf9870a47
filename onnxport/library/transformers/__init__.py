"""transformers: one module per model family (``mobilevit``, ``pixtral``, ``fsmt``...), or per form of
code several families share (``size_forms``: ``torch_int`` and ``len`` of sizes; ``sinusoidal_tables``),
each registering the capture patches it needs. transformers is never imported here: each patch
reads the loaded modules of ``transformers.models`` when it is installed.
"""

from __future__ import annotations

import sys

MODELS = "transformers.models."  # the package holding transformers' model code


def _defined(kind) -> list:
    """The values of type ``kind`` the loaded ``transformers.models`` modules define themselves (not
    import), under their decorators (``library_function``) for functions; none where transformers is
    not imported."""
    from onnxport.library_functions import library_function

    found: dict = {}  # insertion-ordered, each value once
    for name, module in list(sys.modules.items()):
        if not name.startswith(MODELS) or module is None:
            continue
        for value in list(vars(module).values()):
            if kind is not type and (isinstance(value, type) or not callable(value)):
                continue
            value = value if kind is type else library_function(value)
            if isinstance(value, kind) and value.__module__ == name:
                found[value] = None
    return list(found)


def model_classes(defines: tuple[str, ...], *, any_of: tuple[str, ...] = ()) -> list[type]:
    """The classes of loaded ``transformers.models`` modules that define (in their own ``__dict__``)
    every name of ``defines`` and, when given, one of ``any_of``; none where transformers is not
    imported."""
    return [cls for cls in _defined(type) if all(k in cls.__dict__ for k in defines)
            and (not any_of or any(k in cls.__dict__ for k in any_of))]


def _names(code) -> set[str]:
    """The names ``code`` and the code of its comprehensions and inner functions read."""
    if code is None:
        return set()
    return set(code.co_names).union(*(_names(c) for c in code.co_consts if hasattr(c, "co_names")))


def method_variants(method: str, transform, *, reads: frozenset[str] = frozenset()) -> list:
    """One ``patches.SetCode`` for each class of ``model_classes((method,))`` whose own ``method``
    (under its decorators: ``library_function``) reads every name of ``reads`` and is changed by
    ``transform``: the code of its ``source_variant`` while the patch is installed, the decorators
    still applying (``source_variants.function_variant``)."""
    from onnxport.capture.source_variants import function_variant
    from onnxport.library_functions import library_function

    changes = []
    for cls in model_classes((method,)):
        fn = vars(cls)[method]
        if not reads or reads <= _names(getattr(library_function(fn), "__code__", None)):
            changes += function_variant(fn, transform)
    return changes


def function_variants(transform, *, reads: frozenset[str] = frozenset()) -> list:
    """One ``patches.SetCode`` for each module-level function of the loaded ``transformers.models``
    modules (defined there, under its decorators: ``library_function``) whose code reads every name of
    ``reads`` and is changed by ``transform``: the code of its ``source_variant`` while the patch is
    installed (``source_variants.function_variant``)."""
    import types

    from onnxport.capture.source_variants import function_variant

    changes = []
    for fn in _defined(types.FunctionType):
        if not reads or reads <= _names(fn.__code__):
            changes += function_variant(fn, transform)
    return changes
