"""The command line's declarations: ``--input`` / ``--declare-output`` texts
(``"x: float32[batch, 3, 224, 224]"``) and ``--dim`` ranges (``"batch=1:64"``) as a config dict."""

from __future__ import annotations

import re
from typing import Any

from onnxport.config.parse import parse_dim, parse_dtype
from onnxport.config.schema import TensorDecl, dtype_name
from onnxport.errors import ConfigError

_DECL = re.compile(r"^\s*(\w+)\s*:\s*(\w+)\s*\[(.*)\]\s*$")


def parse_declaration(text: str) -> TensorDecl:
    """Parse ``"x: float32[batch, 3, 224, 224]"`` into a ``TensorDecl``; ``ConfigError`` if malformed."""
    m = _DECL.match(text)
    if not m:
        raise ConfigError(f"cannot read the declaration {text!r}",
                          hint='write it as "NAME: DTYPE[DIM, ...]", e.g. "x: float32[batch, 3, 224, 224]"')
    name, dtype, dims = m.groups()
    what = f"declaration {text!r}"
    parts = [p.strip() for p in dims.split(",") if p.strip()]
    return TensorDecl(name, parse_dtype(dtype, what), [parse_dim(p, what) for p in parts])


def config_from_declarations(inputs: list[str], outputs: list[str] | None = None,
                             dims: list[str] | None = None) -> dict:
    """A config dict from ``--input`` / ``--declare-output`` texts and ``--dim`` ranges
    (``"batch=1:64"``: the dim's ``min`` and ``max``); ``parse_config`` checks it.

    Raises ``ConfigError`` for a declaration that does not read (``parse_declaration``) or a range
    that is not ``NAME=MIN:MAX``.
    """
    data: dict[str, Any] = {"inputs": {}}
    for section, texts in (("inputs", inputs), ("outputs", outputs or [])):
        for text in texts:
            decl = parse_declaration(text)
            data.setdefault(section, {})[decl.name] = {"dtype": dtype_name(decl.dtype), "dims": list(decl.dims)}
    for text in dims or []:
        name, (low, high) = parse_dim_range(text)
        data.setdefault("dims", {})[name] = {"min": low, "max": high}
    return data


def parse_dim_range(text: str) -> tuple[str, tuple[int, int]]:
    """``"batch=1:64"`` -> ``("batch", (1, 64))``; ``ConfigError`` when it is not ``NAME=MIN:MAX``."""
    name, sep, rng = text.partition("=")
    low, sep2, high = rng.partition(":")
    try:
        values = int(low), int(high)
    except ValueError:
        raise ConfigError(f"--dim {text!r} is not NAME=MIN:MAX", hint="e.g. --dim batch=1:64") from None
    if not sep or not sep2:
        raise ConfigError(f"--dim {text!r} is not NAME=MIN:MAX", hint="e.g. --dim batch=1:64")
    return name.strip(), values
