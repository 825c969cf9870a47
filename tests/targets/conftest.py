"""The OpenVINO runtime for the tests of ``onnxport.targets``: skipped with the reason where the
``openvino`` package is absent (``pip install onnxport[openvino]``), never under ``CI=true``,
where ``setup.sh`` installs it and its absence is a failure."""

from __future__ import annotations

import os

import pytest

from onnxport.verify.runtimes import openvino_available


@pytest.fixture
def openvino():
    """The ``openvino`` module; skips (fails under ``CI=true``) without it."""
    if not openvino_available():
        if os.environ.get("CI") == "true":
            pytest.fail("OpenVINO is not installed, and setup.sh installs it for CI (onnxport[openvino])")
        pytest.skip("OpenVINO is not installed (pip install onnxport[openvino])")
    import openvino as ov

    return ov
