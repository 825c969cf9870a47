"""The capture's classifier keeps an ``ExportError`` a capture patch raised (found through the
exception's chain), but not one older than the capture: an export run inside the handler of an
earlier failure is classified by what its own trace raised."""

import onnxport
from onnxport.capture.classify import classify
from onnxport.errors import CaptureError


def _raised(make):
    try:
        raise make()
    except Exception as e:  # noqa: BLE001 - the exception as torch.export would leave it
        return e


def test_an_export_error_raised_inside_the_trace_is_kept():
    def patch_refuses():
        try:
            raise onnxport.SpecializationError("a patch refused this size")
        except onnxport.SpecializationError as inner:
            raise RuntimeError("torch.export wrapped it") from inner

    error = _raised(patch_refuses)
    assert isinstance(classify(error, [], [], {}), onnxport.SpecializationError)


def test_the_failure_being_handled_when_the_export_runs_is_not_its_classification():
    earlier = onnxport.SpecializationError("the first capture's branch")
    try:
        raise earlier
    except onnxport.SpecializationError:
        error = _raised(lambda: RuntimeError("something else failed in the second trace"))
        assert error.__context__ is earlier  # Python chains it implicitly
        got = classify(error, [], [], {})
    assert got is not earlier and isinstance(got, CaptureError)
