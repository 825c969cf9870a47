import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)

from third_party import import_torchvision  # noqa: E402

import_torchvision()  # before transformers imports it

ROOT = Path(__file__).parent.parent

# Marked slow by path (the fast tier, `-m "not slow"`, leaves them out; CI runs everything):
SLOW_PATHS = (
    "tests/models/",  # real transformers, torchvision and timm models, exported and validated
    "tests/opinfo/",  # every op of torch's OpInfo database at its sample inputs
    "tests/property/",  # hypothesis: hundreds of random op chains, each exported and run
    "tests/cli/",  # the command line in subprocesses, each importing torch again
    "tests/integrations/",  # RETURNN configs and models, built and exported
    "tests/quantize/",  # models trained first, then quantized by onnxruntime and judged
    "tests/test_examples.py",  # the example scripts, each run to the end in a subprocess
    "tests/verify/test_real_cnns.py",  # torchvision and timm CNNs, validated at every default set
    "tests/weights/test_memory.py",  # a 300 MB checkpoint exported in a fresh process, its memory measured
    "tests/weights/test_export_from_checkpoint.py",  # a Llama decoder exported from three checkpoint forms
    "tests/test_saving.py",  # a 2 GiB model saved, saves killed in subprocesses
    "tests/test_hostile.py",  # many odd inputs, each a full export and validation
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(item.path).resolve().relative_to(ROOT).as_posix().startswith(SLOW_PATHS):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def offline(monkeypatch):
    """No network: the hub offline (``HF_HUB_OFFLINE=1``), and any connection attempt an error. Used by the
    tests of models read from saved directories (``pytestmark = pytest.mark.usefixtures("offline")``)."""
    import socket

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def refuse(self, address):
        raise OSError(f"network access attempted: {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
