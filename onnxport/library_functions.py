"""The Python function under a library's wrappers, for the code that reads a function's source
(capture-time source variants, the rewrite of Python control flow).

Libraries wrap the functions a model calls: decorators that keep ``__wrapped__`` (``functools.wraps``,
transformers' kernel-hub dispatcher ``use_kernel_func_from_hub_with_fallback``), and the ``kernels``
package (a dependency of transformers 5.25), which turns a function into an instance of an
``nn.Module`` class whose ``forward`` calls the function it closes over as ``func``
(``kernels/_internals/layer/layer.py``, ``_create_func_module``).
"""

from __future__ import annotations

import inspect
from typing import Callable


def library_function(fn: Callable) -> Callable:
    """The Python function under ``fn``'s wrappers: decorators that keep ``__wrapped__``
    (``functools.wraps``, transformers' kernel-hub dispatcher) and the ``kernels`` package's module
    form of a function (an ``nn.Module`` whose ``forward`` calls the function it closes over as
    ``func``); ``fn`` itself when it is none of these."""
    fn = inspect.unwrap(fn)
    forward = getattr(type(fn), "forward", None)
    code = getattr(forward, "__code__", None)
    if not inspect.isfunction(fn) and code is not None and "func" in code.co_freevars:
        inner = forward.__closure__[code.co_freevars.index("func")].cell_contents
        if callable(inner):
            return inspect.unwrap(inner)
    return fn
