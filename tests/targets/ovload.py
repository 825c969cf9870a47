"""Loading an exported model in OpenVINO's CPU plugin, float32 forced, as ``verify.runtimes`` does."""

from __future__ import annotations

import io


def compile_in_openvino(ov, proto):
    """``proto`` read and compiled by OpenVINO for the CPU (``INFERENCE_PRECISION_HINT: f32``)."""
    core = ov.Core()
    return core.compile_model(core.read_model(io.BytesIO(proto.SerializeToString())), "CPU",
                              {"INFERENCE_PRECISION_HINT": "f32"})
