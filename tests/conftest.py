import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)

from third_party import import_torchvision  # noqa: E402

import_torchvision()  # before transformers imports it


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
