"""``ASSERTED_DIVISION``: torch.export writes a runtime assert dividing a size by a size as Python's
true division of FX proxies (torch's own handler builds a sympy expression of proxies and fails)."""

from __future__ import annotations

import operator

import torch
from torch.utils._sympy.reference import PythonReferenceAnalysis

from onnxport.capture.assert_division import ASSERTED_DIVISION
from onnxport.capture.patches import installed


def _proxies():
    graph = torch.fx.Graph()
    tracer = torch.fx.proxy.GraphAppendingTracer(graph)
    return graph, torch.fx.Proxy(graph.placeholder("a"), tracer), torch.fx.Proxy(graph.placeholder("b"), tracer)


def test_division_of_proxies_becomes_an_fx_node():
    before = PythonReferenceAnalysis.int_truediv
    with installed(ASSERTED_DIVISION):
        assert PythonReferenceAnalysis.int_truediv(7, 2) == 3.5
        graph, a, b = _proxies()
        out = PythonReferenceAnalysis.int_truediv(a, b)
        assert out.node.op == "call_function" and out.node.target is operator.truediv
        assert out.node.args == (a.node, b.node)
    assert PythonReferenceAnalysis.int_truediv is before

