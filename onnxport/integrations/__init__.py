"""Exports of models written for other frameworks, through onnxport's pipeline.

``returnn``: RETURNN models (RETURNN frontend ``rf.Module`` or PyTorch ``torch.nn.Module``) from a
RETURNN config: ``export_returnn_config`` (``returnn_export``), the capture hooks RETURNN needs while
torch.export traces it (``returnn.capture_hooks``). Needs the ``returnn`` extra
(``pip install 'onnxport[returnn]'``: returnn and dm-tree); importing this package needs neither.
"""
