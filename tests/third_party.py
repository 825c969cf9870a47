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
benchmarks. Nothing else is changed. timm and diffusers, which import torchvision, are installed in the
same folder (``import_timm``, ``import_diffusers``).

The speech toolkits (torchaudio 2.11, SpeechBrain, ESPnet, asteroid, EnCodec) are installed by ``setup.sh``
with ``--no-deps`` in ``<venv>/speech-packages``, with the few pure modules they import, so that the
environment keeps its torch. torchaudio 2.11, its last release, ships a compiled extension built for
CUDA against torch 2.11: with the torch 2.13 CPU build it does not load (``Could not load this library``),
with torch 2.15 its CUDA version check raises. Its models, transforms and compliance modules are pure
Python and do not need it (torchaudio then takes its own pure-Python paths, ``lfilter`` among them).
``import_torchaudio`` puts the folder on the path and imports torchaudio with its extension marked
unavailable, as torchaudio itself marks it when the library files are absent; outside the folder nothing
finds torchaudio, so transformers (which imports it when it finds it) is unaffected.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest
import torch

VISION_PACKAGES = Path(sys.prefix) / "vision-packages"
SPEECH_PACKAGES = Path(sys.prefix) / "speech-packages"


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


def import_diffusers():
    """``diffusers`` (installed beside torchvision, which it imports when it finds it), or skip the calling
    module when it is not installed (``bash setup.sh`` installs it)."""
    if import_torchvision() is None or importlib.util.find_spec("diffusers") is None:
        pytest.skip("diffusers is not installed: bash setup.sh installs it", allow_module_level=True)
    import diffusers

    return diffusers


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


def _torchaudio_without_extension() -> types.ModuleType:
    """``torchaudio._extension`` as torchaudio defines it when its compiled library is absent: nothing
    loaded, ``_IS_TORCHAUDIO_EXT_AVAILABLE`` False, the alignment functions raising when called."""
    module = types.ModuleType("torchaudio._extension")
    module.__doc__ = "torchaudio's compiled extension, marked unavailable (tests/third_party.py)"

    def fail_if_no_align(func):
        @functools.wraps(func)
        def unavailable(*args, **kwargs):
            raise RuntimeError(f"{func.__name__} needs torchaudio's compiled extension, which does not load "
                               "beside this torch build")

        return unavailable

    module.__dict__.update(_IS_TORCHAUDIO_EXT_AVAILABLE=False, _IS_ALIGN_AVAILABLE=False,
                           fail_if_no_align=fail_if_no_align, _load_lib=lambda lib: False,
                           _check_cuda_version=lambda: None, __all__=["_IS_TORCHAUDIO_EXT_AVAILABLE"])
    return module


def import_torchaudio():
    """``torchaudio`` (from ``<venv>/speech-packages``, its compiled extension marked unavailable), or
    None when it is not installed."""
    if SPEECH_PACKAGES.is_dir() and str(SPEECH_PACKAGES) not in sys.path:
        sys.path.append(str(SPEECH_PACKAGES))
    if "torchaudio" in sys.modules:
        return sys.modules["torchaudio"]
    if importlib.util.find_spec("torchaudio") is None:
        return None
    sys.modules.setdefault("torchaudio._extension", _torchaudio_without_extension())
    import torchaudio

    return torchaudio


# SpeechBrain's import sets torch.backends.cudnn.allow_tf32 (one of its "quirks"), which raises where torch's
# test helpers (the OpInfo tests import them) disabled the global backend flags first; on the CPU the flag
# changes nothing.
os.environ.setdefault("SB_DISABLE_QUIRKS", "allow_tf32")


def import_speech(module: str):
    """A speech toolkit's module (``"speechbrain.lobes.models.ECAPA_TDNN"``), torchaudio imported first,
    or skip the calling module when the toolkit is not installed (``bash setup.sh`` installs it)."""
    if import_torchaudio() is None:
        pytest.skip("torchaudio is not installed: bash setup.sh installs the speech toolkits", allow_module_level=True)
    top = module.split(".")[0]
    if importlib.util.find_spec(top) is None:
        pytest.skip(f"{top} is not installed: bash setup.sh installs the speech toolkits", allow_module_level=True)
    imported = importlib.import_module(module)
    _drop_lazy_placeholders()
    return imported


def _drop_lazy_placeholders() -> None:
    """SpeechBrain puts lazy modules in ``sys.modules`` for its integrations (``speechbrain.integrations.k2_fsa``)
    that import their package on the first attribute read, and raise ``ImportError`` where it is absent (k2,
    flair): a scan of ``sys.modules`` reading ``__file__`` (hypothesis's, for its constants) then fails. The
    placeholders not yet loaded leave ``sys.modules``; their parents keep them as attributes."""
    lazy = getattr(sys.modules.get("speechbrain.utils.importutils"), "LazyModule", None)
    if lazy is None:
        return
    for name, mod in list(sys.modules.items()):
        if isinstance(mod, lazy) and mod.__dict__.get("lazy_module") is None:  # its redirects too
            del sys.modules[name]
