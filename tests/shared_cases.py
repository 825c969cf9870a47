"""Where the public bug-pattern cases live: ``../shared/cases`` beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def shared_cases_dir() -> Path:
    """``../shared/cases``; absent: skip, except under CI=true where it fails."""
    path = SHARED / "cases"
    if path.is_dir():
        return path
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{path} is missing: CI must run with ../shared beside the checkout")
    pytest.skip(f"{path} is not present")
