"""Third-party model packages, imported so that their model classes work beside this torch build.

From torch 2.14 the package index serves a torchvision (0.29.2) whose compiled ops load beside torch:
``setup.sh --torch 2.15`` installs it in the venv's site-packages and nothing below is needed. The
torchvision wheel the package index serves for torch 2.13 carries compiled ops (``nms``,
``roi_align``...) that do not load with the CPU torch, and its import fails registering their meta
kernels (``operator torchvision::nms does not exist``). ``setup.sh`` therefore installs it outside the
venv's site-packages, in ``<venv>/vision-packages``, so that transformers (which imports torchvision
when it finds it) works for everything else. The model definitions do not need those ops:
``import_torchvision`` puts that folder on the path and imports the package without the meta
registrations when they fail, so that torchvision and transformers both work in the tests and
benchmarks. Nothing else is changed. timm, which imports torchvision, is installed in the same folder.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch

VISION_PACKAGES = Path(sys.prefix) / "vision-packages"


def import_torchvision():
    """``torchvision``, or None when it is not installed."""
    if VISION_PACKAGES.is_dir() and str(VISION_PACKAGES) not in sys.path:
        sys.path.append(str(VISION_PACKAGES))
    try:
        import torchvision

        return torchvision
    except ImportError:
        return None
    except RuntimeError as e:
        if "torchvision::" not in str(e):
            raise
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    stub = types.ModuleType("torchvision._meta_registrations")
    stub.__doc__ = "meta kernels of torchvision's compiled ops, which this torch build cannot load"
    sys.modules["torchvision._meta_registrations"] = stub
    import torchvision

    return torchvision


def import_timm():
    """``timm`` (installed beside torchvision, whose model code it imports), or None when it is not
    installed."""
    if import_torchvision() is None:
        return None
    try:
        import timm

        return timm
    except ImportError:
        return None


def torchvision_ops_load() -> bool:
    """Whether torchvision's compiled ops (``torch.ops.torchvision.nms``, ``roi_align``) are registered
    beside this torch build (they are with torch >= 2.14 and torchvision 0.29; not with the torch 2.13
    CPU build, see above)."""
    if import_torchvision() is None:
        return False
    try:
        torch.ops.torchvision.nms.default
        torch.ops.torchvision.roi_align.default
    except (AttributeError, RuntimeError):
        return False
    return True


def require_torchvision_ops():
    """``torchvision``, or skip the calling test with the reason when its compiled ops do not load here."""
    if not torchvision_ops_load():
        pytest.skip("torchvision's compiled ops (nms, roi_align) do not load beside this torch build (torch 2.13 "
                    "CPU); these tests run in the torch 2.15 environment (bash setup.sh --torch 2.15)",
                    allow_module_level=True)
    return import_torchvision()
