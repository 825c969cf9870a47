import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def shared_cases_dir() -> Path | None:
    """``../shared/cases`` beside the checkout; absent: skip, except under CI=true where it fails."""
    path = SHARED / "cases"
    if path.is_dir():
        return path
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{path} is missing: CI must run with ../shared beside the checkout")
    pytest.skip(f"{path} is not present")
