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


def test_a_range_torch_states_with_no_fix_is_read_from_the_violation():
    # torch's solver found a lower bound (EfficientLoFTR's image >= 57) and printed no suggested fix for it
    from onnxport.capture.classify import required_ranges

    src = "L['pixel_values'].size()[3]"
    text = ("Constraints violated (image)! For more information, run with TORCH_LOGS=\"+dynamic\".\n"
            f"  - Not all values of image = {src} in the specified range satisfy the generated guard "
            f"57 <= {src} and {src} <= IntInfinity()\n"
            f"  - Not all values of seq = L['ids'].size()[1] in the specified range 2 <= seq <= 512 satisfy the "
            "generated guard 3 <= L['ids'].size()[1] and L['ids'].size()[1] <= 77\n"
            "  - Not all values of time = L['x'].size()[1] in the specified range satisfy the generated guard "
            "3 <= L['x'].size()[1] and L['x'].size()[1] <= 3\n")  # pinned: a specialization, no range
    assert required_ranges(text) == {"image": (57, None), "seq": (3, 77)}
    fixed = text + "\nSuggested fixes:\n  image = Dim('image', min=60)\n"
    assert required_ranges(fixed)["image"] == (60, None)  # torch's own fix first
