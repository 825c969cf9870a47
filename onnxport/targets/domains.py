"""The standard-domains check of ``target='portable'``: a runtime other than onnxruntime knows the
operators of the ONNX standard only."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.errors import RuntimeTargetError
from onnxport.metadata import SOURCE_KEY

STANDARD = ("", "ai.onnx", "ai.onnx.ml")


def check_standard_domains(model: ir.Model) -> None:
    """Raises ``RuntimeTargetError`` naming the first node of a domain outside ``STANDARD`` (a user
    translation's ``_domain=``, an onnxruntime contrib operator) with the user's line it comes from."""
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if node.domain not in STANDARD:
            raise RuntimeTargetError(
                f"the node {node.op_type} of domain {node.domain!r} is no standard ONNX operator: a portable model "
                "holds standard operators only", where=node.metadata_props.get(SOURCE_KEY),
                hint="translate that op with standard operators, or export with target='onnxruntime'")
