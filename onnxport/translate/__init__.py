"""FX graph (core ATen) -> onnx_ir graph translation."""
