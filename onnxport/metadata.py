"""The metadata onnxport writes into the ONNX models it exports, by key (one place for every stage
that writes or reads them)."""

SOURCE_KEY = "source"  # node metadata: the user's line the node comes from (``file.py:12 in forward: ...``)
FX_NODE_KEY = "fx_node"  # value metadata: the FX node whose result the value holds
CONSTRAINTS_KEY = "onnxport.constraints"  # model metadata: the constraints adopted on dynamic dims, "; "-joined
QUANTIZATION_KEY = "onnxport.quantization"  # model metadata: the quantization mode of a quantized result
FLOAT32_COMPUTE_KEY = "onnxport.float32_compute"  # model metadata: bfloat16 op types computed in float32 (", "-joined)
TARGET_KEY = "onnxport.target"  # model metadata: the runtime target the model was rewritten for (onnxport.targets)
