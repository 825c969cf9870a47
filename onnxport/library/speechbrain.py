"""SpeechBrain's light GRUs (``LiGRU``, ``SLiGRU``; the recurrent part of its CRDNN) without their batch-size
bookkeeping while torch.export traces.

``LiGRU_Layer.forward`` and ``SLiGRU_Layer.forward`` call ``self._change_batch_size(x)`` first, which runs
``if self.batch_size != x.shape[0]: self.batch_size = x.shape[0]`` (and, in training only, draws new
dropout masks). The comparison of a Python int with the batch size is a branch on a size: torch.export
fixes the batch to the example's (``SpecializationError``: axis 0 ... became the constant), and the
assignment stores a traced size on the module. In eval mode the method changes nothing the forward
computes: ``self.batch_size`` is read only by ``_sample_drop_mask``'s training branch (the eval branch
returns ``drop_mask_te``, a constant), so skipping it leaves the outputs as they are at every batch size.
While traced, ``_change_batch_size`` of a module that is not training does nothing; a training module
calls SpeechBrain's own. Eager execution outside the trace is unchanged, and nothing is changed where
SpeechBrain is not imported.

Source: ``speechbrain/nnet/RNN.py`` (SpeechBrain 1.x), ``LiGRU_Layer._change_batch_size``,
``SLiGRU_Layer._change_batch_size``, ``_sample_drop_mask``.
"""

from __future__ import annotations

import sys

from onnxport.capture.patches import Patch, SetAttribute, always, register

LAYERS = ("LiGRU_Layer", "SLiGRU_Layer")


def _eval_skips(original):
    def _change_batch_size(self, x):
        """SpeechBrain's ``_change_batch_size`` in training; nothing in eval (onnxport/library/speechbrain.py)."""
        if self.training:
            return original(self, x)
        return None

    return _change_batch_size


def _changes() -> list:
    rnn = sys.modules.get("speechbrain.nnet.RNN")
    if rnn is None:
        return []
    return [SetAttribute(getattr(rnn, name), "_change_batch_size", _eval_skips) for name in LAYERS
            if hasattr(getattr(rnn, name, None), "_change_batch_size")]


LIGRU_BATCH_SIZE = register(Patch(
    "SpeechBrain LiGRU batch bookkeeping", _changes,
    "speechbrain.nnet.RNN.LiGRU_Layer._change_batch_size and SLiGRU_Layer._change_batch_size do nothing for a "
    "module in eval mode while torch.export traces: their `if self.batch_size != x.shape[0]` fixes the batch, "
    "and in eval they change nothing the forward computes (the batch size is read by training's dropout "
    "masks only); a training module runs SpeechBrain's own; nothing changes where SpeechBrain is not imported",
    when=always, order=350))
