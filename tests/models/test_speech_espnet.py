"""ESPnet's own encoders (tests/speech_zoo.py: small configs, seeded weights), batch and time dynamic with time
unbounded, lengths as input, matching eager at the example and at two other (batch, time) with unequal lengths,
each exported in at most 30 s of CPU time, and right at 20,010 frames (past the 20,006 that the positional
table of 5,000 entries covers after the conv2d subsampling, where eager extends the table) unless the export
states a bound on time below that (adopted on the result, said in a warning)."""

import re
import time
import warnings

import onnxport
from exportcheck import check_export
from speech_zoo import build
from third_party import import_speech

import_speech("espnet2")
LONG_FRAMES = 20_010
EXPORT_SECONDS = 30


def _upper_bounds_on_time(result) -> list[str]:
    return [g.text for g in result.constraints if re.search(r"\btime\s*<=?\s*\d+", g.text)]


def _check_unbounded(name: str, monkeypatch):
    case = build(name)
    export, seconds = onnxport.to_onnx, []

    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return export(*args, **kwargs)
        finally:
            seconds.append(time.process_time() - start)

    monkeypatch.setattr(onnxport, "to_onnx", timed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = check_export(case.model, case.args, case.dynamic_shapes, inputs=case.others)
    assert seconds[0] <= EXPORT_SECONDS, f"exported in {seconds[0]:.0f} s of CPU time, over {EXPORT_SECONDS} s"
    bounds = _upper_bounds_on_time(result)
    if bounds:  # the bound stated: in a warning naming the line, and right below it, as validated above
        said = [str(w.message) for w in caught if any(b in str(w.message) for b in bounds)]
        assert said and all(re.search(r"\.py:\d+", s) for s in said), [str(w.message) for w in caught]
        return
    report = result.validate(inputs=[case.make(1, LONG_FRAMES)], sizes=[], values=[])
    assert report.ok, f"at {LONG_FRAMES} frames:\n{report}"


def test_conformer_encoder_time_unbounded(monkeypatch):
    _check_unbounded("espnet_conformer", monkeypatch)


def test_e_branchformer_encoder_time_unbounded(monkeypatch):
    _check_unbounded("espnet_e_branchformer", monkeypatch)
