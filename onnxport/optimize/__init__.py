"""ONNX-level optimization passes; ``pipeline.optimize`` runs them in order."""
